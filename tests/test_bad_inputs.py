"""Bad inputs a learner could type, over every module and the command line: each one a clear error.

Every row is one mistake: the call, the exception it must raise, and a fragment of
the message that names the argument (or flag) at fault. No row may pass silently
(that is the point: a wrong argument must not give a wrong result). Command-line rows
must exit with status 2 and print one line, without a traceback.
"""

from __future__ import annotations

import math
import pickle
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest
import torch
from torch import nn

from mllm_utils import (
    attention,
    cbow,
    charcli,
    chardata,
    charlstm,
    chartrain,
    checkpoints,
    data,
    generation,
    rnn,
    runtime,
    sampling,
    text,
    train,
    transformer,
    wikitext,
)
from mllm_utils.checkpoints import CheckpointError, UnsafeCheckpointError

ITOS = ["<unk>", " ", "a", "b", "c", "d"]
SMALL_TEXT = "a bad cab, a dab. " * 60
NO_CUDA = not torch.cuda.is_available()


class Case(NamedTuple):
    module: str
    name: str
    call: Callable
    error: type[BaseException]
    says: str  # a fragment of the message: the argument's (or flag's) name


def _evil(c):
    class Payload:
        def __reduce__(self):
            return (Path.touch, (c.tmp / "ran",))

    torch.save({"format": checkpoints.CHECKPOINT_FORMAT, "x": Payload()}, c.tmp / "evil.pt")
    return c.tmp / "evil.pt"


def _file(c, name: str, content: bytes) -> Path:
    (c.tmp / name).write_bytes(content)
    return c.tmp / name


def _lstm_train(c, **kwargs):
    args = {"model": c.lstm, "train_data": c.train, "val_data": c.val, "itos": ITOS, "checkpoint_path": None,
            "epochs": 1, "batch_size": 2, "seq_len": 8, "log": lambda *_: None, **kwargs}  # fmt: skip
    return charlstm.train(**args)


def _tlm_train(c, **kwargs):
    args = {"model": c.tlm, "train_data": c.train, "val_data": c.val, "itos": ITOS, "steps": 1, "batch_size": 2,
            "seq_len": 8, "log": lambda *_: None, **kwargs}  # fmt: skip
    return transformer.train(**args)


def _fit(c, **kwargs):
    args = {"model": nn.Linear(2, 2), "loss_fn": nn.functional.cross_entropy, "optimizer": None,
            "train_batches": [(torch.zeros(2, 2), torch.zeros(2, dtype=torch.long))], "epochs": 1, **kwargs}
    if args["optimizer"] is None:
        args["optimizer"] = torch.optim.SGD(args["model"].parameters(), lr=0.1)
    return train.train(**args)


X2 = torch.zeros(4, 2)
Y2 = torch.zeros(4, dtype=torch.long)

