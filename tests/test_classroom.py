"""The classroom kit, end to end with the real nbgrader (installed by `make teach-setup`, used by `make test`).

- the committed student versions (student/) are what `mllm-classroom release` makes from the lessons now;
- every notebook: a blank submission scores 0 with errors only in exercise cells, the solutions score full
  points, and each plausible wrong answer (tests/fixtures/classroom/wrong_answers/) scores below full;
- the sample class (tests/fixtures/classroom/sample_class/) grades to the expected CSV through the command
  line, malformed submissions included (cut-off JSON, a deleted check cell, an endless loop, errors
  everywhere, a missing notebook).
"""

import csv
import filecmp
import importlib.util
import json
import os
import subprocess
import sys

import nbformat
import pytest

from mllm_classroom import grade as grading
from mllm_classroom import lessons as classroom
from mllm_classroom.release import release
from tools import classroom_fixtures as fixtures
from tools.notebooks import notebook_paths

if importlib.util.find_spec("nbgrader") is None:
    message = "nbgrader is not installed: these tests run in the teacher's environment (`make test` makes it)"
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
    return [(c.cell_type, c.source, json.dumps(c.metadata, sort_keys=True)) for c in nb.cells]


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "student"
    release(LESSONS, out)
    return out


@pytest.mark.parametrize("stem", STEMS)
def test_student_version_is_current(released, stem):
    committed = nbformat.read(fixtures.STUDENT / f"{stem}.ipynb", as_version=4)
    fresh = nbformat.read(released / f"{stem}.ipynb", as_version=4)
    assert comparable(committed) == comparable(fresh), (
        f"student/{stem}.ipynb differs from its lesson: run `mllm-classroom release` (or `make release`)"
    )


@pytest.mark.parametrize("stem", STEMS)
def test_student_version_is_what_a_student_needs(stem):
    nb = nbformat.read(fixtures.STUDENT / f"{stem}.ipynb", as_version=4)
    lesson = nbformat.read(fixtures.LESSONS / f"{stem}.ipynb", as_version=4)
    text = json.dumps([c.source for c in nb.cells])
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text, f"{marker} left in the student version"
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
    badge = [c for c in nb.cells if "colab-badge" in c.metadata.get("tags", [])][0]
    assert f"/blob/main/student/{stem}.ipynb" in badge.source, "the badge opens the student copy"
    setup = [c.source for c in nb.cells if "colab-setup" in c.metadata.get("tags", [])]
    assert setup == [c.source for c in lesson.cells if "colab-setup" in c.metadata.get("tags", [])]
    stubs = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert stubs and all("raise NotImplementedError()" in c.source for c in stubs)
    checks = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(checks) >= 3 and all(c.metadata["nbgrader"]["locked"] for c in checks)
    assert all(c.metadata.get("editable") is False and c.metadata.get("deletable") is False for c in checks)


def test_student_readme_is_current(released):
    assert (released / "README.md").read_text(encoding="utf-8") == (fixtures.STUDENT / "README.md").read_text(
        encoding="utf-8"
    ), "student/README.md is stale: run `mllm-classroom release`"


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


# ---------------------------------------------------------------- grading every notebook: blank, right, wrong


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    for kind in ("blank", "right", "wrong"):
        (folder / kind).mkdir()
        for stem in STEMS:
            nbformat.write(fixtures.submission(stem, kind), folder / kind / f"{stem}.ipynb")
    # One shard per kind: three course folders share the two cores, none waits with its core idle.
    results = grading.grade(folder, LESSONS, tmp_path_factory.mktemp("grades"), jobs=3)
    return {(r.student, r.notebook): r for r in results}


@pytest.mark.parametrize("stem", STEMS)
def test_blank_scores_zero_and_breaks_only_exercise_cells(graded_class, stem):
    result = graded_class["blank", stem]
    assert result.status == "graded", result.status
    assert result.points and sum(result.points.values()) == 0, result.points
    lesson_errors = [note for note in result.notes if note.startswith("lesson code")]
    assert not lesson_errors, f"a blank submission broke lesson cells: {lesson_errors}"


