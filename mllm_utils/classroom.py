"""Teach with the course: student versions and grading, through nbgrader's command line.

    mllm-classroom release [--out student] [NOTEBOOK ...]
    mllm-classroom grade SUBMISSIONS [--out grades] [--jobs 2] [NOTEBOOK ...]

(or ``python -m mllm_utils.classroom ...``; ``make release`` and ``make grade`` are shortcuts).

``release`` turns each lesson notebook into its student version: solutions replaced by stubs, check
cells locked, hidden tests removed, outputs cleared, the Colab badge pointing at the student copy and
the Colab setup cell kept. ``grade`` grades a folder laid out as an LMS download gives it, one folder
per student, each holding that student's notebooks under their released names::

    SUBMISSIONS/ada/05_lstm.ipynb
    SUBMISSIONS/ben/05_lstm (1).ipynb      a file is matched by its notebook's name at the start
    SUBMISSIONS/cy/                        nothing for 05: reported as missing

and writes ``grades.csv`` (a row per student and notebook: points per exercise, total, status,
notes), ``totals.csv`` (a row per student) and ``feedback/STUDENT/NOTEBOOK.html``.

nbgrader is the engine, in a temporary course folder: no JupyterHub, no exchange. It is a teacher's
tool, installed with ``pip install -e ".[teach]"``; learners and Colab never need it. Students are
graded in parallel shards (one course folder and gradebook each), and every cell's timeout comes
from the notebook's measured run time, so one student's endless loop costs minutes, not the class.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

# The environment a graded notebook runs in: the quick size, no progress bars, and the course's
# fixed hash seed, as in the committed runs.
GRADING_ENV = {"MLLM_QUICK": "1", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0"}
MIN_CELL_TIMEOUT = 60  # seconds; a cell gets max(this, TIMEOUT_FACTOR x the notebook's measured run time)
TIMEOUT_FACTOR = 5
RUN_TIME_KEY = "quick_run_seconds"  # in notebook.metadata["mllm"], written by tools/notebooks.py run
KERNEL_START_FAILURES = ("Kernel died before replying to kernel_info", "Timeout waiting for kernel_info reply")


class ClassroomError(Exception):
    """A teacher's mistake (a wrong folder, a missing tool): reported in one line, exit status 2."""


# ---------------------------------------------------------------- lesson notebooks and their exercises


def lesson_paths(notebooks_dir: Path, names: list[str] | None = None) -> list[Path]:
    """The lesson notebooks to work on: all of ``notebooks_dir``, or those named (``05`` or ``05_lstm``)."""
    if not notebooks_dir.is_dir():
        raise ClassroomError(
            f"--notebooks: {notebooks_dir} is not a folder; run from the course's folder or pass --notebooks DIR"
        )
    paths = sorted(notebooks_dir.glob("*.ipynb"))
    if not paths:
        raise ClassroomError(f"--notebooks: {notebooks_dir} holds no notebooks")
    if not names:
        return paths
    chosen = set()
    for name in names:
        stem = Path(name).stem
        found = [p for p in paths if p.stem == stem or p.stem.split("_", 1)[0] == stem]
        if not found:
            raise ClassroomError(f"notebook {name!r} is not in {notebooks_dir} (names look like 05 or 05_lstm)")
        chosen.update(found)
    return sorted(chosen)


@dataclass
class Exercise:
    name: str  # "ex1"
    grade_id: str  # "ex1-check"
    points: float


def exercises(nb) -> list[Exercise]:
    """The graded (check) cells of a notebook, in order."""
    found = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            grade_id = meta["grade_id"]
            found.append(Exercise(grade_id.removesuffix("-check"), grade_id, float(meta.get("points", 0))))
    return found


def measured_seconds(nb) -> float | None:
    return nb.metadata.get("mllm", {}).get(RUN_TIME_KEY)


def cell_timeout(nb) -> int:
    seconds = measured_seconds(nb) or MIN_CELL_TIMEOUT
    return int(max(MIN_CELL_TIMEOUT, TIMEOUT_FACTOR * seconds))


# ---------------------------------------------------------------- nbgrader, in a temporary course folder


