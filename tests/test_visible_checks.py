"""Every exercise's visible check rejects a plausible wrong answer: what a learner working alone sees.

A learner alone never runs the hidden tests, so the part of a check cell before its hidden tests must
catch the mistakes a learner is likely to make. ``tests/fixtures/classroom/visible_wrong/NN_topic.py``
holds one such mistake per solution cell (sections ``# %% exN-solution``, as in ``wrong_answers/``;
those are the mistakes only the hidden tests catch, graded by ``tests/test_classroom.py``).

For each notebook the test builds the learner's version of the lesson (hidden tests cut out of the check
cells, every solution cell replaced by its visible-wrong answer), runs it once in a fresh kernel from
``notebooks/`` (with the environment ``conftest.py`` sets), and asserts that every check cell stopped
with an ``AssertionError`` (``mllm_utils.checks.CheckFailed`` is one), not with a ``NameError`` or any
other error, and that no other cell raised. Putting all of a notebook's wrong answers in at once is sound
because no cell reads a name that an earlier exercise's solution defines, except that exercise's own
check cell (``test_exercises_are_independent``): a check can only fail on its own exercise's answer.

The notebooks run two at a time (CI has two cores); ``-k 01_tokenization`` runs one.
"""

import ast
import copy
import re
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from tools import classroom_fixtures as fixtures
from tools.notebooks import notebook_paths

LESSONS = notebook_paths()
STEMS = [p.stem for p in LESSONS]
# The hidden-test region of a check cell, marker lines included (the groups keep the markers' literal
# text out of this file).
HIDDEN = re.compile(r"^[ \t]*### (BEGIN) HIDDEN TESTS[ \t]*\n.*?^[ \t]*### (END) HIDDEN TESTS[ \t]*(?:\n|\Z)",
                    re.M | re.S)
CHECK_FAILED = {"AssertionError", "CheckFailed"}
CELL_TIMEOUT = 600  # seconds; the slowest quick-size cell takes about a minute


def nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def is_solution(cell) -> bool:
    return bool(nbgrader(cell).get("solution"))


def is_check(cell) -> bool:
    return bool(nbgrader(cell).get("grade")) and not is_solution(cell)


def lesson(stem):
    return nbformat.read(fixtures.LESSONS / f"{stem}.ipynb", as_version=4)


def visible_wrong(stem) -> dict[str, str]:
    return fixtures.wrong_answers(stem, fixtures.VISIBLE_WRONG)


def learner_version(nb, answers: dict[str, str], keep_hidden: bool = False):
    """The lesson as a learner runs it: solution cells replaced by ``answers``, hidden tests cut out."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if is_solution(cell):
            cell.source = answers[fixtures.grade_id(cell)]
        elif is_check(cell) and not keep_hidden:
            cell.source = HIDDEN.sub("", cell.source)
    return nb


def run(nb) -> list[dict]:
    """Execute ``nb`` in a fresh kernel, every cell even after an error; one record per code cell."""
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(fixtures.LESSONS)}}).execute()
    return [{"index": i, "grade_id": fixtures.grade_id(c), "check": is_check(c),
             "errors": [(o.ename, o.evalue) for o in c.outputs if o.output_type == "error"]}
            for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def defined_names(source: str) -> set[str]:
    """Names a cell binds at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


class _FirstUse(ast.NodeVisitor):
    """Whether each name is first read or first bound, in the order Python evaluates a cell."""

    def __init__(self):
        self.first: dict[str, str] = {}

    def visit_Name(self, node):
        self.first.setdefault(node.id, "read" if isinstance(node.ctx, ast.Load) else "bound")

    def visit_Assign(self, node):  # the value is evaluated before the targets are bound
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node):  # x += 1 reads x first
        if isinstance(node.target, ast.Name):
            self.first.setdefault(node.target.id, "read")
        self.generic_visit(node)


def read_names(source: str) -> set[str]:
    """Names a cell reads before (or without) binding them itself: what it takes from earlier cells."""
    visitor = _FirstUse()
    visitor.visit(ast.parse(source))
    return {name for name, first in visitor.first.items() if first == "read"}


