"""The command line of the War and Peace character models: preprocess, train, predict, evaluate.

``mllm-war-and-peace {preprocess,train,predict,evaluate}`` (or
``python -m mllm_utils.charcli ...``): the post's three scripts as one command.
``train`` trains the LSTM of notebook 07 (resuming from an existing
checkpoint); ``predict`` and ``evaluate`` take an LSTM or a transformer
(notebook 10) checkpoint and tell which from the file itself.

A mistake (a flag's value out of range, a misspelt flag, a missing or corrupt
file, a text too short for the batch) is reported in one line that names the
flag, with exit status 2 and no traceback. Long flags must be spelt out
(``--epoch 3`` is an error, not ``--epochs 3``). Set ``MLLM_DEBUG=1`` to see
the traceback behind such a message.

Introduced in notebook 07 (War and Peace).
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import re
import sys
from pathlib import Path

import torch

from mllm_utils._validate import check_device
from mllm_utils.chardata import decode, encode, is_data_dir, load_data_dir, prepare, save_data_dir, tokenize
from mllm_utils.charlstm import EMBED_DIM, HIDDEN_DIM, NUM_LAYERS
from mllm_utils.chartrain import POST_SEQ_LEN, evaluate
from mllm_utils.checkpoints import (
    TRANSFORMER,
    CheckpointError,
    UnsafeCheckpointError,
    architecture_of,
    build_model,
    check_model_checkpoint,
    check_writable_path,
    load_checkpoint,
)

__all__ = ["METHODS", "load_any_model", "main"]

METHODS = ("greedy", "temperature", "top-k", "top-p")
SHIPPED = ("lstm", "transformer")  # --checkpoint names for the shipped models (when no such file exists)
# Python argument names in the package's messages -> this command's flags.
# Underscored names become flags wherever they stand; these plain words only before "=", " must" or ")".
_FLAGS = {"top_k": "--k", "top_p": "--p", "lr": "--lr", "clip": "--clip"}


class UsageError(Exception):
    """A mistake in a command's flags or files: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block: the flag and what is wrong with it
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds each option's default to its help, except a default of None: that help says what happens."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


# ---------------------------------------------------------------------------
# Flag types: a value out of range is refused before anything runs
# ---------------------------------------------------------------------------


