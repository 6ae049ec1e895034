"""Submissions for testing the classroom kit: blank, right, wrong and malformed.

    python tools/classroom_fixtures.py sample-class   rewrite tests/fixtures/classroom/sample_class

A submission starts from the committed student version (``student/``), as a student's would:
- blank: the student version untouched;
- right: each solution cell filled with the lesson's solution (the region's marker lines removed);
- wrong: each solution cell filled with the plausible wrong answer kept in
  ``tests/fixtures/classroom/wrong_answers/<notebook>.py`` (sections ``# %% exN-solution``).

``tests/fixtures/classroom/visible_wrong/<notebook>.py`` (same format) holds, per exercise, a plausible
wrong answer that the check cell's *visible* part must reject (a learner alone never runs the hidden
tests); ``tests/test_visible_checks.py`` runs them.

The sample class is what the README's teacher commands grade; ``tests/test_classroom.py`` checks that
it matches what this file makes, and that grading it gives the expected CSV.
"""

from __future__ import annotations

import copy
import re
import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "notebooks"
STUDENT = ROOT / "student"
WRONG = ROOT / "tests" / "fixtures" / "classroom" / "wrong_answers"
VISIBLE_WRONG = ROOT / "tests" / "fixtures" / "classroom" / "visible_wrong"
SAMPLE_CLASS = ROOT / "tests" / "fixtures" / "classroom" / "sample_class"
SAMPLE_NOTEBOOKS = ["03_recurrent_networks", "04_learning_to_count"]
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def solutions(lesson) -> dict[str, str]:
    """The lesson's solution cells as a student who got everything right would submit them."""
    return {grade_id(c): MARKER.sub("", c.source) for c in lesson.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def wrong_variants(stem: str, folder: Path = VISIBLE_WRONG) -> list[tuple[str, str, str]]:
    """Every plausible wrong answer for notebook ``stem`` in ``folder``: (solution cell id, the mistake, the
    cell's code), in file order. A section starts with ``# %% exN-solution``; the same id may come back,
    once per wrong answer; its first line ``# Mistake: ...`` says what is wrong."""
    sections: list[tuple[str, list[str]]] = []
    for line in (folder / f"{stem}.py").read_text(encoding="utf-8").splitlines():
        match = re.match(r"# %% (\S+)\s*$", line)
        if match:
            sections.append((match.group(1), []))
        elif sections:
            sections[-1][1].append(line)
    found = []
    for key, lines in sections:
        source = "\n".join(lines).strip() + "\n"
        mistake = next((ln.removeprefix("# Mistake:").strip() for ln in lines if ln.startswith("# Mistake:")), "")
        found.append((key, mistake, source))
    return found


def wrong_answers(stem: str, folder: Path = WRONG) -> dict[str, str]:
    """The plausible wrong answers for notebook ``stem`` in ``folder``, by solution cell id (the first of each)."""
    answers: dict[str, str] = {}
    for key, _mistake, source in wrong_variants(stem, folder):
        answers.setdefault(key, source)
    return answers


def filled(student, answers: dict[str, str]):
    """A copy of the student version with the given solution cells replaced."""
    nb = copy.deepcopy(student)
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


def submission(stem: str, kind: str):
    """A submission of notebook ``stem``: ``blank``, ``right`` or ``wrong``."""
    student = nbformat.read(STUDENT / f"{stem}.ipynb", as_version=4)
    if kind == "blank":
        return student
    if kind == "right":
        return filled(student, solutions(nbformat.read(LESSONS / f"{stem}.ipynb", as_version=4)))
    if kind == "wrong":
        return filled(student, wrong_answers(stem))
    raise ValueError(f"kind: got {kind!r}, need 'blank', 'right' or 'wrong'")


def make_sample_class(out: Path) -> None:
    """Six students, two notebooks: what a teacher meets in one LMS download.

    ada: everything right; ben: blank; cy: the wrong answers; dee: 03 is not valid JSON, 04 arrives as
    "04_learning_to_count (1).ipynb" with its first check cell deleted; eve: 03 loops forever in its
    first exercise, 04 raises in every cell; fay: an empty folder.
    """
    first, second = SAMPLE_NOTEBOOKS
    if out.exists():
        shutil.rmtree(out)
    for name in ["ada", "ben", "cy", "dee", "eve", "fay"]:
        (out / name).mkdir(parents=True)
    for stem in SAMPLE_NOTEBOOKS:
        for name, kind in [("ada", "right"), ("ben", "blank"), ("cy", "wrong")]:
            nbformat.write(submission(stem, kind), out / name / f"{stem}.ipynb")
    text = nbformat.writes(submission(first, "right"))
    (out / "dee" / f"{first}.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")  # cut off mid-save
    deleted = submission(second, "right")
    deleted.cells = [c for c in deleted.cells if grade_id(c) != "ex1-check"]
    nbformat.write(deleted, out / "dee" / f"{second} (1).ipynb")
    looping = submission(first, "right")
    for cell in looping.cells:
        if grade_id(cell) == "ex1-solution":
            cell.source = "while True:\n    pass\n"
    nbformat.write(looping, out / "eve" / f"{first}.ipynb")
    raising = submission(second, "blank")
    for cell in raising.cells:
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("locked"):
            cell.source = 'raise RuntimeError("nothing works")\n'
    nbformat.write(raising, out / "eve" / f"{second}.ipynb")
    (out / "fay" / ".keep").write_text("", encoding="utf-8")



def one_exercise_lesson(path: Path):
    """A lesson of two cells with the nbgrader markup of the course's exercises, written to ``path``: graded in
    seconds, for the tests of grading itself."""
    solution = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION")
    solution.metadata["nbgrader"] = {"grade": False, "grade_id": "ex1-solution", "locked": False,
                                     "schema_version": 3, "solution": True, "task": False}
    check = nbformat.v4.new_code_cell("assert answer == 42")
    check.metadata["nbgrader"] = {"grade": True, "grade_id": "ex1-check", "locked": True, "points": 1,
                                  "schema_version": 3, "solution": False, "task": False}
    nb = nbformat.v4.new_notebook(cells=[solution, check])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return nb

if __name__ == "__main__":
    if sys.argv[1:] != ["sample-class"]:
        sys.exit(__doc__)
    make_sample_class(SAMPLE_CLASS)
    print(f"wrote {SAMPLE_CLASS.relative_to(ROOT)}")
