"""Every exercise's visible checks reject the plausible wrong answers: what a learner working alone sees.

A learner alone never runs the hidden tests, so the part of a check cell before its hidden tests must
catch the mistakes a learner is likely to make. ``tests/fixtures/classroom/visible_wrong/NN_topic.py``
holds at least three per exercise: sections ``# %% exN-solution`` (the same header once per wrong answer),
each starting with ``# Mistake: ...`` and ``# Names: ...``, and holding the whole solution cell, wrong.

``# Names:`` is what the check's message must say for that answer: a phrase that names its mistake (compared
without case, quotes or backticks, whitespace collapsed), usually part of the one line a check's
``mistakes={...}`` entry gives. Measured on the trial runs: the share of all the wrong answers whose message
names their own mistake (``MUST_NAME``: issue 33's goal is 95%, the floor here is what the checks reach now),
every one of the kinds issue 33 lists (``ISSUE_KINDS``, but ``ISSUE_KINDS_LEFT``), and the messages that name the
mistake of another wrong answer of the same exercise (a hint about a mistake that is not there: at most
``WRONG_HINTS_LEFT`` per notebook, the count measured now; the goal is none).

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
# Issue 33 asks that at least 95% of all wrong answers be told their own mistake, and that no message name a
# mistake the answer did not make. Measured on 2026-11-27: 186 of 245 (75.9%), with hints that named another answer's
# mistake in six notebooks; after the check cells learned to name their mistakes (issue 33): 245 of 245, and none.
# These floors and ceilings are that measurement, a ratchet: they only move towards the goal.
MUST_NAME = 1.0  # the share of all wrong answers whose message names their own mistake (goal: 0.95)
WRONG_HINTS_LEFT: dict[str, int] = {}  # per notebook, messages naming another answer's mistake (none now)
ISSUE_KINDS_LEFT: set[tuple[str, str]] = set()  # issue 33's kinds whose mistake is not named yet (none now)
# The kinds of wrong answers whose messages issue 33 found silent or misleading: each must be named.
ISSUE_KINDS = [
    ("09_self_attention", "ex3", "defaults to bias=False"),
    ("08_encoder_decoder_attention", "ex2", "reads the mask the other way round"),
    ("06_sampling", "ex1", "compares the logits themselves"),
    ("04_learning_to_count", "ex2", "squeezes the stacked runs"),
    ("03_recurrent_networks", "ex3", "stacks the two last states in the wrong order"),
    ("09_self_attention", "ex4", "no transpose"),
    ("10_masked_attention", "ex2", "appends the new key and value along the wrong dimension"),
    ("07_war_and_peace", "ex3", "feeds each new id without the state"),
]


def names(stem) -> dict[str, str]:
    """Each wrong answer's ``# Names:`` phrase, by its ``# Mistake:`` line ("" where it has none)."""
    found, mistake = {}, None
    for line in (fixtures.VISIBLE_WRONG / f"{stem}.py").read_text(encoding="utf-8").splitlines():
        if line.startswith("# %% "):
            mistake = None
        elif line.startswith("# Mistake:"):
            mistake = line.removeprefix("# Mistake:").strip()
            found[mistake] = ""
        elif line.startswith("# Names:") and mistake is not None:
            found[mistake] = line.removeprefix("# Names:").strip()
    return found


def plain(text: str) -> str:
    """Text as a phrase is looked for in it: lower case, no quotes or backticks, whitespace collapsed."""
    return " ".join(re.sub("[\"'`]", "", text).lower().split())


def naming(stem, roles, errors) -> tuple[list[str], list[str], list[str]]:
    """Of a trial run: the wrong answers whose message names their mistake, those whose message does not,
    and the messages that name the mistake of another wrong answer of the same exercise."""
    phrases = names(stem)
    by_exercise: dict[str, set[str]] = {}
    for role in roles:
        if role[0] == "wrong":
            by_exercise.setdefault(role[1], set()).add(plain(phrases.get(role[2], "")))
    named, unnamed, wrong_hint = [], [], []
    for role, found in zip(roles, errors, strict=True):
        if role[0] != "wrong":
            continue
        what = f"{stem} {role[1]} ({role[2]})"
        message = plain(" ".join(f"{name}: {value}" for name, value in found))
        own = plain(phrases.get(role[2], ""))
        (named if own and own in message else unnamed).append(f"{what}: wants {own!r}, says {message[:300]!r}")
        for other in by_exercise[role[1]]:
            if other and other not in own and own not in other and other in message:
                wrong_hint.append(f"{what}: names another answer's mistake {other!r}: {message[:300]!r}")
    return named, unnamed, wrong_hint


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
    mistakes = [m for _g, m, _s in variants]
    assert len(set(mistakes)) == len(mistakes), f"{stem}: two wrong answers have the same '# Mistake:' line"
    phrases = names(stem)
    missing = [m for m in mistakes if not phrases.get(m)]
    assert not missing, f"{stem}: wrong answers without '# Names: ...' (what the message must say): {missing}"
    for kind_stem, exercise, mistake in ISSUE_KINDS:
        if kind_stem == stem:
            assert any(g == f"{exercise}-solution" and mistake in m for g, m, _s in variants), \
                f"{stem} {exercise}: issue 33's wrong answer {mistake!r} is missing"


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
    named, unnamed, wrong_hint = naming(stem, roles, errors)
    for line in wrong_hint:
        print(f"names a mistake that is not there: {line}")
    if len(wrong_hint) > WRONG_HINTS_LEFT.get(stem, 0):
        problems += [f"names a mistake that is not there ({len(wrong_hint)} such messages, "
                     f"{WRONG_HINTS_LEFT.get(stem, 0)} known): {line}" for line in wrong_hint]
    issue = [(e, m) for s, e, m in ISSUE_KINDS if s == stem and (s, e) not in ISSUE_KINDS_LEFT]
    problems += [f"issue 33's kind, not named: {line}" for line in unnamed
                 if any(f" {e} (" in line and m in line for e, m in issue)]
    print(f"{stem}: {len(named)} of {len(named) + len(unnamed)} messages name their mistake")
    assert not problems, f"{stem}:\n" + "\n".join(problems)


def test_messages_name_their_mistakes(trials):
    """Over every notebook: at least MUST_NAME of the wrong answers are told their own mistake."""
    if set(trials) != {s for s in STEMS if (fixtures.VISIBLE_WRONG / f"{s}.py").exists()}:
        pytest.skip("measured over every notebook's trial run: select them all (no -k)")
    named, unnamed = [], []
    for stem, (roles, errors) in trials.items():
        yes, no, _ = naming(stem, roles, errors)
        named += yes
        unnamed += no
    share = len(named) / (len(named) + len(unnamed))
    print(f"{len(named)} of {len(named) + len(unnamed)} wrong answers are told their mistake ({share:.1%})")
    assert share >= MUST_NAME, (f"{len(named)} of {len(named) + len(unnamed)} ({share:.1%}) name their mistake, "
                                f"need {MUST_NAME:.0%}; not named:\n" + "\n".join(unnamed))
