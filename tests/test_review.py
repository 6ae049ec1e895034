"""mllm_classroom.review: what a submission's own code does that a grader cannot trust (read, never run).

Honest answers (every lesson's solutions and plausible wrong answers, and the blank student versions) give
no finding; each way of changing a check, faking a comparison, reaching the kernel or the machine does.
"""

import nbformat
import pytest

from mllm_classroom.judge import match, read_notebook
from mllm_classroom.lessons import tasks
from mllm_classroom.review import Lesson, review
from tools import classroom_fixtures as fixtures
from tools.notebooks import notebook_paths

LESSON = nbformat.v4.new_notebook(cells=[
    nbformat.v4.new_code_cell("import torch\nfrom mllm_utils import checks\nfrom mllm_utils.checks import check_close\n"
                              "data = torch.arange(3.0)"),
    nbformat.v4.new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"),
    nbformat.v4.new_code_cell("check_close('double', double(data), 2 * data)\nfor i in range(2):\n    pass\n"
                              "### BEGIN HIDDEN TESTS\ncheck_close('hidden', double(data + 1), 2 * data + 2)\n"
                              "### END HIDDEN TESTS"),
])
LESSON.cells[1].metadata["nbgrader"] = {"grade_id": "ex1-solution", "solution": True, "grade": False, "locked": False}
LESSON.cells[2].metadata["nbgrader"] = {"grade_id": "ex1-check", "solution": False, "grade": True, "locked": True,
                                        "points": 1}


def findings_of(nb, lesson_nb=LESSON):
    """What review says of a submitted notebook, read as the grader reads it."""
    cells, problem = read_notebook(nbformat.writes(nb).encode())
    assert problem is None
    solutions, _anchors, checks, _notes = match(cells, tasks(lesson_nb))
    return review(cells, Lesson(lesson_nb), solutions, checks)


def submitted(answer, extra=None, extra_meta=None):
    nb = nbformat.from_dict(nbformat.v4.new_notebook(cells=[c.copy() for c in LESSON.cells]))
    nb.cells[1] = nbformat.v4.new_code_cell(answer)
    nb.cells[1].metadata["nbgrader"] = dict(LESSON.cells[1].metadata["nbgrader"])
    if extra is not None:
        cell = nbformat.v4.new_code_cell(extra)
        cell.metadata.update(extra_meta or {})
        nb.cells.insert(2, cell)
    return nb


