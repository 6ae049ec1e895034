import ast
import random
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

import mllm_utils
from mllm_utils import runtime


@pytest.mark.parametrize(("value", "size"), [("1", "quick"), ("0", "full"), (" 1 ", "quick")])
def test_run_size_from_environment(monkeypatch, value, size):
    monkeypatch.setenv("MLLM_QUICK", value)
    assert mllm_utils.run_size() == size
    assert mllm_utils.is_quick() == (size == "quick")


def test_run_size_unset_follows_the_machine(monkeypatch):
    monkeypatch.delenv("MLLM_QUICK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert mllm_utils.run_size() == "full"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert mllm_utils.run_size() == "quick"


def test_run_size_rejects_other_values(monkeypatch):
    monkeypatch.setenv("MLLM_QUICK", "yes")
    with pytest.raises(ValueError, match="MLLM_QUICK=1 for the quick"):
        mllm_utils.run_size()


def test_seed_everything_makes_all_generators_repeat():
    def draw():
        return random.random(), np.random.rand(), torch.rand(1).item()

    mllm_utils.seed_everything(7)
    first = draw()
    mllm_utils.seed_everything(7)
    assert draw() == first
    mllm_utils.seed_everything(8)
    assert draw() != first


def test_start_prints_size_time_and_how_to_switch(monkeypatch, capsys):
    monkeypatch.setenv("MLLM_QUICK", "1")
    size = mllm_utils.start(quick_time="10 s", full_time="1 h on a GPU", seed=3)
    out = capsys.readouterr().out
    assert size == "quick"
    assert "Run size: quick (MLLM_QUICK=1), seed 3" in out
    assert "Expected time: 10 s" in out
    assert "set MLLM_QUICK=0" in out and "1 h on a GPU" in out


def test_device_is_a_torch_device():
    assert isinstance(runtime.device(), torch.device)


# ---------------------------------------------------------------- every notebook's start() line, at both sizes

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
READS_SIZE = re.compile(r"\bSIZE\b|\bis_quick\(|\brun_size\(|MLLM_QUICK")


def value_of(node):
    """A start() argument: a literal, or the measured time the notebook reads (runtime.quick_time("NN", ...))."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("mllm_utils.runtime.quick_time", "runtime.quick_time"):
        return runtime.quick_time(*[ast.literal_eval(a) for a in node.args])
    return ast.literal_eval(node)


def start_call(path):
    """The keyword and positional arguments of the notebook's mllm_utils.start(...) call, and its other code."""
    nb = nbformat.read(path, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    for i, source in enumerate(code):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("mllm_utils.start", "start"):
                args = [value_of(a) for a in node.args]
                kwargs = {k.arg: value_of(k.value) for k in node.keywords}
                call = ast.get_source_segment(source, node)
                here = re.sub(r"^SIZE\s*=\s*$", "", source.replace(call, ""), flags=re.M)  # the assignment itself
                return args, kwargs, "\n".join(code[:i] + [here] + code[i + 1 :])
    raise AssertionError(f"{path.name} never calls mllm_utils.start(...)")


def well_formed(line):
    """The problems of one printed line: nested or unbalanced parentheses, doubled spaces or stops."""
    problems, depth = [], 0
    for char in line:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth > 1:
            problems.append("nested parentheses")
        if depth < 0:
            problems.append("a ')' without its '('")
    if depth > 0:
        problems.append("an unclosed '('")
    problems += [f"{bad!r}" for bad in ("  ", "..", " .", " ,", "()", ". .") if bad in line]
    return sorted(set(problems))


@pytest.mark.parametrize("path", sorted(NOTEBOOK_DIR.glob("*.ipynb")), ids=lambda p: p.stem)
@pytest.mark.parametrize("quick", ["1", "0"])
def test_every_notebooks_start_lines_are_well_formed(monkeypatch, capsys, path, quick):
    args, kwargs, rest = start_call(path)
    monkeypatch.setenv("MLLM_QUICK", quick)
    monkeypatch.delenv("MLLM_SMOKE", raising=False)
    size = mllm_utils.start(*args, **kwargs)
    lines = capsys.readouterr().out.splitlines()
    assert size == ("quick" if quick == "1" else "full")
    described = quick == "0" and (kwargs.get("full_does") or kwargs.get("afterwards"))
    assert len(lines) == (4 if described else 3), lines
    for line in lines:
        assert not well_formed(line), f"{path.name}, MLLM_QUICK={quick}: {well_formed(line)} in {line!r}"
    full_time = kwargs.get("full_time", args[1] if len(args) > 1 else None)
    quick_time = kwargs.get("quick_time", args[0] if args else None)
    if READS_SIZE.search(rest):  # two sizes: the other one is offered, with its own (different) time
        assert full_time is not None, f"{path.name} reads the run size, so start() needs full_time"
        assert full_time != quick_time, f"{path.name}: the two sizes are given the same time"
        other, other_time = ("0", full_time) if quick == "1" else ("1", quick_time)
        assert lines[-1].endswith(f"set MLLM_QUICK={other} in the environment and restart the kernel."), lines[-1]
        assert other_time in lines[-1], lines[-1]
    else:  # one size: no switch is offered
        assert full_time is None, (
            f"{path.name} never reads the run size, so both sizes are the same: call start() without full_time"
        )
        assert "one size only" in lines[2] and "restart" not in lines[2], lines[2]


@pytest.mark.parametrize("time", ["about 1 minute (on a CPU (2 cores))", "a (b", "a) (b", "one minute.", "a\nb"])
def test_start_rejects_a_time_that_would_print_badly(time):
    with pytest.raises(ValueError, match="quick_time must be one phrase"):
        mllm_utils.start(time)
    with pytest.raises(ValueError, match="full_time must be one phrase"):
        mllm_utils.start("1 minute", time)


USES_A_GPU = re.compile(r"mllm_utils\.device\(\)")


@pytest.mark.parametrize("path", sorted(NOTEBOOK_DIR.glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_notebook_promises_times_with_their_machine_and_says_what_the_full_size_does(path):
    """Issue 27: every time names its machine, a GPU time says measured or estimated, the full size says what it does.

    Fails until the notebooks pass start() the new arguments (full_does, gpu_time, afterwards).
    """
    args, kwargs, rest = start_call(path)
    quick_time = kwargs.get("quick_time", args[0] if args else None)
    full_time = kwargs.get("full_time", args[1] if len(args) > 1 else None)
    for name, time in (("quick_time", quick_time), ("full_time", full_time)):
        if time is not None:
            assert re.search(r"\b(CPU|GPU)\b", time), f"{path.name}: {name} {time!r} names no machine"
    if full_time is None:
        return
    assert kwargs.get("full_does"), f"{path.name}: start(full_does=...) must say what the full size does"
    if USES_A_GPU.search(rest):  # the full size runs on the GPU where there is one
        gpu_time = kwargs.get("gpu_time")
        assert gpu_time and re.search(r"measured|estimated", gpu_time), (
            f"{path.name} runs on mllm_utils.device() at the full size: start(gpu_time=...) gives its time on a "
            "GPU, measured or estimated"
        )
        assert kwargs.get("afterwards"), f"{path.name}: start(afterwards=...) says what the model trained is for"


@pytest.mark.parametrize("gpu", [False, True])
def test_start_at_the_full_size_says_what_it_does_and_the_time_of_this_machine(monkeypatch, capsys, gpu):
    monkeypatch.setenv("MLLM_QUICK", "0")
    monkeypatch.delenv("MLLM_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "Tesla T4")
    mllm_utils.start("1 minute on a 2-core CPU", "2 hours on a 2-core CPU", gpu_time="an estimated 5 minutes on a "
                     "T4 GPU", full_does="trains a model", afterwards="later sections sample it")  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("Expected time on this GPU, Tesla T4: an estimated 5 minutes on a T4 GPU" if gpu else
                        "Expected time: 2 hours on a 2-core CPU; with a GPU, an estimated 5 minutes on a T4 GPU")
    assert lines[2] == "It trains a model; later sections sample it."


def test_start_on_a_gpu_for_a_notebook_that_stays_on_the_cpu(monkeypatch, capsys):
    monkeypatch.delenv("MLLM_QUICK", raising=False)
    monkeypatch.delenv("MLLM_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "Tesla T4")
    mllm_utils.start("10 s on a 2-core CPU", "2 minutes on a 2-core CPU", full_does="trains longer")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Run size: full (a GPU was found: Tesla T4), seed 0"
    assert lines[1] == "Expected time: 2 minutes on a 2-core CPU, on the CPU even where there is a GPU"


def test_start_rejects_a_gpu_time_that_says_not_how_it_was_found():
    with pytest.raises(ValueError, match="measured or estimated"):
        mllm_utils.start("1 minute on a CPU", "1 hour on a CPU", gpu_time="5 minutes on a T4 GPU")
    with pytest.raises(ValueError, match="give full_time too"):
        mllm_utils.start("1 minute on a CPU", full_does="trains")


def test_smoke_runs_the_full_size_with_capped_loops(monkeypatch, capsys):
    monkeypatch.setenv("MLLM_SMOKE", "1")
    monkeypatch.setenv("MLLM_QUICK", "0")
    assert runtime.smoke() and runtime.run_size() == "full"
    assert runtime.smoke_cap(200_000) == runtime.SMOKE_STEPS and runtime.smoke_cap(1) == 1
    mllm_utils.start("1 minute on a CPU", "1 hour on a CPU")
    assert "MLLM_SMOKE=1: a smoke test" in capsys.readouterr().out.splitlines()[0]
    monkeypatch.setenv("MLLM_QUICK", "1")
    with pytest.raises(ValueError, match="cannot go with MLLM_QUICK=1"):
        runtime.run_size()
    monkeypatch.setenv("MLLM_SMOKE", "0")
    assert not runtime.smoke() and runtime.smoke_cap(200_000) == 200_000
    monkeypatch.setenv("MLLM_SMOKE", "yes")
    with pytest.raises(ValueError, match="MLLM_SMOKE=1 for the smoke test"):
        runtime.smoke()


def test_model_device_and_wide_float():
    assert runtime.model_device(torch.nn.Linear(2, 2).to("meta")).type == "meta"
    assert runtime.model_device(torch.nn.ReLU()).type == "cpu"
    assert runtime.wide_float("cpu") == torch.float64 and runtime.wide_float("mps") == torch.float32
    runtime.synchronize("cpu")  # nothing to wait for


# ---------------------------------------------------------------- times measured on one kind of GPU (issue 34)

MEASURED = {"H100": "about 2 minutes on an NVIDIA H100 GPU (measured)"}
ESTIMATE = "an estimated 2 to 15 minutes on a T4 GPU (scaled from the H100's measured time)"


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA H100 80GB HBM3", MEASURED["H100"]),  # the class that was measured: its measured time
    ("NVIDIA H100 PCIe", MEASURED["H100"]),
    ("Tesla T4", ESTIMATE),  # any other GPU: the estimate
    ("NVIDIA A100-SXM4-40GB", ESTIMATE),
])  # fmt: skip
def test_start_on_a_gpu_names_it_and_gives_the_measured_time_of_its_class(monkeypatch, capsys, name, expected):
    monkeypatch.setenv("MLLM_QUICK", "0")
    monkeypatch.delenv("MLLM_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: name)
    mllm_utils.start("1 minute on a 2-core CPU", "95 minutes on a 2-core CPU", gpu_time=ESTIMATE,
                     gpu_measured=MEASURED, full_does="trains a model")  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"Expected time on this GPU, {name}: {expected}"


def test_start_without_a_gpu_offers_the_measured_and_the_estimated_gpu_times(monkeypatch, capsys):
    monkeypatch.setenv("MLLM_QUICK", "1")
    monkeypatch.delenv("MLLM_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mllm_utils.start("1 minute on a 2-core CPU", "95 minutes on a 2-core CPU", gpu_time=ESTIMATE,
                     gpu_measured=MEASURED, full_does="trains a model")  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith(f"Full size: 95 minutes on a 2-core CPU; with a GPU, {MEASURED['H100']}, {ESTIMATE}; "
                               "it trains a model.")  # fmt: skip


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"gpu_measured": MEASURED}, ValueError, "give gpu_time too"),
    ({"gpu_time": ESTIMATE, "gpu_measured": {"H100": "2 minutes on an H100"}}, ValueError, "say that it was measured"),
    ({"gpu_time": ESTIMATE, "gpu_measured": {"H100": "2 minutes (measured"}}, ValueError, "one phrase"),
    ({"gpu_time": ESTIMATE, "gpu_measured": {}}, TypeError, "a dict from a part of a GPU's name"),
    ({"gpu_time": ESTIMATE, "gpu_measured": [("H100", "2 minutes, measured")]}, TypeError, "a dict"),
    ({"gpu_time": ESTIMATE, "gpu_measured": {"": "2 minutes, measured"}}, ValueError, "a key of gpu_measured"),
])  # fmt: skip
def test_start_rejects_measured_gpu_times_it_cannot_print(kwargs, error, match):
    with pytest.raises(error, match=match):
        mllm_utils.start("1 minute on a CPU", "1 hour on a CPU", **kwargs)


# ---------------------------------------------------------------- durations and counts in words (issue 34)


@pytest.mark.parametrize(("seconds", "words"), [
    # the H100's figures (the course's run of 2026-11-27): 10's training, 07's training and its epochs
    (38, "38 seconds"),
    (76, "1 minute 16 seconds"),
    (76 / 22, "3.5 seconds"),
    (84.4, "1 minute 24 seconds"),
    (1.27e9 / 914_593, "23 minutes"),  # the post's budget at 07's measured token-steps per second there
    # the CPU's: the shipped runs, an epoch of them, the post's budget at the shipped LSTM's pace
    (6_654, "111 minutes"),
    (109 * 60 / 22, "4 minutes 57 seconds"),
    (1.27e9 / 9_532, "37 hours"),
    (3 * 68 * 60, "3 hours 24 minutes"),
    # the edges: singular where the number is 1, a unit that never prints 0
    (0, "under 0.1 seconds"),
    (0.04, "under 0.1 seconds"),
    (0.06, "0.1 seconds"),
    (1.0, "1 second"),
    (1.04, "1 second"),
    (9.94, "9.9 seconds"),
    (9.96, "10 seconds"),
    (59.4, "59 seconds"),
    (59.6, "1 minute"),
    (61, "1 minute 1 second"),
    (599.4, "9 minutes 59 seconds"),
    (599.6, "10 minutes"),
    (60 * 119.4, "119 minutes"),
    (60 * 119.6, "2 hours"),
    (3600 + 7200, "3 hours"),
    (7200 + 60, "2 hours 1 minute"),
    (36_000, "10 hours"),
    (3600 * 24 * 3, "72 hours"),
])  # fmt: skip
def test_format_duration_reads_right_at_any_speed(seconds, words):
    assert runtime.format_duration(seconds) == words


def test_format_duration_never_prints_a_zero_or_a_wrong_plural():
    # Every duration from a millisecond to two days, on a logarithmic grid: the number before each unit is at
    # least 1 (or the phrase says "under 0.1"), a unit after exactly 1 is singular, any other is plural.
    for seconds in np.geomspace(1e-3, 2 * 86_400, 4_000):
        words = runtime.format_duration(float(seconds))
        assert not re.search(r"(^|\s)0(\.0)?\s", words), words
        assert not re.search(r"(^|\s)1 (seconds|minutes|hours)\b", words), words
        assert not re.search(r"(^|\s)(?!1 )[\d.,]+ (second|minute|hour)\b(?!s)", words), words
        assert words.endswith(("second", "seconds", "minute", "minutes", "hour", "hours")), words


@pytest.mark.parametrize(("bad", "error"), [(-1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                            (True, TypeError), ("38", TypeError), (None, TypeError)])  # fmt: skip
def test_format_duration_refuses_what_is_not_a_duration(bad, error):
    with pytest.raises(error, match="seconds must be a finite number >= 0"):
        runtime.format_duration(bad)


def test_plural_agrees_with_its_count():
    assert runtime.plural(1, "epoch") == "1 epoch"
    assert runtime.plural(22, "epoch") == "22 epochs"
    assert runtime.plural(0, "epoch") == "0 epochs"
    assert runtime.plural(3000, "step") == "3,000 steps"
    assert runtime.plural(6802, "step") == "6,802 steps"
    assert runtime.plural(2, "batch", "batches") == "2 batches" and runtime.plural(1, "batch", "batches") == "1 batch"
    with pytest.raises(TypeError, match="count must be an int"):
        runtime.plural(1.0, "epoch")
    with pytest.raises(ValueError, match="noun"):
        runtime.plural(2, "")
