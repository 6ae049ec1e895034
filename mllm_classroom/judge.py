"""One submission graded, in a process of its own: ``python -m mllm_classroom.judge`` (run by grade.py).

It reads a job (JSON on stdin), grades, and writes the result (JSON on stdout). Whatever the submission
holds (broken JSON, 3,000 levels of nesting, a cell review cannot parse, a process that floods or dies),
the worst outcome is this process's own end: its row then says why, and no other submission is touched.

What runs where:

- the student's process (a sandbox of its own): the submission's own code cells, in their order, except
  its check cells, which it never runs; and, when asked, one of its functions with the judge's arguments;
- the judge (a sandbox forked for this submission from a judge that ran the lesson up to its first check):
  the lesson's cells with their solutions, and each check cell, visible part then hidden tests, with the
  exercise's functions and classes replaced by proxies that have the student's process run them;
- here: the order of it all, the time limits, and the relay of each call (its arguments as the judge
  pickled them; the answer as plain data, never unpickled).

Points come from the judge's verdicts only; nothing the submission prints, raises or stores in its cells'
outputs or metadata counts. Review (:mod:`mllm_classroom.review`) reads the submission's code as a second
line: what it flags is named for the teacher and the points of the exercises it may touch are withheld.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from dataclasses import asdict, dataclass, field

from mllm_classroom import sandbox
from mllm_classroom.channel import Channel, ChannelError, TimedOut
from mllm_classroom.lessons import lesson_only, tasks
from mllm_classroom.sandbox import Limits, Sandbox

MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
INTERRUPT_GRACE = 20  # seconds a process has to answer after an interrupt before its sandbox is ended
# One call of a student's function may take CALL_FACTOR times what the whole check took with the lesson's own
# solution (measured once per grading run: grade.Zygote.reference), and at least CALL_FLOOR seconds.
CALL_FACTOR = 20  # a busy machine: other work, and this class's other sandboxes, share its cores
CALL_FLOOR = 20.0
MAX_FINDINGS = 20  # review's findings kept per submission (the rest counted)
RELAYED = ("result", "observed", "state", "raised", "unsendable", "unreadable", "changed")


@dataclass
class Outcome:
    """What grading one submission found (the row of grades.csv and the feedback page come from it)."""

    status: str = "graded"
    points: dict = field(default_factory=dict)  # "ex1" -> points the judge gave
    verdicts: dict = field(default_factory=dict)  # "ex1" -> the judge's verdict on the failed part (plain)
    notes: list = field(default_factory=list)  # for the teacher only (grades.csv)
    review: list = field(default_factory=list)  # what review flagged, by cell
    withheld: float = 0.0
    calls: int = 0  # calls of the student's functions the judge made
    seconds: float = 0.0
    skipped: int = 0  # the lesson's own study cells (lessons.LESSON_ONLY) left out of the student's run
    again_in_full: bool = False  # a NameError after leaving some out: grade.grade_one grades it again in full


# ---------------------------------------------------------------------------------------------------------
# Reading a submission: as little trust as possible


def read_notebook(data: bytes) -> tuple[list[dict] | None, str | None]:
    """The submission's cells as plain dicts ({type, source, meta, id}), or why it is not a notebook."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        return None, f"not graded: the file is over {MAX_NOTEBOOK_BYTES // 2**20} MiB"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not a notebook (not UTF-8 text)"
    try:
        nb = json.loads(text)
    except RecursionError:
        return None, "not a notebook (JSON nested too deeply)"
    except ValueError as error:
        line = getattr(error, "lineno", "?")
        return None, f"not a notebook (invalid JSON, line {line}; cut off or edited by hand?)"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return None, "not a notebook (no list of cells)"
    cells = []
    for raw in nb["cells"]:
        if not isinstance(raw, dict):
            cells.append({"type": "unreadable", "source": "", "meta": {}, "id": ""})
            continue
        source = raw.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            cells.append({"type": "unreadable", "source": "", "meta": {}, "id": ""})
            continue
        kind = raw.get("cell_type")
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        cells.append({"type": kind if kind in ("code", "markdown", "raw") else "unreadable", "source": source,
                      "meta": meta, "id": raw.get("id") if isinstance(raw.get("id"), str) else ""})
    return cells, None


def grade_id_of(cell: dict) -> str:
    meta = cell["meta"].get("nbgrader")
    if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
        return meta["grade_id"]
    return ""


