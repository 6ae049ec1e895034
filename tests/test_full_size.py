"""tools/full_size.py: the full-size runs and the smoke test of every notebook's full-size code paths."""

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import full_size  # noqa: E402


def test_the_smoke_test_runs_every_notebook_with_a_full_size_of_its_own():
    chosen = {p.name for p in full_size.resolve([], ROOT)}
    every = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert chosen and chosen <= every
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        assert (path.name in chosen) == ("full_time=" in source), path.name
    assert [p.name for p in full_size.resolve(["07"], ROOT)] == ["07_war_and_peace.ipynb"]
    with pytest.raises(SystemExit, match="no single notebook"):
        full_size.resolve(["0"], ROOT)


def test_smoke_runs_a_copy_with_the_caps_and_records_it(tmp_path, monkeypatch):
    """A notebook in a fresh kernel sees MLLM_SMOKE=1 and the full size; the committed file is not touched."""
    for name in (*full_size.RUN_ENV, "MLLM_SMOKE", "PYTHONPATH"):  # run() sets them: restored afterwards
        monkeypatch.setenv(name, os.environ.get(name, ""))
        if not os.environ[name]:
            monkeypatch.delenv(name)
    monkeypatch.setattr(full_size.signal, "signal", lambda *args: None)  # pytest keeps its own SIGTERM handling
    folder = tmp_path / "root" / "notebooks"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import mllm_utils\nprint(mllm_utils.run_size(), mllm_utils.smoke_cap(200_000))"),
        nbformat.v4.new_code_cell("assert mllm_utils.smoke_cap(3) == 2\nopen('written.txt', 'w').write('x')"),
    ]
    nbformat.write(nb, folder / "99_probe.ipynb")
    before = (folder / "99_probe.ipynb").read_bytes()
    out = tmp_path / "out"
    assert full_size.main(["smoke", "99", "--root", str(tmp_path / "root"), "--out", str(out)]) == 0
    assert (folder / "99_probe.ipynb").read_bytes() == before
    assert [p.name for p in folder.iterdir()] == ["99_probe.ipynb"]  # what it wrote went elsewhere:
    assert (out / "99_probe-files" / "written.txt").read_text() == "x"
    executed = nbformat.read(out / "99_probe.ipynb", as_version=4)
    assert executed.cells[0].outputs[0]["text"].strip() == "full 2"
    record = json.loads((out / "timings.json").read_text())["99_probe"]
    assert record["error"] is None and record["mode"] == "smoke" and record["seconds"] > 0
    assert "full 2" in (out / "progress.log").read_text()
