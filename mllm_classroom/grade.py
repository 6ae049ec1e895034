"""A class graded: ``mllm-classroom grade SUBMISSIONS``.

A folder laid out one folder per student (:mod:`mllm_classroom.lms` makes it from what the LMS gave), each
holding that student's notebooks under their lesson's names, is graded notebook by notebook::

    SUBMISSIONS/ada/05_lstm.ipynb
    SUBMISSIONS/cy/                        nothing for 05: reported as missing

Students are graded in parallel shards. For each notebook a shard starts one judge (:mod:`worker`, in a
sandbox) that runs the lesson up to its first check; every submission then gets a judge forked from it
and a process of its own (:mod:`mllm_classroom.judge`), which starts the student's sandbox and grades.
A submission that breaks anything breaks only its own row: ``grades.csv`` is always written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from mllm_classroom import sandbox
from mllm_classroom.channel import Channel, ChannelError, pair
from mllm_classroom.lessons import ClassroomError, cell_timeout, lesson_only, measured_peak_mib, tasks

JUDGE_MEMORY_FACTOR = 2  # the judge holds the lesson's state and one forked copy at a time
WALL_FACTOR = 3  # a submission's whole grading may take this many cell timeouts, plus WALL_MARGIN
WALL_MARGIN = 120
# The time a submission's own process may use in all (its cells and the calls of its functions), unless the
# teacher sets it (--budget): BUDGET_FACTOR times the lesson's measured run, at least MIN_BUDGET seconds.
BUDGET_FACTOR = 4
MIN_BUDGET = 120


def default_budget(lesson) -> int:
    from mllm_classroom.lessons import measured_seconds

    return int(max(MIN_BUDGET, BUDGET_FACTOR * (measured_seconds(lesson) or 0)))


@dataclass
class Result:
    """One student's grade for one notebook."""

    student: str
    notebook: str
    points: dict = field(default_factory=dict)  # "ex1" -> points scored
    status: str = "graded"
    notes: list = field(default_factory=list)  # for the teacher (grades.csv), never in feedback
    review: list = field(default_factory=list)  # what the submission's own code does that is not trusted
    withheld: float = 0.0  # points the judge gave but review withheld
    verdicts: dict = field(default_factory=dict)  # "ex1" -> the judge's verdict on its failed part
    sandbox: str = "bubblewrap"
    limits: str = ""
    display: str = ""  # the name the LMS shows (mllm_classroom.lms); the student column holds its id
    late: str = ""  # "late" when the LMS marked the submission late
    file: str = ""  # the file graded, as the LMS named it
    seconds: float = 0.0
    calls: int = 0
    skipped: int = 0  # the lesson's own study cells left out of its run (lessons.LESSON_ONLY)


def find_submission(folder: Path, stem: str) -> tuple[Path | None, list[str]]:
    """The file in a student's folder that holds notebook ``stem``; several: none (which one is the student's is
    for the teacher to say), and why."""
    matches = sorted((p for p in folder.glob("*.ipynb") if p.name.startswith(stem) and p.is_file()
                      and not p.is_symlink()), key=lambda p: (p.stat().st_mtime, p.name))
    if not matches:
        return None, []
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches)
        return None, [f"{len(matches)} files claim to be this student's {stem} ({names}): none graded, held "
                      "for review"]
    return matches[0], []


