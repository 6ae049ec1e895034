"""tools/perturb.py: the perturbed setups really change a kernel's arithmetic (or the run fails)."""

import argparse
import json
import os
from pathlib import Path

import nbformat
import pytest

from tools import perturb

nbclient = pytest.importorskip("nbclient")

PROBE = """
import os, torch
torch.set_num_threads(1)
p = torch.nn.Parameter(torch.zeros(2, 3, dtype=torch.float64))
opt = torch.optim.SGD([p], lr=0.0)
p.grad = torch.zeros_like(p)
opt.step()
opt.step()
print(json.dumps({"threads": torch.get_num_threads(), "aten": os.environ.get("ATEN_CPU_CAPABILITY"),
                  "capability": torch.backends.cpu.get_cpu_capability(),
                  "mkl": os.environ.get("MKL_CBWR"), "first": p[0, 0].item(),
                  "rest": p.flatten()[1:].abs().max().item()}))
"""


def probe(tmp_path: Path, setup: str | None) -> dict:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import json\n" + PROBE)])
    env = {}
    if setup:
        env["MLLM_PERTURB"] = setup
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(perturb.SITE), os.environ.get("PYTHONPATH")]))
    saved = {k: os.environ.get(k) for k in ["ATEN_CPU_CAPABILITY", "MKL_CBWR", "MLLM_PERTURB", "PYTHONPATH"]}
    os.environ.update(env)
    for name in ("ATEN_CPU_CAPABILITY", "MKL_CBWR"):  # an unperturbed kernel: the CPU's own paths
        os.environ.pop(name, None)
    if not setup:
        os.environ.pop("MLLM_PERTURB", None)
    try:
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return json.loads(nb.cells[0].outputs[0]["text"])


def test_unperturbed_kernel_keeps_the_cpus_own_paths(tmp_path):
    got = probe(tmp_path, None)
    capability = got.pop("capability")
    assert got == {"threads": 1, "aten": None, "mkl": None, "first": 0.0, "rest": 0.0}
    assert capability in {"AVX2", "AVX512"}, capability  # every x86-64 CPU CI or a learner runs has one


def test_kernels_setup_changes_code_paths(tmp_path):
    own = probe(tmp_path, None)["capability"]
    got = probe(tmp_path, "kernels")
    # One instruction set below the CPU's own, in PyTorch and in MKL alike.
    below = {"AVX512": ("avx2", "AVX2", "AVX2"), "AVX2": ("default", "SSE4_2", "DEFAULT")}[own]
    assert (got["aten"], got["mkl"], got["capability"]) == below
    assert got["threads"] == 1 and got["first"] == 0.0  # the notebook's own thread count, as on a learner's machine


def test_nudge_moves_one_weight_once(tmp_path):
    got = probe(tmp_path, "nudge")
    assert got["first"] == pytest.approx(1e-7, rel=1e-9)  # nudged at the first step only, not the second
    assert got["rest"] == 0.0 and got["threads"] == 1


def test_unknown_setup_is_refused():
    with pytest.raises(SystemExit):
        perturb.main(["--setup", "wobble"])


def test_setup_with_its_own_paths_and_bad_setups():
    assert perturb.setup_arg("kernels=student/,notebooks/05_lstm.ipynb") == (
        "kernels", ["student/", "notebooks/05_lstm.ipynb"])
    assert perturb.setup_arg("nudge") == ("nudge", None)
    for bad, says in [("wobble=student/", "unknown setup 'wobble'"), ("kernels=", "no path after '='")]:
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            perturb.setup_arg(bad)


def test_main_runs_pytest_per_setup(monkeypatch, capsys):
    started = []

    class Done:
        returncode = 0

        def communicate(self):
            return "1 passed\n", None

    monkeypatch.setattr(perturb, "start", lambda name, setup, paths: started.append((setup, paths)) or Done())
    assert perturb.main(["--plain", "student/", "--", "notebooks/x.ipynb"]) == 0
    assert started == [("kernels", ["notebooks/x.ipynb"]), ("nudge", ["notebooks/x.ipynb"]), (None, ["student/"])]
    assert "3 of 3 runs passed" in capsys.readouterr().out
    started.clear()
    assert perturb.main(["--setup", "kernels=student/", "--setup", "nudge=notebooks/"]) == 0
    assert started == [("kernels", ["student/"]), ("nudge", ["notebooks/"])]
