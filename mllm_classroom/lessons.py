"""The lesson notebooks as the kit sees them: exercises, measured cost, and what students must not see."""

from __future__ import annotations

import ast
import re
import symtable
from dataclasses import dataclass, field
from pathlib import Path

RUN_TIME_KEY = "quick_run_seconds"  # in notebook.metadata["mllm"], written by tools/notebooks.py run
PEAK_KEY = "quick_peak_mib"  # the kernel's peak memory in that run, also written by tools/notebooks.py run
MIN_CELL_TIMEOUT = 60  # seconds; a cell gets max(this, TIMEOUT_FACTOR x the notebook's measured run time)
TIMEOUT_FACTOR = 5
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*$(.*?)^[ \t]*### END HIDDEN TESTS[ \t]*$", re.M | re.S)
SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*$(.*?)^[ \t]*### END SOLUTION[ \t]*$", re.M | re.S)
# A cell tag: the lesson's own study (a demonstration, a multi-seed experiment), which nothing after it reads.
# Grading leaves such a cell out of a submission's run when the submission kept it as the lesson has it (same
# cell id, same source), and out of the judge's run of the lesson: a class of 05 is graded in a fraction of
# the time. `lesson_only_problems` proves for each lesson that no later cell reads a name such a cell binds; a
# submission that needs one anyway (a NameError) is graded again in full (grade.grade_one).
LESSON_ONLY = "lesson-only"
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
    title: str = ""  # the task, by what the learner writes: "write encode, decode" (the solution's names)


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def exercises(nb) -> list[Exercise]:
    """The graded (check) cells of a notebook, in order."""
    found, written = [], ""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            names = defined_names(cell.source)[:3]
            written = "write " + ", ".join(names) if names else ""
        if meta.get("grade"):
            found.append(Exercise(meta["grade_id"].removesuffix("-check"), meta["grade_id"],
                                  float(meta.get("points", 0)), title=written))
            written = ""
    return found


@dataclass
class Task:
    """An exercise as the grader runs it: where its cells are in the lesson, its check's two parts, and the
    functions and classes its solution cell defines (the names the judge replaces by the student's)."""

    number: int
    name: str  # "ex1"
    points: float
    solution: int  # the solution cell's index in the lesson
    check: int  # the check cell's index
    solution_id: str  # "ex1-solution"
    check_id: str  # "ex1-check"
    visible: str  # the check's code before its hidden tests
    hidden: str  # the hidden tests' code (markers removed)
    names: list[str] = field(default_factory=list)
    solution_cell_id: str = ""  # nbformat's cell id
    check_cell_id: str = ""


def defined_names(source: str) -> list[str]:
    """The names a cell binds at its top level, in order: its functions and classes, and its values (a check
    may read ``answer = 42`` as well as ``def encode``)."""
    try:
        tree = ast.parse(SOLUTION.sub(lambda m: m.group(1), source))
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            found = []
        names += [n for n in found if n not in names]
    return names


def split_check(source: str) -> tuple[str, str]:
    """A check cell's visible part and its hidden tests (without their markers)."""
    hidden = "\n".join(block.strip("\n") for block in HIDDEN.findall(source))
    return HIDDEN.sub("", source).rstrip() + "\n", hidden


def tasks(nb) -> list[Task]:
    """The exercises of a lesson, in order, as the grader runs them."""
    solutions, found = {}, []
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        gid = meta.get("grade_id", "")
        if cell.cell_type == "code" and meta.get("solution"):
            solutions[gid.removesuffix("-solution")] = (index, cell)
        elif cell.cell_type == "code" and meta.get("grade"):
            name = gid.removesuffix("-check")
            sol_index, sol_cell = solutions[name]
            visible, hidden = split_check(cell.source)
            found.append(Task(number=len(found) + 1, name=name, points=float(meta.get("points", 0)),
                              solution=sol_index, check=index, solution_id=grade_id(sol_cell), check_id=gid,
                              visible=visible, hidden=hidden, names=defined_names(sol_cell.source),
                              solution_cell_id=sol_cell.get("id", ""), check_cell_id=cell.get("id", "")))
    return found


def lesson_only(nb) -> dict[str, str]:
    """The cells tagged LESSON_ONLY: their cell id -> their source."""
    return {cell.get("id", ""): cell.source for cell in nb.cells
            if cell.cell_type == "code" and LESSON_ONLY in cell.metadata.get("tags", []) and cell.get("id")}


