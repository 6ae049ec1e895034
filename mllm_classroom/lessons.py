"""The lesson notebooks as the kit sees them: exercises, measured cost, and what students must not see."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_TIME_KEY = "quick_run_seconds"  # in notebook.metadata["mllm"], written by tools/notebooks.py run
PEAK_KEY = "quick_peak_mib"  # the kernel's peak memory in that run, also written by tools/notebooks.py run
MIN_CELL_TIMEOUT = 60  # seconds; a cell gets max(this, TIMEOUT_FACTOR x the notebook's measured run time)
TIMEOUT_FACTOR = 5
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*$(.*?)^[ \t]*### END HIDDEN TESTS[ \t]*$", re.M | re.S)
SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*$(.*?)^[ \t]*### END SOLUTION[ \t]*$", re.M | re.S)
SECRET_MIN_CHARS = 8  # shorter lines (")", "else:", "return x") say nothing and appear everywhere


class ClassroomError(Exception):
    """A teacher's mistake (a wrong folder, a missing tool): reported in one line, exit status 2."""


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


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def exercises(nb) -> list[Exercise]:
    """The graded (check) cells of a notebook, in order."""
    found = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            found.append(Exercise(meta["grade_id"].removesuffix("-check"), meta["grade_id"],
                                  float(meta.get("points", 0))))
    return found


def measured_seconds(nb) -> float | None:
    return nb.metadata.get("mllm", {}).get(RUN_TIME_KEY)


def measured_peak_mib(nb) -> float | None:
    return nb.metadata.get("mllm", {}).get(PEAK_KEY)


def cell_timeout(nb) -> int:
    seconds = measured_seconds(nb) or MIN_CELL_TIMEOUT
    return int(max(MIN_CELL_TIMEOUT, TIMEOUT_FACTOR * seconds))


def secret_lines(lesson) -> set[str]:
    """Every line of the lesson's hidden tests and solutions long enough to recognise (stripped).

    No feedback a student receives may contain one of these, whatever the submission printed.
    """
    lines = set()
    for cell in lesson.cells:
        if cell.cell_type != "code":
            continue
        for pattern in (HIDDEN, SOLUTION):
            for block in pattern.findall(cell.source):
                lines.update(line.strip() for line in block.splitlines())
    return {line for line in lines if len(line) >= SECRET_MIN_CHARS}


def scrub(text: str, secrets: set[str]) -> str:
    """``text`` with every line that holds a secret line replaced by a mark: feedback never leaks a test."""
    if not any(secret in text for secret in secrets):
        return text
    return "\n".join("[a line of the hidden tests or solutions was removed]"
                     if any(secret in line for secret in secrets) else line for line in text.splitlines())
