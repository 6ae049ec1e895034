"""A class graded: ``mllm-classroom grade SUBMISSIONS``.

A folder laid out one folder per student, each holding that student's notebooks under their released
names, is graded with nbgrader in a temporary course folder::

    SUBMISSIONS/ada/05_lstm.ipynb
    SUBMISSIONS/ben/05_lstm (1).ipynb      a file is matched by its notebook's name at the start
    SUBMISSIONS/cy/                        nothing for 05: reported as missing

Students are graded in parallel shards (one course folder and gradebook each); every cell's timeout comes
from the notebook's measured run time. Every submission's kernel runs in the sandbox
(:mod:`mllm_classroom.sandbox`), and every submission's own code is read first (:mod:`mllm_classroom.review`):
the points of exercises checked after code that a grader cannot trust are withheld and the code is named
in the ``review`` column. The submissions folder is only read.
"""

from __future__ import annotations

import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from mllm_classroom import sandbox
from mllm_classroom.engine import generate, nbgrader, require_nbgrader
from mllm_classroom.lessons import ClassroomError, cell_timeout, exercises, grade_id, measured_peak_mib
from mllm_classroom.review import Lesson, affected, review

KERNEL_START_FAILURES = ("Kernel died before replying to kernel_info", "Timeout waiting for kernel_info reply")
WALL_MARGIN = 60  # seconds a kernel may live beyond twice a cell's timeout


@dataclass
class Result:
    """One student's grade for one notebook."""

    student: str
    notebook: str
    points: dict = field(default_factory=dict)  # "ex1" -> points scored
    status: str = "graded"
    notes: list = field(default_factory=list)
    review: list = field(default_factory=list)  # what the submission's own code does that is not trusted
    withheld: float = 0.0  # points the checks gave but review withheld
    messages: dict = field(default_factory=dict)  # "ex1" -> the check's own message when it failed
    sandbox: str = "bubblewrap"
    display: str = ""  # the name the LMS shows (mllm_classroom.lms); the student column holds its id
    late: str = ""  # "late" when the LMS marked the submission late
    file: str = ""  # the file graded, as the LMS named it


def find_submission(folder: Path, stem: str) -> tuple[Path | None, str | None]:
    """The file in a student's folder that holds notebook ``stem`` (``05_lstm (1).ipynb`` counts)."""
    matches = [p for p in folder.glob("*.ipynb") if p.name.startswith(stem) and p.is_file() and not p.is_symlink()]
    if not matches:
        return None, None
    matches.sort(key=lambda p: (p.stat().st_mtime, p.name))
    note = None
    if len(matches) > 1:
        note = f"{len(matches)} files for {stem}; graded the newest, {matches[-1].name}"
    return matches[-1], note


def read_submission(path: Path):
    """The notebook in ``path``, or a reason it cannot be graded."""
    try:
        text = path.read_text(encoding="utf-8")
        json.loads(text)
    except UnicodeDecodeError:
        return None, "not a notebook (not UTF-8 text)"
    except json.JSONDecodeError as error:
        return None, f"not a notebook (invalid JSON, line {error.lineno}: {error.msg}; cut off or edited by hand?)"
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # nbformat raises several kinds for JSON that is not a notebook
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return None, f"not a valid notebook ({first[:120]})"
    return nb, None


def cell_problems(submitted, lesson) -> list[str]:
    """Notes on check cells a student deleted (nbgrader restores them before grading)."""
    have = {grade_id(c) for c in submitted.cells}
    return [f"{e.grade_id} was missing and was restored" for e in exercises(lesson) if e.grade_id not in have]


def first_error(cell) -> tuple[str, str] | None:
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if not errors:
        return None
    return str(errors[0].get("ename", "")), str(errors[0].get("evalue", "")).strip()