def match(cells: list[dict], plan) -> tuple[dict, dict, set, list[str]]:
    """Where each exercise is in the submission: its solution cell (by grade id, then by cell id), and the
    last cell to run before its check (the cell before the submitted check cell, as a notebook runs top to
    bottom; without one, the solution cell). Also the check cells (never run on the student's side), and
    notes on what did not match."""
    solutions, anchors, checks, notes = {}, {}, set(), []
    for task in plan:
        found = [i for i, c in enumerate(cells) if grade_id_of(c) == task.check_id
                 or (task.check_cell_id and c["id"] == task.check_cell_id)]
        checks.update(found)
        by_grade = [i for i, c in enumerate(cells) if grade_id_of(c) == task.solution_id]
        by_id = [i for i, c in enumerate(cells) if task.solution_cell_id and c["id"] == task.solution_cell_id]
        mine = by_grade or by_id
        if found:
            anchors[task.name] = found[0] - 1
        else:
            notes.append(f"{task.name}: its check cell is not in the notebook (graded all the same)")
        if not mine:
            notes.append(f"{task.name}: no cell holds its solution ({task.solution_id}): scored 0")
            continue
        if len(mine) > 1:
            notes.append(f"{task.name}: {len(mine)} cells claim its solution; the last one was graded")
        index = mine[-1]
        if cells[index]["type"] != "code":
            notes.append(f"{task.name}: its solution cell is a {cells[index]['type']} cell, not code: not run")
            continue
        solutions[task.name] = index
        anchors.setdefault(task.name, index)
    return solutions, anchors, checks, notes


# ---------------------------------------------------------------------------------------------------------
# Running it


class Stopped(Exception):
    """The student's process is gone (ended for its time or memory, or by its own doing)."""