@pytest.mark.parametrize("stem", STEMS)
def test_solutions_score_full_points(graded_class, stem):
    result = graded_class["right", stem]
    assert result.status == "graded", result.status
    assert result.points == max_points(stem), result.notes
    assert not result.notes, result.notes


@pytest.mark.parametrize("stem", STEMS)
def test_each_wrong_answer_scores_below_full(graded_class, stem):
    result = graded_class["wrong", stem]
    assert result.status == "graded", result.status
    for name, full in max_points(stem).items():
        assert result.points[name] < full, f"{stem} {name}: the wrong answer got full points ({result.notes})"
    assert not [note for note in result.notes if note.startswith("lesson code")], result.notes


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
    assert "ex1-check was missing and was restored" in dee["notes"]
    eve = rows["eve", first]
    assert eve["ex1"] == "0" and eve["score"] == f"{sum(max_points(first).values()) - max_points(first)['ex1']:g}"
    assert eve["notes"].startswith("ex1-solution: ran past 20 s and was stopped"), eve["notes"]
    assert rows["eve", second]["score"] == "0"
    assert rows["eve", second]["notes"].startswith("lesson code raised in cell 2: RuntimeError: nothing works (and ")


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


# ---------------------------------------------------------------- a kernel that does not start


FLAKY_KERNEL = """import os, runpy, sys
starts = os.path.join(os.path.dirname(os.path.abspath(__file__)), "starts")
with open(starts, "a") as f:
    f.write("x")
if len(open(starts).read()) <= int(open(os.path.join(os.path.dirname(starts), "deaths")).read()):
    sys.exit(1)  # dies before it replies, as a kernel on a busy machine sometimes does
sys.argv = ["ipykernel_launcher", *sys.argv[1:]]
runpy.run_module("ipykernel_launcher", run_name="__main__")
"""


@pytest.mark.parametrize("deaths, status", [(1, "graded"), (2, "grading failed: RuntimeError: Kernel died")])
def test_a_kernel_that_dies_at_start_is_tried_once_more(tmp_path, monkeypatch, deaths, status):
    kernels = tmp_path / "kernel"  # bound into the sandbox, where the kernel may run as nobody: open to all
    kernels.mkdir()
    kernels.chmod(0o777)
    (kernels / "flaky.py").write_text(FLAKY_KERNEL, encoding="utf-8")
    monkeypatch.setenv("MLLM_SANDBOX_TEST_KERNEL", str(kernels / "flaky.py"))
    (kernels / "deaths").write_text(str(deaths), encoding="utf-8")  # the sandbox passes the kernel no variables
    (tmp_path / "class" / "ada").mkdir(parents=True)
    nb = fixtures.one_exercise_lesson(tmp_path / "99_answer.ipynb")
    nbformat.write(nb, tmp_path / "class" / "ada" / "99_answer.ipynb")
    [result] = grading.grade(tmp_path / "class", [tmp_path / "99_answer.ipynb"], tmp_path / "grades")
    assert result.status.startswith(status), result.status
    assert (kernels / "starts").read_text() == "x" * (deaths + (status == "graded")), "one retry, no more"
    assert result.points == ({"ex1": 1.0} if status == "graded" else {})


# ---------------------------------------------------------------- small pieces and a teacher's mistakes


def test_find_submission_takes_lms_copies_and_the_newest(tmp_path):
    (tmp_path / "05_lstm.ipynb").write_text("{}", encoding="utf-8")
    newer = tmp_path / "05_lstm (1).ipynb"
    newer.write_text("{}", encoding="utf-8")
    os.utime(newer, (2e9, 2e9))
    found, note = grading.find_submission(tmp_path, "05_lstm")
    assert found == newer and "2 files for 05_lstm" in note
    assert grading.find_submission(tmp_path, "04_learning_to_count") == (None, None)


@pytest.mark.parametrize(
    "text, reason",
    [("{\"cells\": [", "invalid JSON"), ("[1, 2]", "not a valid notebook"), ("{}", "not a valid notebook")],
)
def test_unreadable_submissions_are_reported(tmp_path, text, reason):
    path = tmp_path / "05_lstm.ipynb"
    path.write_text(text, encoding="utf-8")
    nb, problem = grading.read_submission(path)
    assert nb is None and reason in problem


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
