"""Checkpoints (mllm_utils.checkpoints): atomic writes, stale temporaries, safe and clear loads."""

import collections
import hashlib
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from mllm_utils import charlstm, checkpoints, transformer
from mllm_utils.checkpoints import CHECKPOINT_FORMAT, CheckpointError, UnsafeCheckpointError

ROOT = Path(__file__).resolve().parent.parent
ITOS = ["<unk>", "a", "b", " "]


def lstm_checkpoint(**extra):
    torch.manual_seed(0)
    model = charlstm.CharLSTM(len(ITOS), embed_dim=4, hidden_dim=8, num_layers=1)
    return {**checkpoints.new_checkpoint(model, ITOS, {}, charlstm.HISTORY_KEYS), "model": model.state_dict(), **extra}


def transformer_checkpoint():
    torch.manual_seed(0)
    model = transformer.TransformerLM(len(ITOS), embed_dim=8, num_heads=2, num_layers=1, context_len=8)
    checkpoint = checkpoints.new_checkpoint(model, ITOS, {}, transformer.HISTORY_KEYS, checkpoints.TRANSFORMER)
    return {**checkpoint, "model": model.state_dict()}


# ----------------------------------------------------------------- atomic writes and leftovers


_WRITER = textwrap.dedent(
    """
    import sys, torch
    from mllm_utils import checkpoints
    path = sys.argv[1]
    big = torch.randn(16_000_000)  # 64 MB: each save takes a while
    i = 0
    while True:
        i += 1
        checkpoints.save_checkpoint({"format": checkpoints.CHECKPOINT_FORMAT, "n": i, "big": big}, path)
    """
)


def test_an_interrupted_save_leaves_the_last_good_checkpoint_and_no_clutter(tmp_path):
    path = tmp_path / "ckpt.pt"
    checkpoints.save_checkpoint({"format": CHECKPOINT_FORMAT, "n": 0}, path)
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
    checkpoint = checkpoints.load_checkpoint(path)  # still loads: the old one or a complete new one
    assert checkpoint["n"] >= 0
    if checkpoint["n"] > 0:
        assert checkpoint["big"].numel() == 16_000_000
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "ckpt.pt")
    assert len(leftovers) <= 1 and all(name.startswith(f".ckpt.pt.{writer.pid}.") for name in leftovers)
    checkpoints.save_checkpoint({"format": CHECKPOINT_FORMAT, "n": -1}, path)  # the next save cleans up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]
    assert checkpoints.load_checkpoint(path)["n"] == -1


def test_a_failed_write_removes_its_own_temporary_file(tmp_path):
    def fail(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        checkpoints.atomic_write(tmp_path / "x.pt", fail)
    assert list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_only_stale_temporary_files_are_removed(tmp_path):
    path = tmp_path / "m.pt"
    dead = tmp_path / f".m.pt.{_dead_pid()}.abc123.tmp"
    mine = tmp_path / f".m.pt.{os.getpid()}.def456.tmp"  # a save in progress in this process
    old_unnamed, new_unnamed = tmp_path / ".m.pt.old_one1.tmp", tmp_path / ".m.pt.new_one1.tmp"
    other = tmp_path / ".n.pt.1.abc.tmp"  # another checkpoint's
    lookalike = tmp_path / ".m.pt.notes.tmp"  # not a name a writer gives, however old
    for p in (dead, mine, old_unnamed, new_unnamed, other, lookalike):
        p.write_bytes(b"partial")
    for p in (old_unnamed, lookalike):
        os.utime(p, (time.time() - 7200, time.time() - 7200))
    assert sorted(checkpoints.remove_stale_temporaries(path)) == sorted([dead, old_unnamed])
    assert {p.name for p in tmp_path.iterdir()} == {mine.name, new_unnamed.name, other.name, lookalike.name}


def test_a_checkpoint_name_with_glob_characters_is_cleaned_up_too(tmp_path):
    path = tmp_path / "run[1].pt"
    stale = tmp_path / f".run[1].pt.{_dead_pid()}.x.tmp"
    stale.write_bytes(b"")
    checkpoints.save_checkpoint({"format": CHECKPOINT_FORMAT}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run[1].pt"]


# ----------------------------------------------------------------- what a save refuses


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.float64(1.5), r"checkpoint\['x'\] is np.float64\(1.5\)"),
        (Path("a"), r"checkpoint\['x'\] is PosixPath|checkpoint\['x'\] is WindowsPath"),
        (collections.defaultdict(list), r"checkpoint\['x'\] is defaultdict"),
        ([1, object()], r"checkpoint\['x'\]\[1\] is <object"),
    ],
)
def test_save_refuses_what_a_safe_load_would_refuse(tmp_path, value, match):
    with pytest.raises(TypeError, match=match + ".*tensors and plain data only"):
        checkpoints.save_checkpoint({"format": CHECKPOINT_FORMAT, "x": value}, tmp_path / "m.pt")
    assert list(tmp_path.iterdir()) == []


def test_save_refuses_a_model_bigger_or_smaller_than_its_vocabulary(tmp_path):
    checkpoint = lstm_checkpoint()
    with pytest.raises(ValueError, match=r"4 outputs .* vocabulary \(itos\) has 3 entries"):
        checkpoints.save_checkpoint({**checkpoint, "itos": ITOS[:3]}, tmp_path / "m.pt")


# ----------------------------------------------------------------- loads: every broken file told apart


