"""The website's pure parts (tools/site.py, tools/site_test.py), checked without Sphinx, npm or a browser."""

import base64
import copy
import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools import site, site_test
from tools.site import course_a11y

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MARKERS = re.compile(r"NBVAL_|BEGIN HIDDEN TESTS|END HIDDEN TESTS|BEGIN SOLUTION|END SOLUTION")
REPO = "https://github.com/example/course"


def load(path):
    return json.loads(path.read_text("utf-8"))


def is_comment(line):
    return line.lstrip().startswith("#")


# --- The test harness's comments -------------------------------------------------------------------------

def test_nbval_markers_are_removed_and_the_code_kept():
    source = "# NBVAL_IGNORE_OUTPUT\nstart = time.perf_counter()\n    # NBVAL_SKIP\nx = 1"
    assert site.strip_tooling_comments(source) == "start = time.perf_counter()\nx = 1"


def test_a_remark_to_the_test_runners_goes_and_one_to_the_reader_stays():
    source = ("# NBVAL_IGNORE_OUTPUT\n"
              "# (The panel's first drawing lands inside the widget in Jupyter but as plain output under other\n"
              "# runners, so this cell's output is not compared; the next cell's is.)\n"
              "panel = make_panel()\n"
              "# (timings vary from run to run)\n"
              "seconds = measure()")
    assert site.strip_tooling_comments(source) == ("panel = make_panel()\n# (timings vary from run to run)\n"
                                                   "seconds = measure()")


def test_an_aside_for_the_tests_is_cut_from_a_comment_the_reader_needs():
    source = ('    # Where the course is cloned (the tests point MLLM_COURSE_DIR at a local clone instead).\n'
              '    REPO_DIR = os.environ.get("MLLM_COURSE_DIR", "/content/course")')
    want = '    # Where the course is cloned.\n    REPO_DIR = os.environ.get("MLLM_COURSE_DIR", "/content/course")'
    assert site.strip_tooling_comments(source) == want


def test_noqa_remarks_are_removed_from_code_lines():
    source = "import os  # noqa: F401\nx = 1  # the answer"
    assert site.strip_tooling_comments(source) == "import os\nx = 1  # the answer"


CODE_LINE = st.text(st.characters(blacklist_characters="#\n\r", blacklist_categories=("Cs",)), max_size=40)


@given(st.lists(st.one_of(CODE_LINE, st.sampled_from(["# NBVAL_IGNORE_OUTPUT", "# a comment (under nbval)",
                                                       "# (the tests run this)", "    # NBVAL_SKIP"])),
                max_size=12))
def test_no_code_line_is_ever_removed_or_changed(lines):
    kept = site.strip_tooling_comments("\n".join(lines)).split("\n")
    code = [line for line in lines if not is_comment(line)]
    assert [line for line in kept if not is_comment(line)] == code or (not code and kept == [""])


# --- Exercises ---------------------------------------------------------------------------------------------

def test_hidden_tests_are_removed_with_their_markers():
    source = "check(a)\n### BEGIN HIDDEN TESTS\ncheck(secret)\n### END HIDDEN TESTS\n"
    assert site.strip_hidden_tests(source) == ("check(a)", True)
    assert site.strip_hidden_tests("check(a)") == ("check(a)", False)


@pytest.mark.parametrize("source, says", [("### BEGIN HIDDEN TESTS\ncheck(secret)", "without '### END HIDDEN TESTS'"),
                                          ("check(a)\n### END HIDDEN TESTS", "without '### BEGIN HIDDEN TESTS'")])
def test_unbalanced_hidden_test_markers_are_an_error(source, says):
    with pytest.raises(site.SiteError, match=says):
        site.strip_hidden_tests(source)


def test_a_solution_is_kept_without_its_markers_or_replaced_by_the_stub():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n\nf(1)"
    assert site.strip_solution_markers(source, keep_solution=True) == "def f(x):\n    return x + 1\n\nf(1)"
    assert site.strip_solution_markers(source, keep_solution=False) == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\nf(1)")
    assert site.strip_solution_markers("answer = 42", keep_solution=False) == (
        "# YOUR CODE HERE\nraise NotImplementedError()")  # a solution cell without markers is all solution
    with pytest.raises(site.SiteError, match="without '### END SOLUTION'"):
        site.strip_solution_markers("### BEGIN SOLUTION\nx = 1", keep_solution=True)


def grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_the_stub_is_the_student_versions(path):
    student = load(ROOT / "student" / path.name)
    stubs = {grade_id(c): "".join(c["source"]) for c in student["cells"] if grade_id(c)}
    page = site.site_notebook(load(path), path.name, REPO, "removed", learner=student)
    solutions = [c for c in page["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert solutions
    for cell in solutions:
        assert cell["source"] == stubs[grade_id(cell)]


def test_without_a_learners_version_the_stub_is_nbgraders():
    nb = load(LESSONS[0])
    page = site.site_notebook(nb, LESSONS[0].name, REPO, "removed")
    code = [c for c in page["cells"] if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")]
    assert code and all("raise NotImplementedError()" in c["source"] for c in code)


# --- A lesson's page ---------------------------------------------------------------------------------------

def hidden_parts(nb):
    """Each hidden test's lines, as written in the lesson."""
    parts = []
    for cell in nb["cells"]:
        for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", "".join(cell["source"]), re.S):
            parts.append([line.strip() for line in block.split("\n") if line.strip()])
    return parts


@pytest.mark.parametrize("solutions", site.SOLUTION_MODES)
@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_a_lessons_page_has_no_harness_and_no_hidden_test(path, solutions):
    nb = load(path)
    before = copy.deepcopy(nb)
    page = site.site_notebook(nb, path.name, REPO, solutions)
    assert nb == before, "the lesson itself must not change"
    text = "\n".join("".join(c["source"]) for c in page["cells"])
    assert not MARKERS.search(text)
    visible = "\n".join(site.strip_hidden_tests("".join(c["source"]))[0] for c in nb["cells"])
    secret = {line for part in hidden_parts(nb) for line in part if len(line) >= 30 and line not in visible}
    assert secret, "each lesson has hidden tests with lines of their own"
    shown = text + json.dumps([c.get("outputs", []) for c in page["cells"]])
    assert not [line for line in secret if line in shown]
    # Every code line a reader should see is there, in order: only comments, hidden tests and markers go.
    originals = [c for c in nb["cells"] if c["cell_type"] == "code"]
    copies = [c for c in page["cells"] if c["cell_type"] == "code"]
    assert len(originals) == len(copies)
    for original, copied in zip(originals, copies, strict=True):
        want = [line for line in site.strip_hidden_tests("".join(original["source"]))[0].split("\n")
                if not is_comment(line) and line.strip()]
        got = [line for line in copied["source"].split("\n") if not is_comment(line) and line.strip()]
        if original["metadata"].get("nbgrader", {}).get("solution") and solutions == "removed":
            assert "raise NotImplementedError()" in [line.strip() for line in got] and not copied["outputs"]
        else:
            assert got == want


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_solutions_fold_and_the_badge_becomes_links(path):
    nb = load(path)
    page = site.site_notebook(nb, path.name, REPO)
    for original, copied in zip([c for c in nb["cells"] if c["cell_type"] == "code"],
                                [c for c in page["cells"] if c["cell_type"] == "code"], strict=True):
        grader = original["metadata"].get("nbgrader", {})
        if grader.get("solution"):
            assert "hide-input" in copied["metadata"]["tags"]
            assert copied["metadata"]["mystnb"]["code_prompt_show"] == "Show a solution"
        if "### BEGIN HIDDEN TESTS" in "".join(original["source"]):
            assert copied["outputs"] == [], "a check cell's output shows what its hidden tests checked"
    badge = next(c for c in page["cells"] if "colab-badge" in c["metadata"].get("tags", []))
    # A reader who runs a notebook gets the learner's version (no solutions), from Colab or as a download.
    colab = f"https://colab.research.google.com/github/example/course/blob/main/student/{path.name})"
    assert colab in badge["source"]
    assert f"<../_ipynb/student/{path.name}>`" in badge["source"]
    assert "colab-badge.svg" not in badge["source"], "the badge is an image from another host"


def test_with_the_solutions_removed_only_the_student_version_is_offered():
    path = LESSONS[0]
    badge = next(c for c in site.site_notebook(load(path), path.name, REPO, "removed")["cells"]
                 if "colab-badge" in c["metadata"].get("tags", []))
    assert f"blob/main/student/{path.name})" in badge["source"]
    assert f"<../_ipynb/student/{path.name}>`" in badge["source"]
    assert "/notebooks/" not in badge["source"], "the lesson notebook has the solutions"


def test_each_widget_gets_a_note_that_its_output_needs_python():
    for path in site_test.widget_notebooks(ROOT / "notebooks"):
        page = site.site_notebook(load(path), path.name, REPO)
        cells = page["cells"]
        widgets = [i for i, c in enumerate(cells) if c["cell_type"] == "code"
                   and any(site.WIDGET_VIEW in o.get("data", {}) for o in c["outputs"])]
        assert widgets and all(cells[i + 1]["source"] == site.WIDGET_NOTE for i in widgets)


def test_an_unknown_solutions_mode_is_refused():
    with pytest.raises(site.SiteError, match="--solutions: got 'hidden', expected one of folded, removed"):
        site.site_notebook(load(LESSONS[0]), LESSONS[0].name, REPO, "hidden")


# --- The other pages ---------------------------------------------------------------------------------------

def test_the_course_table_comes_from_the_readme():
    readme = (ROOT / "README.md").read_text("utf-8")
    rows = site.course_rows(readme, [p.name for p in LESSONS])
    assert [r["name"] for r in rows] == [p.name for p in LESSONS]
    assert all(r["topics"] and r["post"] and re.fullmatch(r"\d+ s", r["time"]) for r in rows)
    page = site.index_page(readme, rows, {p.name: p.stem for p in LESSONS}, REPO)
    assert all(f"notebooks/{p.stem}\n" in page for p in LESSONS), "every notebook in the toctree"
    assert all(f"_ipynb/student/{p.name}>`" in page for p in LESSONS), "downloads are the learner's versions"
    assert all(f"blob/main/student/{p.name})" in page for p in LESSONS), "Colab opens the learner's versions"


def test_a_broken_course_table_is_an_error():
    readme = "# Course\n\n## The course\n\n| # | Notebook |\n|---|---|\n| 01 | [a](notebooks/a.ipynb) |\n"
    with pytest.raises(site.SiteError, match="expected a table of 6 columns"):
        site.course_rows(readme, ["a.ipynb"])
    row = "| 01 | [a](notebooks/a.ipynb) | post | topics | 1 s | colab |"
    readme = f"# Course\n\n## The course\n\n| # | N | P | T | S | C |\n|---|---|---|---|---|---|\n{row}\n"
    assert site.course_rows(readme, ["a.ipynb"])[0]["topics"] == "topics"
    with pytest.raises(site.SiteError, match=r"lists \['a.ipynb'\]; notebooks/ holds \['a.ipynb', 'b.ipynb'\]"):
        site.course_rows(readme, ["a.ipynb", "b.ipynb"])


def test_links_to_files_not_on_the_site_point_at_the_repository():
    text = ("See [the guide](CONTRIBUTING.md#exercises), [lesson 5](notebooks/05_lstm.ipynb), "
            "[nbgrader](https://nbgrader.readthedocs.io), [below](#limits) and ![x](img.png).")
    got = site.point_links(text, "TEACHING.md", lambda p: p.startswith("notebooks/"), REPO)
    assert got == (f"See [the guide]({REPO}/blob/main/CONTRIBUTING.md#exercises), [lesson 5](notebooks/05_lstm.ipynb), "
                   "[nbgrader](https://nbgrader.readthedocs.io), [below](#limits) and ![x](img.png).")
    assert site.point_links("[tests](../tests/x.py)", "student/README.md", lambda p: False, REPO) == (
        f"[tests]({REPO}/blob/main/tests/x.py)")


def test_the_student_table_offers_each_student_version():
    page = site.student_page("| [05_lstm](05_lstm.ipynb) | 3 |", REPO)
    colab = "https://colab.research.google.com/github/example/course/blob/main/student/05_lstm.ipynb"
    assert page == f"| {{download}}`05_lstm <../_ipynb/student/05_lstm.ipynb>` ([Colab]({colab})) | 3 |"


def test_files_are_rewritten_only_when_they_change(tmp_path):
    path = tmp_path / "a" / "page.md"
    assert site.write_if_changed(path, "one")
    mtime = path.stat().st_mtime_ns
    assert not site.write_if_changed(path, "one") and path.stat().st_mtime_ns == mtime
    assert site.write_if_changed(path, b"two") and path.read_text() == "two"


# --- Figures' descriptions (issue 26) ---------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode()
ALT = "Training loss against epoch: falls from 2.10 to 1.37 and flattens after epoch 15."


def figure_output(alt=None, png=PNG):
    output = {"output_type": "display_data", "data": {"image/png": png, "text/plain": ["<Figure>"]}, "metadata": {}}
    if alt is not None:
        output["metadata"] = {"image/png": {"alt": alt}}
    return output


def notebook_with(*outputs, widget_outputs=()):
    cells = [{"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# 99 · Test"},
             {"cell_type": "code", "id": "plot", "metadata": {}, "source": "show()", "execution_count": 1,
              "outputs": list(outputs)}]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    if widget_outputs:
        view = {"application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2, "version_minor": 0}}
        cells.append({"cell_type": "code", "id": "panel", "metadata": {}, "source": "display(box)",
                      "execution_count": 2, "outputs": [{"output_type": "display_data", "data": view, "metadata": {}}]})
        nb["metadata"]["widgets"] = {course_a11y.WIDGET_STATE: {"state": {
            "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_out"]}},
            "out": {"model_name": "OutputModel", "state": {"outputs": list(widget_outputs)}}}}}
    return nb


def test_a_figure_is_described_by_its_outputs_alt():
    found, problems = course_a11y.figure_alts(notebook_with(figure_output(ALT)), "99_test.ipynb")
    assert problems == []
    assert found == [(hashlib.sha256(base64.b64decode(PNG)).hexdigest(), ALT)]  # the name MyST-NB gives the file


@pytest.mark.parametrize("alt, says", [
    (None, "no description"),
    ("", "a description of 0 characters"),
    ("a plot", "a description of 6 characters"),
    ("../_images/791d2541f1d31e692b68865d20c4843394691e2e452a2e91eaa308f1f794929b.png", "a file name"),
    ("loss.png", "a file name"),
])
def test_a_figure_without_a_real_description_is_named_with_its_cell(alt, says):
    _, problems = course_a11y.figure_alts(notebook_with(figure_output(alt)), "99_test.ipynb")
    assert len(problems) == 1
    assert problems[0].startswith("99_test.ipynb, cell 2 (id plot), output 1: a figure with ")
    assert says in problems[0] and "figures.show(fig, alt=...)" in problems[0]


def test_a_figure_inside_a_saved_widget_needs_a_description_too():
    nb = notebook_with(widget_outputs=[{"output_type": "stream", "name": "stdout", "text": "T = 1"},
                                       figure_output(None)])
    _, problems = course_a11y.figure_alts(nb, "99_test.ipynb")
    assert problems == ["99_test.ipynb, cell 3 (id panel), the saved state of Output widget out, output 2: a figure "
                        "with no description; show it with mllm_utils.figures.show(fig, alt=...) inside the widget"]
    assert course_a11y.figure_alts(notebook_with(widget_outputs=[figure_output(ALT)]), "x")[1] == []


def test_the_build_fails_on_an_undescribed_figure(tmp_path):
    (tmp_path / "01_a.ipynb").write_text(json.dumps(notebook_with(figure_output(ALT))))
    (tmp_path / "02_b.ipynb").write_text(json.dumps(notebook_with(figure_output(ALT), figure_output("plot.png"))))
    assert site.undescribed_figures(tmp_path) == [
        "02_b.ipynb, cell 2 (id plot), output 2: a figure with a file name as its description ('plot.png'); "
        "show it with mllm_utils.figures.show(fig, alt=...)"]


def test_the_site_and_the_notebooks_ask_the_same_of_a_description():
    from mllm_utils import figures

    assert course_a11y.MIN_ALT_CHARS == figures.MIN_ALT_CHARS
    assert course_a11y.alt_problem(ALT) is None and figures.check_alt(ALT) == ALT


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_figure_of_the_lessons_is_described(path):
    found, problems = course_a11y.figure_alts(load(path), path.name)
    assert problems == [], "\n".join(problems)


def test_the_site_is_built_with_its_accessibility_extension():
    conf = (site.WEBSITE / "conf.py").read_text()
    assert '"course_a11y"' in conf and "course-a11y.js" in conf
    assert all((site.WEBSITE / name).is_file() for name in site.EXTENSIONS)
    assert (site.WEBSITE / "_static" / "course-a11y.js").is_file()


# --- Locks -------------------------------------------------------------------------------------------------

def pins(path):
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {name.lower().replace("_", "-"): version for name, version in (line.split("==") for line in lines)}


def test_the_site_lock_agrees_with_the_course_locks():
    site_pins = pins(ROOT / "requirements-site-lock.txt")
    course = {**pins(ROOT / "requirements-lock.txt"), **pins(ROOT / "requirements-teach-lock.txt")}
    assert {"sphinx", "myst-nb", "furo"} <= set(site_pins)
    assert {n: (v, course[n]) for n, v in site_pins.items() if n in course and course[n] != v} == {}


def test_the_npm_lock_pins_what_the_site_ships():
    package = json.loads((site.WEBSITE / "package.json").read_text())
    lock = json.loads((site.WEBSITE / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == package["dependencies"]
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name}: an exact version, not {version!r}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
    shipped = {folder.split("/dist")[0].split("/es5")[0] for folder, _ in site.VENDOR.values()}
    assert shipped == set(package["dependencies"])


def test_axe_core_is_pinned_for_the_test_and_never_shipped():
    package = json.loads((site.WEBSITE / "package.json").read_text())
    lock = json.loads((site.WEBSITE / "package-lock.json").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", package["devDependencies"]["axe-core"])
    entry = lock["packages"]["node_modules/axe-core"]
    assert entry["version"] == package["devDependencies"]["axe-core"] and entry["dev"] is True
    assert "axe-core" not in package["dependencies"] and "axe-core" not in str(site.VENDOR)


# --- The browser test's pure parts -------------------------------------------------------------------------

def test_a_search_expects_the_notebooks_whose_topics_name_the_term():
    readme = (ROOT / "README.md").read_text("utf-8")
    names = [p.name for p in LESSONS]
    assert "06_sampling.ipynb" in site_test.expected_hits(readme, names, "temperature")
    assert "05_lstm.ipynb" in site_test.expected_hits(readme, names, "LSTM")
    assert all(site_test.expected_hits(readme, names, term) for term in site_test.SEARCH_TERMS)


def test_axe_findings_are_reported_by_rule_with_an_example():
    found = {"image-alt": {"help": "Images must have alternative text", "impact": "critical", "nodes": {
        "img.a": {"target": "img.a", "state": "as loaded"}, "img.b": {"target": "img.b", "state": "as loaded"}}}}
    assert site_test.axe_problems(found) == [
        "axe image-alt (critical): 2 element(s), e.g. img.a [as loaded]: Images must have alternative text"]
    assert site_test.AXE_TAGS == ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def test_an_image_named_by_its_file_fails_the_page():
    images = [{"src": "../_images/ab.png", "alt": "../_images/ab.png"}, {"src": "data:image/png;base64,x", "alt": None},
              {"src": "../_images/cd.png", "alt": ALT}]
    problems = site_test.image_problems(images)
    assert [p.split(":")[0] for p in problems] == ["image ../_images/ab.png", "image data"]


def test_the_keyboard_test_takes_a_page_with_a_control_the_arrow_keys_step():
    page = site_test.keyboard_page([p.name for p in LESSONS])
    assert page and page.startswith("notebooks/")
    widget_pages = [p for p in site_test.widget_notebooks(ROOT / "notebooks")]
    assert any(site_test.browser_test.STEPPED.search(p.read_text()) for p in widget_pages), "06's number boxes"
    assert site_test.browser_test.STEPPED.search((ROOT / "notebooks" / (Path(page).stem + ".ipynb")).read_text())


def test_hidden_lines_are_those_only_the_hidden_tests_have():
    lines = site_test.hidden_lines(LESSONS[0])
    assert lines and all(len(line) >= 30 for line in lines)
    visible = "\n".join(site.strip_hidden_tests("".join(c["source"]))[0] for c in load(LESSONS[0])["cells"])
    assert not [line for line in lines if line in visible]