class Grader:
    def __init__(self, student: Sandbox, judge: Channel, timeout: int, budget: float | None = None,
                 reference: dict | None = None):
        self.student = student
        self.channel = student.channel
        self.judge = judge
        self.timeout = timeout
        self.budget = budget  # seconds the student's process may use in all (cells and calls), or None
        self.used = 0.0
        self.reference = reference or {}  # exercise -> seconds its check took with the lesson's solution
        self.call_limit = float(timeout)
        self.stopped: str | None = None
        self.notes: list[str] = []
        self.calls = 0

    def ask_student(self, header: dict, blobs=(), seconds: float | None = None):
        """One request to the student's process and its answer; Stopped when it does not come. The wait is
        bounded by what is left of the submission's budget: past it, the process is ended."""
        if self.stopped:
            raise Stopped(self.stopped)
        seconds = self.timeout if seconds is None else max(1.0, seconds)
        over_budget = False
        if self.budget is not None:
            left = self.budget - self.used
            if left <= 0:
                self.stop(f"it used its whole time budget ({self.budget:.0f} s)")
                raise Stopped(self.stopped)
            if left < seconds:
                seconds, over_budget = left, True
        start = time.monotonic()
        try:
            self.channel.send(header, blobs)
            try:
                return (*self.channel.recv(timeout=seconds), False)
            except TimedOut:
                if over_budget:
                    self.stop(f"it used its whole time budget ({self.budget:.0f} s)")
                    raise Stopped(self.stopped) from None
                self.student.interrupt()
                try:
                    return (*self.channel.recv(timeout=INTERRUPT_GRACE), True)
                except ChannelError:
                    self.stop(f"ran past {seconds:.0f} s and did not stop when interrupted")
            except ChannelError as error:
                self.stop(self.why_gone(error))
            raise Stopped(self.stopped)
        finally:
            self.used += time.monotonic() - start

    def warm_up(self, seconds: float) -> None:
        """Wait until the student's process is ready (Python, PyTorch and IPython loaded): not the student's
        time, so not counted in the budget."""
        budget, used, self.budget = self.budget, self.used, None
        try:
            self.ask_student({"op": "names", "names": []}, seconds=seconds)
        except Stopped:
            pass
        finally:
            self.budget, self.used = budget, used

    def why_gone(self, error) -> str:
        if not self.student.alive():
            return "the notebook's process ended (its memory limit, or its own doing)"
        return f"the notebook's process broke the protocol ({str(error)[:100]})"

    def stop(self, why: str) -> None:
        self.stopped = self.stopped or why
        self.student.kill()

    def run_student(self, index: int, source: str) -> None:
        try:
            reply, _, interrupted = self.ask_student({"op": "run", "code": source})
        except Stopped:
            return
        if interrupted:
            self.notes.append(f"cell {index} ran past {self.timeout} s and was stopped")
        elif not reply.get("ok"):
            what = str(reply.get("ename", "an error"))[:60]
            self.notes.append(f"cell {index} raised {what}: {str(reply.get('evalue', ''))[:120]}")

    def run_judge(self, index: int, source: str) -> None:
        self.judge.send({"op": "run", "code": source})
        reply, _ = self.judge.recv(timeout=self.timeout * 2 + 60)
        if not reply.get("ok"):
            raise RuntimeError(f"the lesson's cell {index} failed in the judge: {reply.get('ename')}: "
                               f"{reply.get('evalue')}")

    def check(self, task, kinds: dict) -> tuple[list[dict], int]:
        """Run one exercise's check in the judge, relaying its calls to the student's process."""
        deadline = time.monotonic() + self.timeout
        if task.name in self.reference and isinstance(self.reference[task.name], int | float):
            self.call_limit = min(float(self.timeout), max(CALL_FLOOR, CALL_FACTOR * self.reference[task.name]))
        else:
            self.call_limit = float(self.timeout)
        values, blobs = {}, []
        wanted = [n for n, kind in kinds.items() if kind == "other"]
        if wanted:  # values the exercise's cell computed: as plain data, passed on unread
            try:
                reply, blobs, _ = self.ask_student({"op": "values", "names": wanted})
                values = reply.get("values") if isinstance(reply.get("values"), dict) else {}
            except Stopped:
                values, blobs = {}, []
        self.judge.send({"op": "check", "exercise": task.number, "names": kinds, "visible": task.visible,
                         "hidden": task.hidden, "values": values, "seconds": self.timeout}, blobs)
        while True:
            left = deadline - time.monotonic()
            header, blobs = self.judge.recv(timeout=max(left, 0) + self.timeout + 60)
            if header.get("op") == "checked":
                return header.get("verdicts", []), int(header.get("calls", 0))
            if header.get("op") != "call":
                raise RuntimeError(f"the judge sent {header.get('op')!r}")
            self.calls += 1
            self.judge.send(*self.relay(header, blobs, left))

    def relay(self, header: dict, blobs: list[bytes], left: float):
        """The student's answer to one call, for the judge: only the expected fields, none parsed here."""
        if left <= 0:
            return {"stopped": f"the check ran past {self.timeout} s"}, []
        request = {"op": "call", "name": header.get("name"), "watch": header.get("watch", []), "id": header.get("id")}
        if type(header.get("handle")) is int:
            request["handle"] = header["handle"]
        limit = min(left, self.call_limit)
        start = time.monotonic()
        try:
            reply, out, interrupted = self.ask_student(request, blobs[:1], limit)
            while not interrupted and reply.get("op") == "nested":  # a function the judge runs and counts
                self.judge.send({"op": "nested", "name": reply.get("name"), "args": reply.get("args")}, out)
                answer, back = self.judge.recv(timeout=self.timeout + 60)
                answer = {k: answer[k] for k in ("op", "raised") if k in answer}
                reply, out, interrupted = self.ask_student(answer, back[:1],
                                                           limit - (time.monotonic() - start))
        except Stopped as why:
            return {"stopped": str(why)}, []
        if interrupted:
            self.notes.append(f"a call of {str(header.get('name'))[:60]} ran past {limit:.0f} s and was stopped")
            return {"stopped": f"a call ran past {limit:.0f} s (this exercise's calls are given "
                               f"{self.call_limit:.0f} s) and was stopped"}, []
        if reply.get("id") != header.get("id"):
            self.stop("answered another call than the one asked")
            return {"stopped": self.stopped}, []
        answer = {key: reply[key] for key in RELAYED if key in reply}
        if "raised" in answer:
            answer["raised"] = str(answer["raised"])[:80]
        if "unsendable" in answer:
            answer["unsendable"] = True
        return answer, out