CASES = [
    # ------------------------------------------------------------------ attention
    Case("attention", "causal_mask(0)", lambda c: attention.causal_mask(0), ValueError, "seq_len"),
    Case("attention", "causal_mask(2.0)", lambda c: attention.causal_mask(2.0), TypeError, "seq_len"),
    Case("attention", "causal_mask key_len < seq_len", lambda c: attention.causal_mask(4, 2), ValueError, "key_len"),
    Case("attention", "causal_mask key_len='8'", lambda c: attention.causal_mask(4, "8"), TypeError, "key_len"),
    Case("attention", "causal_mask dtype str", lambda c: attention.causal_mask(4, dtype="bool"), TypeError, "dtype"),
    Case("attention", "causal_mask int dtype", lambda c: attention.causal_mask(4, dtype=torch.int64), ValueError,
         "dtype"),
    Case("attention", "sdpa q a list", lambda c: attention.scaled_dot_product_attention([[1.0]], c.q, c.q),
         TypeError, "q must"),
    Case("attention", "sdpa integer k", lambda c: attention.scaled_dot_product_attention(c.q, c.q.long(), c.q),
         TypeError, "k must"),
    Case("attention", "sdpa dropout_p=1.5", lambda c: attention.scaled_dot_product_attention(c.q, c.q, c.q, None, 1.5),
         ValueError, "dropout_p"),
    Case("attention", "sdpa scale=0", lambda c: attention.scaled_dot_product_attention(c.q, c.q, c.q, scale=0),
         ValueError, "scale"),
    Case("attention", "sdpa scale=nan", lambda c: attention.scaled_dot_product_attention(c.q, c.q, c.q, scale=math.nan),
         ValueError, "scale"),
    Case("attention", "sdpa q/k widths differ",
         lambda c: attention.scaled_dot_product_attention(c.q, torch.rand(2, 5, 3), torch.rand(2, 5, 3)), ValueError,
         "queries and keys"),
    Case("attention", "sdpa attn_mask a list", lambda c: attention.scaled_dot_product_attention(c.q, c.q, c.q, [[0]]),
         TypeError, "attn_mask"),
    Case("attention", "sdpa integer attn_mask",
         lambda c: attention.scaled_dot_product_attention(c.q, c.q, c.q, torch.zeros(5, 5, dtype=torch.long)),
         TypeError, "attn_mask"),
    Case("attention", "MHA 10 not a multiple of 4", lambda c: attention.MultiHeadAttention(10, 4), ValueError,
         "num_heads"),
    Case("attention", "MHA embed_dim=16.0", lambda c: attention.MultiHeadAttention(16.0, 4), TypeError, "embed_dim"),
    Case("attention", "MHA dropout=-0.1", lambda c: attention.MultiHeadAttention(16, 4, dropout=-0.1), ValueError,
         "dropout"),
    Case("attention", "MHA bias='yes'", lambda c: attention.MultiHeadAttention(16, 4, bias="yes"), TypeError, "bias"),
    Case("attention", "MHA 2-D x", lambda c: c.mha(torch.rand(5, 16)), ValueError, "input x"),
    Case("attention", "MHA integer x", lambda c: c.mha(torch.zeros(1, 5, 16, dtype=torch.long)), TypeError, "input x"),
    Case("attention", "MHA need_weights='no'", lambda c: c.mha(c.x16, need_weights="no"), TypeError, "need_weights"),
    Case("attention", "MHA is_causal=1", lambda c: c.mha(c.x16, is_causal=1), TypeError, "is_causal"),
    Case("attention", "MHA float key_padding_mask", lambda c: c.mha(c.x16, key_padding_mask=torch.zeros(1, 5)),
         TypeError, "key_padding_mask"),
    Case("attention", "MHA key_padding_mask shape",
         lambda c: c.mha(c.x16, key_padding_mask=torch.zeros(1, 4, dtype=torch.bool)), ValueError, "key_padding_mask"),
    Case("attention", "MHA called as mha(q, k, v)", lambda c: c.mha(c.x16, c.x16, c.x16), ValueError, "mha(x)"),
    Case("attention", "MHA past_kv of one tensor", lambda c: c.mha(c.x16, past_kv=(torch.rand(1, 4, 2, 4),)),
         ValueError, "past_kv"),
    Case("attention", "load_torch_mha theirs a str",
         lambda c: attention.load_torch_multihead_attention(c.mha, "mha"), TypeError, "theirs"),
    Case("attention", "load_torch_mha batch_first=False",
         lambda c: attention.load_torch_multihead_attention(c.mha, nn.MultiheadAttention(16, 4)), ValueError,
         "batch_first"),
    # ------------------------------------------------------------------ cbow
    Case("cbow", "wikitext_paragraphs(one str)", lambda c: cbow.wikitext_paragraphs("a b\nc"), TypeError, "lines"),
    Case("cbow", "wikitext_paragraphs(None)", lambda c: cbow.wikitext_paragraphs(None), TypeError, "lines"),
    Case("cbow", "wikitext_paragraphs bytes line", lambda c: cbow.wikitext_paragraphs([b"x"]), TypeError, "lines[0]"),
    Case("cbow", "build_vocab min_freq=0", lambda c: cbow.build_vocab([["a"]], min_freq=0), ValueError, "min_freq"),
    Case("cbow", "build_vocab min_freq=2.5", lambda c: cbow.build_vocab([["a"]], min_freq=2.5), TypeError, "min_freq"),
    Case("cbow", "build_vocab of untokenized lines", lambda c: cbow.build_vocab(["a b", "c"], 1), TypeError,
         "paragraphs[0]"),
    Case("cbow", "build_vocab of one str", lambda c: cbow.build_vocab("a b c", 1), TypeError, "paragraphs"),
    Case("cbow", "build_vocab min_freq keeps no word", lambda c: cbow.build_vocab([["a", "b", "a"]]), ValueError,
         "min_freq=50"),
    Case("cbow", "build_vocab of no paragraphs", lambda c: cbow.build_vocab([], min_freq=1), ValueError, "paragraphs"),
    Case("cbow", "encode_paragraphs vocab a dict", lambda c: cbow.encode_paragraphs([["a"]], {"a": 0}), TypeError,
         "vocab"),
    Case("cbow", "encode_paragraphs untokenized", lambda c: cbow.encode_paragraphs(["a b"], c.vocab), TypeError,
         "paragraphs[0]"),
    Case("cbow", "encode_paragraphs no default", lambda c: cbow.encode_paragraphs([["zebra"]], c.vocab_no_default),
         KeyError, "set_default_index"),
    Case("cbow", "cbow_pairs window=3", lambda c: cbow.cbow_pairs([list(range(10))], window=3), ValueError, "window"),
    Case("cbow", "cbow_pairs window=4.0", lambda c: cbow.cbow_pairs([list(range(10))], window=4.0), TypeError,
         "window"),
    Case("cbow", "cbow_pairs one tensor", lambda c: cbow.cbow_pairs(torch.arange(10), window=2), TypeError,
         "paragraphs"),
    Case("cbow", "cbow_pairs float ids", lambda c: cbow.cbow_pairs([[1.5, 2.0, 3.0]], window=2), TypeError,
         "paragraph 0"),
    Case("cbow", "cbow_pairs negative ids", lambda c: cbow.cbow_pairs([[-1, 2, 3, 4]], window=2), ValueError,
         "paragraph 0"),
    Case("cbow", "cbow_pairs no paragraphs", lambda c: cbow.cbow_pairs([], window=2), ValueError, "paragraphs"),
    Case("cbow", "cbow_pairs window too wide", lambda c: cbow.cbow_pairs([[1, 2]], window=8), ValueError, "window"),
    Case("cbow", "cbow_pairs_python window=0", lambda c: cbow.cbow_pairs_python([[1, 2, 3]], window=0), ValueError,
         "window"),
    # ------------------------------------------------------------------ chardata
    Case("chardata", "tokenize(None)", lambda c: chardata.tokenize(None), TypeError, "text"),
    Case("chardata", "tokenize(bytes)", lambda c: chardata.tokenize(b"abc"), TypeError, "text"),
    Case("chardata", "build_vocab([])", lambda c: chardata.build_vocab([]), ValueError, "tokens"),
    Case("chardata", "build_vocab(None)", lambda c: chardata.build_vocab(None), TypeError, "tokens"),
    Case("chardata", "build_vocab of ints", lambda c: chardata.build_vocab([1, 2]), TypeError, "tokens"),
    Case("chardata", "build_vocab of a tensor", lambda c: chardata.build_vocab(torch.tensor([1, 2])), TypeError,
         "tokens"),
    Case("chardata", "encode itos without <unk>", lambda c: chardata.encode("ab", ["a", "b"]), ValueError, "itos"),
    Case("chardata", "encode itos a str", lambda c: chardata.encode("ab", "<unk>ab"), TypeError, "itos"),
    Case("chardata", "encode itos empty", lambda c: chardata.encode("ab", []), ValueError, "itos"),
    Case("chardata", "encode ids again", lambda c: chardata.encode(torch.tensor([1]), ITOS), TypeError, "tokens"),
    Case("chardata", "encode a list with an int", lambda c: chardata.encode(["a", 1], ITOS), TypeError, "tokens"),
    Case("chardata", "decode([-1])", lambda c: chardata.decode([-1], ITOS), ValueError, "ids"),
    Case("chardata", "decode([99])", lambda c: chardata.decode([99], ITOS), ValueError, "ids"),
    Case("chardata", "decode tensor -1", lambda c: chardata.decode(torch.tensor([2, -1]), ITOS), ValueError, "ids"),
    Case("chardata", "decode float tensor", lambda c: chardata.decode(torch.tensor([0.5]), ITOS), TypeError, "ids"),
    Case("chardata", "decode 2-D tensor", lambda c: chardata.decode(torch.tensor([[1]]), ITOS), ValueError, "ids"),
    Case("chardata", "decode([1.0])", lambda c: chardata.decode([1.0], ITOS), TypeError, "each id"),
    Case("chardata", "decode a str", lambda c: chardata.decode("ab", ITOS), TypeError, "ids"),
    Case("chardata", "decode with another vocab", lambda c: chardata.decode(torch.tensor([5]), ITOS[:3]), ValueError,
         "ids"),
    Case("chardata", "split a list", lambda c: chardata.split([1, 2, 3]), TypeError, "encoded"),
    Case("chardata", "split 2-D", lambda c: chardata.split(torch.zeros(2, 3)), ValueError, "encoded"),
    Case("chardata", "split train_fraction=1.0", lambda c: chardata.split(c.data, 1.0), ValueError, "train_fraction"),
    Case("chardata", "split train_fraction='0.9'", lambda c: chardata.split(c.data, "0.9"), TypeError,
         "train_fraction"),
    Case("chardata", "split train_fraction=nan", lambda c: chardata.split(c.data, math.nan), ValueError,
         "train_fraction"),
    Case("chardata", "split too short", lambda c: chardata.split(torch.arange(5)), ValueError, "too short"),
    Case("chardata", "prepare(123)", lambda c: chardata.prepare(123), TypeError, "text"),
    Case("chardata", "prepare itos without <unk>", lambda c: chardata.prepare(SMALL_TEXT, itos=["a"]), ValueError,
         "itos"),
    Case("chardata", "prepare itos with a twin", lambda c: chardata.prepare(SMALL_TEXT, itos=["<unk>", "a", "a"]),
         ValueError, "itos"),
    Case("chardata", "prepare train_fraction=0", lambda c: chardata.prepare(SMALL_TEXT, train_fraction=0),
         ValueError, "train_fraction"),
    Case("chardata", "windows seq_len=0", lambda c: chardata.windows(c.data, 0), ValueError, "seq_len"),
    Case("chardata", "windows seq_len=4.0", lambda c: chardata.windows(c.data, 4.0), TypeError, "seq_len"),
    Case("chardata", "windows stride=0", lambda c: chardata.windows(c.data, 4, stride=0), ValueError, "stride"),
    Case("chardata", "windows offset=-5", lambda c: chardata.windows(c.data, 4, offset=-5), ValueError, "offset"),
    Case("chardata", "windows offset=1.5", lambda c: chardata.windows(c.data, 4, offset=1.5), TypeError, "offset"),
    Case("chardata", "windows float data", lambda c: chardata.windows(c.data.float(), 4), TypeError, "data"),
    Case("chardata", "windows list data", lambda c: chardata.windows([1, 2, 3, 4, 5, 6], 2), TypeError, "data"),
    Case("chardata", "windows 2-D data", lambda c: chardata.windows(c.data.view(2, -1), 4), ValueError, "data"),
    Case("chardata", "windows too short", lambda c: chardata.windows(c.data[:4], 4), ValueError, "seq_len"),
    Case("chardata", "windows offset past the end", lambda c: chardata.windows(c.data, 4, offset=10_000), ValueError,
         "offset"),
    Case("chardata", "batches batch_size=0", lambda c: chardata.batches(c.data, 0, 4), ValueError, "batch_size"),
    Case("chardata", "batches batch_size=2.0", lambda c: chardata.batches(c.data, 2.0, 4), TypeError, "batch_size"),
    Case("chardata", "batches seq_len=0", lambda c: chardata.batches(c.data, 2, 0), ValueError, "seq_len"),
    Case("chardata", "batches shuffle='yes'", lambda c: chardata.batches(c.data, 2, 4, shuffle="yes"), TypeError,
         "shuffle"),
    Case("chardata", "batches generator=0", lambda c: chardata.batches(c.data, 2, 4, generator=0), TypeError,
         "generator"),
    Case("chardata", "batches drop_last=None", lambda c: chardata.batches(c.data, 2, 4, drop_last=None), TypeError,
         "drop_last"),
    Case("chardata", "stream_batches batch_size=0", lambda c: chardata.stream_batches(c.data, 0, 4), ValueError,
         "batch_size"),
    Case("chardata", "stream_batches seq_len=-1", lambda c: chardata.stream_batches(c.data, 2, -1), ValueError,
         "seq_len"),
    Case("chardata", "stream_batches too many rows", lambda c: chardata.stream_batches(c.data[:100], 50, 8),
         ValueError, "batch_size"),
    Case("chardata", "stream_batches offset=-1", lambda c: chardata.stream_batches(c.data, 2, 4, offset=-1),
         ValueError, "offset"),
    Case("chardata", "save_vocab without <unk>", lambda c: chardata.save_vocab(["a"], c.tmp / "v.json"), ValueError,
         "itos"),
    Case("chardata", "save_vocab path=None", lambda c: chardata.save_vocab(ITOS, None), TypeError, "path"),
    Case("chardata", "load_vocab missing", lambda c: chardata.load_vocab(c.tmp / "none.json"), FileNotFoundError,
         "preprocess"),
    Case("chardata", "load_vocab path=None", lambda c: chardata.load_vocab(None), TypeError, "path"),
    Case("chardata", "load_vocab not JSON", lambda c: chardata.load_vocab(_file(c, "v.json", b"{itos")), ValueError,
         "v.json"),
    Case("chardata", "load_data_dir empty folder", lambda c: chardata.load_data_dir(c.tmp), FileNotFoundError,
         "preprocess --data"),
    Case("chardata", "save_data_dir onto a file", lambda c: chardata.save_data_dir(_file(c, "f", b"x"), ITOS, c.train,
                                                                                   c.val),
         NotADirectoryError, "folder"),
    # ------------------------------------------------------------------ checkpoints
    Case("checkpoints", "save a list", lambda c: checkpoints.save_checkpoint([1], c.tmp / "m.pt"), TypeError,
         "checkpoint must"),
    Case("checkpoints", "save path=None", lambda c: checkpoints.save_checkpoint({}, None), TypeError, "path"),
    Case("checkpoints", "save a numpy number", lambda c: checkpoints.save_checkpoint({"x": np.float32(1)}, c.tmp / "m"),
         TypeError, "checkpoint['x']"),
    Case("checkpoints", "save an object", lambda c: checkpoints.save_checkpoint({"x": [object()]}, c.tmp / "m"),
         TypeError, "checkpoint['x'][0]"),
    Case("checkpoints", "save vocab smaller than model",
         lambda c: checkpoints.save_checkpoint({"model_config": {"vocab_size": 9}, "itos": ITOS}, c.tmp / "m"),
         ValueError, "vocab_size"),
    Case("checkpoints", "save onto a folder", lambda c: checkpoints.save_checkpoint({}, c.tmp), IsADirectoryError,
         "folder"),
    Case("checkpoints", "save under a file", lambda c: checkpoints.save_checkpoint({}, _file(c, "f", b"x") / "m.pt"),
         NotADirectoryError, "path="),
    Case("checkpoints", "load path=None", lambda c: checkpoints.load_checkpoint(None), TypeError, "path"),
    Case("checkpoints", "load missing", lambda c: checkpoints.load_checkpoint(c.tmp / "no.pt"), FileNotFoundError,
         "no checkpoint"),
    Case("checkpoints", "load empty file", lambda c: checkpoints.load_checkpoint(_file(c, "e.pt", b"")),
         CheckpointError, "empty (0 bytes)"),
    Case("checkpoints", "load random bytes",
         lambda c: checkpoints.load_checkpoint(_file(c, "r.pt", np.random.default_rng(0).bytes(999))),
         CheckpointError, "not a file written by torch.save"),
    Case("checkpoints", "load a truncated file",
         lambda c: checkpoints.load_checkpoint(_file(c, "t.pt", c.lstm_file.read_bytes()[:3000])), CheckpointError,
         "truncated"),
    Case("checkpoints", "load one that runs code", lambda c: checkpoints.load_checkpoint(_evil(c)),
         UnsafeCheckpointError, "arbitrary code"),
    Case("checkpoints", "load another program's file",
         lambda c: checkpoints.load_checkpoint(c.save({"weights": torch.zeros(1)})), CheckpointError, "format"),
    Case("checkpoints", "load a folder", lambda c: checkpoints.load_checkpoint(c.tmp), CheckpointError, "folder"),
    Case("checkpoints", "map_location='gpu'", lambda c: checkpoints.load_checkpoint(c.lstm_file, map_location="gpu"),
         ValueError, "map_location"),
    Case("checkpoints", "map_location=3", lambda c: checkpoints.load_checkpoint(c.lstm_file, map_location=3),
         TypeError, "map_location"),
    Case("checkpoints", "remove_stale_temporaries(None)", lambda c: checkpoints.remove_stale_temporaries(None),
         TypeError, "path"),
    Case("checkpoints", "atomic_write(None)", lambda c: checkpoints.atomic_write(None, print), TypeError, "path"),
    # ------------------------------------------------------------------ chartrain
    Case("chartrain", "lr_at step=-1", lambda c: chartrain.lr_at(-1, 10, 1e-3, 0, 0), ValueError, "step"),
    Case("chartrain", "lr_at total_steps=0", lambda c: chartrain.lr_at(0, 0, 1e-3, 0, 0), ValueError, "total_steps"),
    Case("chartrain", "lr_at lr<0", lambda c: chartrain.lr_at(0, 10, -1e-3, 0, 0), ValueError, "lr must"),
    Case("chartrain", "lr_at lr=nan", lambda c: chartrain.lr_at(0, 10, math.nan, 0, 0), ValueError, "lr must"),
    Case("chartrain", "lr_at lr_min > lr", lambda c: chartrain.lr_at(0, 10, 1e-3, 1e-2, 0), ValueError, "lr_min"),
    Case("chartrain", "lr_at warmup=-1", lambda c: chartrain.lr_at(0, 10, 1e-3, 0, -1), ValueError, "warmup"),
    Case("chartrain", "evaluate max_tokens=-5", lambda c: chartrain.evaluate(c.lstm, c.val, 8, max_tokens=-5),
         ValueError, "max_tokens"),
    Case("chartrain", "evaluate max_tokens too few", lambda c: chartrain.evaluate(c.lstm, c.val, 8, max_tokens=4),
         ValueError, "max_tokens"),
    Case("chartrain", "evaluate seq_len=0", lambda c: chartrain.evaluate(c.lstm, c.val, 0), ValueError, "seq_len"),
    Case("chartrain", "evaluate batch_size=0", lambda c: chartrain.evaluate(c.lstm, c.val, 8, 0), ValueError,
         "batch_size"),
    Case("chartrain", "evaluate carry_state=1", lambda c: chartrain.evaluate(c.lstm, c.val, 8, carry_state=1),
         TypeError, "carry_state"),
    Case("chartrain", "evaluate ids beyond the vocab", lambda c: chartrain.evaluate(c.lstm, c.val + 10, 8), ValueError,
         "data holds token ids"),
    Case("chartrain", "evaluate float data", lambda c: chartrain.evaluate(c.lstm, c.val.float(), 8), TypeError,
         "data"),
    Case("chartrain", "evaluate model a str", lambda c: chartrain.evaluate("lstm", c.val, 8), TypeError, "model"),
    Case("chartrain", "evaluate device='gpu'", lambda c: chartrain.evaluate(c.lstm, c.val, 8, device="gpu"),
         ValueError, "device"),
    Case("chartrain", "evaluate seq_len > context_len", lambda c: chartrain.evaluate(c.tlm, c.val, 64), ValueError,
         "context_len"),
    Case("chartrain", "evaluate text too short", lambda c: chartrain.evaluate(c.lstm, c.val[:5], 8), ValueError,
         "seq_len"),
    # ------------------------------------------------------------------ charlstm
    Case("charlstm", "CharLSTM(0)", lambda c: charlstm.CharLSTM(0), ValueError, "vocab_size"),
    Case("charlstm", "CharLSTM(70.0)", lambda c: charlstm.CharLSTM(70.0), TypeError, "vocab_size"),
    Case("charlstm", "CharLSTM embed_dim=0", lambda c: charlstm.CharLSTM(6, embed_dim=0), ValueError, "embed_dim"),
    Case("charlstm", "CharLSTM hidden_dim=-1", lambda c: charlstm.CharLSTM(6, hidden_dim=-1), ValueError,
         "hidden_dim"),
    Case("charlstm", "CharLSTM num_layers=0", lambda c: charlstm.CharLSTM(6, num_layers=0), ValueError, "num_layers"),
    Case("charlstm", "CharLSTM dropout=-0.5", lambda c: charlstm.CharLSTM(6, dropout=-0.5), ValueError, "dropout"),
    Case("charlstm", "CharLSTM dropout=1.0", lambda c: charlstm.CharLSTM(6, dropout=1.0), ValueError, "dropout"),
    Case("charlstm", "forward ids beyond the vocab", lambda c: c.lstm(torch.tensor([[1, 6]])), ValueError, "x holds"),
    Case("charlstm", "forward negative id", lambda c: c.lstm(torch.tensor([[-1, 2]])), ValueError, "x holds"),
    Case("charlstm", "forward 1-D x", lambda c: c.lstm(torch.tensor([1, 2])), ValueError, "x must"),
    Case("charlstm", "forward float x", lambda c: c.lstm(torch.rand(1, 3)), TypeError, "x must"),
    Case("charlstm", "forward empty x", lambda c: c.lstm(torch.zeros(1, 0, dtype=torch.long)), ValueError,
         "x is empty"),
    Case("charlstm", "forward state of one tensor", lambda c: c.lstm(torch.tensor([[1]]), (torch.zeros(1, 1, 8),)),
         ValueError, "state"),
    Case("charlstm", "step 2-D x", lambda c: c.lstm.step(torch.tensor([[1]])), ValueError, "x must"),
    Case("charlstm", "train clip=-1", lambda c: _lstm_train(c, clip=-1), ValueError, "clip"),
    Case("charlstm", "train clip=0", lambda c: _lstm_train(c, clip=0), ValueError, "clip"),
    Case("charlstm", "train epochs=-1", lambda c: _lstm_train(c, epochs=-1), ValueError, "epochs"),
    Case("charlstm", "train epochs=2.0", lambda c: _lstm_train(c, epochs=2.0), TypeError, "epochs"),
    Case("charlstm", "train batch_size=0", lambda c: _lstm_train(c, batch_size=0), ValueError, "batch_size"),
    Case("charlstm", "train seq_len=0", lambda c: _lstm_train(c, seq_len=0), ValueError, "seq_len"),
    Case("charlstm", "train lr=0", lambda c: _lstm_train(c, lr=0), ValueError, "lr must"),
    Case("charlstm", "train lr=inf", lambda c: _lstm_train(c, lr=math.inf), ValueError, "lr must"),
    Case("charlstm", "train lr_min > lr", lambda c: _lstm_train(c, lr=1e-3, lr_min=1e-2), ValueError, "lr_min"),
    Case("charlstm", "train warmup=-1", lambda c: _lstm_train(c, warmup=-1), ValueError, "warmup"),
    Case("charlstm", "train seed=-1", lambda c: _lstm_train(c, seed=-1), ValueError, "seed"),
    Case("charlstm", "train carry_state='yes'", lambda c: _lstm_train(c, carry_state="yes"), TypeError,
         "carry_state"),
    Case("charlstm", "train resume=None", lambda c: _lstm_train(c, resume=None), TypeError, "resume"),
    Case("charlstm", "train itos shorter than the model", lambda c: _lstm_train(c, itos=ITOS[:4]), ValueError, "itos"),
    Case("charlstm", "train ids beyond the vocab", lambda c: _lstm_train(c, train_data=c.train + 10), ValueError,
         "train_data"),
    Case("charlstm", "train val_data a list", lambda c: _lstm_train(c, val_data=[1, 2, 3]), TypeError, "val_data"),
    Case("charlstm", "train log=None", lambda c: _lstm_train(c, log=None), TypeError, "log"),
    Case("charlstm", "train device='gpu'", lambda c: _lstm_train(c, device="gpu"), ValueError, "device"),
    Case("charlstm", "train a transformer", lambda c: _lstm_train(c, model=c.tlm), TypeError, "model"),
    Case("charlstm", "train checkpoint_path=3", lambda c: _lstm_train(c, checkpoint_path=3), TypeError,
         "checkpoint_path"),
    Case("charlstm", "train checkpoint_path a folder", lambda c: _lstm_train(c, checkpoint_path=c.tmp),
         IsADirectoryError, "checkpoint_path="),
    Case("charlstm", "train text too short for the batch", lambda c: _lstm_train(c, batch_size=500), ValueError,
         "batch_size"),
    Case("charlstm", "train val_seq_len too long", lambda c: _lstm_train(c, val_seq_len=10_000), ValueError,
         "val_seq_len"),
    Case("charlstm", "train resuming a transformer file", lambda c: _lstm_train(c, checkpoint_path=c.tlm_file),
         CheckpointError, "not an LSTM checkpoint"),
    Case("charlstm", "load_model of a transformer", lambda c: charlstm.load_model(c.tlm_file), CheckpointError,
         "transformer.load_model"),
    Case("charlstm", "load_model missing", lambda c: charlstm.load_model(c.tmp / "no.pt"), FileNotFoundError,
         "checkpoint"),
    Case("charlstm", "plot_history({})", lambda c: charlstm.plot_history({}), ValueError, "history"),
    Case("charlstm", "plot_history post_val='x'",
         lambda c: charlstm.plot_history({"train": [], "val": [], "step": [], "token_steps": []}, post_val="x"),
         TypeError, "post_val"),
    # ------------------------------------------------------------------ data
    Case("data", "strip_gutenberg(bytes)", lambda c: data.strip_gutenberg(b"text"), TypeError, "text"),
    Case("data", "strip_gutenberg(None)", lambda c: data.strip_gutenberg(None), TypeError, "text"),
    Case("data", "strip_gutenberg without markers", lambda c: data.strip_gutenberg("War and Peace"), ValueError,
         "text lacks"),
    # ------------------------------------------------------------------ rnn
    Case("rnn", "RNN(0, 4)", lambda c: rnn.RNN(0, 4), ValueError, "input_dim"),
    Case("rnn", "RNN(2.0, 4)", lambda c: rnn.RNN(2.0, 4), TypeError, "input_dim"),
    Case("rnn", "RNN(2, '4')", lambda c: rnn.RNN(2, "4"), TypeError, "hidden_dim"),
    Case("rnn", "forward long x", lambda c: c.rnn(torch.zeros(3, 2, dtype=torch.long)), TypeError, "x must"),
    Case("rnn", "forward wrong width", lambda c: c.rnn(torch.zeros(3, 5)), ValueError, "x must"),
    Case("rnn", "forward no time steps", lambda c: c.rnn(torch.zeros(0, 2)), ValueError, "x has no time steps"),
    Case("rnn", "forward h of another shape", lambda c: c.rnn(torch.zeros(3, 1, 2), torch.zeros(2, 4)), ValueError,
         "h must"),
    Case("rnn", "forward float64 x", lambda c: c.rnn(torch.zeros(3, 2, dtype=torch.float64)), TypeError, "x has dtype"),
    Case("rnn", "forward a list", lambda c: c.rnn([[0.0, 1.0]]), TypeError, "x must"),
    Case("rnn", "sequence_data task='next'", lambda c: rnn.sequence_data("next", 4), ValueError, "task"),
    Case("rnn", "sequence_data seq_len=0", lambda c: rnn.sequence_data("count", 0, 10), ValueError, "seq_len"),
    Case("rnn", "sequence_data seq_len=4.0", lambda c: rnn.sequence_data("count", 4.0), TypeError, "seq_len"),
    Case("rnn", "sequence_data vocab_size=1", lambda c: rnn.sequence_data("count", 4, 1), ValueError, "vocab_size"),
    # ------------------------------------------------------------------ runtime
    Case("runtime", "seed_everything(-1)", lambda c: runtime.seed_everything(-1), ValueError, "seed"),
    Case("runtime", "seed_everything(1.5)", lambda c: runtime.seed_everything(1.5), TypeError, "seed"),
    Case("runtime", "seed_everything(2**33)", lambda c: runtime.seed_everything(2**33), ValueError, "seed"),
    Case("runtime", "start(None, ...)", lambda c: runtime.start(None, "1 h"), TypeError, "quick_time"),
    Case("runtime", "start('', ...)", lambda c: runtime.start("1 min", ""), ValueError, "full_time"),
    Case("runtime", "start with nested parentheses", lambda c: runtime.start("1 min (on a CPU (2 cores))"),
         ValueError, "quick_time"),
    Case("runtime", "MLLM_QUICK=yes", lambda c: c.env("MLLM_QUICK", "yes", runtime.run_size), ValueError,
         "MLLM_QUICK"),
    # ------------------------------------------------------------------ generation (checked there already)
    Case("generation", "generate length=-1", lambda c: generation.generate(c.lstm, [1], -1), ValueError, "length"),
    Case("generation", "generate temperature=0", lambda c: generation.generate(c.lstm, [1], 3, temperature=0),
         ValueError, "temperature"),
    Case("generation", "generate top_k=0", lambda c: generation.generate(c.lstm, [1], 3, top_k=0), ValueError, "top_k"),
    Case("generation", "generate top_p=1.5", lambda c: generation.generate(c.lstm, [1], 3, top_p=1.5), ValueError,
         "top_p"),
    Case("generation", "generate greedy='yes'", lambda c: generation.generate(c.lstm, [1], 3, greedy="yes"),
         TypeError, "greedy"),
    Case("generation", "generate prompt ids beyond the vocab", lambda c: generation.generate(c.lstm, [9], 3),
         ValueError, "x holds token ids"),
    Case("generation", "generate with the transformer past its context",
         lambda c: generation.generate(c.tlm, [1] * 8, 3), ValueError, "context_len"),
    # ------------------------------------------------------------------ sampling
    Case("sampling", "sample temperature=1e-50 (float32 logits)",
         lambda c: sampling.sample(torch.tensor([1.0, 2.0]), temperature=1e-50), ValueError, "temperature=1e-50"),
    Case("generation", "generate temperature=1e-50",
         lambda c: generation.generate(c.lstm, [1], 3, temperature=1e-50), ValueError, "temperature=1e-50"),
    # ------------------------------------------------------------------ text
    Case("text", "basic_english(None)", lambda c: text.basic_english(None), TypeError, "takes a str"),
    Case("text", "get_tokenizer('spacy')", lambda c: text.get_tokenizer("spacy"), ValueError, "tokenizer"),
    Case("text", "get_tokenizer language='fr'", lambda c: text.get_tokenizer("basic_english", "fr"), ValueError,
         "language"),
    Case("text", "Vocab('abc')", lambda c: text.Vocab("abc"), TypeError, "tokens"),
    Case("text", "Vocab(['a', 1])", lambda c: text.Vocab(["a", 1]), TypeError, "token (str)"),
    Case("text", "set_default_index(99)", lambda c: c.vocab.set_default_index(99), ValueError, "index 99"),
    Case("text", "set_default_index(-1)", lambda c: c.vocab.set_default_index(-1), ValueError, "index -1"),
    Case("text", "set_default_index(1.5)", lambda c: c.vocab.set_default_index(1.5), TypeError, "set_default_index"),
    Case("text", "Vocab default_index=5 of 2", lambda c: text.Vocab(["a", "b"], default_index=5), ValueError,
         "index 5"),
    Case("text", "unknown token, no default", lambda c: c.vocab_no_default["zebra"], RuntimeError,
         "set_default_index"),
    Case("text", "lookup_token(99)", lambda c: c.vocab.lookup_token(99), RuntimeError, "index 99"),
    Case("text", "lookup_token(0.5 tensor)", lambda c: c.vocab.lookup_token(torch.tensor(0.5)), TypeError,
         "integer index"),
    Case("text", "lookup_indices('abc')", lambda c: c.vocab.lookup_indices("abc"), TypeError, "single string"),
    Case("text", "insert_token at 99", lambda c: c.vocab.insert_token("new", 99), RuntimeError, "index 99"),
    Case("text", "append_token twice", lambda c: c.vocab.append_token("a"), RuntimeError, "already exists"),
    Case("text", "specials='<unk>'", lambda c: text.build_vocab_from_iterator([["a"]], specials="<unk>"), TypeError,
         "specials"),
    Case("text", "min_freq=1.5", lambda c: text.build_vocab_from_iterator([["a"]], min_freq=1.5), TypeError,
         "min_freq"),
    Case("text", "max_tokens='3'", lambda c: text.build_vocab_from_iterator([["a"]], max_tokens="3"), TypeError,
         "max_tokens"),
    Case("text", "max_tokens <= specials", lambda c: text.build_vocab_from_iterator([["a"]], specials=["<unk>"],
                                                                                    max_tokens=1),
         ValueError, "max_tokens"),
    Case("text", "vocab() specials='<pad>'", lambda c: text.vocab(OrderedDict(a=1), specials="<pad>"), TypeError,
         "specials"),
    # ------------------------------------------------------------------ train
    Case("train", "Batches X and Y differ", lambda c: train.Batches(X2, Y2[:-1], 2), ValueError, "X and Y"),
    Case("train", "Batches of lists", lambda c: train.Batches([1, 2], [1, 2], 2), TypeError, "X must"),
    Case("train", "Batches batch_size=0", lambda c: train.Batches(X2, Y2, 0), ValueError, "batch_size"),
    Case("train", "Batches batch_size=2.0", lambda c: train.Batches(X2, Y2, 2.0), TypeError, "batch_size"),
    Case("train", "Batches shuffle='no'", lambda c: train.Batches(X2, Y2, 2, shuffle="no"), TypeError, "shuffle"),
    Case("train", "Batches seed=-1", lambda c: train.Batches(X2, Y2, 2, seed=-1), ValueError, "seed"),
    Case("train", "Batches empty", lambda c: train.Batches(X2[:0], Y2[:0], 2), ValueError, "empty"),
    Case("train", "train epochs=0", lambda c: _fit(c, epochs=0), ValueError, "epochs"),
    Case("train", "train epochs=2.0", lambda c: _fit(c, epochs=2.0), TypeError, "epochs"),
    Case("train", "train loss_fn a str", lambda c: _fit(c, loss_fn="cross_entropy"), TypeError, "loss_fn"),
    Case("train", "train optimizer a str", lambda c: _fit(c, optimizer="adam"), TypeError, "optimizer"),
    Case("train", "train batches a tensor", lambda c: _fit(c, train_batches=X2), TypeError, "train_batches"),
    Case("train", "train scheduler=1", lambda c: _fit(c, scheduler=1), TypeError, "scheduler"),
    Case("train", "train forward=1", lambda c: _fit(c, forward=1), TypeError, "forward"),
    Case("train", "train no batches", lambda c: _fit(c, train_batches=[]), ValueError, "no batches"),
    Case("train", "train model a str", lambda c: _fit(c, model="linear", optimizer=c.sgd), TypeError, "model"),
    Case("train", "evaluate device='gpu'", lambda c: train.evaluate(nn.Linear(2, 2), nn.functional.cross_entropy,
                                                                    [(X2, Y2)], device="gpu"),
         ValueError, "device"),
    Case("train", "plot_losses of a list", lambda c: train.plot_losses([1.0, 0.5]), TypeError, "history"),
    # ------------------------------------------------------------------ transformer
    Case("transformer", "TransformerLM(0)", lambda c: transformer.TransformerLM(0), ValueError, "vocab_size"),
    Case("transformer", "10 dims for 4 heads", lambda c: transformer.TransformerLM(6, embed_dim=10, num_heads=4),
         ValueError, "num_heads"),
    Case("transformer", "embed_dim=16.0", lambda c: transformer.TransformerLM(6, embed_dim=16.0), TypeError,
         "embed_dim"),
    Case("transformer", "context_len=0", lambda c: transformer.TransformerLM(6, context_len=0), ValueError,
         "context_len"),
    Case("transformer", "dropout=1.0", lambda c: transformer.TransformerLM(6, dropout=1.0), ValueError, "dropout"),
    Case("transformer", "num_layers=2.0", lambda c: transformer.TransformerLM(6, num_layers=2.0), TypeError,
         "num_layers"),
    Case("transformer", "forward ids beyond the vocab", lambda c: c.tlm(torch.tensor([[1, 6]])), ValueError, "x holds"),
    Case("transformer", "forward 1-D x", lambda c: c.tlm(torch.tensor([1, 2])), ValueError, "x.unsqueeze(0)"),
    Case("transformer", "forward float x", lambda c: c.tlm(torch.rand(1, 3)), TypeError, "x: integer token ids"),
    Case("transformer", "forward a state of 1 block", lambda c: c.tlm(torch.tensor([[1]]), state=[]), ValueError,
         "state"),
    Case("transformer", "forward need_weights='yes'", lambda c: c.tlm(torch.tensor([[1]]), need_weights="yes"),
         TypeError, "need_weights"),
    Case("transformer", "forward past the context", lambda c: c.tlm(torch.ones(1, 9, dtype=torch.long)), ValueError,
         "context_len"),
    Case("transformer", "FeedForward hidden_dim=0", lambda c: transformer.FeedForward(16, 0), ValueError,
         "hidden_dim"),
    Case("transformer", "Block with 3 heads", lambda c: transformer.Block(16, 3, 64), ValueError, "num_heads"),
    Case("transformer", "train steps=0", lambda c: _tlm_train(c, steps=0), ValueError, "steps"),
    Case("transformer", "train seq_len past the context", lambda c: _tlm_train(c, seq_len=1000), ValueError,
         "seq_len"),
    Case("transformer", "train eval_every=0", lambda c: _tlm_train(c, eval_every=0), ValueError, "eval_every"),
    Case("transformer", "train checkpoint_path a folder", lambda c: _tlm_train(c, checkpoint_path=c.tmp),
         IsADirectoryError, "checkpoint_path="),
    Case("transformer", "train eval_tokens=3", lambda c: _tlm_train(c, eval_tokens=3), ValueError, "eval_tokens"),
    Case("transformer", "train clip=-1", lambda c: _tlm_train(c, clip=-1), ValueError, "clip"),
    Case("transformer", "train an LSTM", lambda c: _tlm_train(c, model=c.lstm), TypeError, "model"),
    Case("transformer", "train itos shorter", lambda c: _tlm_train(c, itos=ITOS[:3]), ValueError, "itos"),
    Case("transformer", "train batch too big", lambda c: _tlm_train(c, batch_size=1000), ValueError, "batch_size"),
    Case("transformer", "save_model a list", lambda c: transformer.save_model([1], c.tmp / "t.pt"), TypeError,
         "checkpoint"),
    Case("transformer", "save_model no config", lambda c: transformer.save_model({"model": {}}, c.tmp / "t.pt"),
         ValueError, "model_config"),
    Case("transformer", "save_model an LSTM's", lambda c: transformer.save_model(c.lstm_checkpoint, c.tmp / "t.pt"),
         ValueError, "num_heads"),
    Case("transformer", "load_model of an LSTM", lambda c: transformer.load_model(c.lstm_file), CheckpointError,
         "charlstm.load_model"),
    # ------------------------------------------------------------------ wikitext
    Case("wikitext", "urls one string", lambda c: wikitext.wikitext2_dir(urls="http://x/w.zip", cache_dir=c.tmp),
         TypeError, "urls"),
    Case("wikitext", "splits one string", lambda c: wikitext.wikitext2_dir(c.tmp, splits="train"), TypeError,
         "splits"),
    Case("wikitext", "splits misspelt", lambda c: wikitext.wikitext2_dir(c.tmp, splits=["trian"]), ValueError, "split"),
    Case("wikitext", "md5 too short", lambda c: wikitext.wikitext2_dir(md5="abc", cache_dir=c.tmp), ValueError, "md5"),
    Case("wikitext", "timeout=0", lambda c: wikitext.wikitext2_dir(timeout=0, cache_dir=c.tmp), ValueError,
         "timeout"),
    Case("wikitext", "timeout=nan", lambda c: wikitext.wikitext2_dir(timeout=math.nan, cache_dir=c.tmp), ValueError,
         "timeout"),
    Case("wikitext", "folder=3", lambda c: wikitext.wikitext2_dir(3), TypeError, "folder"),
    Case("wikitext", "line_counts a list", lambda c: wikitext.wikitext2_dir(c.tmp, line_counts=[1]), TypeError,
         "line_counts"),
    Case("wikitext", "folder without the files", lambda c: wikitext.wikitext2_dir(c.tmp), wikitext.WikiTextError,
         "wiki.train.tokens does not exist"),
    Case("wikitext", "wikitext2 split='trian'", lambda c: wikitext.wikitext2("trian"), ValueError, "split"),
    Case("wikitext", "or_excerpt split='trian'", lambda c: wikitext.wikitext2_or_excerpt("trian", quick=True),
         ValueError, "split"),
    Case("wikitext", "or_excerpt quick='yes'", lambda c: wikitext.wikitext2_or_excerpt("train", quick="yes"),
         TypeError, "quick"),
]

