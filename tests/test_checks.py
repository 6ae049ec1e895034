"""The exercise checkers: right answers of every kind pass, wrong ones fail with expected / got / hint."""

import numpy as np
import pytest
import torch

from mllm_utils import checks
from mllm_utils.checks import CheckFailed


@pytest.mark.parametrize(
    "got, expected",
    [
        (torch.tensor([1, 2]), torch.tensor([1, 2])),  # two equal tensors (once an "ambiguous" error)
        (torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0, 2.0]])),
        (np.arange(3), np.arange(3)),
        ([1, 2], [1, 2]),
        ((1, 2), (1, 2)),
        (torch.Size([1, 2]), (1, 2)),
        (["a", "b"], ["a", "b"]),
        ({"x": torch.tensor([1])}, {"x": torch.tensor([1])}),
        ([torch.tensor(1), torch.tensor(2)], [torch.tensor(1), torch.tensor(2)]),
        (3, 3),
        (np.int64(3), 3),
        (2, 2.0),  # an int where a float is expected
        (True, True),
        ("cat", "cat"),
    ],
)
def test_check_equal_passes_equal_values_of_the_same_kind(got, expected, capsys):
    checks.check_equal("value", got, expected)
    assert capsys.readouterr().out == "value: ok\n"


@pytest.mark.parametrize(
    "got, expected, fragment",
    [
        (["b"], ["a"], "expected: ['a']"),
        (torch.tensor([1, 2]), torch.tensor([1, 2, 3]), "shape (2,), expected (3,)"),
        (torch.tensor([1, 2]), torch.tensor([1, 3]), "got:      tensor([1, 2]"),
        (None, [1, 2], "does the function end with `return"),
        ([1, 2], "12", "the result is a list, expected a str"),
        ({"x": 1}, {"y": 1}, "expected: {'y': 1}"),
    ],
)
def test_check_equal_fails_with_expected_and_got(got, expected, fragment):
    with pytest.raises(CheckFailed) as caught:
        checks.check_equal("value", got, expected, hint="look again")
    message = str(caught.value)
    assert message.startswith("value: ") and "expected:" in message and "got:" in message
    assert fragment in message


@pytest.mark.parametrize(
    "got, expected, fragment",
    [
        ((1, 2), [1, 2], "the result is a tuple, expected a list"),
        ([1, 2], (1, 2), "the result is a list, expected a tuple"),
        (16640.0, 16640, "the result is a float, expected an int"),
        ([3, 4.0], [3, 4], "the result[1] is a float, expected an int"),
        (1, True, "the result is an int, expected a bool"),
        (torch.tensor([1.0, 2.0]), torch.tensor([1, 2]), "a tensor of torch.float32, expected a tensor of torch.int64"),
        ([torch.tensor(1), torch.tensor(2)], torch.tensor([1, 2]), "the result is a list, expected a tensor"),
        (torch.tensor([1, 2]), [1, 2], "the result is a tensor of torch.int64, expected a list"),
        (np.arange(2), torch.arange(2), "the result is an array of int64, expected a tensor"),
        ({"x": 1.5}, {"x": 1}, "the result['x'] is a float, expected an int"),
    ],
)
def test_check_equal_names_a_value_of_another_kind(got, expected, fragment):
    """Values equal as numbers but of another kind fail, and the message says which part differs."""
    with pytest.raises(CheckFailed) as caught:
        checks.check_equal("value", got, expected)
    assert "not the expected kind of value" in str(caught.value) and fragment in str(caught.value)


def test_check_failed_is_an_assertion_error():
    """nbgrader and pytest count an AssertionError as a failed test, not as a crash."""
    assert issubclass(CheckFailed, AssertionError)


@pytest.mark.parametrize("got", [torch.zeros(2, 3), np.zeros((2, 3)), [[0, 0, 0], [0, 0, 0]]])
def test_check_shape_accepts_tensors_arrays_and_lists(got, capsys):
    checks.check_shape("x", got, (2, None))
    assert "x: shape (2, 3) ok" in capsys.readouterr().out


@pytest.mark.parametrize(
    "got, shape, fragment",
    [
        (torch.zeros(2, 3), (3, 3), "expected: (3, 3)"),
        (torch.zeros(2, 3), (2, 3, 1), "2 dimensions, not 3"),
        (None, (2,), "does the function end with `return"),
        (5, (2,), "has no shape"),
        ([[1], [2, 3]], (2,), "has no shape"),
    ],
)
def test_check_shape_fails_clearly(got, shape, fragment):
    with pytest.raises(CheckFailed, match="expected") as caught:
        checks.check_shape("x", got, shape)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    "got, expected",
    [
        (torch.tensor([1.0, 2.0]), [1.0, 2.0 + 1e-7]),
        (np.array([0.5]), torch.tensor([0.5])),
        (2, 2.0),
        (torch.tensor(3.0, dtype=torch.float16), 3.0),
        ([], []),
    ],
)
def test_check_close_passes(got, expected, capsys):
    checks.check_close("y", got, expected)
    assert capsys.readouterr().out.startswith("y: matches")


