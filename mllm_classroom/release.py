"""The learner's version of every lesson, and its solutions page: ``mllm-classroom release``.

A lesson (``notebooks/NN.ipynb``) is the teacher's source: every solution, every hidden test. Its learner's
version (``student/NN.ipynb``) is what every learner opens (the README's table and badges, ``make lab``, the
website's Colab and download links) and what a teacher hands out:

- the lesson's cells with their outputs, so a learner can compare their run with the course's;
- each exercise's solution replaced by a stub that keeps the signature and raises
  ``NotDone(N, "name")`` (one line when run: "exercise N is not done yet: write `name` above");
- each check cell with its visible checks only, not yet run (no output gives an answer away), tagged
  ``raises-exception`` (run on the stub it stops with that one line; JupyterLab's Run All goes on);
- after each check, a link to that exercise's solution in ``solutions/NN.md``: one deliberate step away.

No solution code, no hidden test, no nbgrader or nbval marker appears in a cell; the nbgrader metadata
stays (the grader matches cells by it). Made by this module only, never by hand: a test fails when
``student/`` or ``solutions/`` differ from what it writes.
"""

from __future__ import annotations

import ast
import copy
import os
import re
from pathlib import Path

import nbformat

from mllm_classroom.lessons import HIDDEN, LESSON_ONLY, SOLUTION, exercises, measured_seconds, tasks

REGION = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*$", re.M | re.S)
IMPORT = "from mllm_utils.checks import NotDone\n"
RAISES = "raises-exception"