# The command line: (name, arguments, fragment of the one-line error). Status 2, no traceback.
CLI = [
    ("no command", [], "required"),
    ("unknown command", ["fly"], "invalid choice"),
    ("train --epochs -1", ["train", "--epochs", "-1"], "--epochs"),
    ("train --epochs 0", ["train", "--epochs", "0"], "--epochs"),
    ("train --epochs 2.5", ["train", "--epochs", "2.5"], "--epochs"),
    ("train --epoch 3 (no prefixes)", ["train", "--epoch", "3"], "--epoch 3"),
    ("train --batch 4 (no prefixes)", ["train", "--batch", "4"], "--batch 4"),
    ("train --batch-size 0", ["train", "--batch-size", "0"], "--batch-size"),
    ("train --seq-len -3", ["train", "--seq-len", "-3"], "--seq-len"),
    ("train --lr 0", ["train", "--lr", "0"], "--lr"),
    ("train --lr nan", ["train", "--lr", "nan"], "--lr"),
    ("train --lr-min -1", ["train", "--lr-min", "-1"], "--lr-min"),
    ("train --clip -1", ["train", "--clip", "-1"], "--clip"),
    ("train --warmup -1", ["train", "--warmup", "-1"], "--warmup"),
    ("train --dropout 1.5", ["train", "--dropout", "1.5"], "--dropout"),
    ("train --embed-dim 0", ["train", "--embed-dim", "0"], "--embed-dim"),
    ("train --hidden-dim x", ["train", "--hidden-dim", "x"], "--hidden-dim"),
    ("train --num-layers 0", ["train", "--num-layers", "0"], "--num-layers"),
    ("train --threads -2", ["train", "--threads", "-2"], "--threads"),
    ("train --seed -1", ["train", "--seed", "-1"], "--seed"),
    ("train --device gpu", ["train", "--device", "gpu"], "--device"),
    ("train --fresh yes", ["train", "--fresh", "yes"], "unrecognized arguments: yes"),
    ("train --text missing", ["train", "--text", "missing.txt"], "--text"),
    ("train batch bigger than the text", ["train", "--text", "{small}", "--batch-size", "500", "--seq-len", "16"],
     "--batch-size"),
    ("train --lr-min above --lr", ["train", "--text", "{small}", "--lr", "0.001", "--lr-min", "0.01"], "--lr-min"),
    ("train a transformer checkpoint", ["train", "--text", "{small}", "--checkpoint", "{transformer}"],
     "--checkpoint"),
    ("train a corrupt checkpoint", ["train", "--text", "{small}", "--checkpoint", "{junk}"], "--checkpoint"),
    ("train --checkpoint a folder", ["train", "--text", "{small}", "--checkpoint", "{partial}"], "--checkpoint="),
    ("train --checkpoint under a file", ["train", "--text", "{small}", "--checkpoint", "{junk}/m.pt"],
     "--checkpoint="),
    ("predict --length 0", ["predict", "--length", "0"], "--length"),
    ("predict --k 0", ["predict", "--k", "0"], "--k"),
    ("predict --p 1.5", ["predict", "--p", "1.5"], "--p"),
    ("predict --p 0", ["predict", "--p", "0"], "--p"),
    ("predict --temperature 0", ["predict", "--temperature", "0"], "--temperature"),
    ("predict --temperature -1", ["predict", "--temperature", "-1"], "--temperature"),
    ("predict --method beam", ["predict", "--method", "beam"], "--method"),
    ("predict --seed -1", ["predict", "--seed", "-1"], "--seed"),
    ("predict empty prompt", ["predict", "--prompt", "\u201c\u201d"], "--prompt"),
    ("predict --k above the vocabulary", ["predict", "--method", "top-k", "--k", "500"], "--k"),
    ("predict missing checkpoint", ["predict", "--checkpoint", "missing.pt"], "--checkpoint"),
    ("predict empty checkpoint", ["predict", "--checkpoint", "{empty}"], "--checkpoint"),
    ("predict code-running checkpoint", ["predict", "--checkpoint", "{evil}"], "--checkpoint"),
    ("predict transformer past its context", ["predict", "--checkpoint", "transformer", "--length", "600"],
     "--length"),
    ("evaluate --seq-len 0", ["evaluate", "--seq-len", "0"], "--seq-len"),
    ("evaluate --max-tokens -5", ["evaluate", "--max-tokens", "-5"], "--max-tokens"),
    ("evaluate --max-tokens too few", ["evaluate", "--text", "{small}", "--max-tokens", "10"], "--max-tokens"),
    ("evaluate transformer --seq-len 600", ["evaluate", "--checkpoint", "transformer", "--text", "{small}",
                                            "--seq-len", "600"], "--seq-len"),
    ("evaluate transformer --carry-state", ["evaluate", "--checkpoint", "transformer", "--carry-state"],
     "--carry-state"),
    ("evaluate --text missing", ["evaluate", "--text", "missing.txt"], "--text"),
    ("evaluate a half-written --data", ["evaluate", "--data", "{partial}"], "preprocess --data"),
    ("preprocess --text missing", ["preprocess", "--text", "missing.txt"], "--text"),
    ("preprocess --data onto a file", ["preprocess", "--data", "{junk}"], "--data"),
]


