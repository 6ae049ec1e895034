import pytest
import torch

from mllm_utils import checks


def test_check_shape(capsys):
    checks.check_shape("x", torch.zeros(2, 3), (2, None))
    assert "x: shape (2, 3) ok" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"expected shape \(3, 3\), got \(2, 3\)"):
        checks.check_shape("x", torch.zeros(2, 3), (3, 3))
    with pytest.raises(AssertionError):
        checks.check_shape("x", torch.zeros(2, 3), (2, 3, 1))


def test_check_close_reports_the_difference(capsys):
    checks.check_close("y", torch.tensor([1.0, 2.0]), [1.0, 2.0 + 1e-7])
    assert "y: matches" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="largest difference 0.5"):
        checks.check_close("y", torch.tensor([1.0, 2.5]), [1.0, 2.0])
    with pytest.raises(AssertionError, match="expected shape"):
        checks.check_close("y", torch.zeros(3), torch.zeros(2))


def test_check_equal():
    checks.check_equal("tokens", ["a", "b"], ["a", "b"])
    with pytest.raises(AssertionError, match="expected \\['a'\\], got \\['b'\\]"):
        checks.check_equal("tokens", ["b"], ["a"])