def test_save_names_a_path_it_cannot_write_and_creates_missing_folders(tmp_path):
    (tmp_path / "run.pt").write_bytes(b"a file, not a folder")
    for bad in (tmp_path / "run.pt" / "m.pt", tmp_path / "run.pt" / "deeper" / "m.pt"):
        with pytest.raises(NotADirectoryError, match=r"path='.*' lies inside '.*run\.pt', which is a file"):
            checkpoints.save_checkpoint(lstm_checkpoint(), bad)
    with pytest.raises(IsADirectoryError, match=r"path='.*' is a folder"):
        checkpoints.save_checkpoint(lstm_checkpoint(), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt"]  # nothing half-written anywhere
    checkpoints.save_checkpoint(lstm_checkpoint(), tmp_path / "new" / "deeper" / "m.pt")
    assert checkpoints.load_checkpoint(tmp_path / "new" / "deeper" / "m.pt")["format"] == checkpoints.CHECKPOINT_FORMAT


def test_missing_empty_random_truncated_and_folder_are_told_apart(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*train one"):
        checkpoints.load_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"empty \(0 bytes\)"):
        checkpoints.load_checkpoint(tmp_path / "empty.pt")
    (tmp_path / "random.pt").write_bytes(np.random.default_rng(0).bytes(4000))
    with pytest.raises(CheckpointError, match="not a file written by torch.save"):
        checkpoints.load_checkpoint(tmp_path / "random.pt")
    checkpoints.save_checkpoint(lstm_checkpoint(), tmp_path / "good.pt")
    data = (tmp_path / "good.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a file written by torch.save .*truncated"):
        checkpoints.load_checkpoint(tmp_path / "cut.pt")
    with pytest.raises(CheckpointError, match="is a folder"):
        checkpoints.load_checkpoint(tmp_path)


def test_a_zip_with_a_scrambled_pickle_is_corrupt_not_unsafe(tmp_path):
    checkpoints.save_checkpoint(lstm_checkpoint(), tmp_path / "good.pt")
    with zipfile.ZipFile(tmp_path / "good.pt") as src, zipfile.ZipFile(tmp_path / "bad.pt", "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, np.random.default_rng(1).bytes(len(data)) if name.endswith("data.pkl") else data)
    with pytest.raises(CheckpointError, match="is corrupt") as info:
        checkpoints.load_checkpoint(tmp_path / "bad.pt")
    assert "weights_only" not in str(info.value)  # not torch's advice to load it unsafely


class _RunsCode:
    """An object whose unpickling would call a function (here: create a file)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "payload": _RunsCode(marker)}, path)
    with pytest.raises(UnsafeCheckpointError, match="refused to load .*could run arbitrary code"):
        checkpoints.load_checkpoint(path)
    assert not marker.exists()
    assert issubclass(UnsafeCheckpointError, pickle.UnpicklingError)


def test_a_file_of_another_program_is_not_ours(tmp_path):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a character-model checkpoint"):
        checkpoints.load_checkpoint(tmp_path / "other.pt")
    assert issubclass(CheckpointError, ValueError)


def test_each_model_refuses_the_others_checkpoint(tmp_path):
    checkpoints.save_checkpoint(lstm_checkpoint(), tmp_path / "lstm.pt")
    transformer.save_model(transformer_checkpoint(), tmp_path / "transformer.pt")
    with pytest.raises(CheckpointError, match="not a transformer checkpoint: it holds an LSTM.*charlstm.load_model"):
        transformer.load_model(tmp_path / "lstm.pt")
    with pytest.raises(CheckpointError, match="not an LSTM checkpoint: it holds a transformer.*transformer.load_model"):
        charlstm.load_model(tmp_path / "transformer.pt")
    with pytest.raises(CheckpointError, match="not an LSTM checkpoint"):
        charlstm.load_model(transformer.shipped_checkpoint_path())


def test_an_inconsistent_checkpoint_is_refused_before_its_weights_are_used(tmp_path):
    torch.save({**lstm_checkpoint(), "itos": ITOS[:3]}, tmp_path / "small_vocab.pt")  # bypasses save's check
    with pytest.raises(CheckpointError, match="4 outputs .*has 3 entries"):
        charlstm.load_model(tmp_path / "small_vocab.pt")
    incomplete = {k: v for k, v in lstm_checkpoint().items() if k != "model"}
    checkpoints.save_checkpoint(incomplete, tmp_path / "no_model.pt")
    with pytest.raises(CheckpointError, match="no 'model' dict"):
        charlstm.load_model(tmp_path / "no_model.pt")
    edited = lstm_checkpoint()
    edited["model_config"] = {**edited["model_config"], "hidden_dim": 16}
    checkpoints.save_checkpoint(edited, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match="weights do not fit"):
        charlstm.load_model(tmp_path / "edited.pt")
    edited["model_config"] = {**edited["model_config"], "num_heads": 2}  # neither model's config
    checkpoints.save_checkpoint({**edited, "architecture": "lstm"}, tmp_path / "odd.pt")
    with pytest.raises(CheckpointError, match="does not describe a CharLSTM"):
        charlstm.load_model(tmp_path / "odd.pt")


def test_map_location_on_a_machine_without_that_device_names_the_argument(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="map_location='cuda'.*no CUDA GPU"):
        charlstm.load_model(map_location="cuda")


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_shipped_checkpoints_load_and_are_left_untouched():
    paths = [charlstm.shipped_checkpoint_path(), transformer.shipped_checkpoint_path()]
    before = [(_sha(p), p.stat().st_mtime_ns) for p in paths]
    lstm, itos, _ = charlstm.load_model()
    model, itos2, _ = transformer.load_model()
    assert itos == itos2 and lstm.config["vocab_size"] == model.config["vocab_size"] == len(itos)
    assert [(_sha(p), p.stat().st_mtime_ns) for p in paths] == before
    assert checkpoints.architecture_of(torch.load(paths[0], weights_only=True)) == checkpoints.LSTM
