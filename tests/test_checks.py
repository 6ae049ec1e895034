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


def test_hints_reach_the_message_as_things_to_check_after_where_the_values_differ():
    with pytest.raises(CheckFailed) as caught:
        checks.check_close("scores", [2.0], [1.0], hint="divide by the square root of d_head")
    assert str(caught.value).endswith("  first differs: at index (0,): expected 1, got 2\n"
                                      "  things to check: divide by the square root of d_head")


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


# Diagnosis: known mistakes named, the first difference shown, errors inside an answer reported as a check.

def _failure(check, *args, **kwargs) -> CheckFailed:
    with pytest.raises(CheckFailed) as caught:
        check(*args, **kwargs)
    return caught.value


MASK = torch.ones(4, 4, dtype=torch.bool).triu(1)
MISTAKES = {"the mask is inverted: True must mark a blocked key": ~MASK,
            "keeps the past instead of the future (tril for triu)": MASK.T}


@pytest.mark.parametrize("wrong, named", [(~MASK, "the mask is inverted"), (MASK.T, "keeps the past")])
def test_a_known_mistake_is_named_in_one_line_and_no_hint_comes_with_it(wrong, named):
    error = _failure(checks.check_equal, "mask", wrong, MASK, hint="the softmax's axis", mistakes=MISTAKES)
    first = str(error).splitlines()[0]
    assert first.startswith("mask: this is what a known mistake gives: ") and named in first
    assert "softmax" not in str(error) and "things to check" not in str(error)
    others = [label for label in MISTAKES if named not in label]
    assert not any(label in str(error) for label in others), "a mistake the answer did not make is named"
    assert error.parts["mistake"].startswith(named) and error.parts["hint"] == ""


def test_no_mistake_matched_says_where_the_values_first_differ_and_names_none():
    wrong = MASK.clone()
    wrong[2, 3] = False  # a mistake no entry describes
    error = _failure(checks.check_equal, "mask", wrong, MASK, hint="compare with pad_id", mistakes=MISTAKES)
    text = str(error)
    assert "first differs: at index (2, 3): expected True, got False (1 of 16 entries differ)" in text
    assert "things to check: compare with pad_id" in text
    assert not any(label in text for label in MISTAKES)
    assert error.parts["mistake"] == "" and error.parts["where"].startswith("at index (2, 3)")


def test_mistakes_are_computed_only_when_the_answer_fails(capsys):
    def never():
        raise AssertionError("computed for a right answer")

    checks.check_equal("mask", MASK.clone(), MASK, mistakes={"never": never})
    checks.check_close("x", [1.0], [1.0], mistakes={"never": never})
    error = _failure(checks.check_close, "x", [3.0], [1.0],
                     mistakes={"doubled": lambda: [2.0], "tripled": lambda: [3.0]})
    assert "known mistake gives: tripled" in str(error) and "doubled" not in str(error)


def test_check_close_matches_a_mistake_with_its_own_tolerance():
    expected = torch.linspace(0, 1, 50)
    mistake = expected * 2
    error = _failure(checks.check_close, "p", mistake + 1e-7, expected, atol=1e-5, mistakes={"doubled": mistake})
    assert "known mistake gives: doubled" in str(error)
    error = _failure(checks.check_close, "p", mistake + 1e-2, expected, atol=1e-5, mistakes={"doubled": mistake})
    assert "doubled" not in str(error) and "first differs: at index (0,)" in str(error)


def test_a_mistake_of_another_shape_is_named_where_the_shape_is_wrong():
    expected = torch.zeros(3, 1, 4)
    error = _failure(checks.check_close, "out", torch.zeros(3, 4), expected,
                     mistakes={"squeezes away the size-1 axis": torch.zeros(3, 4)}, hint="keep every axis")
    assert str(error).splitlines()[0] == "out: wrong shape: squeezes away the size-1 axis"
    assert "keep every axis" not in str(error)


def test_a_mistake_that_gives_the_right_value_on_this_case_is_never_named():
    error = _failure(checks.check_equal, "n", 5, 4, mistakes={"gives 4 too": 4, "off by one": 5})
    assert "off by one" in str(error) and "gives 4 too" not in str(error)