def error_notes(autograded, timeout: int) -> tuple[list[str], dict]:
    """One note per cell that raised when graded (exercise cells by id, others by number), and each check
    cell's own message, whole, by exercise (``ex1`` -> "check_close: ... expected: ... got: ...")."""
    notes, lesson, messages = [], [], {}
    for index, cell in enumerate(autograded.cells):
        error = first_error(cell)
        if error is None:
            continue
        ename, evalue = error
        message = (f"{ename}: {evalue.splitlines()[0]}" if evalue else ename)[:160]
        timed_out = ename in ("KeyboardInterrupt", "CellTimeoutError")  # nbgrader interrupts a cell at its limit
        if timed_out:
            message = f"ran past {timeout} s and was stopped"
        gid = grade_id(cell)
        if gid:
            notes.append(f"{gid}: {message}")
            if cell.metadata.get("nbgrader", {}).get("grade"):
                messages[gid.removesuffix("-check")] = message if timed_out else f"{ename}: {evalue}"[:2000]
        else:
            lesson.append(f"cell {index}: {message}")
    if lesson:  # a broken lesson cell usually breaks the rest: the first one says why
        more = f" (and {len(lesson) - 1} more)" if len(lesson) > 1 else ""
        notes.insert(0, f"lesson code raised in {lesson[0]}{more}")
    return notes, messages


def last_error(log: str, sid: str, timeout: int | None = None) -> str:
    """Why nbgrader made no graded copy for ``sid``, from its log, in the teacher's words where we know them."""
    lines = [line.strip() for line in log.splitlines() if "[ERROR]" in line or "Error" in line]
    mine = [line for line in lines if sid in line] or lines
    reason = (mine[-1] if mine else "nbgrader gave no reason")[:200]
    if "CellTimeoutError" in reason and timeout:
        return f"a cell ran past {timeout} s and did not stop when interrupted (the rest was not run)"
    if "DeadKernelError" in reason or ("Kernel died" in reason and "kernel_info" not in reason):
        return "the kernel died while running (its memory or time limit, or its own doing)"
    return reason


def kernel_settings(lesson, timeout: int, threads: int, root: Path) -> dict:
    """The sandbox's settings for one notebook, as the environment of the nbgrader process."""
    settings = sandbox.Settings(
        memory_mib=sandbox.memory_mib(measured_peak_mib(lesson)), wall_seconds=2 * timeout + WALL_MARGIN,
        read_only=sandbox.python_folders(), parent=str(root / "kernels"),
        env={"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)},
        kernel_script=os.environ.get("MLLM_SANDBOX_TEST_KERNEL"),  # tests only: a kernel that misbehaves
    )
    (root / "kernels").mkdir(exist_ok=True)
    return settings.to_env()


def grade_shard(root: Path, lessons: list[Path], students: dict[str, Path], threads: int,
                timeout: int | None, use_sandbox: bool = True) -> list[Result]:
    """Grade some students in one course folder: review, nbgrader autograde, then the gradebook read."""
    from nbgrader.api import Gradebook, MissingEntry

    generate(root, lessons)
    results = []
    for path in lessons:
        lesson = nbformat.read(path, as_version=4)
        trusted = Lesson(lesson)
        ids, submitted = {}, {}
        for index, (student, folder) in enumerate(sorted(students.items())):
            result = Result(student, path.stem, sandbox="bubblewrap" if use_sandbox else "off (--no-sandbox)")
            results.append(result)
            file, note = find_submission(folder, path.stem)
            result.notes += [note] if note else []
            if file is None:
                result.status = "missing"
                continue
            nb, problem = read_submission(file)
            if nb is None:
                result.status = problem
                continue
            result.notes += cell_problems(nb, lesson)
            result.review = review(nb, trusted)
            sid = f"s{index:04d}"  # nbgrader's ids stay plain whatever the LMS called the folder
            target = root / "submitted" / sid / path.stem
            target.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target / path.name)
            ids[sid], submitted[sid] = result, nb
        if not ids:
            continue
        limit = timeout or cell_timeout(lesson)
        env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        if use_sandbox:
            env.update(kernel_settings(lesson, limit, threads, root))
        options = [f"--ExecutePreprocessor.timeout={limit}", "--OverwriteCells.add_missing_cells=True"]
        log = nbgrader(root, "autograde", path.stem, *options, env=env)
        if any(message in log.stdout + log.stderr for message in KERNEL_START_FAILURES):
            # A kernel that did not start (a busy machine, a port taken) is not the student's fault: once more.
            for sid in [sid for sid in ids if not (root / "autograded" / sid / path.stem / path.name).exists()]:
                log = nbgrader(root, "autograde", path.stem, f"--student={sid}", *options, env=env)
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            for sid, result in ids.items():
                graded = root / "autograded" / sid / path.stem / path.name
                if not graded.exists():
                    result.status = "grading failed: " + last_error(log.stdout + log.stderr, sid, limit)
                    continue
                try:
                    notebook = gb.find_submission_notebook(path.stem, path.stem, sid)
                except MissingEntry:
                    result.status = "grading failed: not in the gradebook"
                    continue
                for grade in notebook.grades:
                    result.points[grade.name.removesuffix("-check")] = float(grade.score or 0)
                notes, result.messages = error_notes(nbformat.read(graded, as_version=4), limit)
                result.notes += notes
                withhold(result, submitted[sid], lesson)
    return results