@pytest.fixture
def c(tmp_path, monkeypatch):
    """Small models, texts and files for the calls above (fresh for every row)."""
    torch.manual_seed(0)
    ctx = SimpleNamespace(tmp=tmp_path)
    ctx.data = torch.arange(200) % len(ITOS)
    ctx.train, ctx.val = ctx.data[:160], ctx.data[160:]
    ctx.lstm = charlstm.CharLSTM(len(ITOS), embed_dim=4, hidden_dim=8, num_layers=1)
    ctx.tlm = transformer.TransformerLM(len(ITOS), embed_dim=8, num_heads=2, num_layers=1, context_len=8)
    ctx.mha = attention.MultiHeadAttention(16, 4)
    ctx.x16, ctx.q = torch.rand(1, 5, 16), torch.rand(2, 5, 4)
    ctx.rnn = rnn.RNN(2, 4)
    ctx.sgd = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    ctx.vocab = text.build_vocab_from_iterator([["a", "b"]], specials=["<unk>"])
    ctx.vocab.set_default_index(0)
    ctx.vocab_no_default = text.build_vocab_from_iterator([["a", "b"]], specials=["<unk>"])
    ctx.lstm_checkpoint = {**checkpoints.new_checkpoint(ctx.lstm, ITOS, {}, charlstm.HISTORY_KEYS),
                           "model": ctx.lstm.state_dict()}  # fmt: skip
    ctx.lstm_file = tmp_path / "lstm.pt"
    checkpoints.save_checkpoint(ctx.lstm_checkpoint, ctx.lstm_file)
    ctx.tlm_file = tmp_path / "transformer.pt"
    tlm_checkpoint = checkpoints.new_checkpoint(ctx.tlm, ITOS, {}, transformer.HISTORY_KEYS, checkpoints.TRANSFORMER)
    transformer.save_model({**tlm_checkpoint, "model": ctx.tlm.state_dict()}, ctx.tlm_file)

    def save(obj):
        torch.save(obj, tmp_path / "other.pt")
        return tmp_path / "other.pt"

    def env(name, value, fn):
        monkeypatch.setenv(name, value)
        return fn()

    ctx.save, ctx.env = save, env
    return ctx


