"""A notebook cell that writes to stderr fails nbval with a readable message."""

import subprocess
import sys

import nbformat

from tools.notebooks import ROOT


def test_unexpected_stderr_fails_with_its_text(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('import sys\nprint("SomeWarning: deprecated thing", file=sys.stderr)')
    cell.execution_count = 1  # stored as run, with no output: the fresh run adds stderr
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "noisy.ipynb"
    nbformat.write(nb, path)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tools.nbval_stderr", "--nbval", "--nbval-current-env",
         "-o", "addopts=", "-p", "no:cacheprovider", str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    assert "stderr written by this notebook cell" in result.stdout
    assert "SomeWarning: deprecated thing" in result.stdout
    assert "fix the cause" in result.stdout
