"""The command line of the character models (mllm_utils.charcli: the mllm-war-and-peace command)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mllm_utils import charcli, chardata, charlstm, checkpoints

ROOT = Path(__file__).resolve().parent.parent
SMALL_TEXT = (
    "Well, Prince, so Genoa and Lucca are now just family estates.\r\n\r\n"
    "If you don't tell me that this means war,  I will--\n"
    "\u201cHow are you?\u201d said he; 1805!\n"
) * 20
TINY = ["--batch-size", "4", "--seq-len", "16", "--embed-dim", "8", "--hidden-dim", "16", "--num-layers", "2",
        "--warmup", "2"]  # fmt: skip


def _help(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        charcli.main([*args, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def _main(capsys, monkeypatch, cwd, *args):
    """Run the command line in this process (faster than a subprocess per call)."""
    monkeypatch.chdir(cwd)
    charcli.main(list(args))
    return capsys.readouterr().out


def _fails(capsys, monkeypatch, cwd, *args) -> str:
    """Run a mistaken command: exit status 2, one line on stderr, no traceback; return that line."""
    monkeypatch.chdir(cwd)
    with pytest.raises(SystemExit) as exit_info:
        charcli.main(list(args))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _small_text(tmp_path) -> Path:
    text = tmp_path / "small.txt"
    text.write_text(SMALL_TEXT, encoding="utf-8")
    return text


def test_cli_help_lists_commands_methods_and_parameters(capsys):
    top = _help(capsys)
    for command in ("preprocess", "train", "predict", "evaluate"):
        assert command in top
    predict = _help(capsys, "predict")
    for word in ("greedy", "temperature", "top-k", "top-p", "--k", "--p", "--prompt", "--length"):
        assert word in predict
    train = _help(capsys, "train")
    assert "--fresh" in train and "--carry-state" in train and "resume" in train


def test_predict_help_is_what_notebook_07_prints(capsys):
    """Notebook 07 prints these lines of `predict --help` (nbval compares them)."""
    lines = [line for line in _help(capsys, "predict").splitlines() if "--" in line and "help" not in line]
    assert lines == [
        "usage: mllm-war-and-peace predict [-h] [--checkpoint CHECKPOINT]",
        "                                  [--method {greedy,temperature,top-k,top-p}]",
        "                                  [--prompt PROMPT] [--length LENGTH]",
        "                                  [--temperature TEMPERATURE] [--k K] [--p P]",
        "                                  [--seed SEED]",
        "  --checkpoint CHECKPOINT",
        "  --method {greedy,temperature,top-k,top-p}",
        "  --prompt PROMPT       text to start from (default: She went away)",
        "  --length LENGTH       characters to generate (default: 500)",
        "  --temperature TEMPERATURE",
        "  --k K                 k for top-k (default: 5)",
        "  --p P                 p for top-p (default: 0.95)",
        "  --seed SEED           seed of the sampling generator (default: 0)",
    ]


def test_help_gives_each_default_once(capsys):
    """No option's help says "(default: None)"; --checkpoint says in words what its default means, once."""
    for command in ("train", "predict", "evaluate"):
        text = " ".join(_help(capsys, command).split())
        assert "(default: None)" not in text, command
    predict = " ".join(_help(capsys, "predict").split())
    assert predict.count("(default: the shipped LSTM)") == 1


def test_python_dash_m_runs_the_command_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mllm_utils.charcli", "evaluate", "--help"],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8", timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0 and "--max-tokens" in out.stdout and out.stderr == ""
    # the console script runs the same main (read as text: tomllib is new in Python 3.11)
    assert 'mllm-war-and-peace = "mllm_utils.charcli:main"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_a_mistake_in_a_real_process_is_one_line_and_status_2(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mllm_utils.charcli", "evaluate", "--checkpoint", "missing.pt"],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8", timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr and out.stderr.count("\n") == 1
    assert "--checkpoint: no checkpoint at missing.pt" in out.stderr


def test_cli_train_predict_evaluate_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    common = ["--text", str(_small_text(tmp_path)), "--checkpoint", "m.pt"]
    first = _main(capsys, monkeypatch, tmp_path, "train", *common, *TINY, "--epochs", "1")
    assert "epoch 1: train" in first and (tmp_path / "m.pt").is_file()
    again = _main(capsys, monkeypatch, tmp_path, "train", *common, *TINY, "--epochs", "2")
    assert "Resuming from m.pt: 1 epoch done" in again and "epoch 2: train" in again
    for method in charcli.METHODS:
        out = _main(capsys, monkeypatch, tmp_path, "predict", "--checkpoint", "m.pt", "--method",
                    method, "--prompt", "Well", "--length", "30")  # fmt: skip
        assert out.startswith("Well") and len(out.rstrip("\n")) == 34
    ev = _main(capsys, monkeypatch, tmp_path, "evaluate", "--checkpoint", "m.pt", "--text",
               str(tmp_path / "small.txt"), "--seq-len", "16")  # fmt: skip
    loss = float(ev.split("validation loss: ")[1].split()[0])
    assert 0 < loss < 4.3  # below log(vocab size): it learned something
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.losses.json", "m.pt", "small.txt"]