def test_mistakes_must_be_a_dict_of_lines():
    with pytest.raises(TypeError, match="mistakes must be a dict"):
        checks.check_equal("n", 5, 4, mistakes=[5])


@pytest.mark.parametrize("got, expected, where", [
    (torch.arange(100).flip(0), torch.arange(100), "at index (0,): expected 0, got 99 (100 of 100 entries differ)"),
    (np.eye(3), np.zeros((3, 3)), "at index (0, 0): expected 0, got 1 (3 of 9 entries differ)"),
    ([1, 2, [3, 4]], [1, 2, [3, 5]], "at [2][1]: expected 5, got 4"),
    ([1, 2], [1, 2, 3], "the result has 2 items, expected 3"),
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}, "the result lacks the keys ['c'] and has the extra keys ['b']"),
    ([torch.tensor([1, 2])], [torch.tensor([1, 3])], "[0] at index (1,): expected 3, got 2"),
])
def test_check_equal_says_where_the_values_first_differ(got, expected, where):
    assert f"first differs: {where}" in str(_failure(checks.check_equal, "v", got, expected))


def test_a_large_tensor_is_described_by_its_first_values_too():
    """Expected and got of more than 8 entries no longer read the same."""
    error = _failure(checks.check_equal, "ids", torch.arange(100).flip(0), torch.arange(100))
    expected_line, got_line = str(error).splitlines()[1:3]
    assert expected_line.endswith("a tensor of shape (100,), dtype torch.int64, first values [0, 1, 2, 3, 4, 5, ...]")
    assert got_line.endswith("first values [99, 98, 97, 96, 95, 94, ...]")


def test_check_close_says_where_nan_first_appears():
    got = torch.ones(10)
    got[4] = float("nan")
    error = _failure(checks.check_close, "p", got, torch.ones(10))
    assert "first differs: at index (4,): expected 1, got nan (1 of 10 entries differ)" in str(error)


def _concatenates_on_the_wrong_axis(cache, new):
    keys = torch.cat([cache, new], dim=2)
    return keys


def test_attempt_reports_an_error_inside_the_answer_with_the_learner_s_line():
    error = _failure(checks.attempt, "head_step", _concatenates_on_the_wrong_axis, torch.zeros(1, 2, 4),
                     torch.zeros(1, 1, 3))
    lines = str(error).splitlines()
    assert lines[0].startswith("head_step: raised RuntimeError: Sizes of tensors must match")
    assert lines[1] == "  expected: a result, without an error"
    line = _concatenates_on_the_wrong_axis.__code__.co_firstlineno + 1
    assert lines[2] == (f"  where:    line {line}, in _concatenates_on_the_wrong_axis: "
                        "keys = torch.cat([cache, new], dim=2)")
    assert lines[3] == "  shapes:   cache (1, 2, 4), new (1, 1, 3)"
    assert "Traceback" not in str(error) and error.__suppress_context__
    assert error.parts["where"].endswith("dim=2) (shapes: cache (1, 2, 4), new (1, 1, 3))")


def test_attempt_returns_the_result_and_lets_not_done_and_failed_checks_through():
    assert checks.attempt("add", lambda a, b=0: a + b, 1, b=2) == 3

    def not_done():
        raise checks.NotDone(2, "head_step")

    with pytest.raises(checks.NotDone, match="exercise 2 is not done yet"):
        checks.attempt("head_step", not_done)
    with pytest.raises(CheckFailed, match="^inner$"):
        checks.attempt("f", lambda: (_ for _ in ()).throw(CheckFailed("inner")))


def test_attempt_lets_the_grader_s_own_errors_through():
    """In the teacher's grader the learner's function runs in another process; what the grader raises for it
    (marked ``mllm_student``) it reports itself."""
    from mllm_classroom.worker import raised_here

    def remote():
        raise raised_here("RuntimeError", "head_step", 2)

    with pytest.raises(RuntimeError, match="raised by head_step") as caught:
        checks.attempt("head_step", remote)
    assert caught.value.mllm_student == {"type": "RuntimeError", "function": "head_step"}