def selected_stems(request) -> list[str]:
    """The notebooks whose tests this session runs (so that ``-k`` runs only those notebooks)."""
    here = request.node.path if hasattr(request.node, "path") else None
    stems = {item.callspec.params["stem"] for item in request.session.items
             if getattr(item, "path", None) == here and hasattr(item, "callspec")
             and "stem" in item.callspec.params and item.originalname == "test_visible_checks_reject_the_wrong_answers"}
    return [s for s in STEMS if s in stems]


@pytest.fixture(scope="module")
def learner_runs(request):
    """Each selected notebook's learner version, run once, two notebooks at a time."""
    stems = [s for s in selected_stems(request) if (fixtures.VISIBLE_WRONG / f"{s}.py").exists()]
    lessons = {s: lesson(s) for s in stems}
    # Longest first (the run time each lesson records), so that the two workers finish together.
    stems.sort(key=lambda s: -lessons[s].metadata.get("mllm", {}).get("quick_run_seconds", 0))
    with ThreadPoolExecutor(2) as pool:
        futures = {s: pool.submit(run, learner_version(lessons[s], visible_wrong(s))) for s in stems}
        return {s: f.result() for s, f in futures.items()}


@pytest.mark.parametrize("stem", STEMS)
def test_every_exercise_has_one_visible_wrong_answer(stem):
    path = fixtures.VISIBLE_WRONG / f"{stem}.py"
    assert path.exists(), f"{path.relative_to(fixtures.ROOT)} is missing: one visible-wrong answer per exercise"
    headers = re.findall(r"^# %% (\S+)\s*$", path.read_text(encoding="utf-8"), re.M)
    right = fixtures.solutions(lesson(stem))
    assert sorted(headers) == sorted(right), f"{stem}: exactly one section per solution cell, got {headers}"
    for grade_id, source in visible_wrong(stem).items():
        assert source.strip() != right[grade_id].strip(), f"{stem} {grade_id}: the 'wrong' answer is the solution"
        ast.parse(source)  # a wrong answer, not a broken one


@pytest.mark.parametrize("stem", STEMS)
def test_exercises_are_independent(stem):
    """No cell reads what an earlier exercise's answer defines, except that exercise's own check cell."""
    nb = lesson(stem)
    wrong = visible_wrong(stem) if (fixtures.VISIBLE_WRONG / f"{stem}.py").exists() else {}
    cells = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(cells):
        if not is_solution(cell):
            continue
        exercise = fixtures.grade_id(cell).removesuffix("-solution")
        names = defined_names(fixtures.MARKER.sub("", cell.source))
        if fixtures.grade_id(cell) in wrong:
            names |= defined_names(wrong[fixtures.grade_id(cell)])
        for later in cells[k + 1 :]:
            if fixtures.grade_id(later) == f"{exercise}-check":
                continue
            shared = names & read_names(later.source)
            assert not shared, (f"{stem}: cell {fixtures.grade_id(later) or later.get('id')} reads {sorted(shared)} "
                                f"from {exercise}'s answer: a wrong answer there would fail another check")


@pytest.mark.parametrize("stem", STEMS)
def test_visible_checks_reject_the_wrong_answers(learner_runs, stem):
    assert stem in learner_runs, f"no visible-wrong answers for {stem} (see test_every_exercise_has_one_...)"
    problems = []
    for cell in learner_runs[stem]:
        errors = cell["errors"]
        where = f"cell {cell['index']} ({cell['grade_id'] or 'lesson'})"
        if cell["check"]:
            if not errors:
                problems.append(f"{where}: the visible check passed a wrong answer")
            elif errors[0][0] not in CHECK_FAILED:
                problems.append(f"{where}: {errors[0][0]}: {errors[0][1][:200]} (not a failed check)")
        elif errors:
            problems.append(f"{where} raised {errors[0][0]}: {errors[0][1][:200]}")
    assert not problems, f"{stem}:\n" + "\n".join(problems)
