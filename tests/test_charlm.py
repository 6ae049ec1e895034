"""The War and Peace character model (mllm_utils.charlm): data, batches, model, checkpoints, CLI."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from mllm_utils import charlm

ROOT = Path(__file__).resolve().parent.parent
SMALL_TEXT = (
    "Well, Prince, so Genoa and Lucca are now just family estates.\r\n\r\n"
    "If you don't tell me that this means war,  I will--\n"
    "\u201cHow are you?\u201d said he; 1805!\n"
) * 20


# ----------------------------------------------------------------- tokenizer, vocab, split


def test_tokenize_follows_the_post_rules():
    text = "Hello,\r\n\r\n  \u201cworld\u2019s\u201d   end!\nA-b; c? 1805\u20131812."
    assert "".join(charlm.tokenize(text)) == "Hello, worlds end! A-b; c? 18051812."


def test_tokenize_newlines_become_one_space_and_spaces_squeeze():
    assert charlm.tokenize("a\n\n\nb  \n c") == list("a b c")


def test_tokenize_rejects_non_strings():
    with pytest.raises(TypeError, match="takes a str"):
        charlm.tokenize(["a", "b"])


def test_vocab_encode_decode_round_trip():
    tokens = charlm.tokenize(SMALL_TEXT)
    itos = charlm.build_vocab(tokens)
    assert itos[0] == "<unk>" and itos[1:] == sorted(set(tokens))
    ids = charlm.encode(tokens, itos)
    assert ids.dtype == torch.long and len(ids) == len(tokens)
    assert charlm.decode(ids, itos) == "".join(tokens)
    assert charlm.encode("Z#", itos).tolist() == [0, 0]  # unknown characters map to <unk>


def test_vocab_json_round_trip(tmp_path):
    itos = charlm.build_vocab("ab c")
    charlm.save_vocab(itos, tmp_path / "vocab.json")
    assert charlm.load_vocab(tmp_path / "vocab.json") == itos
    (tmp_path / "bad.json").write_text('{"itos": ["a"]}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a vocabulary"):
        charlm.load_vocab(tmp_path / "bad.json")


def test_build_vocab_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no tokens"):
        charlm.build_vocab([])


def test_split_is_90_10_and_in_order():
    data = torch.arange(1000)
    train, val = charlm.split(data)
    assert len(train) == 900 and len(val) == 100
    assert torch.equal(torch.cat([train, val]), data)
    with pytest.raises(ValueError, match="strictly between"):
        charlm.split(data, 1.0)
    with pytest.raises(ValueError, match="too short"):
        charlm.split(torch.arange(5))


def test_prepare_with_a_given_vocab_reuses_it():
    itos, train, val = charlm.prepare(SMALL_TEXT)
    itos2, train2, _ = charlm.prepare(SMALL_TEXT, itos=itos)
    assert itos2 is itos and torch.equal(train, train2)
    assert len(train) == int(0.9 * (len(train) + len(val)))


# ----------------------------------------------------------------- batches


def test_windows_are_shifted_views():
    data = torch.arange(20)
    X, Y = charlm.windows(data, seq_len=4)
    assert X.shape == (4, 4) and torch.equal(Y, X + 1)
    assert X.data_ptr() == data.data_ptr()  # a view, not a copy
    X1, _ = charlm.windows(data, seq_len=4, stride=1)
    assert X1.shape == (16, 4)  # the post's data set: a window at every position
    with pytest.raises(ValueError, match="too few"):
        charlm.windows(torch.arange(4), seq_len=4)


def test_batches_cover_every_window_once():
    data = torch.arange(101)
    gen = torch.Generator().manual_seed(0)
    got = list(charlm.batches(data, batch_size=3, seq_len=10, generator=gen))
    assert [len(X) for X, _ in got] == [3, 3, 3, 1]
    starts = sorted(int(X[i, 0]) for X, _ in got for i in range(len(X)))
    assert starts == list(range(0, 100, 10))
    assert all(torch.equal(Y, X + 1) for X, Y in got)
    assert len(list(charlm.batches(data, 3, 10, drop_last=True))) == 3
    with pytest.raises(ValueError, match="batch_size"):
        next(charlm.batches(data, 0, 10))


def test_stream_batches_continue_row_by_row():
    data = torch.arange(1000)
    got = list(charlm.stream_batches(data, batch_size=4, seq_len=8))
    assert all(X.shape == (4, 8) for X, _ in got)
    for (X0, _), (X1, _) in zip(got[:-1], got[1:], strict=True):
        assert torch.equal(X1[:, 0], X0[:, -1] + 1)  # row b of the next batch continues row b
    with pytest.raises(ValueError, match="smaller batch_size"):
        next(charlm.stream_batches(torch.arange(20), batch_size=8, seq_len=8))


# ----------------------------------------------------------------- model


def test_model_shapes_and_carried_state_equals_one_pass():
    torch.manual_seed(0)
    model = charlm.CharLSTM(vocab_size=11, embed_dim=4, hidden_dim=8, num_layers=2).eval()
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
    model = charlm.CharLSTM(vocab_size=11, embed_dim=4, hidden_dim=8, num_layers=3, dropout=dropout).eval()
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
    model = charlm.CharLSTM(vocab_size=11, embed_dim=4, hidden_dim=8, num_layers=2, dropout=0.9)
    x = torch.randint(11, (64, 1))
    model.train()
    a, b = model(x)[0], model(x)[0]
    assert not torch.equal(a, b)  # dropout between the layers draws new masks
    model.eval()
    torch.testing.assert_close(model(x)[0], model(x)[0])


def test_default_sizes_are_the_posts():
    model = charlm.CharLSTM(vocab_size=70)
    assert (model.embedding.embedding_dim, model.lstm.hidden_size, model.lstm.num_layers) == (32, 128, 4)
    assert model.lstm.batch_first


def test_lr_schedule_warms_up_then_decays():
    lrs = [charlm.lr_at(s, 100, 1e-2, 1e-4, 10) for s in range(101)]
    assert lrs[0] == pytest.approx(1e-3) and max(lrs) == pytest.approx(1e-2)
    assert lrs[-1] == pytest.approx(1e-4)
    assert all(a >= b for a, b in zip(lrs[10:-1], lrs[11:], strict=True))


# ----------------------------------------------------------------- training and checkpoints


def _tiny_run(tmp_path, epochs, **kwargs):
    torch.manual_seed(0)
    itos, train, val = charlm.prepare(SMALL_TEXT)
    model = charlm.CharLSTM(len(itos), embed_dim=8, hidden_dim=16, num_layers=2)
    kwargs.setdefault("log", lambda *_: None)
    return charlm.train(
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
    model, itos, checkpoint = charlm.load_model(tmp_path / "m.pt")
    assert not model.training and itos == checkpoint["itos"] and checkpoint["epoch"] == 3


def test_resuming_from_weights_only_starts_a_fresh_optimizer(tmp_path):
    """The shipped checkpoint has no optimizer state; training on from it must still work."""
    first = _tiny_run(tmp_path, epochs=1)
    charlm.save_checkpoint({k: v for k, v in first.items() if k != "optimizer"}, tmp_path / "m.pt")
    messages = []
    resumed = _tiny_run(tmp_path, epochs=2, log=messages.append)
    assert resumed["epoch"] == 2 and "optimizer" in resumed
    assert any("no optimizer state" in m for m in messages)


def test_resume_with_another_model_size_is_refused(tmp_path):
    _tiny_run(tmp_path, epochs=1)
    itos, train, val = charlm.prepare(SMALL_TEXT)
    other = charlm.CharLSTM(len(itos), embed_dim=8, hidden_dim=32, num_layers=2)
    with pytest.raises(ValueError, match="another vocabulary or model size"):
        charlm.train(other, train, val, itos, tmp_path / "m.pt", epochs=2, log=lambda *_: None)


def test_evaluate_protocols():
    torch.manual_seed(0)
    model = charlm.CharLSTM(vocab_size=5, embed_dim=4, hidden_dim=8, num_layers=1)
    data = torch.randint(5, (500,))
    fresh = charlm.evaluate(model, data, seq_len=20, batch_size=7)
    carried = charlm.evaluate(model, data, seq_len=20, batch_size=7, carry_state=True)
    # an untrained model's loss is near log(5) either way
    assert abs(fresh - torch.log(torch.tensor(5.0)).item()) < 0.3
    assert abs(carried - fresh) < 0.2
    assert model.training  # evaluate restored the mode


_WRITER = textwrap.dedent(
    """
    import sys, torch
    from mllm_utils import charlm
    path = sys.argv[1]
    big = torch.randn(16_000_000)  # 64 MB: each save takes a while
    i = 0
    while True:
        i += 1
        charlm.save_checkpoint({"format": charlm.CHECKPOINT_FORMAT, "n": i, "big": big}, path)
    """
)


def test_an_interrupted_save_leaves_the_last_good_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    charlm.save_checkpoint({"format": charlm.CHECKPOINT_FORMAT, "n": 0}, path)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        # Kill the writer while a temporary file is being written (a save in progress).
        while not list(tmp_path.glob(".ckpt.pt.*.tmp")):
            assert writer.poll() is None, "the writer process died on its own"
            assert time.monotonic() < deadline, "the writer never started a save"
            time.sleep(0.005)
        time.sleep(0.05)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
    checkpoint = charlm.load_checkpoint(path)  # still loads: the old one or a complete new one
    assert checkpoint["n"] >= 0
    if checkpoint["n"] > 0:
        assert checkpoint["big"].numel() == 16_000_000


class _RunsCode:
    """An object whose unpickling would call a function (here: create a file)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": charlm.CHECKPOINT_FORMAT, "payload": _RunsCode(marker)}, path)
    with pytest.raises(charlm.UnsafeCheckpointError, match="refused to load .*could run arbitrary code"):
        charlm.load_checkpoint(path)
    assert not marker.exists()