def grade_submission(job: dict, judge: Channel) -> Outcome:
    import nbformat

    from mllm_classroom.review import Lesson, review

    start = time.monotonic()
    outcome = Outcome()
    lesson = nbformat.read(job["lesson"], as_version=4)
    plan = tasks(lesson)
    with open(job["submission"], "rb") as f:
        cells, problem = read_notebook(f.read(MAX_NOTEBOOK_BYTES + 1))
    if cells is None:
        outcome.status = problem
        return outcome
    solutions, anchors, check_cells, notes = match(cells, plan)
    outcome.notes += notes
    try:
        findings = review(cells, Lesson(lesson), solutions, check_cells)
        first_flagged = min((f.cell for f in findings), default=None)
        outcome.review = [str(f)[:300] for f in findings[:MAX_FINDINGS]]
        if len(findings) > MAX_FINDINGS:
            outcome.review.append(f"and {len(findings) - MAX_FINDINGS} more findings")
    except RecursionError:
        first_flagged = 0
        outcome.review = ["the notebook is nested too deeply to be read: held for review"]
    limits = Limits(**job["limits"])
    student = Sandbox("student", limits, job.get("use_sandbox", True))
    student.start()
    budget = job.get("budget")
    reference = job.get("reference") if isinstance(job.get("reference"), dict) else {}
    grader = Grader(student, judge, int(job["timeout"]), float(budget) if budget else None, reference)
    grader.warm_up(max(120, 3 * int(job["timeout"])))  # a loaded machine may take long to import PyTorch
    study = lesson_only(lesson)
    skip = study if job.get("skip", True) else {}
    try:
        first_check = plan[0].check if plan else len(lesson.cells)
        done = -1  # the last submitted cell run on the student's side
        ran = {}  # exercise -> the last submitted cell run before its check (cells run in their order)
        for index in range(first_check, len(lesson.cells)):
            cell = lesson.cells[index]
            task = next((t for t in plan if t.check == index), None)
            if task is None:  # a lesson cell: the judge runs it, but not the lesson's own study (as the zygote)
                if cell.cell_type == "code" and cell.source.strip() and cell.get("id") not in study:
                    grader.run_judge(index, cell.source)
                continue
            anchor = anchors.get(task.name)
            if anchor is not None and anchor > done:
                for i in range(done + 1, anchor + 1):
                    if cells[i]["type"] != "code" or i in check_cells or not cells[i]["source"].strip():
                        continue
                    if skip.get(cells[i]["id"]) == cells[i]["source"]:  # the lesson's study, as the lesson has it
                        outcome.skipped += 1
                        continue
                    grader.run_student(i, cells[i]["source"])
                done = anchor
            ran[task.name] = done
            if task.name not in solutions:
                outcome.points[task.name] = 0.0
                outcome.verdicts[task.name] = {"kind": "missing"}
                continue
            try:
                kinds = grader.ask_student({"op": "names", "names": task.names})[0].get("kinds", {})
                kinds = {n: kinds.get(n) if kinds.get(n) in ("function", "class", "other", "missing") else "missing"
                         for n in task.names}
            except Stopped:
                kinds = {n: "function" for n in task.names}  # every call will say why it stopped
            verdicts, _ = grader.check(task, kinds)
            failed = [v for v in verdicts if v.get("kind") != "passed"]
            passed = verdicts and not failed
            outcome.points[task.name] = task.points if passed else 0.0
            if failed:
                outcome.verdicts[task.name] = failed[0]
        outcome.notes += grader.notes[:MAX_FINDINGS]
        # A name the student's code took from a cell left out (no cell of the lesson's own does): run all of it.
        outcome.again_in_full = bool(outcome.skipped) and (
            any(" raised NameError" in note for note in grader.notes)
            or any(v.get("kind") == "undefined" or v.get("type") == "NameError" for v in outcome.verdicts.values()))
        if grader.stopped:
            outcome.notes.append(f"the notebook was stopped: {grader.stopped}")
    finally:
        student.kill()
        try:
            judge.send({"op": "exit"})
        except ChannelError:
            pass
    outcome.calls = grader.calls
    withhold(outcome, first_flagged, ran, plan)
    outcome.seconds = round(time.monotonic() - start, 1)
    return outcome


def withhold(outcome: Outcome, first_flagged: int | None, ran: dict, plan) -> None:
    """Review's findings hold back the points of every exercise checked after the first flagged cell ran
    (an exercise checked before that cell ran keeps its points; ``ran``: the last cell run before each check)."""
    if first_flagged is None:
        return
    names = [t.name for t in plan if ran.get(t.name) is None or ran[t.name] >= first_flagged]
    for name in names:
        outcome.withheld += outcome.points.get(name, 0.0)
        if name in outcome.points:
            outcome.points[name] = 0.0
    outcome.notes.append(f"points withheld for review: {', '.join(names) or 'none'}")


def main() -> int:
    job = json.loads(sys.stdin.read())
    # What importing PyTorch maps (3 GiB for a CUDA build) comes on top, as in the sandboxes.
    if job.get("import_mib"):
        sandbox.use_import_mib(job["import_mib"])
    memory = (int(job.get("grader_memory_mib", 4096)) + sandbox.import_mib()) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    judge = Channel.from_fd(int(job["judge_fd"]), 64 * 1024 * 1024)
    try:
        outcome = grade_submission(job, judge)
    except Exception as error:  # noqa: BLE001 - one submission's failure is its row, never the class's
        outcome = Outcome(status=f"grading failed: {type(error).__name__}: {str(error)[:200]}")
    sys.stdout.write(json.dumps(asdict(outcome)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