@pytest.mark.parametrize(
    "got, expected, fragment",
    [
        (torch.tensor([1.0, 2.5]), [1.0, 2.0], "largest difference 0.5 at index (1,)"),
        (torch.zeros(3), torch.zeros(2), "wrong shape"),
        (None, 1.0, "does the function end with `return"),
        ("1.0", 1.0, "not made of numbers"),
        ([[1.0], [2.0, 3.0]], [1.0], "cannot be read as an array"),
        (torch.tensor([float("nan")]), [1.0], "nan or inf"),
        (True, 1.0, "not made of numbers"),
    ],
)
def test_check_close_fails_clearly(got, expected, fragment):
    with pytest.raises(CheckFailed) as caught:
        checks.check_close("y", got, expected)
    assert fragment in str(caught.value)


def test_hints_reach_the_message():
    with pytest.raises(CheckFailed, match="hint: divide by the square root"):
        checks.check_close("scores", [2.0], [1.0], hint="divide by the square root of d_head")


def test_check_true(capsys):
    checks.check_true("accuracy", 0.95 >= 0.9, expected="at least 0.9", got=0.95)
    assert capsys.readouterr().out == "accuracy: ok (0.95, at least 0.9)\n"
    checks.check_true("equal", torch.tensor(True), expected="true", got=1)
    with pytest.raises(CheckFailed, match="expected: at least 0.9\n  got:      0.5\n  hint: train longer"):
        checks.check_true("accuracy", 0.5 >= 0.9, expected="at least 0.9", got=0.5, hint="train longer")
    with pytest.raises(TypeError, match="condition must be a boolean"):
        checks.check_true("accuracy", 0.5, expected="at least 0.9", got=0.5)


def test_torch_calls_records_functions_and_methods():
    x = torch.randn(3, 4)
    with checks.torch_calls() as names:
        torch.nn.functional.log_softmax(x, dim=-1)
        x.exp().sum()
    assert "log_softmax" in names and "exp" in names and "sum" in names
    with checks.torch_calls() as names:
        pass
    assert names == []


# ---------------------------------------------------------------- answers that try to decide their own check


class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class ZeroSubtraction(torch.Tensor):
    """A tensor whose subtraction gives zeros: any difference from the expected value would vanish."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.sub, torch.Tensor.sub, torch.Tensor.__sub__):
            return torch.zeros(())
        return super().__torch_function__(func, types, args, kwargs or {})


class ListThatEqualsAnything(list):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("got", [AlwaysEqual(), [AlwaysEqual()], {"a": AlwaysEqual()}, ListThatEqualsAnything([0]),
                                 np.array([AlwaysEqual()], dtype=object)])
def test_check_equal_refuses_values_that_decide_their_own_equality(got):
    with pytest.raises(checks.CheckFailed, match="cannot compare|not the expected value"):
        checks.check_equal("value", got, [1, 2])


def test_check_close_refuses_a_tensor_subclass():
    wrong = torch.tensor([9.0, 9.0]).as_subclass(ZeroSubtraction)
    with pytest.raises(checks.CheckFailed, match="ZeroSubtraction object"):
        checks.check_close("value", wrong, [1.0, 2.0])
    with pytest.raises(checks.CheckFailed):
        checks.check_shape("value", wrong, (2,))


def test_an_active_torch_function_mode_does_not_change_a_check():
    from torch.overrides import TorchFunctionMode

    class Zero(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            return torch.zeros_like(result) if isinstance(result, torch.Tensor) else result

    got, expected = torch.tensor([9.0, 9.0]), torch.tensor([1.0, 2.0])
    with Zero(), pytest.raises(checks.CheckFailed, match="largest difference"):
        checks.check_close("value", got, expected)


@pytest.mark.parametrize("shape", [2, "2", (2.0,), None])
def test_check_shape_says_what_a_shape_is(shape):
    with pytest.raises(TypeError, match=r"check_shape: shape must be a tuple of ints .* got"):
        checks.check_shape("x", torch.zeros(2), shape)


@pytest.mark.parametrize("got, expected", [(torch.bool, torch.bool), (torch.zeros(2, 3).shape, (2, 3)),
                                           (torch.device("cpu"), torch.device("cpu"))])
def test_check_equal_compares_torch_s_own_plain_values(got, expected, capsys):
    checks.check_equal("value", got, expected)
    assert capsys.readouterr().out == "value: ok\n"
    with pytest.raises(checks.CheckFailed):
        checks.check_equal("value", got, [9])


def test_module_calls_records_each_call_s_input_shape_and_with_grad_whether_autograd_recorded():
    layer = torch.nn.Linear(3, 2)
    with checks.module_calls(layer) as shapes:
        layer(torch.zeros(4, 3))
    with checks.module_calls(layer, grad=True) as calls:
        layer(torch.zeros(1, 3))
        with torch.no_grad():
            layer(torch.zeros(2, 3))
        with torch.inference_mode():
            layer(torch.zeros(5, 3))
    assert shapes == [(4, 3)]
    assert calls == [((1, 3), True), ((2, 3), False), ((5, 3), False)]
    layer(torch.zeros(1, 3))  # after the block: not recorded
    assert len(calls) == 3
    with pytest.raises(TypeError, match="grad must be True or False"):
        checks.module_calls(layer, grad="yes")