def _whole(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        return value

    return parse


def _real(low: float, high: float = math.inf, low_open: bool = True, high_open: bool = True, what: str = ""):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (value > low if low_open else value >= low)
        ok = ok and (value < high if high_open else value <= high)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return parse


_count, _natural = _whole(1), _whole(0)
_positive = _real(0.0, what="a number > 0")
_nonnegative = _real(0.0, low_open=False, what="a number >= 0")
_probability = _real(0.0, 1.0, high_open=False, what="a probability in (0, 1]")
_dropout = _real(0.0, 1.0, low_open=False, what="a probability in [0, 1)")


def _device(text: str) -> str:
    try:
        torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be a device such as cpu, cuda or mps, got {text!r}") from None
    try:
        check_device("device", text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not available on this machine: use --device cpu") from None
    return text


# ---------------------------------------------------------------------------
# Loading either model
# ---------------------------------------------------------------------------


def load_any_model(path=None, map_location="cpu"):
    """``(model, itos, checkpoint)`` from an LSTM or a transformer checkpoint (the shipped LSTM if None)."""
    from mllm_utils.charlstm import CharLSTM, shipped_checkpoint_path
    from mllm_utils.transformer import TransformerLM

    path = shipped_checkpoint_path() if path is None else path
    checkpoint = load_checkpoint(path, map_location)
    architecture = architecture_of(checkpoint)
    check_model_checkpoint(checkpoint, architecture, path)
    model_class = TransformerLM if architecture == TRANSFORMER else CharLSTM
    return build_model(model_class, checkpoint, path), checkpoint["itos"], checkpoint


def _model_for(args):
    """The model ``--checkpoint`` names: a file, else ``lstm`` / ``transformer`` for the shipped ones."""
    from mllm_utils import charlstm, transformer

    path = args.checkpoint
    if path in SHIPPED and not Path(path).exists():
        path = (charlstm if path == "lstm" else transformer).shipped_checkpoint_path()
    try:
        return load_any_model(path)
    except (OSError, ValueError, pickle.UnpicklingError) as exc:
        raise UsageError(f"--checkpoint: {exc}") from exc


# ---------------------------------------------------------------------------
# The commands
# ---------------------------------------------------------------------------


def _read_text(path):
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"--text {path}: no such file") from None
    except (UnicodeDecodeError, IsADirectoryError) as exc:
        raise UsageError(f"--text {path}: not a UTF-8 text file ({exc})") from None


def _cmd_preprocess(args) -> None:
    out = Path(args.data)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--data {out} is a file: name a folder for vocab.json, train.pt and val.pt")
    itos, train_data, val_data = prepare(_read_text(args.text))
    save_data_dir(out, itos, train_data, val_data)
    print(f"Vocabulary of {len(itos)} tokens -> {out / 'vocab.json'}")
    print(f"{len(train_data):,} training and {len(val_data):,} validation characters -> {out}/")


def _data_for(args):
    data_dir = Path(args.data)
    if args.text is None and is_data_dir(data_dir):
        return load_data_dir(data_dir)
    if args.text is None:
        print(f"No preprocessed data in {data_dir}: preprocessing the novel first")
        _cmd_preprocess(args)
        return load_data_dir(data_dir)
    return prepare(_read_text(args.text))


def _cmd_train(args) -> None:
    from mllm_utils.charlstm import CharLSTM, history_path, train

    torch.set_num_threads(args.threads) if args.threads else None
    try:  # before the data and the first epoch: a folder or a path under a file could not be saved to
        checkpoint_path = check_writable_path("--checkpoint", args.checkpoint)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    itos, train_data, val_data = _data_for(args)
    if args.fresh and checkpoint_path.exists():
        print(f"--fresh: starting over (overwriting {checkpoint_path} after the first epoch)")
    torch.manual_seed(args.seed)
    model = CharLSTM(len(itos), args.embed_dim, args.hidden_dim, args.num_layers, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{n_params:,} parameters; {len(train_data):,} training characters; device {args.device}")
    try:
        checkpoint = train(
            model, train_data, val_data, itos, checkpoint_path, epochs=args.epochs,
            batch_size=args.batch_size, seq_len=args.seq_len, lr=args.lr, lr_min=args.lr_min,
            warmup=args.warmup, clip=args.clip, carry_state=args.carry_state, seed=args.seed,
            resume=not args.fresh, device=args.device,
        )  # fmt: skip
    except (CheckpointError, UnsafeCheckpointError) as exc:
        raise UsageError(f"--checkpoint: {exc} (or pass --fresh to start over)") from exc
    if checkpoint["epoch"] > 0:
        print(f"Checkpoint: {checkpoint_path} (history in {history_path(checkpoint_path)})")
    if checkpoint["history"]["val"]:
        print(f"final validation loss {checkpoint['history']['val'][-1]:.4f} nats/char")


def _cmd_predict(args) -> None:
    from mllm_utils.generation import generate

    model, itos, _ = _model_for(args)
    prompt_ids = encode(tokenize(args.prompt), itos).tolist()
    if not prompt_ids:
        raise UsageError("--prompt is empty after tokenizing: give --prompt some letters")
    context_len = getattr(model, "context_len", None)
    if context_len is not None and len(prompt_ids) + args.length - 1 > context_len:
        raise UsageError(
            f"--length {args.length} after a {len(prompt_ids)}-character --prompt needs more than the "
            f"transformer's context_len={context_len} positions: use --length {context_len - len(prompt_ids) + 1} "
            "or less"
        )
    if args.method == "top-k" and args.k > len(itos):
        raise UsageError(f"--k {args.k} is more than the vocabulary's {len(itos)} characters")
    generator = torch.Generator().manual_seed(args.seed)
    options = {
        "greedy": {"greedy": True},
        "temperature": {"temperature": args.temperature},
        "top-k": {"temperature": args.temperature, "top_k": args.k},
        "top-p": {"temperature": args.temperature, "top_p": args.p},
    }[args.method]
    new = generate(model, prompt_ids, args.length, generator=generator, **options)
    print(decode(prompt_ids, itos) + decode(new, itos))


def _cmd_evaluate(args) -> None:
    model, itos, checkpoint = _model_for(args)
    transformer = architecture_of(checkpoint) == TRANSFORMER
    if transformer and args.carry_state:
        raise UsageError("--carry-state is for the LSTM: a transformer has no state to carry beyond its context")
    if args.text is None and is_data_dir(args.data):
        data_itos, _, val_data = load_data_dir(Path(args.data))
        if data_itos != itos:
            raise UsageError(f"--data {args.data} was preprocessed with another vocabulary than the checkpoint's")
    else:
        _, _, val_data = prepare(_read_text(args.text), itos=itos)
    loss = evaluate(model, val_data, args.seq_len, max_tokens=args.max_tokens)
    done = f"{checkpoint['step']:,} steps" if transformer else f"{checkpoint['epoch']} epochs"
    print(f"checkpoint: {args.checkpoint or 'war_and_peace_lstm.pt'} "
          f"({checkpoint['token_steps']:,} token-steps, {done})")  # fmt: skip
    print(f"validation characters: {min(len(val_data) - 1, args.max_tokens or len(val_data)):,}")
    print(f"validation loss: {loss:.4f} nats/char ({args.seq_len}-character windows, fresh state)")
    if args.carry_state:
        full = evaluate(model, val_data, args.seq_len, carry_state=True, max_tokens=args.max_tokens)
        print(f"validation loss with the state carried: {full:.4f} nats/char")


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mllm-war-and-peace", allow_abbrev=False,
        description="The War and Peace character models (notebooks 07 and 10): preprocess the novel, "
        "train the LSTM (resuming from an existing checkpoint), sample, evaluate.",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, metavar="{preprocess,train,predict,evaluate}")

    def data_options(p):
        p.add_argument("--data", default="charlm_data",
                       help="folder for vocab.json, train.pt, val.pt (default: %(default)s)")  # fmt: skip
        p.add_argument("--text", default=None, help="train on this UTF-8 text file instead of the shipped novel")

    p = sub.add_parser("preprocess", allow_abbrev=False,
                       help="tokenize the novel, save the vocabulary (JSON) and the 90/10 split")  # fmt: skip
    data_options(p)
    p.set_defaults(func=_cmd_preprocess)

    p = sub.add_parser("train", help="train; continues from --checkpoint if it exists (see --fresh)",
                       formatter_class=_DefaultsFormatter, allow_abbrev=False)  # fmt: skip
    data_options(p)
    p.add_argument("--checkpoint", default="war_and_peace_lstm.pt", help="checkpoint to write (and resume from)")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint and start over")
    p.add_argument("--epochs", type=_count, default=20, help="total epochs (passes over the training text)")
    p.add_argument("--batch-size", type=_count, default=128)
    p.add_argument("--seq-len", type=_count, default=128, help="window length (characters)")
    p.add_argument("--carry-state", action="store_true", help="consecutive windows, hidden state carried")
    p.add_argument("--lr", type=_positive, default=3e-3, help="peak learning rate (Adam)")
    p.add_argument("--lr-min", type=_nonnegative, default=1e-4, help="learning rate at the end of the cosine decay")
    p.add_argument("--warmup", type=_natural, default=100, help="warm-up steps")
    p.add_argument("--clip", type=_positive, default=1.0, help="gradient-norm clipping")
    p.add_argument("--embed-dim", type=_count, default=EMBED_DIM)
    p.add_argument("--hidden-dim", type=_count, default=HIDDEN_DIM)
    p.add_argument("--num-layers", type=_count, default=NUM_LAYERS)
    p.add_argument("--dropout", type=_dropout, default=0.0)
    p.add_argument("--seed", type=_natural, default=0)
    p.add_argument("--threads", type=_natural, default=0, help="CPU threads (0: torch's default)")
    p.add_argument("--device", type=_device, default="cuda" if torch.cuda.is_available() else "cpu")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "predict", formatter_class=_DefaultsFormatter, allow_abbrev=False,
        help="sample text: methods greedy, temperature, top-k, top-p",
        description="Sample text from a checkpoint. Methods: greedy (always the most likely "
        "character), temperature (sample from softmax(logits / T)), top-k (sample among the k "
        "most likely), top-p (sample among the smallest set whose probability reaches p).",
    )  # fmt: skip
    _checkpoint_option(p)
    p.add_argument("--method", choices=METHODS, default="top-p", help="the decoding rule (default: %(default)s)")
    p.add_argument("--prompt", default="She went away", help="text to start from")
    p.add_argument("--length", type=_count, default=500, help="characters to generate")
    p.add_argument("--temperature", type=_positive, default=0.7, help="temperature T (all sampling methods)")
    p.add_argument("--k", type=_count, default=5, help="k for top-k")
    p.add_argument("--p", type=_probability, default=0.95, help="p for top-p")
    p.add_argument("--seed", type=_natural, default=0, help="seed of the sampling generator")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("evaluate", formatter_class=_DefaultsFormatter, allow_abbrev=False,
                       help="print a checkpoint's validation loss on the held-out 10%%")  # fmt: skip
    data_options(p)
    _checkpoint_option(p)
    p.add_argument("--seq-len", type=_count, default=POST_SEQ_LEN, help="window length (the post's: 64)")
    p.add_argument("--max-tokens", type=_count, default=None, help="evaluate on the first N characters only")
    p.add_argument("--carry-state", action="store_true", help="also print the loss with the state carried (LSTM)")
    p.set_defaults(func=_cmd_evaluate)
    return parser


