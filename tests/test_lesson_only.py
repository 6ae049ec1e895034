"""Cells tagged lesson-only (mllm_classroom.lessons.LESSON_ONLY): the lesson's own study, left out of grading runs.

- in every lesson, no cell that grading runs reads a name whose last binding is in such a cell, and no exercise
  or check is one (``lesson_only_problems``), so leaving them out changes no verdict;
- the learner's versions carry no such tag (the grader reads the tags from the lesson, never a submission);
- graded for real (the sandbox): a submission that kept the cell as the lesson has it runs without it; one that
  changed it runs it; one whose own code needs a name from it (a NameError) is graded again in full, full points.
"""

import shutil

import nbformat
import pytest

from mllm_classroom import grade as grading
from mllm_classroom.lessons import LESSON_ONLY, lesson_only, lesson_only_problems
from tools import classroom_fixtures as fixtures
from tools.notebooks import notebook_paths

STEMS = [p.stem for p in notebook_paths()]


@pytest.mark.parametrize("stem", STEMS)
def test_nothing_graded_reads_what_a_lesson_only_cell_binds(stem):
    lesson = nbformat.read(fixtures.LESSONS / f"{stem}.ipynb", as_version=4)
    assert lesson_only_problems(lesson) == []


@pytest.mark.parametrize("stem", STEMS)
def test_learner_versions_carry_no_lesson_only_tag(stem):
    learner = nbformat.read(fixtures.STUDENT / f"{stem}.ipynb", as_version=4)
    assert not [c for c in learner.cells if LESSON_ONLY in c.metadata.get("tags", [])]


def code(source, tags=(), **nbgrader):
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = list(tags)
    if nbgrader:
        cell.metadata["nbgrader"] = {"schema_version": 3, "task": False, "solution": False, "grade": False,
                                     "locked": False, **nbgrader}
    return cell


def lesson(study="STUDY = 6 * 7\nprint('a long study')", answer="return 42"):
    nb = nbformat.v4.new_notebook(cells=[
        code("import torch\nfrom mllm_utils.checks import check_equal"),
        code(study, tags=[LESSON_ONLY]),
        code("BASE = 40"),
        code(f"def answer():\n    ### BEGIN SOLUTION\n    {answer}\n    ### END SOLUTION",
             grade_id="ex1-solution", solution=True),
        code("check_equal('answer', answer(), 42)\n### BEGIN HIDDEN TESTS\ncheck_equal('again', answer(), 42)\n"
             "### END HIDDEN TESTS", grade_id="ex1-check", grade=True, locked=True, points=2),
    ])
    for number, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{number}"  # as in a learner's version: the lesson's cell ids
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["mllm"] = {"quick_run_seconds": 5, "quick_peak_mib": 1200}
    return nb


def test_problems_name_a_later_reader_and_a_tagged_exercise():
    nb = lesson()
    assert lesson_only_problems(nb) == [] and list(lesson_only(nb).values()) == [nb.cells[1].source]
    nb.cells[2].source = "BASE = STUDY - 2"
    assert lesson_only_problems(nb) == ["cell 2 reads 'STUDY', last bound in the lesson-only cell 1"]
    nb.cells[2].source = "def base():\n    return STUDY - 2"  # read when called, later: still a reader
    assert lesson_only_problems(nb) == ["cell 2 reads 'STUDY', last bound in the lesson-only cell 1"]
    nb.cells[2].source = "STUDY = 1\nBASE = STUDY"  # binds it first: reads its own
    assert lesson_only_problems(nb) == []
    nb.cells[3].metadata["tags"] = [LESSON_ONLY]
    assert lesson_only_problems(nb)[0] == "cell 3 is an exercise or a check and cannot be lesson-only"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="grading runs in the sandbox (`make sandbox-setup`)")
def test_grading_leaves_the_study_out_unless_a_submission_needs_it(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nbformat.write(lesson(), lessons / "98_study.ipynb")
    students = {
        "ada": lesson(answer="return BASE + 2"),  # kept the study as it is: left out
        "ben": lesson(answer="return STUDY"),  # needs the study's name: graded again with every cell
        "cy": lesson(study="STUDY = 42  # mine", answer="return STUDY"),  # changed it: it runs
        "dee": lesson(answer="return BASE"),  # wrong: graded once, without the study
    }
    for name, nb in students.items():
        (tmp_path / "class" / name).mkdir(parents=True)
        for cell in nb.cells:
            cell.metadata.get("tags", []).clear()  # a learner's version has no tag: the lesson's count
        nbformat.write(nb, tmp_path / "class" / name / "98_study.ipynb")
    results = {r.student: r for r in grading.grade(tmp_path / "class", [lessons / "98_study.ipynb"],
                                                   tmp_path / "grades", jobs=1)}
    got = {name: (r.status, r.points, r.skipped) for name, r in results.items()}
    assert got == {"ada": ("graded", {"ex1": 2.0}, 1), "ben": ("graded", {"ex1": 2.0}, 0),
                   "cy": ("graded", {"ex1": 2.0}, 0), "dee": ("graded", {"ex1": 0.0}, 1)}, got
    assert not any(r.review for r in results.values()), {n: r.review for n, r in results.items()}