def withhold(result: Result, submitted, lesson) -> None:
    """Points of exercises checked after code that review does not trust go to ``withheld``, not the score."""
    if not result.review:
        return
    names = affected(submitted, result.review)
    have = {grade_id(c) for c in submitted.cells}
    names |= {e.name for e in exercises(lesson) if e.grade_id not in have}  # restored: after anything
    for name in sorted(names):
        result.withheld += result.points.get(name, 0.0)
        if name in result.points:
            result.points[name] = 0.0
    result.notes.append(f"points withheld for review: {', '.join(sorted(names)) or 'none'}")


def grade(submissions: Path, lessons: list[Path], out: Path, jobs: int = 2, timeout: int | None = None,
          use_sandbox: bool = True, annotate=None) -> list[Result]:
    """Grade every student folder in ``submissions``; write grades.csv, totals.csv and feedback/ into ``out``."""
    from mllm_classroom.reports import write_reports

    require_nbgrader()
    if not submissions.is_dir():
        raise ClassroomError(f"SUBMISSIONS: {submissions} is not a folder (it needs one folder per student)")
    students = {p.name: p for p in sorted(submissions.iterdir()) if p.is_dir() and not p.name.startswith(".")}
    if not students:
        raise ClassroomError(f"SUBMISSIONS: {submissions} has no student folders (one folder per student)")
    if not isinstance(jobs, int) or jobs < 1:
        raise ClassroomError(f"--jobs: got {jobs!r}, need a whole number of at least 1")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 1):
        raise ClassroomError(f"--timeout: got {timeout!r}, need a whole number of seconds, at least 1")
    inside = [p for p in (out.resolve(), *out.resolve().parents) if p == submissions.resolve()]
    if inside:
        raise ClassroomError(f"--out: {out} is inside SUBMISSIONS; the submissions folder is never written")
    if use_sandbox:
        sandbox.check_available()
    jobs = min(jobs, len(students))
    names = sorted(students)
    shards = [{name: students[name] for name in names[k::jobs]} for k in range(jobs)]
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with tempfile.TemporaryDirectory(prefix="mllm-grade-") as tmp, ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(grade_shard, Path(tmp) / f"shard{k}", lessons, shard, threads, timeout, use_sandbox)
                   for k, shard in enumerate(shards)]
        results = [result for future in futures for result in future.result()]
    results.sort(key=lambda r: (r.student, r.notebook))
    if annotate is not None:  # what the LMS said of each submission (mllm_classroom.lms.Download.annotate)
        annotate(results)
    write_reports(results, lessons, out)
    return results