def _globals(source: str) -> tuple[set[str], set[str]]:
    """(the names a cell binds at its top level, the names it reads as globals, in any of its scopes)."""
    try:
        table = symtable.symtable(source, "cell", "exec")
    except SyntaxError:
        return set(), set()
    binds = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    reads = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    stack = list(table.get_children())
    while stack:
        scope = stack.pop()
        reads |= {s.get_name() for s in scope.get_symbols() if s.is_referenced() and s.is_global()}
        stack += scope.get_children()
    return binds, reads - binds  # a name the cell binds itself is read after it binds it (a loop, a def)


def lesson_only_problems(nb) -> list[str]:
    """Why the LESSON_ONLY cells of ``nb`` could not be left out of a run: a later cell that is run reads a
    name whose last binding before it is in such a cell, a tagged cell holds an exercise or a check, or it
    changes what a later cell reads without binding a name (random numbers, global settings: by review)."""
    skipped = {i for i, c in enumerate(nb.cells) if c.cell_type == "code" and LESSON_ONLY in c.metadata.get("tags", [])}
    graded = {t.solution for t in tasks(nb)} | {t.check for t in tasks(nb)}
    problems = [f"cell {i} is an exercise or a check and cannot be {LESSON_ONLY}" for i in sorted(skipped & graded)]
    last = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        binds, reads = _globals(cell.source)
        if index not in skipped:
            problems += [f"cell {index} reads {name!r}, last bound in the {LESSON_ONLY} cell {last[name]}"
                         for name in sorted(reads) if last.get(name) in skipped]
        for name in binds:
            last[name] = index
    return problems


def measured_seconds(nb) -> float | None:
    return nb.metadata.get("mllm", {}).get(RUN_TIME_KEY)


def measured_peak_mib(nb) -> float | None:
    return nb.metadata.get("mllm", {}).get(PEAK_KEY)


def cell_timeout(nb) -> int:
    seconds = measured_seconds(nb) or MIN_CELL_TIMEOUT
    return int(max(MIN_CELL_TIMEOUT, TIMEOUT_FACTOR * seconds))


def secret_lines(lesson) -> set[str]:
    """Every line of the lesson's hidden tests and solutions long enough to recognise, in the form
    :func:`plain_text` gives. No feedback a student receives may contain one of these."""
    lines = set()
    for cell in lesson.cells:
        if cell.cell_type != "code":
            continue
        for pattern in (HIDDEN, SOLUTION):
            for block in pattern.findall(cell.source):
                lines.update(squeeze(line) for line in block.splitlines())
    return {line for line in lines if len(line) >= SECRET_MIN_CHARS}


# Terminal escapes (colours, cursor moves) and characters that print as nothing or move the text.
ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5"
                       "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f"
                       "\ufeff\uffa0\ufff0-\ufffb]")


def plain_text(text: str) -> str:
    """``text`` without terminal escapes and invisible or control characters (tabs and newlines kept), and
    with what UTF-8 cannot hold (a lone surrogate such as ``"\\udcff"`` in an error message) replaced by ``?``:
    no character a submission sends can stop a report from being written."""
    try:
        text = str(text)
    except Exception:  # noqa: BLE001 - a value whose str() fails says nothing
        text = "?"
    text = text.encode("utf-8", "replace").decode("utf-8")
    return INVISIBLE.sub("", ESCAPES.sub("", text))


def capped(text: str, limit: int) -> str:
    """``text`` (made plain) cut to at most ``limit`` characters, the cut said."""
    text = plain_text(text)
    return text if len(text) <= limit else text[: max(0, limit - 12)] + " [... cut]"


def squeeze(text: str) -> str:
    """The visible characters of ``text`` only: what a secret line is recognised by, however it is spaced."""
    return "".join(plain_text(text).split())


def scrub(text: str, secrets: set[str]) -> str:
    """``text`` made plain, or a mark in its place when it holds a line of the hidden tests or solutions,
    however that line was spaced, split or hidden with invisible characters."""
    text = plain_text(text)
    flat = squeeze(text)
    if any(secret in flat for secret in secrets):
        return "[withheld: it quoted the hidden tests or a solution]"
    return text
