"""The browser test's pure parts (tools/browser_test.py), checked without a browser."""

import json

import nbformat

from tools import browser_test

WIDGET = {"application/vnd.jupyter.widget-view+json": {"model_id": "ab", "version_major": 2, "version_minor": 0},
          "text/plain": ["VBox(children=(Text(value='king'),))"]}


def write_notebook(path, data):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 99 · Test"), nbformat.v4.new_code_cell("display(box)")]
    nb.cells[1].outputs = [nbformat.v4.new_output("display_data", data=data)]
    nbformat.write(nb, path)


def test_widget_notebooks_are_found_from_their_saved_outputs(tmp_path):
    write_notebook(tmp_path / "01_with.ipynb", WIDGET)
    write_notebook(tmp_path / "02_without.ipynb", {"text/plain": ["VBox(children=(...))"]})
    assert [p.name for p in browser_test.widget_notebooks(tmp_path)] == ["01_with.ipynb"]
    assert browser_test.widget_cells(json.loads((tmp_path / "01_with.ipynb").read_text())) == [1]


def test_the_course_has_widget_notebooks():
    found = browser_test.widget_notebooks(browser_test.ROOT / "notebooks")
    assert found and all(p.suffix == ".ipynb" for p in found)


def test_only_the_course_errors_fail_the_page():
    messages = [
        ("error", "Failed to load resource: net::ERR_NAME_NOT_RESOLVED"),  # the Colab badge, offline
        ("error", "Failed to load resource: the server responded with a status of 404 ()"),
        ("warning", "widget model not found"),
        ("error", "Error: widget model not found\n    at x.get_model (...)"),
        ("error", "Could not open comm jupyter.widget"),
        ("pageerror", "TypeError: Cannot read properties of undefined"),
        ("pageerror", "ResizeObserver loop completed with undelivered notifications."),
    ]
    assert browser_test.course_errors(messages) == [messages[3][1], messages[4][1], messages[5][1]]


def test_a_missing_browser_is_reported(monkeypatch):
    monkeypatch.setattr(browser_test, "CHROMIUM", "/nonexistent/chromium")
    problem = browser_test.missing_tools()
    assert problem and "browser-setup.sh" in problem


def test_a_controls_role_and_name_come_from_the_aria_snapshot():
    assert browser_test.aria_role_name('- slider "temperature T"') == ("slider", "temperature T")
    assert browser_test.aria_role_name('- textbox "Text to tokenize:":\n  - /placeholder: x') == (
        "textbox", "Text to tokenize:")
    assert browser_test.aria_role_name("- slider") == ("slider", "")  # no name: what the test reports
    assert browser_test.aria_role_name('- combobox "say \\"war\\"":\n  - option "a"') == ("combobox", 'say \\"war\\"')
    assert browser_test.aria_role_name("") == ("", "")
    assert {"slider", "textbox", "combobox", "button"} <= browser_test.CONTROL_ROLES


def test_the_keyboard_test_takes_a_notebook_with_a_slider_or_a_number_box(tmp_path):
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "s", "version_major": 2, "version_minor": 0}}
    write_notebook(tmp_path / "01_text.ipynb", WIDGET)
    for name, model in (("02_slider", "FloatSliderModel"), ("03_number", "BoundedFloatTextModel")):
        write_notebook(tmp_path / f"{name}.ipynb", view)
        path = tmp_path / f"{name}.ipynb"
        path.write_text(path.read_text().replace('"metadata": {', f'"metadata": {{"_model_name": "{model}", ', 1))
    paths = sorted(tmp_path.glob("*.ipynb"))
    assert browser_test.keyboard_notebook(paths) == "02_slider.ipynb"
    assert browser_test.keyboard_notebook([paths[0], paths[2]]) == "03_number.ipynb"
    assert browser_test.keyboard_notebook(paths[:1]) == "01_text.ipynb"
    assert browser_test.keyboard_notebook([]) is None


