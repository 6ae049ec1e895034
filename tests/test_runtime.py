import random

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
