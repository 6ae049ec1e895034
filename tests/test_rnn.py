"""Tests for mllm_utils.rnn: the hand-written RNN and the toy sequence data sets."""

import pytest
import torch
from torch import nn

from mllm_utils.rnn import RNN, sequence_data


def copy_into_torch(ours: RNN) -> nn.RNN:
    ref = nn.RNN(ours.input_dim, ours.hidden_dim)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ours.w_ih)
        ref.weight_hh_l0.copy_(ours.w_hh)
        ref.bias_ih_l0.copy_(ours.b_ih)
        ref.bias_hh_l0.copy_(ours.b_hh)
    return ref


@pytest.mark.parametrize("batch", [None, 3])
def test_rnn_matches_torch(batch):
    torch.manual_seed(0)
    ours = RNN(5, 7)
    ref = copy_into_torch(ours)
    shape = (6, 5) if batch is None else (6, batch, 5)
    x = torch.randn(shape)
    h0 = torch.randn(7) if batch is None else torch.randn(batch, 7)
    with torch.no_grad():
        out, h = ours(x, h0)
        ref_out, ref_h = ref(x, h0[None])
    assert out.shape == ref_out.shape
    assert torch.allclose(out, ref_out, atol=1e-6)
    assert torch.allclose(h, ref_h[0], atol=1e-6)


def test_rnn_state_can_be_carried_across_calls():
    torch.manual_seed(1)
    ours = RNN(4, 3)
    x = torch.randn(8, 2, 4)
    with torch.no_grad():
        full, h_full = ours(x)
        first, h_first = ours(x[:5])
        rest, h_rest = ours(x[5:], h_first)
    assert torch.allclose(torch.cat([first, rest]), full, atol=1e-6)
    assert torch.allclose(h_rest, h_full, atol=1e-6)


def test_rnn_registers_its_weights_and_learns():
    torch.manual_seed(2)
    ours = RNN(3, 4)
    assert [name for name, _ in ours.named_parameters()] == ["w_ih", "w_hh", "b_ih", "b_hh"]
    bound = 1 / 4**0.5
    assert all(p.abs().max() <= bound for p in ours.parameters())
    out, _ = ours(torch.randn(5, 3))
    out.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in ours.parameters())


@pytest.mark.parametrize(
    "x_shape, h_shape, match",
    [
        ((6, 2, 4), None, r"x must have shape \(L, B, 5\)"),
        ((5,), None, "x must have shape"),
        ((6, 2, 5), (3, 7), r"h must have shape \(2, 7\)"),
        ((6, 5), (1, 7), r"h must have shape \(7,\)"),
    ],
)
def test_rnn_rejects_wrong_shapes(x_shape, h_shape, match):
    ours = RNN(5, 7)
    h = None if h_shape is None else torch.zeros(h_shape)
    with pytest.raises(ValueError, match=match):
        ours(torch.zeros(x_shape), h)


def test_rnn_rejects_bad_sizes():
    with pytest.raises(ValueError, match="must be positive"):
        RNN(0, 4)


def test_count_data():
    X, Y = sequence_data("count", seq_len=6, vocab_size=128)
    assert X.shape == (6, 122, 128) and Y.shape == (6, 122)
    assert X.dtype == torch.float32 and Y.dtype == torch.long
    assert torch.equal(X.sum(dim=-1), torch.ones(6, 122))  # one-hot
    numbers = X.argmax(dim=-1)
    assert numbers[:, 3].tolist() == [3, 4, 5, 6, 7, 8]
    assert torch.equal(Y, numbers + 1)
    assert Y.max().item() == 127


def test_first_element_data():
    X, Y = sequence_data("first", seq_len=4, vocab_size=10)
    assert X.shape == (4, 6, 10) and Y.shape == (4, 6)
    numbers = X.argmax(dim=-1)
    assert numbers[:, 5].tolist() == [5, 6, 7, 8]
    assert torch.equal(Y, numbers[0].expand(4, -1))



def test_data_follows_the_default_dtype():
    # Notebook 05 trains in double precision (torch.set_default_dtype(torch.float64)): the data must follow.
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        X, Y = sequence_data("first", seq_len=4, vocab_size=10)
        rnn = RNN(10, 3)
    finally:
        torch.set_default_dtype(before)
    assert X.dtype == torch.float64 and Y.dtype == torch.long
    assert rnn.w_hh.dtype == torch.float64
    out, h = rnn(X)
    assert out.dtype == torch.float64 and out.shape == (4, 6, 3)

@pytest.mark.parametrize(
    "task, seq_len, vocab_size, match",
    [
        ("next", 4, 10, "task must be one of"),
        ("count", 0, 10, "seq_len must be between 1 and vocab_size - 1 = 9"),
        ("first", 10, 10, "seq_len must be between 1 and vocab_size - 1 = 9"),
    ],
)
def test_sequence_data_rejects_bad_arguments(task, seq_len, vocab_size, match):
    with pytest.raises(ValueError, match=match):
        sequence_data(task, seq_len, vocab_size)