def _row_id(case: Case) -> str:
    return f"{case.module}: {case.name}"


@pytest.mark.parametrize("case", CASES, ids=_row_id)
def test_a_bad_call_is_a_clear_error(case, c):
    with pytest.raises(case.error) as info:
        case.call(c)
    assert case.says in str(info.value), f"{type(info.value).__name__}: {info.value}"
    assert not (c.tmp / "ran").exists()  # no row ran code from a file


def test_an_empty_prompt_is_named_as_such(c):
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        generation.generate(c.lstm, [], 3)


@pytest.mark.parametrize(("name", "argv", "says"), CLI, ids=[row[0] for row in CLI])
def test_a_bad_command_line_is_one_clear_line_with_status_2(name, argv, says, c, capsys, monkeypatch):
    monkeypatch.chdir(c.tmp)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    (c.tmp / "small.txt").write_text(SMALL_TEXT, encoding="utf-8")
    (c.tmp / "empty.pt").write_bytes(b"")
    (c.tmp / "junk").write_bytes(b"junk" * 100)
    (c.tmp / "partial").mkdir()
    (c.tmp / "partial" / "vocab.json").write_text('{"itos": ["<unk>", "a"]}', encoding="utf-8")
    files = {"small": "small.txt", "empty": "empty.pt", "junk": "junk", "partial": "partial",
             "transformer": str(c.tlm_file), "evil": str(_evil(c))}  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        charcli.main([arg.format(**files) for arg in argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert says in err, err
    assert not (c.tmp / "ran").exists()


def test_the_table_covers_every_module_and_the_command_line():
    modules = {case.module for case in CASES}
    assert modules == {"attention", "cbow", "chardata", "checkpoints", "chartrain", "charlstm", "data", "generation",
                       "rnn", "runtime", "sampling", "text", "train", "transformer", "wikitext"}  # fmt: skip
    assert len(CASES) + len(CLI) >= 150
    assert len({_row_id(case) for case in CASES}) == len(CASES)  # every row is a different mistake
    assert all(issubclass(case.error, (ValueError, TypeError, OSError, RuntimeError, KeyError, pickle.PickleError))
               for case in CASES)  # fmt: skip