def nbgrader(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run one nbgrader command in the course folder ``root``; its log is returned, not printed."""
    full_env = {**os.environ, **GRADING_ENV, **(env or {})}
    # Keep a teacher's own Jupyter configuration (another course's nbgrader_config.py) out of it.
    full_env["JUPYTER_CONFIG_DIR"] = str(root / ".jupyter")
    # nbgrader runs `alembic` (its database tool) from PATH: use the one beside this Python.
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    command = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}", "--force"]
    return subprocess.run(command, cwd=root, env=full_env, capture_output=True, text=True)


def require_nbgrader() -> None:
    try:
        import nbgrader  # noqa: F401
    except ModuleNotFoundError:
        raise ClassroomError(
            'nbgrader is not installed: `pip install -e ".[teach]"` in the course folder (or `make teach-setup`)'
        ) from None


def generate(root: Path, lessons: list[Path]) -> None:
    """Copy the lessons in as one assignment each and let nbgrader make the student versions."""
    for path in lessons:
        source = root / "source" / path.stem
        source.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, source / path.name)
    result = nbgrader(root, "generate_assignment", "*")  # one start of nbgrader for all of them
    made = {p.stem for p in lessons if (root / "release" / p.stem / p.name).exists()}
    if result.returncode != 0 or len(made) != len(lessons):
        failed = ", ".join(p.name for p in lessons if p.stem not in made) or "?"
        errors = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "ERROR" in line]
        raise ClassroomError(f"nbgrader could not make the student version of {failed}:\n" + "\n".join(errors))


# ---------------------------------------------------------------- release


def release(lessons: list[Path], out: Path) -> list[dict]:
    """Write the student version of each lesson into ``out`` (plus a README with the table); return the table."""
    require_nbgrader()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mllm-release-") as tmp:
        root = Path(tmp)
        generate(root, lessons)
        for path in lessons:
            nb = nbformat.read(root / "release" / path.stem / path.name, as_version=4)
            for cell in nb.cells:
                if "colab-badge" in cell.metadata.get("tags", []):
                    # The Open-in-Colab badge opens the student copy, not the lesson.
                    cell.source = cell.source.replace(f"/notebooks/{path.name}", f"/{out.name}/{path.name}")
            nb.metadata.pop("widgets", None)
            write_atomically(out / path.name, lambda f, nb=nb: nbformat.write(nb, f))
            found = exercises(nb)
            rows.append({
                "notebook": path.stem, "exercises": len(found), "points": sum(e.points for e in found),
                "seconds": measured_seconds(nb),
            })
    write_release_readme(out, rows)
    return rows


def write_atomically(path: Path, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, then put it in place: never half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        write(f)
    os.replace(tmp, path)


def write_release_readme(out: Path, rows: list[dict]) -> None:
    lines = [
        "# Student versions",
        "",
        "Made by `mllm-classroom release` from the lesson notebooks in `notebooks/`: solutions replaced by",
        "stubs, check cells locked, hidden tests removed, outputs cleared. Do not edit these by hand: change the",
        "lesson, then release again (a test fails when the two drift apart). Each opens in Colab from its badge.",
        "",
        "| notebook | exercises | points | run time (quick size, 2-core CPU) |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        seconds = f"{row['seconds']:.0f} s" if row["seconds"] else "not measured"
        lines.append(f"| [{row['notebook']}]({row['notebook']}.ipynb) | {row['exercises']} | "
                     f"{row['points']:g} | {seconds} |")
    total = sum(row["points"] for row in rows)
    lines += ["", f"{sum(row['exercises'] for row in rows)} exercises, {total:g} points in all.", ""]
    (out / "README.md").write_text("\n".join(lines), encoding="utf-8")


# ---------------------------------------------------------------- grade


@dataclass
class Result:
    """One student's grade for one notebook."""

    student: str
    notebook: str
    points: dict = field(default_factory=dict)  # "ex1" -> points scored
    status: str = "graded"
    notes: list = field(default_factory=list)
    feedback: Path | None = None  # nbgrader's HTML, while the course folder exists


def find_submission(folder: Path, stem: str) -> tuple[Path | None, str | None]:
    """The file in a student's folder that holds notebook ``stem`` (``05_lstm (1).ipynb`` counts)."""
    matches = [p for p in folder.glob("*.ipynb") if p.name.startswith(stem)]
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
    have = {c.metadata.get("nbgrader", {}).get("grade_id") for c in submitted.cells}
    return [f"{e.grade_id} was missing and was restored" for e in exercises(lesson) if e.grade_id not in have]


def error_notes(autograded_path: Path, timeout: int) -> list[str]:
    """One note per cell that raised when graded: exercise cells by id, others by number (a timeout says so)."""
    nb = nbformat.read(autograded_path, as_version=4)
    notes, lesson = [], []
    for index, cell in enumerate(nb.cells):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if not errors:
            continue
        ename, evalue = errors[0].ename, str(errors[0].evalue).strip()
        message = (f"{ename}: {evalue.splitlines()[0]}" if evalue else ename)[:160]
        if ename in ("KeyboardInterrupt", "CellTimeoutError"):  # nbgrader interrupts a cell at its limit
            message = f"ran past {timeout} s and was stopped"
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id:
            notes.append(f"{grade_id}: {message}")
        else:
            lesson.append(f"cell {index}: {message}")
    if lesson:  # a broken lesson cell usually breaks the rest: the first one says why
        more = f" (and {len(lesson) - 1} more)" if len(lesson) > 1 else ""
        notes.insert(0, f"lesson code raised in {lesson[0]}{more}")
    return notes


def grade_shard(root: Path, lessons: list[Path], students: dict[str, Path], threads: int,
                timeout: int | None) -> list[Result]:
    """Grade some students in one course folder: nbgrader autograde, the gradebook read, then feedback."""
    from nbgrader.api import Gradebook, MissingEntry

    generate(root, lessons)
    timeout_override = timeout
    results = []
    for path in lessons:
        lesson = nbformat.read(path, as_version=4)
        ids = {}
        for index, (student, folder) in enumerate(sorted(students.items())):
            result = Result(student, path.stem)
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
            sid = f"s{index:04d}"  # nbgrader's ids stay plain whatever the LMS called the folder
            target = root / "submitted" / sid / path.stem
            target.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target / path.name)
            ids[sid] = result
        if not ids:
            continue
        timeout = timeout_override or cell_timeout(lesson)
        env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        options = [f"--ExecutePreprocessor.timeout={timeout}", "--OverwriteCells.add_missing_cells=True"]
        log = nbgrader(root, "autograde", path.stem, *options, env=env)
        if any(message in log.stdout + log.stderr for message in KERNEL_START_FAILURES):
            # A kernel that did not start (a busy machine, a port taken) is not the student's fault: once more.
            for sid in [sid for sid in ids if not (root / "autograded" / sid / path.stem / path.name).exists()]:
                log = nbgrader(root, "autograde", path.stem, f"--student={sid}", *options, env=env)
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            for sid, result in ids.items():
                graded = root / "autograded" / sid / path.stem / path.name
                if not graded.exists():
                    result.status = "grading failed: " + last_error(log.stdout + log.stderr, sid)
                    continue
                try:
                    notebook = gb.find_submission_notebook(path.stem, path.stem, sid)
                except MissingEntry:
                    result.status = "grading failed: not in the gradebook"
                    continue
                for grade in notebook.grades:
                    result.points[grade.name.removesuffix("-check")] = float(grade.score or 0)
                result.notes += error_notes(graded, timeout)
                result.feedback = root / "feedback" / sid / path.stem / path.name.replace(".ipynb", ".html")
    nbgrader(root, "generate_feedback", "*")  # one start of nbgrader (seconds each) for every notebook
    return results


