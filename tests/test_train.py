"""The shared training loop: it learns, it records, it refuses what it cannot do."""

import math

import matplotlib
import pytest
import torch

from mllm_utils.train import Batches, evaluate, plot_losses, train

matplotlib.use("Agg")


def toy_problem(n=256, seed=0):
    """Two well separated classes in 2-D."""
    g = torch.Generator().manual_seed(seed)
    Y = torch.randint(0, 2, (n,), generator=g)
    X = torch.randn(n, 2, generator=g) + 3.0 * (2 * Y[:, None] - 1)
    return X, Y


def test_train_learns_and_records_every_step_and_epoch():
    torch.manual_seed(0)
    X, Y = toy_problem()
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = Batches(X, Y, batch_size=50)
    before = evaluate(model, torch.nn.functional.cross_entropy, [(X, Y)])
    history = train(
        model, torch.nn.functional.cross_entropy, optimizer, batches, epochs=3, val_batches=[(X, Y)]
    )
    assert len(history["train"]) == len(history["val"]) == 3
    assert len(history["step"]) == 3 * len(batches) == 3 * 6
    assert history["val"][-1] < before / 4
    assert history["train"][-1] < history["train"][0]
    assert model.training  # left in training mode after the last validation


def test_scheduler_steps_after_every_optimizer_step():
    X, Y = toy_problem(40)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    batches = Batches(X, Y, batch_size=10)  # 4 steps per epoch
    total = 2 * len(batches)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / total)
    train(model, torch.nn.functional.cross_entropy, optimizer, batches, epochs=2, scheduler=scheduler)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_evaluate_weights_batches_by_size_and_restores_the_mode():
    X, Y = toy_problem(30)
    model = torch.nn.Linear(2, 2)
    model.train()
    loss = torch.nn.functional.cross_entropy
    batched = evaluate(model, loss, [(X[:20], Y[:20]), (X[20:], Y[20:])])
    assert batched == pytest.approx(loss(model(X), Y).item(), rel=1e-5)
    assert model.training
    model.eval()
    evaluate(model, loss, [(X, Y)])
    assert not model.training


class TinySequenceModel(torch.nn.Module):
    """Returns (B, T, V) logits and a second value, like an RNN with its hidden state."""

    def __init__(self, vocab_size=5):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, vocab_size)

    def forward(self, X):
        return self.embedding(X), None


def test_sequence_logits_and_a_custom_forward():
    X = torch.randint(0, 5, (8, 6), generator=torch.Generator().manual_seed(1))
    Y = (X + 1) % 5  # learn "next number"
    model = TinySequenceModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    history = train(
        model,
        torch.nn.functional.cross_entropy,
        optimizer,
        [(X, Y)],
        epochs=30,
        forward=lambda m, X: m(X)[0],
    )
    assert history["train"][-1] < 0.2 < history["train"][0]


def test_bad_arguments_and_failures_are_reported():
    X, Y = toy_problem(10)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        train(model, loss, optimizer, [(X, Y)], epochs=0)
    with pytest.raises(ValueError, match="no batches"):
        train(model, loss, optimizer, [], epochs=1)
    with pytest.raises(ValueError, match="no batches"):
        evaluate(model, loss, [])
    bad = [(torch.full((10, 2), math.inf), Y)]
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        train(model, loss, optimizer, bad, epochs=1)


def test_batches_cover_every_row_once_per_epoch_in_a_new_order():
    X = torch.arange(23)
    batches = Batches(X, X * 10, batch_size=5, seed=3)
    assert len(batches) == 5
    orders = []
    for _ in range(2):
        seen = [(x, y) for bx, by in batches for x, y in zip(bx.tolist(), by.tolist(), strict=True)]
        assert sorted(x for x, _ in seen) == list(range(23))
        assert all(y == 10 * x for x, y in seen)
        orders.append([x for x, _ in seen])
    assert orders[0] != orders[1]
    again = [bx.tolist() for bx, _ in Batches(X, X, batch_size=5, seed=3)]
    assert sum(again, []) == orders[0]  # same seed, same order
    assert [bx.tolist() for bx, _ in Batches(X, X, 10, shuffle=False)][-1] == [20, 21, 22]


def test_batches_refuse_bad_input():
    with pytest.raises(ValueError, match="same number of rows"):
        Batches(torch.zeros(3), torch.zeros(4), 2)
    with pytest.raises(ValueError, match="empty"):
        Batches(torch.zeros(0), torch.zeros(0), 2)
    with pytest.raises(ValueError, match="batch_size"):
        Batches(torch.zeros(3), torch.zeros(3), 0)


def test_plot_losses_draws_steps_epochs_and_validation():
    history = {"train": [2.0, 1.0], "val": [2.5, 1.5], "step": [3.0, 2.0, 1.5, 1.0]}
    ax = plot_losses(history, title="toy")
    assert [line.get_label() for line in ax.get_lines()] == [
        "train (step)",
        "train (epoch mean)",
        "validation",
    ]
    assert ax.get_lines()[0].get_xdata().tolist() == [0.5, 1.0, 1.5, 2.0]
    assert ax.get_title() == "toy"


def test_progress_bars_follow_tqdm_disable(monkeypatch):
    # tqdm.auto's notebook bar passes disable=False itself; TQDM_DISABLE=1 must still win.
    from mllm_utils.runtime import progress

    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress(range(3), desc="x", disable=False).disable
    monkeypatch.delenv("TQDM_DISABLE")
    bar = progress(range(3), desc="x", disable=False)
    assert not bar.disable
    bar.close()