class Zygote:
    """The judge of one notebook for one shard: the lesson run up to its first check, forked per submission."""

    def __init__(self, lesson_path: Path, limits: sandbox.Limits, use_sandbox: bool, timeout: int):
        self.box = sandbox.Sandbox("judge", limits, use_sandbox)
        self.channel = self.box.start()
        lesson = nbformat.read(lesson_path, as_version=4)
        plan = tasks(lesson)
        first = plan[0].check if plan else len(lesson.cells)
        skip = lesson_only(lesson)  # the lesson's own study: no check reads it (lessons.lesson_only_problems)
        for index, cell in enumerate(lesson.cells[:first]):
            if cell.cell_type != "code" or not cell.source.strip() or cell.get("id") in skip:
                continue
            self.channel.send({"op": "run", "code": cell.source})
            try:
                reply, _ = self.channel.recv(timeout=timeout * 2 + 60)
            except ChannelError as error:
                self.box.kill()
                raise ClassroomError(f"{lesson_path.name}: the judge stopped in the lesson's cell {index} ({error}); "
                                     "the lesson itself must run (python tools/notebooks.py run)") from None
            if not reply.get("ok"):
                self.box.kill()
                raise ClassroomError(f"{lesson_path.name}: the lesson's cell {index} raised {reply.get('ename')} "
                                     f"in the judge: {reply.get('evalue')}")

    def reference(self, lesson_path: Path, timeout: int) -> dict:
        """The seconds each check takes in a judge with the lesson's own solutions (a fork of this one, run to
        the end): what the calls of a submission's functions in that check are given (judge.CALL_FACTOR)."""
        lesson = nbformat.read(lesson_path, as_version=4)
        plan = tasks(lesson)
        first = plan[0].check if plan else len(lesson.cells)
        checks = {t.check: t.name for t in plan}
        seconds = {}
        try:
            channel, pidfd = self.fork()
        except (ChannelError, OSError):  # no reference: every call gets the check's whole time
            return seconds
        try:
            for index in range(first, len(lesson.cells)):
                cell = lesson.cells[index]
                if cell.cell_type != "code" or not cell.source.strip():
                    continue
                start = time.monotonic()
                channel.send({"op": "run", "code": cell.source})
                channel.recv(timeout=timeout * 2 + 60)
                if index in checks:
                    seconds[checks[index]] = round(time.monotonic() - start, 3)
            channel.send({"op": "exit"})
        except (ChannelError, OSError):  # no reference: every call gets the check's whole time
            pass
        finally:
            channel.close()
            end(pidfd)
        return seconds

    def fork(self) -> tuple[Channel, int | None]:
        """A judge for one more submission: the grader's end of its channel, and a pidfd to end it with."""
        before = self.children()
        mine, theirs = pair()
        self.channel.send({"op": "fork"})
        self.channel.send_fd({"fd": "judge"}, theirs.fileno())
        theirs.close()
        self.channel.recv(timeout=60)
        new = sorted(self.children() - before)
        pidfd = None
        if len(new) == 1:
            try:
                pidfd = os.pidfd_open(new[0])
            except (OSError, AttributeError):  # an old kernel or Python: the judge ends with its channel
                pidfd = None
        return Channel(mine), pidfd

    def children(self) -> set[int]:
        """The zygote's forked judges, by their pids on this machine."""
        pid = self.box.pid
        try:
            return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
        except (OSError, ValueError, TypeError):
            return set()

    def close(self) -> None:
        self.box.kill()


def end(pidfd: int | None) -> None:
    """Kill a forked judge (it may be busy with what a submission sent) and close its pidfd."""
    if pidfd is None:
        return
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    os.close(pidfd)


def grade_one(lesson_path: Path, file: Path, zygote: Zygote, limits: sandbox.Limits, timeout: int,
              use_sandbox: bool, budget: int | None = None, reference: dict | None = None) -> dict:
    """Grade one submission in a process of its own; its outcome (judge.Outcome as a dict). A submission whose
    code needed a name from a cell left out of its run (lessons.LESSON_ONLY) is graded again with every cell."""
    outcome = grade_once(lesson_path, file, zygote, limits, timeout, use_sandbox, budget, reference, skip=True)
    if outcome.get("again_in_full"):  # within what is left of its budget: a second run costs the class nothing more
        left = None if budget is None else max(1, int(budget - outcome.get("seconds", 0)))
        outcome = grade_once(lesson_path, file, zygote, limits, timeout, use_sandbox, left, reference, skip=False)
    return outcome