def last_error(log: str, sid: str) -> str:
    lines = [line.strip() for line in log.splitlines() if "[ERROR]" in line or "Error" in line]
    mine = [line for line in lines if sid in line] or lines
    return (mine[-1] if mine else "nbgrader gave no reason")[:200]


def grade(submissions: Path, lessons: list[Path], out: Path, jobs: int = 2,
          timeout: int | None = None) -> list[Result]:
    """Grade every student folder in ``submissions``; write grades.csv, totals.csv and feedback/ into ``out``."""
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
    jobs = min(jobs, len(students))
    names = sorted(students)
    shards = [{name: students[name] for name in names[k::jobs]} for k in range(jobs)]
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with tempfile.TemporaryDirectory(prefix="mllm-grade-") as tmp, ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(grade_shard, Path(tmp) / f"shard{k}", lessons, shard, threads, timeout)
                   for k, shard in enumerate(shards)]
        results = [result for future in futures for result in future.result()]
        results.sort(key=lambda r: (r.student, r.notebook))
        write_reports(results, lessons, out)
    return results


def write_reports(results: list[Result], lessons: list[Path], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exercise_names = []
    max_points = {}
    for path in lessons:
        found = exercises(nbformat.read(path, as_version=4))
        max_points[path.stem] = sum(e.points for e in found)
        exercise_names += [e.name for e in found if e.name not in exercise_names]
    header = ["student", "notebook", *exercise_names, "score", "max_score", "status", "notes"]
    rows = []
    for r in results:
        score = sum(r.points.values())
        rows.append([r.student, r.notebook, *[fmt(r.points.get(n)) for n in exercise_names],
                     fmt(score), fmt(max_points[r.notebook]), r.status, "; ".join(r.notes)])
    write_csv(out / "grades.csv", header, rows)
    students = sorted({r.student for r in results})
    totals = []
    for student in students:
        mine = {r.notebook: sum(r.points.values()) for r in results if r.student == student}
        totals.append([student, *[fmt(mine.get(p.stem, 0)) for p in lessons], fmt(sum(mine.values()))])
    write_csv(out / "totals.csv", ["student", *[p.stem for p in lessons], "total"], totals)
    for r in results:
        target = out / "feedback" / r.student / f"{r.notebook}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        if r.feedback is not None and r.feedback.exists():
            shutil.copy(r.feedback, target)
        else:
            target.write_text(f"<html><body><h1>{html.escape(r.notebook)}</h1><p>Not graded: "
                              f"{html.escape(r.status)}.</p></body></html>\n", encoding="utf-8")


def fmt(value) -> str:
    return "" if value is None else f"{value:g}"


def write_csv(path: Path, header: list, rows: list) -> None:
    write_atomically(path, lambda f: csv.writer(f).writerows([header, *rows]))


# ---------------------------------------------------------------- command line


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, need a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {value}, need at least 1")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="mllm-classroom", allow_abbrev=False,
        description="Make the student versions of the course's notebooks, and grade a class's submissions.",
    )
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"),
                        help="folder of the lesson notebooks (default: notebooks)")
    sub = parser.add_subparsers(dest="command", required=True)
    rel = sub.add_parser("release", help="make the student versions", allow_abbrev=False)
    rel.add_argument("names", nargs="*", metavar="NOTEBOOK", help="05 or 05_lstm (default: all)")
    rel.add_argument("--out", type=Path, default=Path("student"), help="folder to write (default: student)")
    gra = sub.add_parser("grade", help="grade a folder of submissions", allow_abbrev=False)
    gra.add_argument("submissions", type=Path, metavar="SUBMISSIONS", help="one folder per student")
    gra.add_argument("names", nargs="*", metavar="NOTEBOOK", help="05 or 05_lstm (default: all)")
    gra.add_argument("--out", type=Path, default=Path("grades"), help="folder for the CSVs and feedback")
    gra.add_argument("--jobs", type=positive_int, default=2, help="students graded at once (default: 2)")
    gra.add_argument("--timeout", type=positive_int, default=None,
                     help=f"seconds a cell may run (default: {TIMEOUT_FACTOR}x the notebook's measured run time, "
                          f"at least {MIN_CELL_TIMEOUT})")
    args = parser.parse_args(argv)
    try:
        lessons = lesson_paths(args.notebooks, args.names)
        if args.command == "release":
            for row in release(lessons, args.out):
                print(f"{row['notebook']}: {row['exercises']} exercises, {row['points']:g} points")
            print(f"student versions written to {args.out}/")
            return 0
        results = grade(args.submissions, lessons, args.out, args.jobs, args.timeout)
    except ClassroomError as error:
        print(f"mllm-classroom: {error}", file=sys.stderr)
        return 2
    graded = sum(r.status == "graded" for r in results)
    print(f"{graded} of {len(results)} submissions graded; {args.out / 'grades.csv'}, "
          f"{args.out / 'totals.csv'}, {args.out / 'feedback'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
