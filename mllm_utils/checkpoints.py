"""Checkpoints of the two character models: atomic writes, safe loads, clear refusals.

A checkpoint is a dict of state dicts and plain data (numbers, strings, lists,
dicts) saved with ``torch.save``. Both character models use the same format
(:data:`CHECKPOINT_FORMAT`): the LSTM of notebook 07 (:mod:`mllm_utils.charlstm`)
and the transformer of notebook 10 (:mod:`mllm_utils.transformer`), told apart
by :func:`architecture_of`.

* Writing is atomic (:func:`atomic_write`): a temporary file beside the target,
  then one rename. A reader, or a crash, sees the old file or the new one,
  never half of one. A temporary file left by a killed writer is removed the
  next time that path is written (:func:`remove_stale_temporaries`).
* :func:`save_checkpoint` refuses what could not be loaded back safely (an
  object that only a code-running unpickle restores, a numpy number) and a
  model whose output size differs from its vocabulary.
* :func:`load_checkpoint` loads with ``weights_only=True`` and tells apart a
  missing, empty, corrupt or truncated file (:class:`CheckpointError`) from one
  that would run code (:class:`UnsafeCheckpointError`).
* :func:`check_model_checkpoint` then refuses another model's checkpoint and an
  inconsistent one before any weights are copied.

Introduced in notebook 07 (War and Peace); notebook 10 saves its transformer with it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import tempfile
import time
import zipfile
from collections import OrderedDict
from pathlib import Path

import torch

from mllm_utils._validate import check_device, check_itos, check_path, describe

__all__ = [
    "CHECKPOINT_FORMAT",
    "LSTM",
    "TRANSFORMER",
    "CheckpointError",
    "UnsafeCheckpointError",
    "architecture_of",
    "atomic_write",
    "atomic_write_text",
    "build_model",
    "check_model_checkpoint",
    "check_writable_path",
    "load_checkpoint",
    "load_file",
    "load_weights",
    "new_checkpoint",
    "optimizer_state_of",
    "remove_stale_temporaries",
    "save_checkpoint",
    "weights_of",
]

CHECKPOINT_FORMAT = "mllm-charlm-1"
LSTM = "lstm"
TRANSFORMER = "decoder-only-transformer"
NAMES = {LSTM: "an LSTM", TRANSFORMER: "a transformer"}
LOADERS = {
    LSTM: "mllm_utils.charlstm.load_model",
    TRANSFORMER: "mllm_utils.transformer.load_model",
}
_LEGACY_MAGIC = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19"  # torch.save's pre-zip format starts so
_UNSAFE = re.compile(r"global|reduce|class|build", re.IGNORECASE)  # torch's words for a refused object
_NAMED = re.compile(r"(\d+)\.[a-z0-9_]+")  # PID.RANDOM: the writer's process id, then mkstemp's letters
_UNNAMED = re.compile(r"[a-z0-9_]{8}")  # RANDOM alone: a writer of an older release
_STALE_AGE_S = 3600  # temporary files without a writer's pid count as stale after an hour
_PLAIN = (dict, OrderedDict, list, tuple, set, str, bytes, int, float, complex, bool, type(None),
          torch.Size, torch.dtype, torch.device)  # fmt: skip


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint: empty, corrupt, truncated, another model's, inconsistent."""


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds objects that only a full (code-running) unpickle could load."""


# ---------------------------------------------------------------------------
# Atomic writes
# ---------------------------------------------------------------------------


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def remove_stale_temporaries(path) -> list[Path]:
    """Delete temporary files that interrupted writes of ``path`` left beside it; return them.

    A writer names its temporary file ``.NAME.PID.RANDOM.tmp``. One whose
    process no longer runs is stale. Files of a writer still running are kept
    (on Windows, where an open file cannot be deleted, that happens by itself),
    and so are unnamed ones younger than an hour (an older version's writer).
    """
    path = check_path("path", path)
    prefix, removed = _temporary_prefix(path), []
    if not path.parent.is_dir():
        return removed
    for candidate in path.parent.glob(f"{_glob_escape(prefix)}*.tmp"):
        middle = candidate.name[len(prefix) : -len(".tmp")]
        named, unnamed = _NAMED.fullmatch(middle), _UNNAMED.fullmatch(middle)
        try:
            if named and (int(named[1]) == os.getpid() or _process_runs(int(named[1]))):
                continue
            if not named and (not unnamed or time.time() - candidate.stat().st_mtime < _STALE_AGE_S):
                continue  # not one of ours (another file's), or maybe an older version's write in progress
            candidate.unlink()
            removed.append(candidate)
        except OSError:  # gone already, or still open (Windows): leave it
            continue
    return removed


def _glob_escape(text: str) -> str:
    """``text`` with glob's special characters escaped (a checkpoint may be called ``run[1].pt``)."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _process_runs(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate it there; unlink fails on open files instead
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def check_writable_path(name: str, path) -> Path:
    """``path`` as a ``Path``, refused at once if no file can be written there; ``name`` is the argument's.

    Raises ``IsADirectoryError`` when ``path`` is a folder and ``NotADirectoryError``
    when a folder on its way is a file (``run.pt/model.pt`` beside an existing
    ``run.pt``), so that a training run learns it before its first epoch, not
    when it first saves. Folders that do not exist yet are fine: writing creates them.
    """
    path = check_path(name, path)
    if path.is_dir():
        raise IsADirectoryError(f"{name}={str(path)!r} is a folder: give a file name in it, e.g. {path / 'model.pt'}")
    for parent in path.parents:
        if parent.is_dir():
            break
        if parent.exists():
            raise NotADirectoryError(
                f"{name}={str(path)!r} lies inside {str(parent)!r}, which is a file, not a folder: nothing can be "
                f"saved under it; choose another path, e.g. {parent.parent / path.name}"
            )
    return path


def atomic_write(path, write) -> None:
    """Call ``write(f)`` on a temporary file in the same folder, then rename it over ``path``.

    ``os.replace`` is atomic on one file system: a reader (or a crash) sees the
    old file or the new one, never half of one. Stale temporary files of
    ``path`` are removed first; this write's own is removed if it fails.
    """
    path = check_writable_path("path", path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{_temporary_prefix(path)}{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private (0600); a checkpoint is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


# ---------------------------------------------------------------------------
# Saving
# ---------------------------------------------------------------------------


def _check_plain(value, where: str) -> None:
    """Raise TypeError unless ``value`` holds only what ``torch.load(weights_only=True)`` restores."""
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise TypeError(f"{where} is a {type(value).__name__}: save it as a plain tensor (value.detach())")
        return
    if type(value) not in _PLAIN:
        raise TypeError(
            f"{where} is {describe(value)}: a checkpoint holds tensors and plain data only (numbers, strings, "
            "lists, dicts), or loading it would be refused. Convert it, e.g. float(x), int(x), x.state_dict()"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key, f"a key of {where}")
            _check_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple, set)):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]")