def _checkpoint_option(p) -> None:
    p.add_argument("--checkpoint", default=None,
                   help="an LSTM or transformer checkpoint, or 'lstm' / 'transformer' for the shipped ones "
                   "(default: the shipped LSTM)")  # fmt: skip


def _with_flags(message: str, parser: argparse.ArgumentParser, command: str) -> str:
    """One line, with the package's argument names (``batch_size``) spelt as this command's flags."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags = {a.dest: a.option_strings[-1] for a in sub._actions if a.option_strings}
    message = " ".join(message.split())
    for name, flag in flags.items():
        if "_" in name:
            message = re.sub(rf"(?<![\w\-./'])({name})(?=[\s=:,)]|$)", flag, message)
    for name, flag in _FLAGS.items():
        if flag in flags.values():
            message = re.sub(rf"(?<![\w\-./'])({name})(?=[=)]| must)", flag, message)
    return message


def main(argv=None) -> None:
    """The command line: ``mllm-war-and-peace {preprocess,train,predict,evaluate}``.

    Introduced in notebook 07.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except KeyboardInterrupt:
        parser.exit(130, f"{parser.prog} {args.command}: interrupted (the last checkpoint written is kept)\n")
    except (UsageError, OSError, ValueError, TypeError, FloatingPointError, pickle.UnpicklingError,
            torch.cuda.OutOfMemoryError) as exc:  # fmt: skip
        if os.environ.get("MLLM_DEBUG"):
            raise
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            exc = UsageError("out of memory: use a smaller --batch-size or --seq-len")
        parser.exit(2, f"{parser.prog} {args.command}: error: {_with_flags(str(exc), parser, args.command)}\n")


if __name__ == "__main__":
    sys.exit(main())