def enclosing_name(source: str, line: int) -> str:
    """The top-level function or class whose body holds ``line`` (1-based) of ``source``."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            return node.name
    raise ValueError(f"a solution region at line {line} is not inside a function: the stub would not keep a "
                     "signature (put the region inside the function's body)")


def stub(source: str, number: int) -> str:
    """``source`` with each solution region replaced by a stub that raises NotDone."""
    def replace(match: re.Match) -> str:
        line = source.count("\n", 0, match.start()) + 1
        name = enclosing_name(source, line)
        indent = match["indent"]
        return f'{indent}# YOUR CODE HERE\n{indent}raise NotDone({number}, "{name}")'

    body = REGION.sub(replace, source)
    return body if IMPORT in body else IMPORT + "\n\n" + body.lstrip("\n")


def defined_anywhere(plan) -> set[str]:
    return {name for task in plan for name in task.names}


def reads_any(source: str, names: set[str]) -> bool:
    """Does the code read one of ``names`` outside a function or class it defines (i.e. when it runs)?"""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom):
            continue
        if any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node)):
            return True
    return False


def solution_url(repository: str, stem: str, number: int) -> str:
    return f"{repository}/blob/main/solutions/{stem}.md#exercise-{number}"


def clear(cell) -> None:
    cell.outputs = []
    cell.execution_count = None


def tag(cell, name: str) -> None:
    tags = cell.metadata.setdefault("tags", [])
    if name not in tags:
        tags.append(name)


def learner_version(lesson, stem: str, repository: str, folder: str = "student", links: bool = True):
    """The learner's version of ``lesson`` (a notebook node); the lesson is not changed. ``links=False``
    leaves out the links to the solutions (a class's hand-out before the deadline)."""
    nb = copy.deepcopy(lesson)
    plan = tasks(nb)
    names = defined_anywhere(plan)
    by_solution = {t.solution: t for t in plan}
    by_check = {t.check: t for t in plan}
    cells = []
    for index, cell in enumerate(nb.cells):
        if LESSON_ONLY in cell.metadata.get("tags", []):  # the grader's business, not the learner's
            cell.metadata["tags"].remove(LESSON_ONLY)
            if not cell.metadata["tags"]:
                del cell.metadata["tags"]
        if "colab-badge" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace(f"/notebooks/{stem}.ipynb", f"/{folder}/{stem}.ipynb")
        if index in by_solution:
            task = by_solution[index]
            cell.source = stub(cell.source, task.number)
            clear(cell)
            if reads_any(cell.source, names):  # the cell also uses what it defines: it stops at the stub
                tag(cell, RAISES)
        elif index in by_check:
            task = by_check[index]
            cell.source = HIDDEN.sub("", cell.source).rstrip()
            clear(cell)
            tag(cell, RAISES)
        elif cell.cell_type == "code" and reads_any(cell.source, names):
            clear(cell)
            tag(cell, RAISES)
        cells.append(cell)
        if index in by_check and links:
            task = by_check[index]
            link = nbformat.v4.new_markdown_cell(
                f"**Solution.** Once your checks above pass, or if you are stuck, compare with "
                f"[a solution to exercise {task.number}](../solutions/{stem}.md#exercise-{task.number}) "
                f"(in this course's `solutions/` folder, beside this one; in Colab, "
                f"[the same on GitHub]({solution_url(repository, stem, task.number)})).")
            link.id = f"{cell.get('id', 'x')[:40]}-solution-link"[:64]
            cells.append(link)
    nb.cells = cells
    for cell in nb.cells:
        if cell.cell_type == "code" and (SOLUTION.search(cell.source) or HIDDEN.search(cell.source)):
            raise ValueError(f"{stem}: a solution or hidden test is left in the learner's version")
    return nb


def solutions_page(lesson, stem: str, title: str) -> str:
    """The solutions of a lesson's exercises, for ``solutions/NN.md``: the code only, markers removed."""
    plan = tasks(lesson)
    lines = [f"# Solutions: {title}", "",
             f"One solution to each exercise of [{stem}](../student/{stem}.ipynb) (there are others). Try the "
             "exercise first and run its checks; read a solution when they pass, to compare, or when you are stuck.",
             ""]
    for task in plan:
        source = SOLUTION.sub(lambda m: m.group(1).strip("\n"), lesson.cells[task.solution].source)
        source = re.sub(r"\n[ \t]*\n[ \t]*\n+", "\n\n\n", source).strip("\n")
        lines += [f"## Exercise {task.number}", "", "```python", source, "```", ""]
    return "\n".join(lines)


def notebook_title(nb) -> str:
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    heading = next((line.lstrip("#").strip() for line in first.splitlines() if line.startswith("#")), "")
    return heading or "the notebook"


def release(lessons: list[Path], out: Path, solutions: Path | None = None, repository: str | None = None,
            links: bool = True) -> list[dict]:
    """Write the learner's version of each lesson into ``out`` (and a README with the table), and each
    lesson's solutions page into ``solutions`` (default: beside ``out``); return the table. ``links=False``:
    versions without the links to the solutions, and no solutions pages (a class's hand-out)."""
    repository = repository or repository_url(lessons[0].parent.parent)
    solutions = solutions or out.parent / "solutions"
    out.mkdir(parents=True, exist_ok=True)
    if links:
        solutions.mkdir(parents=True, exist_ok=True)
    rows = []
    for path in lessons:
        lesson = nbformat.read(path, as_version=4)
        nb = learner_version(lesson, path.stem, repository, out.name, links)
        write_atomically(out / path.name, lambda f, nb=nb: nbformat.write(nb, f))
        if links:
            page = solutions_page(lesson, path.stem, notebook_title(lesson))
            write_atomically(solutions / f"{path.stem}.md", lambda f, page=page: f.write(page))
        found = exercises(lesson)
        rows.append({"notebook": path.stem, "exercises": len(found), "points": sum(e.points for e in found),
                     "seconds": measured_seconds(lesson)})
    write_release_readme(out, rows)
    return rows


def repository_url(root: Path) -> str:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"].rstrip("/")


def write_atomically(path: Path, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, then put it in place: never half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", errors="replace", newline="") as f:  # no character stops a report
        write(f)
    os.replace(tmp, path)


def run_times_kept() -> dict:
    """The run time each notebook shows (mllm_utils/data/run_times.json, written by tools/run_times.py), by stem;
    empty where the course's package is not installed (a notebook's own measured time is shown then)."""
    import json
    from importlib import resources

    try:
        return json.loads((resources.files("mllm_utils") / "data" / "run_times.json").read_text(encoding="utf-8"))
    except (ModuleNotFoundError, FileNotFoundError):
        return {}


def write_release_readme(out: Path, rows: list[dict]) -> None:
    lines = [
        "# The course's notebooks, for learners",
        "",
        "Open these. Each is a lesson with its outputs, and its exercises to do: a stub to replace with your",
        "code, and checks to run. Run a notebook from the top, write each exercise, run its checks, then compare",
        "with the solution linked after them (all in [`../solutions/`](../solutions/), beside this folder in the",
        "JupyterLab that `make lab` opens, so they open offline too). A teacher hands these out as they are.",
        "",
        "Run times are those `tools/notebooks.py run` measured (the README's course table and each notebook's",
        "start line give the same figures).",
        "",
        "Made by `mllm-classroom release` (`make release`) from the lessons in `../notebooks/`; never edit them",
        "by hand (a test fails when they drift from the lessons).",
        "",
        "| notebook | exercises | points | run time (quick size, 2-core CPU) |",
        "| --- | --- | --- | --- |",
    ]
    kept = run_times_kept()
    for row in rows:
        seconds = row["seconds"] if row["notebook"] not in kept else kept[row["notebook"]]
        seconds = f"{seconds:.0f} s" if seconds else "not measured"
        lines.append(f"| [{row['notebook']}]({row['notebook']}.ipynb) | {row['exercises']} | "
                     f"{row['points']:g} | {seconds} |")
    total = sum(row["points"] for row in rows)
    lines += ["", f"{sum(row['exercises'] for row in rows)} exercises, {total:g} points in all.", ""]
    (out / "README.md").write_text("\n".join(lines), encoding="utf-8")