def grade_once(lesson_path: Path, file: Path, zygote: Zygote, limits: sandbox.Limits, timeout: int,
               use_sandbox: bool, budget: int | None, reference: dict | None, skip: bool) -> dict:
    judge, pidfd = zygote.fork()
    job = {"lesson": str(lesson_path), "submission": str(file), "judge_fd": judge.fileno(), "timeout": timeout,
           "import_mib": sandbox.import_mib(), "budget": budget, "reference": reference or {},
           "limits": limits.__dict__, "use_sandbox": use_sandbox, "skip": skip}
    wall = max(WALL_FACTOR * timeout, (budget or 0) + timeout) + WALL_MARGIN
    process = subprocess.Popen([sys.executable, "-m", "mllm_classroom.judge"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=(judge.fileno(),),
                               start_new_session=True, text=True)
    try:
        out, _ = process.communicate(json.dumps(job), timeout=wall)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.communicate()
        return {"status": f"grading failed: it took longer than {wall} s in all"}
    finally:
        judge.close()
        end(pidfd)  # the judge forked for this submission never outlives it
        sandbox.remove_cgroups_of(process.pid)  # a grading process killed at its wall time leaves them
    try:
        outcome = json.loads(out)
        if not isinstance(outcome, dict):
            raise ValueError
        return outcome
    except ValueError:
        return {"status": f"grading failed: the grading process ended with status {process.returncode}"}


def grade_shard(lessons: list[Path], students: dict[str, Path], threads: int, timeout: int | None,
                use_sandbox: bool = True, budget: int | None = None) -> list[Result]:
    results = []
    for path in lessons:
        lesson = nbformat.read(path, as_version=4)
        limit = timeout or cell_timeout(lesson)
        seconds = budget or default_budget(lesson)
        reference = None
        memory = sandbox.memory_mib(measured_peak_mib(lesson))
        limits = sandbox.Limits(memory_mib=memory, threads=threads)
        box = "bubblewrap" if use_sandbox else "off (--no-sandbox)"
        where = sandbox.describe_limits(limits) if use_sandbox else "none (--no-sandbox)"
        zygote = None
        try:
            for student, folder in sorted(students.items()):
                result = Result(student, path.stem, sandbox=box, limits=where)
                results.append(result)
                file, notes = find_submission(folder, path.stem)
                result.review += notes
                if notes:  # the points are left empty for the teacher, never the newest file's
                    result.status = "held for review: " + notes[0]
                    continue
                if file is None:
                    result.status = "missing"
                    continue
                if zygote is None:
                    judge_limits = sandbox.Limits(memory_mib=JUDGE_MEMORY_FACTOR * memory, threads=1)
                    zygote = Zygote(path, judge_limits, use_sandbox, limit)
                    if reference is None:
                        reference = zygote.reference(path, limit)
                try:
                    outcome = grade_one(path, file, zygote, limits, limit, use_sandbox, seconds, reference)
                except (ChannelError, OSError) as error:  # the judge is gone: this row says so, a new one starts
                    outcome = {"status": f"grading failed: the judge stopped ({type(error).__name__}); grade "
                                         "this submission again"}
                    zygote.close()
                    zygote = None
                except Exception as error:  # noqa: BLE001 - one submission's failure is its row, never the class's
                    outcome = {"status": f"grading failed: {type(error).__name__}: {str(error)[:200]}"}
                    print(f"mllm-classroom: grading {file} failed: {type(error).__name__}: {str(error)[:200]}",
                          file=sys.stderr)
                for key in ("status", "points", "notes", "review", "withheld", "verdicts", "seconds", "calls",
                            "skipped"):
                    if key in outcome:
                        value = outcome[key]
                        setattr(result, key, result.review + value if key == "review" else value)
        finally:
            if zygote is not None:
                zygote.close()
    return results


def grade(submissions: Path, lessons: list[Path], out: Path, jobs: int = 2, timeout: int | None = None,
          use_sandbox: bool = True, annotate=None, budget: int | None = None) -> list[Result]:
    """Grade every student folder in ``submissions``; write grades.csv, totals.csv and feedback/ into ``out``."""
    from mllm_classroom.reports import write_reports

    if not submissions.is_dir():
        raise ClassroomError(f"SUBMISSIONS: {submissions} is not a folder (it needs one folder per student)")
    students = {p.name: p for p in sorted(submissions.iterdir()) if p.is_dir() and not p.name.startswith(".")}
    if not students:
        raise ClassroomError(f"SUBMISSIONS: {submissions} has no student folders (one folder per student)")
    if not isinstance(jobs, int) or jobs < 1:
        raise ClassroomError(f"--jobs: got {jobs!r}, need a whole number of at least 1")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 1):
        raise ClassroomError(f"--timeout: got {timeout!r}, need a whole number of seconds, at least 1")
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise ClassroomError(f"--budget: got {budget!r}, need a whole number of seconds, at least 1")
    inside = [p for p in (out.resolve(), *out.resolve().parents) if p == submissions.resolve()]
    if inside:
        raise ClassroomError(f"--out: {out} is inside SUBMISSIONS; the submissions folder is never written")
    if use_sandbox:
        sandbox.check_available()
    jobs = min(jobs, len(students))
    names = sorted(students)
    shards = [{name: students[name] for name in names[k::jobs]} for k in range(jobs)]
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with tempfile.TemporaryDirectory(prefix="mllm-grade-"), ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(grade_shard, lessons, shard, threads, timeout, use_sandbox, budget)
                   for shard in shards]
        results = [result for future in futures for result in future.result()]
    results.sort(key=lambda r: (r.student, r.notebook))
    if annotate is not None:  # what the LMS said of each submission (mllm_classroom.lms.Download.annotate)
        annotate(results)
    write_reports(results, lessons, out)
    return results
