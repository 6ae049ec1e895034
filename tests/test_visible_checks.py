"""Every exercise's visible checks reject the plausible wrong answers: what a learner working alone sees.

A learner alone never runs the hidden tests, so the part of a check cell before its hidden tests must
catch the mistakes a learner is likely to make. ``tests/fixtures/classroom/visible_wrong/NN_topic.py``
holds at least three per exercise: sections ``# %% exN-solution`` (the same header once per wrong answer),
each starting with ``# Mistake: ...`` and holding the whole solution cell, wrong.

For each notebook the test runs the lesson once in a fresh kernel (from ``notebooks/``, in the environment
``conftest.py`` sets), and at each exercise runs, in turn, every wrong answer followed by the check's
visible part, which must stop with a failed check (``AssertionError``; ``CheckFailed`` is one), not with
a ``NameError`` or any other error of the check's own code; then the lesson's own solution, whose visible
check must pass, before the lesson goes on. No other cell may raise. Notebooks run two at a time.
"""

import ast
import copy
import re
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from mllm_classroom.lessons import split_check, tasks
from tools import classroom_fixtures as fixtures
from tools.notebooks import notebook_paths

STEMS = [p.stem for p in notebook_paths()]
CHECK_FAILED = {"AssertionError", "CheckFailed"}
CELL_TIMEOUT = 600  # seconds; the slowest quick-size cell takes about a minute
AT_LEAST = 3  # wrong answers per exercise


def lesson(stem):
    return nbformat.read(fixtures.LESSONS / f"{stem}.ipynb", as_version=4)


def trial(nb, variants):
    """The lesson with, before each exercise's solution, each wrong answer and the visible check after it.

    Returns the notebook and, per code cell, what it is: ("lesson",), ("wrong", exercise, mistake) for a
    visible check run on a wrong answer, ("right", exercise) for the one run on the solution.
    """
    plan = {t.solution: t for t in tasks(nb)}
    checks = {t.check: t for t in tasks(nb)}
    cells, roles = [], []
    for index, cell in enumerate(nb.cells):
        if index in plan:
            task = plan[index]
            for _key, mistake, source in [v for v in variants if v[0] == task.solution_id]:
                cells.append(nbformat.v4.new_code_cell(source))
                roles.append(("answer", task.name, mistake))
                cells.append(nbformat.v4.new_code_cell(task.visible))
                roles.append(("wrong", task.name, mistake))
            cells.append(nbformat.v4.new_code_cell(fixtures.MARKER.sub("", cell.source)))
            roles.append(("lesson",))
            continue
        if index in checks:
            cells.append(nbformat.v4.new_code_cell(split_check(cell.source)[0]))
            roles.append(("right", checks[index].name))
            continue
        cells.append(copy.deepcopy(cell))
        roles.append(("lesson",) if cell.cell_type == "code" else ("markdown",))
    out = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(nb.metadata))
    return out, roles


def run(nb) -> list[list]:
    """Execute ``nb`` in a fresh kernel, every cell even after an error; each cell's errors (name, value)."""
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(fixtures.LESSONS)}}).execute()
    return [[(o.ename, o.evalue) for o in c.get("outputs", []) if o.output_type == "error"] for c in nb.cells]


def selected_stems(request) -> list[str]:
    """The notebooks whose tests this session runs (so that ``-k`` runs only those notebooks)."""
    stems = {item.callspec.params["stem"] for item in request.session.items
             if hasattr(item, "callspec") and "stem" in item.callspec.params
             and item.originalname == "test_visible_checks_reject_the_wrong_answers"}
    return [s for s in STEMS if s in stems]


@pytest.fixture(scope="module")
def trials(request):
    """Each selected notebook's trial run, two notebooks at a time, longest first."""
    stems = [s for s in selected_stems(request) if (fixtures.VISIBLE_WRONG / f"{s}.py").exists()]
    lessons = {s: lesson(s) for s in stems}
    stems.sort(key=lambda s: -lessons[s].metadata.get("mllm", {}).get("quick_run_seconds", 0))
    built = {s: trial(lessons[s], fixtures.wrong_variants(s)) for s in stems}
    with ThreadPoolExecutor(2) as pool:
        futures = {s: pool.submit(run, built[s][0]) for s in stems}
        return {s: (built[s][1], f.result()) for s, f in futures.items()}


@pytest.mark.parametrize("stem", STEMS)
def test_every_exercise_has_three_wrong_answers(stem):
    path = fixtures.VISIBLE_WRONG / f"{stem}.py"
    assert path.exists(), f"{path.relative_to(fixtures.ROOT)} is missing: {AT_LEAST} wrong answers per exercise"
    variants = fixtures.wrong_variants(stem)
    right = fixtures.solutions(lesson(stem))
    for grade_id in right:
        mine = [v for v in variants if v[0] == grade_id]
        assert len(mine) >= AT_LEAST, f"{stem} {grade_id}: {len(mine)} wrong answers, need at least {AT_LEAST}"
    for grade_id, mistake, source in variants:
        assert grade_id in right, f"{stem}: a section for {grade_id}, which is no solution cell of the lesson"
        assert mistake, f"{stem} {grade_id}: each wrong answer starts with '# Mistake: ...' (what is wrong)"
        assert source.strip() != right[grade_id].strip(), f"{stem} {grade_id}: the 'wrong' answer is the solution"
        ast.parse(source)  # a wrong answer, not a broken one
    sources = [re.sub(r"#.*", "", s).split() for _g, _m, s in variants]
    assert len({tuple(s) for s in sources}) == len(sources), f"{stem}: two wrong answers are the same code"


@pytest.mark.parametrize("stem", STEMS)
def test_visible_checks_reject_the_wrong_answers(trials, stem):
    assert stem in trials, f"no visible-wrong answers for {stem}"
    roles, errors = trials[stem]
    problems = []
    for index, (role, found) in enumerate(zip(roles, errors, strict=True)):
        kind = role[0]
        if kind == "wrong":
            what = f"{role[1]} ({role[2]})"
            if not found:
                problems.append(f"{what}: the visible check passed this wrong answer")
            elif found[0][0] not in CHECK_FAILED:
                problems.append(f"{what}: {found[0][0]}: {found[0][1][:200]} (not a failed check)")
        elif kind == "answer":
            if found:
                problems.append(f"{role[1]} ({role[2]}): defining the wrong answer raised {found[0][0]}")
        elif found:
            where = f"{role[1]}'s check on the lesson's solution" if kind == "right" else f"trial cell {index}"
            problems.append(f"{where} raised {found[0][0]}: {found[0][1][:200]}")
    assert not problems, f"{stem}:\n" + "\n".join(problems)