def _check_vocab_size(checkpoint: dict, where: str, error=ValueError) -> None:
    config, itos = checkpoint.get("model_config"), checkpoint.get("itos")
    if isinstance(config, dict) and isinstance(itos, (list, tuple)) and config.get("vocab_size") != len(itos):
        raise error(
            f"{where}: the model has {config.get('vocab_size')} outputs (model_config['vocab_size']) but the "
            f"vocabulary (itos) has {len(itos)} entries; they must be equal, or sampled ids have no character "
            "and characters have no embedding: build the model with vocab_size=len(itos)"
        )


def save_checkpoint(checkpoint: dict, path) -> None:
    """Save a checkpoint dict (state dicts and plain data only) atomically with ``torch.save``.

    Refuses a dict that holds other objects (they would be refused on loading)
    and one whose model output size differs from its vocabulary's length.
    Introduced in notebook 07.
    """
    if not isinstance(checkpoint, dict):
        raise TypeError(f"checkpoint must be a dict (state dicts and plain data), got {describe(checkpoint)}")
    path = check_writable_path("path", path)
    _check_plain(checkpoint, "checkpoint")
    _check_vocab_size(checkpoint, "save_checkpoint")
    atomic_write(path, lambda f: torch.save(checkpoint, f))


def weights_of(model: torch.nn.Module) -> dict:
    """The model's state dict as detached CPU copies (what a checkpoint stores)."""
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _on_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return type(value)((k, _on_cpu(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def optimizer_state_of(optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's state dict with every tensor copied to the CPU (what a checkpoint stores).

    Adam's moments live on the parameters' device; saved as they are, a GPU
    run's checkpoint needs a GPU (or ``map_location``) to be read at all. On
    loading, ``optimizer.load_state_dict`` moves them to wherever the
    parameters are, so a run resumes on any device.
    """
    return _on_cpu(optimizer.state_dict())


def new_checkpoint(model, itos, train_config: dict, history_keys, architecture: str | None = None) -> dict:
    """A fresh checkpoint dict for ``model`` (nothing trained yet).

    ``architecture`` marks a transformer's; an LSTM's (unmarked, as they always
    were) also counts epochs.
    """
    checkpoint = {"format": CHECKPOINT_FORMAT}
    if architecture is not None:
        checkpoint["architecture"] = architecture
    checkpoint.update({"model_config": dict(model.config), "train_config": dict(train_config), "itos": list(itos)})
    if architecture is None:
        checkpoint["epoch"] = 0
    checkpoint.update({"step": 0, "token_steps": 0, "train_seconds": 0.0,
                       "history": {key: [] for key in history_keys}})  # fmt: skip
    return checkpoint


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def _check_map_location(map_location):
    if map_location is None or callable(map_location) or isinstance(map_location, dict):
        return map_location
    return check_device("map_location", map_location)


def _is_torch_file(path: Path) -> bool:
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as f:
        return f.read(len(_LEGACY_MAGIC)) == _LEGACY_MAGIC


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for marker in ("WeightsUnpickler error:", "PytorchStreamReader"):
        if marker in text:
            text = text[text.index(marker) :]
    for advice in ("Check the documentation", "Please use `torch.serialization", "This is an internal miniz"):
        text = text.split(advice)[0]
    return " ".join(text.split())[:200] or type(exc).__name__


def load_file(path, map_location="cpu"):
    """Whatever ``torch.save`` wrote to ``path``, loaded with ``weights_only=True``, or a clear refusal.

    Raises ``FileNotFoundError`` (no such file), :class:`CheckpointError` (a
    folder, or an empty, corrupt or truncated file) or
    :class:`UnsafeCheckpointError` (an ``UnpicklingError``: the file holds
    objects beyond tensors and plain data, whose unpickling could run code).
    """
    path = check_path("path", path, hint="load_model() without a path loads the shipped model")
    map_location = _check_map_location(map_location)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file: name the .pt file inside it")
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}: train one with `mllm-war-and-peace train "
            f"--checkpoint {path}` or leave --checkpoint out to use the shipped model"
        )
    if path.stat().st_size == 0:
        raise CheckpointError(
            f"{path} is empty (0 bytes): a copy or download that was interrupted? Delete it and copy it "
            "again, or train again"
        )
    if not _is_torch_file(path):
        raise CheckpointError(
            f"{path} is not a checkpoint: it is not a file written by torch.save (corrupt, truncated, or "
            "another kind of file). Copy it again, or train again"
        )
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if not _UNSAFE.search(_first_line(exc)):
            raise CheckpointError(f"{path} is corrupt ({_first_line(exc)}): copy it again, or train again") from exc
        raise UnsafeCheckpointError(
            f"refused to load {path}: it holds Python objects beyond tensors and plain data, and "
            "unpickling them could run arbitrary code. Only load checkpoints written by "
            "mllm_utils.checkpoints (state dicts, lists, dicts, numbers, strings); if you trust the "
            f"file's source, re-save its state_dict. Details: {exc}"
        ) from exc
    except (RuntimeError, EOFError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{path} is corrupt or truncated ({_first_line(exc)}): copy it again, or train again"
        ) from exc


def load_checkpoint(path, map_location="cpu") -> dict:
    """Load a checkpoint with ``weights_only=True``; refuse one that would run code.

    The errors of :func:`load_file`, and :class:`CheckpointError` for a file
    that is not a character-model checkpoint. Introduced in notebook 07.
    """
    checkpoint = load_file(path, map_location)
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path} is not a character-model checkpoint (expected a dict with format "
            f"{CHECKPOINT_FORMAT!r}); was it written by mllm_utils.checkpoints.save_checkpoint?"
        )
    return checkpoint


def architecture_of(checkpoint: dict) -> str:
    """:data:`LSTM` or :data:`TRANSFORMER`: the ``"architecture"`` entry, else read from the model config.

    LSTM checkpoints carry no mark (they predate the transformer); a transformer's
    config names its heads.
    """
    marked = checkpoint.get("architecture")
    if marked is not None:
        return marked
    config = checkpoint.get("model_config")
    return TRANSFORMER if isinstance(config, dict) and "num_heads" in config else LSTM


def check_model_checkpoint(checkpoint: dict, architecture: str, path) -> dict:
    """Refuse a checkpoint of another model, or one whose parts do not fit together; return it.

    Checks the architecture, that ``model_config``, ``model`` and ``itos`` are
    there, and that the model's output size equals the vocabulary's length.
    """
    found = architecture_of(checkpoint)
    if found != architecture:
        raise CheckpointError(
            f"{path} is not {NAMES[architecture]} checkpoint: it holds {NAMES.get(found, repr(found))}; load it "
            f"with {LOADERS.get(found, 'the code that wrote it')} (the command line's predict and evaluate take "
            "either)"
        )
    for key, kind in (("model_config", dict), ("model", dict), ("itos", list)):
        if not isinstance(checkpoint.get(key), kind):
            raise CheckpointError(
                f"{path} has no {key!r} {kind.__name__}: it is not a complete model checkpoint "
                "(was it written by charlstm.train, transformer.train or save_model?)"
            )
    try:
        check_itos(f"{path}'s itos", checkpoint["itos"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(str(exc)) from None
    _check_vocab_size(checkpoint, str(path), CheckpointError)
    return checkpoint


def build_model(model_class, checkpoint: dict, path):
    """``model_class(**checkpoint["model_config"])`` with its weights loaded, in eval mode."""
    try:
        model = model_class(**checkpoint["model_config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(
            f"{path}: its model_config {checkpoint['model_config']} does not describe a {model_class.__name__} "
            f"({exc})"
        ) from None
    load_weights(model, checkpoint["model"], path)
    model.eval()
    return model


def load_weights(model: torch.nn.Module, state_dict: dict, path) -> None:
    """``model.load_state_dict(state_dict)``, with an error that says which file does not fit."""
    try:
        model.load_state_dict(state_dict)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())[:300]
        raise CheckpointError(
            f"{path}: its weights do not fit the model its model_config describes ({detail}); the file was "
            "edited or mixes two runs: train again"
        ) from None
