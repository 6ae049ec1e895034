"""The header command: one address in pyproject.toml, rewritten into every notebook."""


import nbformat

from tools import notebooks


def make_notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 99 · Test"),
        nbformat.v4.new_code_cell("import mllm_utils\nSIZE = mllm_utils.start('1 s', '1 s')"),
    ]
    nbformat.write(nb, path)


def test_headers_are_inserted_then_rewritten_when_the_address_changes(tmp_path, monkeypatch):
    path = tmp_path / "99_test.ipynb"
    make_notebook(path)
    url = "https://github.com/someone/course"
    monkeypatch.setattr(notebooks, "repository_url", lambda: url)

    assert notebooks.write_headers(check=True, paths=[path]) == 1
    assert notebooks.write_headers(check=False, paths=[path]) == 0
    nb = nbformat.read(path, as_version=4)
    assert [c.metadata.get("tags") for c in nb.cells[1:3]] == [["colab-badge"], ["colab-setup"]]
    assert "colab.research.google.com/github/someone/course/blob/main/notebooks/99_test.ipynb" in nb.cells[1].source
    assert f'REPO_URL = "{url}"' in nb.cells[2].source
    assert '"MLLM_COURSE_DIR", "/content/course")' in nb.cells[2].source
    assert "mllm_utils.start" in nb.cells[3].source
    assert notebooks.write_headers(check=True, paths=[path]) == 0

    monkeypatch.setattr(notebooks, "repository_url", lambda: "https://github.com/other/place")
    assert notebooks.header_problems(nb, path, "https://github.com/other/place")
    assert notebooks.write_headers(check=False, paths=[path]) == 0
    nb = nbformat.read(path, as_version=4)
    assert len(nb.cells) == 4, "stale header cells are replaced, not duplicated"
    assert "github/other/place/" in nb.cells[1].source and "\"/content/place\")" in nb.cells[2].source


def test_setup_cell_does_nothing_outside_colab():
    source = notebooks.setup_source("https://github.com/someone/course")
    namespace = {}
    exec(compile(source, "setup", "exec"), namespace)  # not in Colab: must not clone or install
    assert "REPO_URL" not in namespace


def test_repository_url_comes_from_pyproject():
    assert notebooks.repository_url().startswith("https://github.com/")


def test_widget_state_is_kept_with_stable_ids_in_state_and_outputs(tmp_path):
    """Saved widget state survives `save`, with the kernel's random ids replaced by stable ones."""
    path = tmp_path / "99_test.ipynb"
    slider, box = "a" * 32, "b" * 32
    nb = nbformat.v4.new_notebook()
    view = {notebooks.WIDGET_VIEW: {"model_id": box, "version_major": 2, "version_minor": 0},
            "text/plain": "VBox(children=(IntSlider(value=0),))"}
    nb.cells = [nbformat.v4.new_code_cell("display(box)", outputs=[nbformat.v4.new_output("display_data", data=view)])]
    state = {slider: {"model_name": "IntSliderModel", "state": {"value": 3}},
             box: {"model_name": "VBoxModel", "state": {"children": [f"IPY_MODEL_{slider}"]}}}
    nb.metadata["widgets"] = {notebooks.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}

    notebooks.save(nb, path)
    saved = nbformat.read(path, as_version=4)
    first, second = (notebooks.stable_widget_id("99_test", n) for n in range(2))
    assert set(notebooks.widget_ids(saved)) == {first, second}
    widgets = saved.metadata["widgets"][notebooks.WIDGET_STATE]["state"]
    assert widgets[second]["state"]["children"] == [f"IPY_MODEL_{first}"]
    assert widgets[first]["state"]["value"] == 3
    assert saved.cells[0].outputs[0]["data"][notebooks.WIDGET_VIEW]["model_id"] == second
    # Saving again changes nothing (the state on disk is sorted by id, not in creation order).
    before = path.read_text()
    notebooks.save(saved, path)
    assert path.read_text() == before


def test_a_notebook_without_widgets_keeps_no_widget_metadata(tmp_path):
    path = tmp_path / "99_test.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {notebooks.WIDGET_STATE: {"state": {}, "version_major": 2, "version_minor": 0}}
    notebooks.save(nb, path)
    assert "widgets" not in nbformat.read(path, as_version=4).metadata

