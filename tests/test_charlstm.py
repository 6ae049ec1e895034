"""The LSTM of notebook 07 (mllm_utils.charlstm) and the pieces its training shares (mllm_utils.chartrain)."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

from mllm_utils import charcli, chardata, charlstm, chartrain, checkpoints

ROOT = Path(__file__).resolve().parent.parent

SMALL_TEXT = (
    "Well, Prince, so Genoa and Lucca are now just family estates.\r\n\r\n"
    "If you don't tell me that this means war,  I will--\n"
    "\u201cHow are you?\u201d said he; 1805!\n"
) * 20


# ----------------------------------------------------------------- model


def test_model_shapes_and_carried_state_equals_one_pass():
    torch.manual_seed(0)
    model = charlstm.CharLSTM(vocab_size=11, embed_dim=4, hidden_dim=8, num_layers=2).eval()
    x = torch.randint(11, (3, 10))
    logits, (h, c) = model(x)
    assert logits.shape == (3, 10, 11) and h.shape == (2, 3, 8) and c.shape == (2, 3, 8)
    first, state = model(x[:, :6])
    second, _ = model(x[:, 6:], state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), logits)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_one_character_steps_equal_the_lstm_pass(dropout):
    """forward with T == 1 goes through step(): it must match nn.LSTM on the same text."""
    torch.manual_seed(0)
    model = charlstm.CharLSTM(vocab_size=11, embed_dim=4, hidden_dim=8, num_layers=3, dropout=dropout).eval()
    x = torch.randint(11, (2, 7))
    logits, (h, c) = model(x)  # nn.LSTM over the whole sequence
    state, stepped = None, []
    for t in range(7):
        out, state = model(x[:, t : t + 1], state)
        assert out.shape == (2, 1, 11)
        stepped.append(out)
    torch.testing.assert_close(torch.cat(stepped, dim=1), logits)
    torch.testing.assert_close(state[0], h)
    torch.testing.assert_close(state[1], c)
    assert model.step(x[:, 0])[0].shape == (2, 11)


def test_one_character_step_applies_dropout_only_in_training():
    torch.manual_seed(0)
    model = charlstm.CharLSTM(vocab_size=11, embed_dim=4, hidden_dim=8, num_layers=2, dropout=0.9)
    x = torch.randint(11, (64, 1))
    model.train()
    a, b = model(x)[0], model(x)[0]
    assert not torch.equal(a, b)  # dropout between the layers draws new masks
    model.eval()
    torch.testing.assert_close(model(x)[0], model(x)[0])


def test_default_sizes_are_the_posts():
    model = charlstm.CharLSTM(vocab_size=70)
    assert (model.embedding.embedding_dim, model.lstm.hidden_size, model.lstm.num_layers) == (32, 128, 4)
    assert model.lstm.batch_first


def test_token_ids_outside_the_vocabulary_and_bad_states_are_clear_errors():
    model = charlstm.CharLSTM(vocab_size=5, embed_dim=4, hidden_dim=8, num_layers=2)
    with pytest.raises(ValueError, match=r"x holds token ids from 0 to 7, but the vocabulary has 5 entries"):
        model(torch.tensor([[0, 7]]))
    with pytest.raises(ValueError, match="x holds token ids from -1"):
        model.step(torch.tensor([-1]))
    _, state = model(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match=r"state must be the \(h, c\) pair .*\(2, 3, 8\)"):
        model(torch.tensor([[1], [2], [3]]), state)


def test_lr_schedule_warms_up_then_decays():
    lrs = [chartrain.lr_at(s, 100, 1e-2, 1e-4, 10) for s in range(101)]
    assert lrs[0] == pytest.approx(1e-3) and max(lrs) == pytest.approx(1e-2)
    assert lrs[-1] == pytest.approx(1e-4)
    assert all(a >= b for a, b in zip(lrs[10:-1], lrs[11:], strict=True))


# ----------------------------------------------------------------- training and evaluation


def _tiny_run(tmp_path, epochs, **kwargs):
    torch.manual_seed(0)
    itos, train, val = chardata.prepare(SMALL_TEXT)
    model = charlstm.CharLSTM(len(itos), embed_dim=8, hidden_dim=16, num_layers=2)
    kwargs.setdefault("log", lambda *_: None)
    return charlstm.train(
        model, train, val, itos, tmp_path / "m.pt", epochs=epochs, batch_size=4, seq_len=16,
        warmup=2, val_seq_len=16, **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize("carry_state", [False, True])
def test_training_lowers_the_loss_and_resumes(tmp_path, carry_state):
    first = _tiny_run(tmp_path, epochs=2, carry_state=carry_state)
    assert first["epoch"] == 2 and len(first["history"]["val"]) == 2
    assert first["history"]["val"][-1] < first["history"]["val"][0]
    history = json.loads((tmp_path / "m.losses.json").read_text(encoding="utf-8"))
    assert history["val"] == first["history"]["val"]
    resumed = _tiny_run(tmp_path, epochs=3, carry_state=carry_state)
    assert resumed["epoch"] == 3 and resumed["history"]["val"][:2] == first["history"]["val"]
    assert resumed["token_steps"] > first["token_steps"] == first["history"]["token_steps"][-1]
    model, itos, checkpoint = charlstm.load_model(tmp_path / "m.pt")
    assert not model.training and itos == checkpoint["itos"] and checkpoint["epoch"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.losses.json", "m.pt"]  # nothing left behind


def test_resuming_from_weights_only_starts_a_fresh_optimizer(tmp_path):
    """The shipped checkpoint has no optimizer state; training on from it must still work."""
    first = _tiny_run(tmp_path, epochs=1)
    checkpoints.save_checkpoint({k: v for k, v in first.items() if k != "optimizer"}, tmp_path / "m.pt")
    messages = []
    resumed = _tiny_run(tmp_path, epochs=2, log=messages.append)
    assert resumed["epoch"] == 2 and "optimizer" in resumed
    assert any("no optimizer state" in m for m in messages)


def test_resuming_says_which_settings_come_from_the_checkpoint(tmp_path):
    _tiny_run(tmp_path, epochs=1)
    messages = []
    resumed = _tiny_run(tmp_path, epochs=1, lr=1e-2, log=messages.append)
    assert resumed["epoch"] == 1 and resumed["train_config"]["lr"] == 3e-3
    assert any("checkpoint's settings: lr 0.003 instead of 0.01" in m for m in messages)
    assert any("nothing to train: epochs=1 counts from the start, and 1 are done" in m for m in messages)


def test_resume_with_another_model_size_is_refused(tmp_path):
    _tiny_run(tmp_path, epochs=1)
    itos, train, val = chardata.prepare(SMALL_TEXT)
    other = charlstm.CharLSTM(len(itos), embed_dim=8, hidden_dim=32, num_layers=2)
    with pytest.raises(ValueError, match="another vocabulary or model size"):
        charlstm.train(other, train, val, itos, tmp_path / "m.pt", epochs=2, log=lambda *_: None)


def test_a_text_too_short_for_one_batch_is_refused_before_training(tmp_path):
    itos, train, val = chardata.prepare(SMALL_TEXT)
    model = charlstm.CharLSTM(len(itos), embed_dim=4, hidden_dim=8, num_layers=1)
    with pytest.raises(ValueError, match="too short for one batch of 500 windows of 16"):
        charlstm.train(model, train, val, itos, tmp_path / "m.pt", epochs=1, batch_size=500, seq_len=16)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["folder", "under a file"])
def test_a_checkpoint_path_that_cannot_be_written_is_refused_before_training(tmp_path, where):
    """A folder, or a path inside a file, used to fail only when the first epoch saved."""
    itos, train, val = chardata.prepare(SMALL_TEXT)
    model = charlstm.CharLSTM(len(itos), embed_dim=4, hidden_dim=8, num_layers=1)
    (tmp_path / "run.pt").write_bytes(b"a file")
    path, error = ((tmp_path, IsADirectoryError) if where == "folder"
                   else (tmp_path / "run.pt" / "m.pt", NotADirectoryError))  # fmt: skip
    steps = []
    with pytest.raises(error, match="checkpoint_path="):
        charlstm.train(model, train, val, itos, path, epochs=1, batch_size=4, seq_len=16, log=steps.append)
    assert steps == [] and sorted(p.name for p in tmp_path.iterdir()) == ["run.pt"]


def test_train_step_refuses_a_diverged_loss():
    model = charlstm.CharLSTM(3, embed_dim=2, hidden_dim=2, num_layers=1)
    with torch.no_grad():
        model.head.bias.fill_(math.inf)
    optimizer = torch.optim.Adam(model.parameters())
    with pytest.raises(FloatingPointError, match="the loss became nan at step 7: lower the learning rate"):
        chartrain.train_step(model, optimizer, torch.tensor([[1, 2]]), torch.tensor([[2, 1]]), 1e-3, 1.0,
                             where=" at step 7")  # fmt: skip


def test_evaluate_protocols():
    torch.manual_seed(0)
    model = charlstm.CharLSTM(vocab_size=5, embed_dim=4, hidden_dim=8, num_layers=1)
    data = torch.randint(5, (500,))
    fresh = chartrain.evaluate(model, data, seq_len=20, batch_size=7)
    carried = chartrain.evaluate(model, data, seq_len=20, batch_size=7, carry_state=True)
    # an untrained model's loss is near log(5) either way
    assert abs(fresh - torch.log(torch.tensor(5.0)).item()) < 0.3
    assert abs(carried - fresh) < 0.2
    assert model.training  # evaluate restored the mode
    assert chartrain.evaluate(model, data, seq_len=20, max_tokens=40) == chartrain.evaluate(model, data[:41], 20)
    with pytest.raises(ValueError, match=r"data has 11 tokens \(the first max_tokens=10 \+ 1\).*seq_len=20"):
        chartrain.evaluate(model, data, seq_len=20, max_tokens=10)


def test_the_shipped_checkpoint_loads_and_is_small():
    path = charlstm.shipped_checkpoint_path()
    assert path.stat().st_size < 20_000_000
    model, itos, checkpoint = charlstm.load_model()
    assert "optimizer" not in checkpoint  # shipped for inference only
    assert itos == chardata.prepare()[0]  # the vocabulary of today's data
    assert model.config["vocab_size"] == len(itos)


def test_every_name_the_notebooks_use_is_there():
    """Notebooks 07 and 10 call the character modules by name; each name they use exists there."""
    modules = {"chardata": chardata, "checkpoints": checkpoints, "chartrain": chartrain, "charlstm": charlstm,
               "charcli": charcli}  # fmt: skip
    used = {name: set() for name in modules}
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        source = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"])
        for name in used:
            used[name] |= set(re.findall(rf"\b{name}\.([A-Za-z_]\w*)", source))
    assert used["chardata"] and used["charlstm"], "notebooks 07 and 10 no longer use the character modules?"
    missing = [f"{m}.{name}" for m, names in used.items() for name in sorted(names) if not hasattr(modules[m], name)]
    assert missing == []
