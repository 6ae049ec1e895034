"""The classroom kit, end to end with the real sandbox (bubblewrap, installed by `make sandbox-setup`).

- the committed learner's versions (student/) and solutions pages (solutions/) are what `mllm-classroom release`
  makes from the lessons now, and show no solution, hidden test or test marker;
- every notebook: the solutions score full points, and each plausible wrong answer
  (tests/fixtures/classroom/wrong_answers/) scores below full;
- the sample class (tests/fixtures/classroom/sample_class/) grades to the expected CSV through the command
  line, malformed submissions included (cut-off JSON, a deleted check cell, an endless loop, errors
  everywhere, a missing notebook) and a blank one (ben: every exercise "not done yet", 0 points).
"""

import csv
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from mllm_classroom import grade as grading
from mllm_classroom import lessons as classroom
from mllm_classroom.release import release
from tools import classroom_fixtures as fixtures
from tools.notebooks import notebook_paths

if shutil.which("bwrap") is None:
    message = "bwrap is not installed: grading runs every submission in a sandbox (`make sandbox-setup`)"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)

LESSONS = notebook_paths()
STEMS = [p.stem for p in LESSONS]


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def max_points(stem):
    return {e.name: e.points for e in classroom.exercises(nbformat.read(fixtures.LESSONS / f"{stem}.ipynb", 4))}


# ---------------------------------------------------------------- what is committed is what the commands make


def comparable(nb):
    return [(c.cell_type, c.source, json.dumps(c.metadata, sort_keys=True), json.dumps(c.get("outputs", []),
             sort_keys=True), c.get("execution_count")) for c in nb.cells]


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "student"
    release(LESSONS, out)
    return out


@pytest.mark.parametrize("stem", STEMS)
def test_learner_version_and_solutions_are_current(released, stem):
    made = nbformat.read(released / f"{stem}.ipynb", as_version=4)
    committed = nbformat.read(fixtures.STUDENT / f"{stem}.ipynb", as_version=4)
    assert comparable(made) == comparable(committed), f"student/{stem}.ipynb is stale: run `make release`"
    page = (released.parent / "solutions" / f"{stem}.md").read_text(encoding="utf-8")
    assert page == (fixtures.ROOT / "solutions" / f"{stem}.md").read_text(encoding="utf-8"), \
        f"solutions/{stem}.md is stale: run `make release`"


MARKERS = re.compile(r"BEGIN SOLUTION|END SOLUTION|HIDDEN TESTS|NBVAL|nbgrader|nbval", re.I)


@pytest.mark.parametrize("stem", STEMS)
def test_learner_version_shows_the_lesson_and_hides_every_answer(stem):
    lesson = nbformat.read(fixtures.LESSONS / f"{stem}.ipynb", as_version=4)
    learner = nbformat.read(fixtures.STUDENT / f"{stem}.ipynb", as_version=4)
    plan = classroom.tasks(lesson)
    # What lies between BEGIN and END SOLUTION (the stub keeps the signature, docstring and lines around it).
    regions = [m.group(1) for c in lesson.cells if c.metadata.get("nbgrader", {}).get("solution")
               for m in re.finditer(r"### BEGIN SOLUTION(.*?)### END SOLUTION", c.source, re.S)]
    assert len(regions) >= len(plan)
    secret = {line.strip() for t in plan for line in t.hidden.splitlines() if len(line.strip()) > 12}
    secret |= {line.strip() for code in regions for line in code.splitlines()
               if len(line.strip()) > 12 and not line.strip().startswith(("def ", "class ", "#", "return "))}
    # A line the lesson shows anyway (a visible check, a lesson cell) is no secret when a hidden test or a
    # solution repeats it.
    exercise_cells = {t.solution_cell_id for t in plan} | {t.check_cell_id for t in plan}
    public = "\n".join([t.visible for t in plan]
                       + [c.source for c in lesson.cells if c.get("id") not in exercise_cells])
    secret = {line for line in secret if line not in public}
    for cell in learner.cells:
        assert not MARKERS.search(cell.source), f"{stem}: a marker in a cell a learner reads: {cell.source[:80]!r}"
        shown = cell.source + json.dumps(cell.get("outputs", []))
        leaked = [line for line in secret if line in shown]
        assert not leaked, f"{stem}: a solution or hidden test line a learner reads: {leaked[:2]}"
    by_id = {c.get("id"): c for c in learner.cells}
    for task in plan:
        stub, check = by_id[task.solution_cell_id], by_id[task.check_cell_id]
        assert f'raise NotDone({task.number}, "' in stub.source and stub.outputs == []
        assert check.outputs == [] and check.execution_count is None and "raises-exception" in check.metadata["tags"]
        after = learner.cells[learner.cells.index(check) + 1]
        assert f"solutions/{stem}.md#exercise-{task.number}" in after.source, "the solution, one step away"
    kept = {c.get("id"): c for c in lesson.cells}
    for cell in learner.cells:  # every other cell as in the lesson, outputs included
        if cell.get("id") in kept and "raises-exception" not in cell.metadata.get("tags", []) \
                and cell.get("id") not in {t.solution_cell_id for t in plan} and cell.cell_type == "code":
            assert cell.outputs == kept[cell.get("id")].outputs, f"{stem}: a lesson cell lost its outputs"