HONEST = [
    "def double(x):\n    return 2 * x",
    "def double(x):\n    out = x.clone()\n    out *= 2\n    return out",
    "import math\ndef double(x):\n    return x + x",
    "class Doubler(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.k = 2\n"
    "    def forward(self, x):\n        return self.k * x\ndef double(x):\n    return Doubler()(x)",
    "def double(x):\n    w = torch.nn.Parameter(torch.ones(1))\n    w.requires_grad = False\n    w.data = w.data * 2\n"
    "    return w * x",
    "def double(x):\n    for i in range(1):\n        pass\n    return 2 * x",
    "%matplotlib inline\ndef double(x):\n    return 2 * x",
]
# What honest students do (issue 32): none changes a verdict, since every check reads its inputs, reference
# values and helpers from the judge's own run of the lesson; none is a finding.
HONEST_VARIANTS = {
    "timed solution": "%%time\ndef double(x):\n    return 2 * x",
    "timeit line": "%timeit -n 3 -r 1 double(data)",
    "time line": "%time y = double(data)",
    "gpu listed": "!nvidia-smi -L",
    "help": "torch.nn.RNN?",
    "warnings": "import warnings\nwarnings.filterwarnings('ignore')",
    "own x": "x = torch.randn(3)\nprint(double(x))",
    "own data": "data = torch.ones(2)\nprint(double(data))",
    "loop with i": "for i in range(3):\n    print(double(torch.tensor(float(i))))",
    "model and accuracy": "model, accuracy = torch.nn.RNN(3, 4), 0.5",
    "own check": "from mllm_utils.checks import check_close\ncheck_close('mine', double(torch.ones(2)), [2.0, 2.0])",
}
HOSTILE = {
    "checks.check_close = lambda *a, **k: None": "assigns to checks.check_close",
    "import mllm_utils.checks as c\nc.check_close = print": "assigns to c.check_close",
    "def patch(m):\n    m.check_close = print\npatch(checks)": "assigns to m.check_close",
    "m = checks\nm.allclose = print": "assigns to m.allclose",
    "torch.Tensor.sub = lambda *a: 0": "assigns to torch.Tensor.sub",
    "check_close = lambda *a, **k: None": "rebinds check_close",
    "setattr(checks, 'check_close', print)": "uses setattr",
    "import sys\nsys.modules['x'] = 1": "imports sys",
    "import importlib": "imports importlib",
    "from torch.overrides import TorchFunctionMode": "imports torch.overrides",
    "exec('x = 1')": "uses exec",
    "__import__('os')": "uses __import__",
    "getattr(checks, name)": "uses getattr with a computed or special name",
    "x = torch.sys": "uses the attribute .sys",
    "x = double.__globals__": "uses the attribute __globals__",
    "get_ipython().events.register('pre_run_cell', print)": "uses get_ipython",
    "print(In[-1])": "uses In",
    "print(_i2)": "uses _i2",
    "open('/etc/passwd')": "uses open",
    "x = '/proc/1/cmdline'": "names the path",
    "class A:\n    def __eq__(self, other):\n        return True": "defines __eq__",
    "class T(torch.Tensor):\n    pass": "subclasses torch.Tensor",
    "X = type('X', (), {'__eq__': lambda s, o: True})": "names __eq__ in a string",
    "%env X=1\nimport os": "imports os",
    "!echo 'import os' > helper.py\nimport helper": "uses get_ipython",
    "%time import os": "imports os",
    "%%time\nimport mllm_utils.checks as c\nc.check_close = print": "assigns to c.check_close",
    "!rm -rf ~": "uses get_ipython",
    "%%bash\nls": "uses get_ipython",
    "from mllm_utils.checks import WATCHING": "imports WATCHING from the course's checks",
    "import operator\nf = operator.attrgetter('checks.WATCH' + 'ING')": "imports operator",
    "y = torch._native_multi_head_attention": "a private part of a library",
    "f = torch.nn.modules.transformer._generate_square_subsequent_mask": "a private part of a library",
    "from functools import reduce\nf = reduce(getattr, ['nn', 'functional'], torch)": "uses getattr as a value",
    "%matplotlib $(rm -rf ~)": "uses get_ipython",
}


def test_honest_answers_give_no_finding():
    for answer in HONEST:
        assert findings_of(submitted(answer)) == [], answer


@pytest.mark.parametrize("name", list(HONEST_VARIANTS))
def test_what_honest_students_do_gives_no_finding(name):
    code = HONEST_VARIANTS[name]
    assert findings_of(submitted("def double(x):\n    return 2 * x", extra=code)) == [], name
    if "def double" in code:
        assert findings_of(submitted(code)) == [], name
    tagged = submitted("def double(x):\n    return 2 * x", extra=code, extra_meta={"tags": ["my-own-tag"]})
    assert findings_of(tagged) == [], name  # a tag from JupyterLab's tag editor: the grader reads no tag


@pytest.mark.parametrize("code, what", HOSTILE.items(), ids=range(len(HOSTILE)))
def test_each_way_around_a_check_is_found_in_a_solution_or_an_added_cell(code, what):
    for nb, cell in [(submitted(code), 1), (submitted("def double(x):\n    return 2 * x", extra=code), 2)]:
        findings = findings_of(nb)
        assert any(what in f.what for f in findings), (code, [str(f) for f in findings])
        assert {f.cell for f in findings} == {cell}


FORBIDDING = nbformat.v4.new_notebook(cells=[
    nbformat.v4.new_code_cell("import torch\nfrom torch import nn\nfrom mllm_utils.checks import switched_off"),
    nbformat.v4.new_code_cell("def affine(x, w, b):\n    ### BEGIN SOLUTION\n    return x @ w.T + b\n"
                              "    ### END SOLUTION"),
    nbformat.v4.new_code_cell("with switched_off('nn.Linear'):\n    got = affine(torch.ones(2), torch.ones(3, 2), "
                              "torch.zeros(3))"),
])
FORBIDDING.cells[1].metadata["nbgrader"] = {"grade_id": "ex1-solution", "solution": True, "grade": False,
                                            "locked": False}