def test_cli_preprocess_writes_vocab_and_split(tmp_path, capsys, monkeypatch):
    _main(capsys, monkeypatch, tmp_path, "preprocess", "--text", str(_small_text(tmp_path)), "--data", "d")
    itos = chardata.load_vocab(tmp_path / "d" / "vocab.json")
    train = torch.load(tmp_path / "d" / "train.pt", weights_only=True)
    val = torch.load(tmp_path / "d" / "val.pt", weights_only=True)
    assert itos == chardata.build_vocab(chardata.tokenize(SMALL_TEXT))
    assert len(train) + len(val) == len(chardata.tokenize(SMALL_TEXT))


def test_a_half_written_data_folder_says_to_rerun_preprocess(tmp_path, capsys, monkeypatch):
    _main(capsys, monkeypatch, tmp_path, "preprocess", "--text", str(_small_text(tmp_path)), "--data", "d")
    (tmp_path / "d" / "val.pt").unlink()  # what a preprocess of an older release, killed half-way, left
    err = _fails(capsys, monkeypatch, tmp_path, "train", "--data", "d", "--epochs", "1", *TINY)
    assert "d is incomplete" in err and "val.pt missing" in err and "preprocess --data d" in err


def test_predict_and_evaluate_take_the_transformer_checkpoint(tmp_path, capsys, monkeypatch):
    out = _main(capsys, monkeypatch, tmp_path, "predict", "--checkpoint", "transformer", "--method", "greedy",
                "--prompt", "Prince Andrew", "--length", "12")  # fmt: skip
    assert out.startswith("Prince Andrew") and len(out.rstrip("\n")) == 25
    ev = _main(capsys, monkeypatch, tmp_path, "evaluate", "--checkpoint", "transformer", "--max-tokens", "256")
    assert "token-steps, 6,802 steps)" in ev and "validation characters: 256" in ev
    err = _fails(capsys, monkeypatch, tmp_path, "predict", "--checkpoint", "transformer", "--length", "600")
    assert "--length 600" in err and "context_len=512" in err and "--length 500 or less" in err
    err = _fails(capsys, monkeypatch, tmp_path, "evaluate", "--checkpoint", "transformer", "--carry-state")
    assert "--carry-state is for the LSTM" in err


def test_train_refuses_a_transformer_checkpoint_in_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "t.pt").write_bytes(charlstm.shipped_checkpoint_path().with_name(
        "war_and_peace_transformer.pt").read_bytes())  # fmt: skip
    err = _fails(capsys, monkeypatch, tmp_path, "train", "--text", str(_small_text(tmp_path)), "--checkpoint",
                 "t.pt", "--epochs", "1", *TINY)  # fmt: skip
    assert "--checkpoint: t.pt is not an LSTM checkpoint: it holds a transformer" in err and "--fresh" in err


@pytest.mark.parametrize("where", ["folder", "under a file"])
def test_train_refuses_a_checkpoint_it_could_not_write_before_anything_runs(where, tmp_path, capsys, monkeypatch):
    """A folder for --checkpoint used to fail only when the first epoch was over."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "run.pt").write_bytes(b"a file")
    checkpoint = "runs" if where == "folder" else "run.pt/m.pt"
    monkeypatch.setattr(charcli, "_data_for", lambda args: pytest.fail("the data were prepared first"))
    err = _fails(capsys, monkeypatch, tmp_path, "train", "--checkpoint", checkpoint, *TINY)
    assert f"--checkpoint='{checkpoint}'" in err
    assert ("is a folder" if where == "folder" else "which is a file, not a folder") in err


def test_broken_checkpoints_are_reported_in_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint at all" * 10)
    assert "empty (0 bytes)" in _fails(capsys, monkeypatch, tmp_path, "predict", "--checkpoint", "empty.pt")
    assert "not a file written by torch.save" in _fails(capsys, monkeypatch, tmp_path, "evaluate",
                                                        "--checkpoint", "junk.pt")  # fmt: skip


def test_cli_predict_with_an_empty_prompt_says_what_to_do(tmp_path, capsys, monkeypatch):
    torch.manual_seed(0)
    itos = chardata.build_vocab("abc ")
    model = charlstm.CharLSTM(len(itos), embed_dim=4, hidden_dim=8, num_layers=1)
    checkpoint = {**checkpoints.new_checkpoint(model, itos, {}, charlstm.HISTORY_KEYS), "model": model.state_dict()}
    checkpoints.save_checkpoint(checkpoint, tmp_path / "m.pt")
    err = _fails(capsys, monkeypatch, tmp_path, "predict", "--checkpoint", "m.pt", "--prompt", "\u201c\u201d")
    assert "--prompt is empty after tokenizing" in err


def test_long_flags_must_be_spelt_out(tmp_path, capsys, monkeypatch):
    err = _fails(capsys, monkeypatch, tmp_path, "train", "--epoch", "3")
    assert "unrecognized arguments: --epoch 3" in err
    assert not (tmp_path / "charlm_data").exists() and not (tmp_path / "war_and_peace_lstm.pt").exists()


def test_package_messages_name_the_flags():
    parser = charcli._parser()
    message = charcli._with_flags("the text is too short for one batch: use a smaller batch_size or seq_len",
                                  parser, "train")  # fmt: skip
    assert message.endswith("use a smaller --batch-size or --seq-len")
    assert charcli._with_flags("lr_min must be in [0, 0.001], got 0.1", parser, "train").startswith("--lr-min must")
    assert charcli._with_flags("top_k=80 is larger", parser, "predict") == "--k=80 is larger"
    untouched = "2 epochs done; /tmp/seq_len/x.pt"
    assert charcli._with_flags(untouched, parser, "train") == untouched