def test_load_checkpoint_errors_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*train one"):
        charlm.load_checkpoint(tmp_path / "missing.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a character-model checkpoint"):
        charlm.load_checkpoint(tmp_path / "other.pt")


def test_the_shipped_checkpoint_loads_and_is_small():
    path = charlm.shipped_checkpoint_path()
    assert path.stat().st_size < 20_000_000
    model, itos, checkpoint = charlm.load_model()
    assert "optimizer" not in checkpoint  # shipped for inference only
    assert itos == charlm.prepare()[0]  # the vocabulary of today's data
    assert model.config["vocab_size"] == len(itos)


# ----------------------------------------------------------------- command line


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "mllm_utils.charlm", *args],
        cwd=cwd, capture_output=True, text=True, encoding="utf-8", timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"},
    )  # fmt: skip


def _help(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        charlm.main([*args, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_cli_help_lists_commands_methods_and_parameters(capsys):
    top = _help(capsys)
    for command in ("preprocess", "train", "predict", "evaluate"):
        assert command in top
    predict = _help(capsys, "predict")
    for word in ("greedy", "temperature", "top-k", "top-p", "--k", "--p", "--prompt", "--length"):
        assert word in predict
    train = _help(capsys, "train")
    assert "--fresh" in train and "--carry-state" in train and "resume" in train


def test_python_dash_m_runs_the_command_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mllm_utils.charlm", "evaluate", "--help"],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8", timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0 and "--max-tokens" in out.stdout and out.stderr == ""


def _main(capsys, monkeypatch, cwd, *args):
    """Run the command line in this process (faster than a subprocess per call)."""
    monkeypatch.chdir(cwd)
    charlm.main(list(args))
    return capsys.readouterr().out


def test_cli_train_predict_evaluate_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    text = tmp_path / "small.txt"
    text.write_text(SMALL_TEXT, encoding="utf-8")
    common = ["--text", str(text), "--checkpoint", "m.pt"]
    tiny = ["--batch-size", "4", "--seq-len", "16", "--embed-dim", "8", "--hidden-dim", "16",
            "--num-layers", "2", "--warmup", "2"]  # fmt: skip
    first = _main(capsys, monkeypatch, tmp_path, "train", *common, *tiny, "--epochs", "1")
    assert "epoch 1: train" in first and (tmp_path / "m.pt").is_file()
    again = _main(capsys, monkeypatch, tmp_path, "train", *common, *tiny, "--epochs", "2")
    assert "Resuming from m.pt: 1 epochs done" in again and "epoch 2: train" in again
    for method in charlm.METHODS:
        out = _main(capsys, monkeypatch, tmp_path, "predict", "--checkpoint", "m.pt", "--method",
                    method, "--prompt", "Well", "--length", "30")  # fmt: skip
        assert out.startswith("Well") and len(out.rstrip("\n")) == 34
    ev = _main(capsys, monkeypatch, tmp_path, "evaluate", "--checkpoint", "m.pt", "--text",
               str(text), "--seq-len", "16")  # fmt: skip
    loss = float(ev.split("validation loss: ")[1].split()[0])
    assert 0 < loss < 4.3  # below log(vocab size): it learned something


def test_cli_preprocess_writes_vocab_and_split(tmp_path, capsys, monkeypatch):
    text = tmp_path / "small.txt"
    text.write_text(SMALL_TEXT, encoding="utf-8")
    _main(capsys, monkeypatch, tmp_path, "preprocess", "--text", str(text), "--data", "d")
    itos = charlm.load_vocab(tmp_path / "d" / "vocab.json")
    train = torch.load(tmp_path / "d" / "train.pt", weights_only=True)
    val = torch.load(tmp_path / "d" / "val.pt", weights_only=True)
    assert itos == charlm.build_vocab(charlm.tokenize(SMALL_TEXT))
    assert len(train) + len(val) == len(charlm.tokenize(SMALL_TEXT))


def test_cli_predict_with_an_empty_prompt_says_what_to_do(tmp_path, capsys, monkeypatch):
    torch.manual_seed(0)
    itos = charlm.build_vocab("abc ")
    model = charlm.CharLSTM(len(itos), embed_dim=4, hidden_dim=8, num_layers=1)
    checkpoint = {**charlm._new_checkpoint(model, itos, {}), "model": model.state_dict()}
    charlm.save_checkpoint(checkpoint, tmp_path / "m.pt")
    with pytest.raises(SystemExit, match="prompt is empty"):
        _main(capsys, monkeypatch, tmp_path, "predict", "--checkpoint", "m.pt", "--prompt", "\u201c\u201d")