FORBIDDING.cells[2].metadata["nbgrader"] = {"grade_id": "ex1-check", "solution": False, "grade": True,
                                            "locked": True, "points": 1}


@pytest.mark.parametrize("extra, answer, what", [
    ("layer = nn.Linear(2, 3)\nprint(affine(torch.ones(2), layer.weight, layer.bias), layer(torch.ones(2)))",
     None, None),  # trying the function beside the layer it replaces: honest
    ("Lin = nn.Linear", None, "uses Linear, which this exercise asks you to do without"),
    ("def helper(x):\n    return nn.Linear(2, 3)(x)", None, "uses Linear, which this exercise asks you to do without"),
    ("layer = nn.Linear(2, 3)", "def affine(x, w, b):\n    return layer(x)", "reads layer, made in cell 2 with Linear"),
    ("layer = nn.Linear(2, 3)", "def affine(x, layer, b):\n    return x @ layer.T + b", None),  # its own argument
])
def test_a_forbidden_routine_counts_where_it_can_reach_the_solution(extra, answer, what):
    nb = nbformat.from_dict(nbformat.v4.new_notebook(cells=[c.copy() for c in FORBIDDING.cells]))
    if answer is not None:
        nb.cells[1] = nbformat.v4.new_code_cell(answer)
        nb.cells[1].metadata["nbgrader"] = dict(FORBIDDING.cells[1].metadata["nbgrader"])
    nb.cells.insert(2, nbformat.v4.new_code_cell(extra))
    findings = [f.what for f in findings_of(nb, FORBIDDING)]
    assert (findings == []) if what is None else any(what in f for f in findings), findings


def test_a_cell_is_named_by_what_it_does_whatever_flags_it_carries():
    locked = {"nbgrader": {"grade_id": "my-own", "locked": True, "grade": True, "points": 1}}
    found = findings_of(submitted("def double(x):\n    return 2 * x", extra="import os", extra_meta=locked))
    assert sorted(f.what for f in found) == ["imports os (reaches the interpreter, the kernel or the machine)",
                                             "nbgrader metadata that differs from the student version's"]


@pytest.mark.parametrize("change, what", [
    (lambda nb: nb.cells[0].metadata.update(nbgrader="x"), "nbgrader metadata that differs"),
    (lambda nb: nb.cells[2].metadata["nbgrader"].update(schema_version=4), "nbgrader metadata that differs"),
    (lambda nb: nb.cells.insert(1, nbformat.v4.new_code_cell("if 1 <> 2:\n    pass")), "code that does not parse"),
    (lambda nb: nb.cells.insert(1, nbformat.v4.new_code_cell("x = 1\ny = x" + ".real" * 3000)), "nested too deeply"),
    (lambda nb: nb.cells.__setitem__(1, nbformat.from_dict({**nb.cells[1], "cell_type": "markdown",
                                                             "attachments": {}} | {"outputs": None})),
     "a markdown cell in the place of the solution"),
])
def test_review_fails_closed(change, what):
    nb = submitted("def double(x):\n    return 2 * x")
    change(nb)
    if nb.cells[1].cell_type == "markdown":
        nb.cells[1].pop("outputs", None)
        nb.cells[1].pop("execution_count", None)
    findings = findings_of(nb)
    assert any(what in f.what for f in findings), [str(f) for f in findings]


@pytest.mark.parametrize("stem", [p.stem for p in notebook_paths()])
def test_the_course_s_own_answers_give_no_finding(stem):
    lesson_nb = nbformat.read(fixtures.LESSONS / f"{stem}.ipynb", as_version=4)
    for kind in ("blank", "right", "wrong"):
        findings = findings_of(fixtures.submission(stem, kind), lesson_nb)
        if kind == "wrong":  # a plausible mistake may be the shortcut an exercise forbids: that one is named
            findings = [f for f in findings if "asks you to do without" not in f.what]
        assert findings == [], (kind, [str(f) for f in findings])


def test_lessons_are_read_in_parallel_shards():
    """Grading reads lessons in one thread per shard; CPython 3.11's parser breaks when two threads parse."""
    from concurrent.futures import ThreadPoolExecutor

    lessons = [nbformat.read(p, as_version=4) for p in notebook_paths()]
    with ThreadPoolExecutor(4) as pool:
        read = list(pool.map(Lesson, lessons * 4))
    assert all(lesson.check_reads for lesson in read)