def test_student_readme_is_current(released):
    assert (released / "README.md").read_text(encoding="utf-8") == \
        (fixtures.STUDENT / "README.md").read_text(encoding="utf-8"), "student/README.md is stale: `make release`"


def test_every_learner_entry_point_opens_the_learners_version():
    readme = (fixtures.ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## The course", 1)[1].split("<!-- course-table -->", 1)[0]
    links = re.findall(r"\]\(([^)]+\.ipynb)\)", table)
    assert len(links) == 2 * len(STEMS), links  # a link and a Colab badge per notebook
    for link in links:
        assert "/student/" in link or link.startswith("student/"), f"README's course table opens {link}"
    makefile = (fixtures.ROOT / "Makefile").read_text(encoding="utf-8")
    lab = re.search(r"^lab:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "student/" in lab and "notebooks/" not in lab, lab
    for stem in STEMS:
        learner = nbformat.read(fixtures.STUDENT / f"{stem}.ipynb", as_version=4)
        badge = next(c for c in learner.cells if "colab-badge" in c.metadata.get("tags", []))
        assert f"/blob/main/student/{stem}.ipynb" in badge.source
def test_sample_class_is_current(tmp_path):
    fixtures.make_sample_class(tmp_path / "sample_class")
    diff = filecmp.dircmp(tmp_path / "sample_class", fixtures.SAMPLE_CLASS)
    stale = []
    for sub in [diff, *diff.subdirs.values()]:
        stale += sub.left_only + sub.right_only + sub.diff_files
        _, mismatch, errors = filecmp.cmpfiles(sub.left, sub.right, sub.common_files, shallow=False)
        stale += mismatch + errors
    assert not stale, f"{stale}: run `python tools/classroom_fixtures.py sample-class`"


def test_every_exercise_has_a_wrong_answer():
    for path in LESSONS:
        lesson = nbformat.read(path, as_version=4)
        want = {c.metadata["nbgrader"]["grade_id"] for c in lesson.cells
                if c.metadata.get("nbgrader", {}).get("solution")}
        assert set(fixtures.wrong_answers(path.stem)) == want, f"{path.stem}: one wrong answer per solution cell"
        right = fixtures.solutions(lesson)
        for grade_id, source in fixtures.wrong_answers(path.stem).items():
            assert source.strip() != right[grade_id].strip(), f"{path.stem} {grade_id}: the 'wrong' answer is right"


# ---------------------------------------------------------------- grading every notebook: right, wrong
# A blank submission (the learner's version as released) is graded in the sample class below (ben, two
# notebooks): every exercise "not done yet", 0 points. That a blank notebook runs to its end, every other cell
# without an error, is what nbval compares for each learner's version (student/, `make test-loaded`).


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    for kind in ("right", "wrong"):
        (folder / kind).mkdir()
        for stem in STEMS:
            nbformat.write(fixtures.submission(stem, kind), folder / kind / f"{stem}.ipynb")
    results = grading.grade(folder, LESSONS, tmp_path_factory.mktemp("grades"), jobs=2)
    return {(r.student, r.notebook): r for r in results}


@pytest.mark.parametrize("stem", STEMS)
def test_solutions_score_full_points(graded_class, stem):
    result = graded_class["right", stem]
    assert result.status == "graded", result.status
    assert result.points == max_points(stem), (result.verdicts, result.notes)
    assert not result.notes and not result.review, (result.notes, result.review)


@pytest.mark.parametrize("stem", STEMS)
def test_each_wrong_answer_scores_below_full(graded_class, stem):
    result = graded_class["wrong", stem]
    assert result.status == "graded", result.status
    for name, full in max_points(stem).items():
        assert result.points[name] < full, f"{stem} {name}: the wrong answer got full points ({result.notes})"
        assert result.verdicts[name]["kind"] in ("check", "raised", "unusable", "unsendable"), result.verdicts[name]
    assert not result.review, result.review


# ---------------------------------------------------------------- the sample class, through the command line


@pytest.fixture(scope="module")
def sample_grades(tmp_path_factory):
    out = tmp_path_factory.mktemp("grades")
    command = [sys.executable, "-m", "mllm_classroom", "grade", str(fixtures.SAMPLE_CLASS),
               *fixtures.SAMPLE_NOTEBOOKS, "--out", str(out), "--timeout", "20"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=fixtures.ROOT)
    assert done.returncode == 0, done.stderr
    assert "9 of 12 submissions graded" in done.stdout, done.stdout  # dee 03 unreadable, fay sent nothing
    rows = {(r["student"], r["notebook"]): r for r in read_csv(out / "grades.csv")}
    return out, rows


def test_sample_class_csv(sample_grades):
    out, rows = sample_grades
    first, second = fixtures.SAMPLE_NOTEBOOKS
    assert len(rows) == 12
    for stem in fixtures.SAMPLE_NOTEBOOKS:
        full = max_points(stem)
        total = f"{sum(full.values()):g}"
        ada, ben, cy = rows["ada", stem], rows["ben", stem], rows["cy", stem]
        assert [ada[n] for n in full] == [f"{p:g}" for p in full.values()] and ada["score"] == total
        assert ada["max_score"] == total and ada["status"] == "graded" and ada["notes"] == ""
        assert [ben[n] for n in full] == ["0"] * len(full) and ben["score"] == "0"
        assert all(float(cy[n]) < p for n, p in full.items()), cy
        assert rows["fay", stem]["status"] == "missing" and rows["fay", stem]["score"] == "0"
    assert rows["dee", first]["status"].startswith("not a notebook (invalid JSON, line ")
    dee = rows["dee", second]
    assert dee["status"] == "graded" and dee["score"] == f"{sum(max_points(second).values()):g}"
    assert "ex1: its check cell is not in the notebook (graded all the same)" in dee["notes"]
    eve = rows["eve", first]
    assert eve["ex1"] == "0" and eve["score"] == f"{sum(max_points(first).values()) - max_points(first)['ex1']:g}"
    assert "ran past 20 s and was stopped" in eve["notes"], eve["notes"]
    assert rows["eve", second]["score"] == "0"
    assert "raised RuntimeError: nothing works" in rows["eve", second]["notes"]


def test_sample_class_totals_and_feedback(sample_grades):
    out, rows = sample_grades
    totals = {r["student"]: r for r in read_csv(out / "totals.csv")}
    assert sorted(totals) == ["ada", "ben", "cy", "dee", "eve", "fay"]
    for student, row in totals.items():
        mine = [float(rows[student, stem]["score"]) for stem in fixtures.SAMPLE_NOTEBOOKS]
        assert float(row["total"]) == sum(mine)
        for stem in fixtures.SAMPLE_NOTEBOOKS:
            page = (out / "feedback" / student / f"{stem}.html").read_text(encoding="utf-8")
            status = rows[student, stem]["status"]
            assert ("Not graded" in page) == (status != "graded"), (student, stem)
    for stem in fixtures.SAMPLE_NOTEBOOKS:  # ben sent the learner's versions as released: nothing done
        ben = (out / "feedback" / "ben" / f"{stem}.html").read_text(encoding="utf-8")
        assert ben.count("not done yet: ") == len(max_points(stem)), (stem, ben)
        assert "raised" not in ben and rows["ben", stem]["status"] == "graded"


# ---------------------------------------------------------------- small pieces and a teacher's mistakes


def test_find_submission_takes_lms_copies_and_holds_two_for_review(tmp_path):
    (tmp_path / "05_lstm.ipynb").write_text("{}", encoding="utf-8")
    newer = tmp_path / "05_lstm (1).ipynb"
    newer.write_text("{}", encoding="utf-8")
    os.utime(newer, (2e9, 2e9))
    found, review = grading.find_submission(tmp_path, "05_lstm")
    assert found is None and review == ["2 files claim to be this student's 05_lstm (05_lstm.ipynb, "
                                        "05_lstm (1).ipynb): none graded, held for review"]
    assert grading.find_submission(tmp_path, "04_learning_to_count") == (None, [])


@pytest.mark.parametrize(
    "args, message",
    [
        (["grade", "no-such-folder"], "SUBMISSIONS: no-such-folder is not a folder"),
        (["grade", ".", "--jobs", "0"], "--jobs: got 0, need at least 1"),
        (["grade", ".", "--job", "2"], "unrecognized arguments: --job"),
        (["release", "99"], "notebook '99' is not in notebooks"),
        (["--notebooks", "nowhere", "release"], "--notebooks: nowhere is not a folder"),
    ],
)
def test_command_line_mistakes_are_one_line(args, message):
    done = subprocess.run([sys.executable, "-m", "mllm_classroom", *args], capture_output=True, text=True,
                          cwd=fixtures.ROOT)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
