"""Checks on the committed notebooks themselves (not on what they compute).

nbval (run by plain `pytest`) re-executes every notebook and compares outputs;
these tests check what nbval cannot: that the notebooks were run top to bottom
in one fresh kernel, that they follow the course conventions (CONTRIBUTING.md),
and that the README lists them in order.
"""

import os
import re
from pathlib import Path

import nbformat
import pytest

from tools.notebooks import (
    ROOT,
    WIDGET_VIEW,
    header_problems,
    notebook_paths,
    repository_url,
    stable_widget_id,
    widget_ids,
)

NOTEBOOKS = notebook_paths()
MAX_OUTPUT_BYTES = 2_000_000  # per notebook, images included
MIN_COMPARED_SHARE = 0.8
NBVAL_COMMENT = re.compile(r"NBVAL_")  # a test runner's comment: cells say it with a tag, which a learner never reads
NOT_COMPARED = {"nbval-ignore-output", "nbval-skip"}
MIN_ALT_CHARS = 40
# Paths that only exist on somebody's machine.
PERSONAL_PATH = re.compile(r"(/home/\w|/Users/\w|/root/|/work/|/tmp/|/content/drive|[A-Z]:\\\\Users)")


def ids(paths):
    return [p.name for p in paths]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb file"


def test_readme_lists_every_notebook_in_order():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = [name for name in re.findall(r"\[(\d\d\w*)\]\(student/\1\.ipynb\)", readme)]
    names = [p.stem for p in NOTEBOOKS]
    assert table == names, (
        "The README course table must list exactly the notebooks in notebooks/, in order.\n"
        f"README: {table}\nnotebooks/: {names}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_conventions(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert re.fullmatch(r"\d\d[a-z]?_[a-z0-9_]+\.ipynb", path.name), "name: NN_topic.ipynb"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", "kernelspec must be python3"
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith(f"# {path.name[:3].strip('_')}"), (
        "the first cell is the title, '# NN · Title'"
    )
    problems = header_problems(nb, path, repository_url())
    assert not problems, "; ".join(problems) + " (fix: `make headers`)"
    assert "mllm_utils.start(" in nb.cells[3].source, "cell 3 imports and calls mllm_utils.start(...)"
    headings = [c.source for c in nb.cells if c.cell_type == "markdown"]
    for section in ("## Exercises", "## Summary", "## What's next"):
        assert any(section in h for h in headings), f"missing a '{section}' section"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_executed_top_to_bottom_without_errors(path):
    nb = nbformat.read(path, as_version=4)
    counts = [c.execution_count for c in code_cells(nb) if c.source.strip()]
    assert counts == list(range(1, len(counts) + 1)), (
        f"execution counts {counts}: run it top to bottom in a fresh kernel "
        f"(`python tools/notebooks.py run {path.name}`)"
    )
    for i, cell in enumerate(code_cells(nb)):
        for out in cell.outputs:
            assert out.output_type != "error", f"code cell {i} stores an error"
            assert out.get("name") != "stderr", f"code cell {i} stores stderr output: {out.text[:300]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_outputs_small_and_portable(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.encode()) < MAX_OUTPUT_BYTES, f"{path.name} is over {MAX_OUTPUT_BYTES} bytes"
    found = PERSONAL_PATH.search(text)
    assert not found, f"{path.name} holds a machine-specific path near {text[found.start() - 60:found.end() + 60]!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_most_outputs_are_compared(path):
    nb = nbformat.read(path, as_version=4)
    with_output = [c for c in code_cells(nb) if c.outputs]
    compared = [c for c in with_output if not NOT_COMPARED & set(c.metadata.get("tags", []))]
    share = len(compared) / len(with_output) if with_output else 1.0
    print(f"{path.name}: {len(compared)} of {len(with_output)} code cells with output compared ({share:.0%})")
    assert share >= MIN_COMPARED_SHARE, f"only {share:.0%} of cells with output are compared by nbval"
    for cell in code_cells(nb):
        assert not NBVAL_COMMENT.search(cell.source), (
            "a test marker written in a cell a learner reads: use the cell tag (nbval-ignore-output) instead:\n"
            + cell.source[:200])
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            assert "assert" in cell.source, (
                "a cell whose output nbval ignores must assert its result instead:\n" + cell.source[:200]
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_exercises_have_nbgrader_markup(path):
    nb = nbformat.read(path, as_version=4)
    grade_ids = []
    solutions = 0
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        grade_ids.append(meta["grade_id"])
        if meta.get("solution"):
            solutions += 1
            assert "### BEGIN SOLUTION" in cell.source, f"cell {i}: an nbgrader solution cell needs a solution region"
            check = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
            assert check is not None and check.metadata.get("nbgrader", {}).get("grade") is True, (
                f"cell {i}: each solution is followed by its graded check cell"
            )
            assert "### BEGIN HIDDEN TESTS" in check.source, f"cell {i + 1}: a check cell has hidden tests"
            assert check.metadata["nbgrader"]["grade_id"] == meta["grade_id"].replace("-solution", "-check")
    assert solutions >= 3, "each notebook has at least three exercises"
    assert len(grade_ids) == len(set(grade_ids)), f"duplicate nbgrader grade_id in {grade_ids}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_nbgrader_reads_the_markup(path):
    """Run nbgrader's own preprocessors, as `generate_assignment` does: a marker anywhere (even in prose)
    that nbgrader cannot pair up, or metadata it rejects, fails here rather than in a teacher's hands."""
    try:
        from nbgrader import preprocessors
    except ModuleNotFoundError:
        if os.environ.get("CI"):
            raise
        pytest.skip("nbgrader is not installed: `make test` runs this in .venv-teach")
    nb = nbformat.read(path, as_version=4)
    resources = {}
    for step in ("CheckCellMetadata", "LockCells", "ClearSolutions", "ClearOutput", "ClearHiddenTests",
                 "ComputeChecksums", "CheckCellMetadata"):
        nb, resources = getattr(preprocessors, step)().preprocess(nb, resources)
    text = "\n".join(c.source for c in nb.cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text, f"'{marker}' is left after nbgrader's preprocessors: write it nowhere else"


TIMER = re.compile(r"perf_counter|time\.time\(|timeit|%%?time\b")
COMPARISON = re.compile(r"^\s*assert\b[^\n]*[<>]", re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_no_timing_assertions(path):
    """Timings vary with the machine and its load: print them, never assert an ordering or a bound."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(code_cells(nb)):
        if TIMER.search(cell.source):
            found = COMPARISON.search(cell.source)
            assert not found, f"code cell {i} times something and asserts a comparison: {found.group(0).strip()}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_run_time_is_recorded(path):
    """Grading derives each cell's timeout from the notebook's measured run time, and the sandbox's memory limit
    from the kernel's measured peak address space (mllm_classroom.lessons, mllm_classroom.sandbox)."""
    measured = nbformat.read(path, as_version=4).metadata.get("mllm", {})
    seconds, peak = measured.get("quick_run_seconds"), measured.get("quick_peak_mib")
    assert isinstance(seconds, int) and 0 < seconds < 120, f"run it with `python tools/notebooks.py run {path.name}`"
    assert isinstance(peak, int) and 100 < peak < 4096, f"run it with `python tools/notebooks.py run {path.name}`"


def test_header_command_agrees_with_pyproject():
    """The one address in pyproject.toml is what every notebook uses (tested per notebook above)."""
    url = repository_url()
    assert url.startswith("https://github.com/") and url.count("/") == 4, url
    for path in NOTEBOOKS:
        assert url in Path(path).read_text(encoding="utf-8"), f"{path.name} does not use {url}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_widgets_show_before_running(path):
    """Every displayed widget has its saved state, so a reader sees a control, not its repr."""
    nb = nbformat.read(path, as_version=4)
    shown = [
        o["data"][WIDGET_VIEW]["model_id"]
        for c in code_cells(nb)
        for o in c.outputs
        if WIDGET_VIEW in o.get("data", {})
    ]
    saved = widget_ids(nb)
    missing = sorted(set(shown) - set(saved))
    assert not missing, f"widgets shown without saved state: {missing} (re-run with tools/notebooks.py)"
    assert set(saved) == {stable_widget_id(path.stem, n) for n in range(len(saved))}, (
        "widget ids are not the stable ones: re-run with tools/notebooks.py"
    )
    if shown:
        assert nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["version_major"] == 2



@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_every_figure_is_described(path):
    """Every image a notebook shows carries a description (alt text) in its output's metadata, written from
    what it shows (mllm_utils.figures.show): the website's <img alt> and nbconvert's read it."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(code_cells(nb)):
        for out in cell.outputs:
            for mime in ("image/png", "image/jpeg", "image/svg+xml"):
                if mime not in out.get("data", {}):
                    continue
                alt = out.get("metadata", {}).get(mime, {}).get("alt", "")
                assert isinstance(alt, str) and len(alt) >= MIN_ALT_CHARS, (
                    f"code cell {i}: a figure without a description: show it with figures.show(fig, alt=...)")
                assert not re.search(r"\.(png|jpe?g|svg)\b|^_?images?/", alt), f"code cell {i}: alt is a file name"
