"""The War and Peace character model of notebook 07, under one name: data, model, checkpoints, CLI.

Notebook 07 (and notebook 10, and earlier releases of the course) use
``from mllm_utils import charlm`` and ``charlm.tokenize``, ``charlm.CharLSTM``,
``charlm.train``... Those names live in one module per concern now, and this
module gathers them:

* :mod:`mllm_utils.chardata`: tokenizer, vocabulary, split, windows, batches;
* :mod:`mllm_utils.checkpoints`: atomic writes, safe loads (shared with the transformer);
* :mod:`mllm_utils.chartrain`: schedule, training step, evaluation (shared with the transformer);
* :mod:`mllm_utils.charlstm`: the LSTM, its training loop, the shipped checkpoint;
* :mod:`mllm_utils.charcli`: the command line,
  ``python -m mllm_utils.charcli {preprocess,train,predict,evaluate}`` (``-m mllm_utils.charlm`` too).

Introduced in notebook 07 (War and Peace); notebook 10 reuses the data functions.
"""

from __future__ import annotations

import sys

from mllm_utils.charcli import METHODS, load_any_model, main
from mllm_utils.chardata import (
    UNK,
    batches,
    build_vocab,
    decode,
    encode,
    load_data_dir,
    load_vocab,
    prepare,
    save_data_dir,
    save_vocab,
    split,
    stream_batches,
    tokenize,
    windows,
)
from mllm_utils.charlstm import (
    EMBED_DIM,
    HIDDEN_DIM,
    NUM_LAYERS,
    POST_BATCH_SIZE,
    POST_DROPOUT,
    POST_EPOCHS,
    POST_LR,
    SHIPPED_CHECKPOINT,
    CharLSTM,
    history_path,
    load_model,
    plot_history,
    shipped_checkpoint_path,
    train,
)
from mllm_utils.chartrain import POST_SEQ_LEN, evaluate, lr_at
from mllm_utils.checkpoints import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    UnsafeCheckpointError,
    load_checkpoint,
    remove_stale_temporaries,
    save_checkpoint,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "EMBED_DIM",
    "HIDDEN_DIM",
    "METHODS",
    "NUM_LAYERS",
    "POST_BATCH_SIZE",
    "POST_DROPOUT",
    "POST_EPOCHS",
    "POST_LR",
    "POST_SEQ_LEN",
    "SHIPPED_CHECKPOINT",
    "UNK",
    "CharLSTM",
    "CheckpointError",
    "UnsafeCheckpointError",
    "batches",
    "build_vocab",
    "decode",
    "encode",
    "evaluate",
    "history_path",
    "load_any_model",
    "load_checkpoint",
    "load_data_dir",
    "load_model",
    "load_vocab",
    "lr_at",
    "main",
    "plot_history",
    "prepare",
    "remove_stale_temporaries",
    "save_checkpoint",
    "save_data_dir",
    "save_vocab",
    "shipped_checkpoint_path",
    "split",
    "stream_batches",
    "tokenize",
    "train",
    "windows",
]

if __name__ == "__main__":
    sys.exit(main())
