"""mllm_utils.charlm keeps every name earlier releases used; notebooks 07 and 10 use the new modules.

The code lives in mllm_utils.chardata, checkpoints, chartrain, charlstm and charcli
(each with its own tests); charlm gathers it under the old names.
"""

import json
import re
from pathlib import Path

import pytest

from mllm_utils import charcli, chardata, charlm, charlstm, chartrain, checkpoints

ROOT = Path(__file__).resolve().parent.parent
HOME = {chardata: "chardata", checkpoints: "checkpoints", chartrain: "chartrain", charlstm: "charlstm",
        charcli: "charcli"}  # fmt: skip
# Every public name of charlm before the split (its __all__ and the constants notebooks read).
OLD_NAMES = [
    "CharLSTM", "UnsafeCheckpointError", "batches", "build_vocab", "decode", "encode", "evaluate",
    "load_checkpoint", "load_model", "load_vocab", "lr_at", "main", "plot_history", "prepare",
    "save_checkpoint", "save_vocab", "split", "stream_batches", "tokenize", "train", "windows",
    "UNK", "CHECKPOINT_FORMAT", "SHIPPED_CHECKPOINT", "EMBED_DIM", "HIDDEN_DIM", "NUM_LAYERS",
    "POST_SEQ_LEN", "POST_BATCH_SIZE", "POST_LR", "POST_EPOCHS", "POST_DROPOUT", "METHODS",
    "shipped_checkpoint_path",
]  # fmt: skip


@pytest.mark.parametrize("name", OLD_NAMES)
def test_every_old_name_is_still_importable_and_is_the_new_object(name):
    value = getattr(charlm, name)
    homes = [module for module in HOME if getattr(module, name, None) is value]
    assert homes, f"charlm.{name} is defined in none of the new modules"


def test_every_name_the_notebooks_use_is_there():
    """Notebooks 07 and 10 call the split modules by name; each name they use exists there."""
    used = {name: set() for name in HOME.values()}
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        source = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"])
        for module in used:
            used[module] |= set(re.findall(rf"\b{module}\.([A-Za-z_]\w*)", source))
    assert used["chardata"] and used["charlstm"], "notebooks 07 and 10 no longer use the character modules?"
    modules = {name: module for module, name in HOME.items()}
    missing = [f"{m}.{name}" for m, names in used.items() for name in sorted(names) if not hasattr(modules[m], name)]
    assert missing == []


def test_all_lists_only_real_names():
    assert all(hasattr(charlm, name) for name in charlm.__all__)
    assert set(OLD_NAMES) <= set(charlm.__all__)
