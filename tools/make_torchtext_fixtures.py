"""Record what the real torchtext 0.18 does, as JSON fixtures for tests/test_text_parity.py.

torchtext needs torch 2.3 and Python <= 3.11, so it lives in a throwaway
environment, never in the course's .venv. From the repository root:

    python3.11 -m venv /tmp/ttvenv
    /tmp/ttvenv/bin/pip install torch==2.3.0 torchtext==0.18.0     # about 5 GB with CUDA wheels
    /tmp/ttvenv/bin/python tools/make_torchtext_fixtures.py
    rm -rf /tmp/ttvenv

It writes tests/fixtures/torchtext/{tokenizers,vocab_builds,vocab_ops}.json.
Each file holds the inputs (the corpus, the build arguments, the operations)
next to torchtext's outputs, so the tests replay exactly the same calls on
``mllm_utils.text``. Errors are recorded as torchtext's exception type name and
the first line of its message.

The replay functions below (``tokenize_corpus``, ``run_build``, ``run_ops``)
take the text API as an argument (torchtext's, or ``mllm_utils.text``): the
parity test imports them, so the recorded and the replayed calls cannot drift
apart. This module imports neither torchtext nor torch at import time.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import sys
from collections import Counter, OrderedDict
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "torchtext"

# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

# Lines for the tokenizers: everything basic_english treats specially, and
# things it must leave alone.
TOKENIZER_CORPUS = [
    "",
    " ",
    "   ",
    "\t\n \r\n",
    "\u00a0\u2003\u2028",
    "Hello world",
    "  leading and trailing spaces  ",
    'Don\'t say "Hello", World!',
    "'single quotes' and \"double quotes\"",
    "it's O'Brien's",
    "Wait... what?!",
    "Is it (really) true? Yes; no: maybe!",
    "e.g. U.S.A. and i.e. etc.",
    "3.14 and 1,000,000 and -42 and 1e-9",
    "$5.00, 50% off & free #shipping",
    "email@example.com http://example.com/a?b=c#d",
    "This movie was great!<br /><br />I loved it.",
    "UPPER CASE BREAKS<BR />TOO<Br />and<bR />these",
    "not caught: <br/> <br  /> <br>",
    "a<br />b",
    "(1805\u20131812):",
    "an en\u2013dash and an em\u2014dash - and a hyphen-ated word",
    "\u201ccurly double\u201d and \u2018curly single\u2019",
    "na\u00efve caf\u00e9 \u00c9COLE \u00c0 d\u00e9j\u00e0 vu",
    "e\u0301 combining accent",
    "Stra\u00dfe \u1e9e \u0130stanbul \u039f\u0394\u039f\u03a3",
    "\ufb01 ligature and \uff01 full-width \uff0c",
    "\u4e2d\u6587\u6587\u672c\uff0c\u6d4b\u8bd5\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 (Japanese)",
    "emoji \U0001f600\U0001f44d\U0001f3fd and family \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "zero\u200bwidth space",
    "digits 0123456789 and 2nd 3rd",
    " = Valkyria Chronicles III = \n",
    " The 1 @,@ 000 @-@ year @-@ old tree was 3 @.@ 5 m tall . \n",
    " <unk> is the unknown token , <UNK> too . \n",
    "tab\tseparated\tvalues",
    "new\nline and crlf\r\nline",
    "semi;colon:colon;;::",
    "!!!???...,,,(((",
    "[brackets] {braces} <angles> /slash\\ back\\slash",
    "under_score and hy-phen and tilde~",
    "MiXeD CaSe WoRdS",
    "C++ & C# are languages.",
    '"Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes."',
    "It's \"quoted\" -- isn't it?",
]


def _lists(*lines: str) -> list[list[str]]:
    return [line.split() for line in lines]


# Corpora for build_vocab_from_iterator, each a way to feed the iterator.
BUILD_SOURCES = {
    # The pitfall guide's example: a special in the data takes a max_tokens slot.
    "guide_example": {"kind": "lists", "data": [["b", "a", "<unk>", "a", "B", "c"]]},
    # Frequencies 4..1 with ties between cases and accents.
    "ties": {
        "kind": "lists",
        "data": _lists(
            "x y Y z Z w W ~ !",
            "x y Y z Z b B",
            "x y Y a A \u00e4 \u00c4",
            "x b B a A",
            "\u00e9 e E \u00e9",
        ),
    },
    "specials_in_data": {
        "kind": "lists",
        "data": _lists(
            "<unk> the <pad> the <unk> <unk> a",
            "<eos> the a cat <bos> <bos>",
            "cat sat on the mat <eos>",
        ),
    },
    # The tokenizer corpus through basic_english, as the posts build vocabs.
    "basic_english_corpus": {"kind": "basic_english", "data": TOKENIZER_CORPUS},
    "split_corpus": {"kind": "split", "data": TOKENIZER_CORPUS},
    # Strings instead of lists: each string counts as its characters.
    "strings": {"kind": "strings", "data": ["hello", "world", "hello there", ""]},
    # MLLM's War and Peace preprocessing passes a Counter of characters.
    "counter_of_chars": {
        "kind": "counter",
        "data": dict(Counter("Well, Prince, so Genoa and Lucca are now just family estates; 1805!")),
    },
    "counter_of_words": {"kind": "counter", "data": {"hello": 3, "world": 1, "ab": 2}},
    "empty_lines": {"kind": "lists", "data": [[], [], ["only"], []]},
    "nothing": {"kind": "lists", "data": []},
    "empty_string_token": {"kind": "lists", "data": [["", "a", ""], ["a", "b"]]},
}

# Sources used only by the odd cases below.
EXTRA_SOURCES = {"ints": {"kind": "ints", "data": [[1, 2, 1]]}}

SPECIALS = {
    "none": None,
    "unk": ["<unk>"],
    "four": ["<unk>", "<pad>", "<bos>", "<eos>"],
}


def build_cases() -> list[dict]:
    """Every combination of the main parameters, then the odd ones."""
    cases = []
    for source, (specials_name, specials), min_freq, special_first in itertools.product(
        BUILD_SOURCES, SPECIALS.items(), (1, 2, 3), (True, False)
    ):
        n = len(specials or [])
        for max_tokens in (None, n + 1, n + 3, 1000):
            kwargs = {"min_freq": min_freq, "specials": specials, "special_first": special_first}
            if max_tokens is not None:
                kwargs["max_tokens"] = max_tokens
            name = f"{source}/{specials_name}/min{min_freq}/first{special_first}/max{max_tokens}"
            cases.append({"name": name, "source": source, "kwargs": kwargs})
    odd = [
        ("defaults", "ties", {}, None),
        ("min_freq_0", "ties", {"min_freq": 0}, None),
        ("specials_empty_list", "ties", {"specials": []}, None),
        ("specials_tuple", "ties", {"specials": {"tuple": ["<unk>", "<pad>"]}}, None),
        ("specials_string", "ties", {"specials": "<unk>"}, None),
        ("specials_string_repeated_char", "ties", {"specials": "<pp>"}, "duplicate_token"),
        ("specials_duplicate", "ties", {"specials": ["<unk>", "<unk>"]}, "duplicate_token"),
        (
            "specials_duplicate_last",
            "ties",
            {"specials": ["<unk>", "<pad>", "<unk>"], "special_first": False},
            "duplicate_token",
        ),
        ("max_tokens_equals_specials", "ties", {"specials": ["<unk>"], "max_tokens": 1}, "max_tokens_too_small"),
        ("max_tokens_below_specials", "ties", {"specials": SPECIALS["four"], "max_tokens": 2}, "max_tokens_too_small"),
        ("max_tokens_zero", "ties", {"max_tokens": 0}, "max_tokens_too_small"),
        ("max_tokens_one", "ties", {"max_tokens": 1}, None),
        ("max_tokens_guide", "guide_example", {"specials": ["<unk>"], "max_tokens": 3}, None),
        ("max_tokens_min_freq", "ties", {"specials": ["<unk>"], "max_tokens": 6, "min_freq": 3}, None),
        ("generator_of_lists", "ties", {"iterator": "generator"}, None),
        ("int_tokens", "ints", {}, "token_not_str"),
    ]
    for name, source, kwargs, error in odd:
        case = {"name": name, "source": source, "kwargs": kwargs}
        if error:
            case["error"] = error
        cases.append(case)
    return cases


# The factory torchtext.vocab.vocab(ordered_dict, ...): order kept as given.
FACTORY_CASES = [
    {"name": "order_kept", "ordered_dict": {"z": 1, "a": 5, "m": 3}, "kwargs": {}},
    {"name": "min_freq", "ordered_dict": {"z": 1, "a": 5, "m": 3}, "kwargs": {"min_freq": 3}},
    {
        "name": "specials_popped",
        "ordered_dict": {"z": 1, "<unk>": 9, "a": 5},
        "kwargs": {"specials": ["<unk>", "<pad>"]},
    },
    {
        "name": "specials_last",
        "ordered_dict": {"z": 1, "<unk>": 9, "a": 5},
        "kwargs": {"specials": ["<unk>"], "special_first": False, "min_freq": 2},
    },
]

# Operations on built vocabularies. An op that should raise names its error
# label; the recorder refuses to write fixtures if torchtext disagrees.
_BASE = {"source": "specials_in_data", "kwargs": {"specials": ["<unk>", "<pad>"]}}


def _t(value, dtype="int64"):
    return {"tensor": value, "dtype": dtype}


OP_SCENARIOS = [
    {
        "name": "lookups_without_default",
        "build": _BASE,
        "ops": [
            ["len"],
            ["get_default_index"],
            ["getitem", "the"],
            ["getitem", "<pad>"],
            ["getitem", "<eos>"],
            ["getitem", "zebra", "unknown_token"],
            ["getitem", "The", "unknown_token"],
            ["getitem", "", "unknown_token"],
            ["call", ["the", "zebra"], "unknown_token"],
            ["lookup_indices", ["the", "zebra"], "unknown_token"],
            ["call", ["the", "cat", "<unk>"]],
            ["lookup_indices", ["the", "cat"]],
            ["lookup_indices", []],
            ["lookup_indices", {"tuple": ["cat", "the"]}, "not_a_list"],
            ["lookup_indices", "the cat", "string_not_list"],
            ["lookup_indices", {"generator": ["cat", "the"]}, "not_a_sequence"],
            ["contains", "the"],
            ["contains", "zebra"],
            ["contains", ""],
            ["contains", 5, "token_not_str"],
            ["getitem", 5, "token_not_str"],
            ["lookup_token", 0],
            ["lookup_token", 9],
            ["lookup_token", True],
            ["lookup_token", _t(2)],
            ["lookup_token", _t([3])],
            ["lookup_token", _t(2, "int32")],
            ["lookup_token", 10, "index_out_of_range"],
            ["lookup_token", 1000, "index_out_of_range"],
            ["lookup_token", -1, "index_out_of_range"],
            ["lookup_token", 1.0, "not_an_index"],
            ["lookup_token", _t(1.0, "float32"), "float_tensor_index"],
            ["lookup_token", _t(1.7, "float32"), "float_tensor_index"],
            ["lookup_token", "the", "not_an_index"],
            ["lookup_tokens", [0, 1, 2]],
            ["lookup_tokens", []],
            ["lookup_tokens", {"tuple": [1, 2]}],
            ["lookup_tokens", _t([3, 0, 1]), "not_a_list"],
            ["lookup_tokens", [_t(1), _t(2)]],
            ["lookup_tokens", [0, 10], "index_out_of_range"],
            ["lookup_tokens", [-1], "index_out_of_range"],
            ["lookup_tokens", _t([[0, 1], [2, 3]]), "not_an_index"],
            ["get_itos"],
            ["get_stoi"],
        ],
    },
    {
        "name": "default_index",
        "build": _BASE,
        "ops": [
            ["set_default_index", 0],
            ["get_default_index"],
            ["getitem", "zebra"],
            ["getitem", "the"],
            ["call", ["the", "zebra", "<unk>", "<pad>"]],
            ["set_default_index", None],
            ["get_default_index"],
            ["getitem", "zebra", "unknown_token"],
            ["set_default_index", 99],
            ["getitem", "zebra"],
            ["set_default_index", -1],
            ["lookup_indices", ["zebra", "cat"]],
            ["set_default_index", _t(1)],
            ["get_default_index"],
            ["getitem", "zebra"],
            ["set_default_index", "x", "not_an_index"],
            ["get_default_index"],
        ],
    },
    {
        "name": "insert_and_append",
        "build": _BASE,
        "ops": [
            ["set_default_index", 0],
            ["insert_token", "new", 0],
            ["get_default_index"],
            ["getitem", "zebra"],
            ["getitem", "<unk>"],
            ["getitem", "new"],
            ["insert_token", "mid", 3],
            ["insert_token", "end", 12],
            ["insert_token", "x", 14, "insert_out_of_range"],
            ["insert_token", "y", -1, "insert_out_of_range"],
            ["insert_token", "the", 1, "token_exists"],
            ["insert_token", "the", 100, "insert_out_of_range"],
            ["append_token", "tail"],
            ["append_token", "the", "token_exists"],
            ["append_token", "<unk>", "token_exists"],
            ["append_token", ""],
            ["getitem", ""],
            ["insert_token", 5, 0, "token_not_str"],
            ["append_token", 5, "token_not_str"],
            ["insert_token", "tensor_index", _t(2)],
            ["lookup_indices", ["new", "mid", "end", "tail", "tensor_index", "zebra"]],
            ["lookup_tokens", [0, 1, 2, 3, 4]],
            ["get_itos"],
            ["get_stoi"],
            ["len"],
        ],
    },
    {
        "name": "insert_into_vocab_without_default",
        "build": {"source": "ties", "kwargs": {}},
        "ops": [
            ["insert_token", "<unk>", 0],
            ["get_default_index"],
            ["getitem", "zebra", "unknown_token"],
            ["append_token", "<pad>"],
            ["insert_token", "<bos>", 1],
            ["get_itos"],
            ["get_stoi"],
        ],
    },
    {
        "name": "specials_last_with_default",
        "build": {
            "source": "basic_english_corpus",
            "kwargs": {"specials": ["<unk>"], "special_first": False, "min_freq": 2},
        },
        "ops": [
            ["len"],
            ["getitem", "<unk>"],
            ["set_default_index", {"getitem": "<unk>"}],
            ["getitem", "never-seen"],
            ["call", ["the", "and", "never-seen", "."]],
            ["get_itos"],
        ],
    },
]

TOKENIZER_ERRORS = [
    {"name": "basic_english_language_de", "call": ["basic_english"], "kwargs": {"language": "de"}, "error": "language"},
    {"name": "unknown_tokenizer_name", "call": ["no_such_tokenizer"], "kwargs": {}, "error": "unknown_tokenizer"},
    {"name": "basic_english_on_int", "apply": 5, "error": "not_a_string"},
    {"name": "basic_english_on_none", "apply": None, "error": "not_a_string"},
]

# ---------------------------------------------------------------------------
# Replay: the same calls against any implementation of the API
# ---------------------------------------------------------------------------

MUTATING = {"set_default_index", "insert_token", "append_token"}


def encode(value):
    """A JSON value for a result: lists, dicts with str keys, str, int, bool, None."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        # stoi comes from a C++ hash map in torchtext: store it by index.
        return {k: encode(v) for k, v in sorted(value.items(), key=lambda kv: (kv[1], kv[0]))}
    raise TypeError(f"cannot record a {type(value).__name__}")


def record(value) -> dict:
    """The value and its type (and its items' types), so list vs tuple differences show."""
    out = {"value": encode(value), "type": type(value).__name__}
    if isinstance(value, (list, tuple)):
        out["item_types"] = sorted({type(v).__name__ for v in value})
    if isinstance(value, dict):
        out["item_types"] = sorted({f"{type(k).__name__}:{type(v).__name__}" for k, v in value.items()})
    return out


def error_record(exc: BaseException) -> dict:
    message = str(exc).strip().splitlines()
    return {"type": type(exc).__name__, "message": message[0] if message else ""}


def decode(arg, torch, vocab=None):
    """Turn a recorded argument back into the object passed (tensors, tuples, generators)."""
    if isinstance(arg, dict):
        if "tensor" in arg:
            return torch.tensor(arg["tensor"], dtype=getattr(torch, arg["dtype"]))
        if "tuple" in arg:
            return tuple(decode(a, torch, vocab) for a in arg["tuple"])
        if "generator" in arg:
            return (decode(a, torch, vocab) for a in arg["generator"])
        if "getitem" in arg:
            return vocab[arg["getitem"]]
    if isinstance(arg, list):
        return [decode(a, torch, vocab) for a in arg]
    return arg


def tokenize_corpus(api, corpus: list[str]) -> dict:
    """Both tokenizers over every line of ``corpus``."""
    return {
        "basic_english": [api.get_tokenizer("basic_english")(line) for line in corpus],
        "split": [api.get_tokenizer(None)(line) for line in corpus],
    }


def tokenizer_error(api, case: dict) -> dict:
    """Run one tokenizer call that may raise; return its result or error."""
    try:
        if "call" in case:
            result = api.get_tokenizer(*case["call"], **case["kwargs"])
            return {"result": {"type": type(result).__name__}}
        return {"result": record(api.get_tokenizer("basic_english")(case["apply"]))}
    except Exception as exc:  # noqa: BLE001 - recording whatever torchtext raises
        return {"error": error_record(exc)}


def tokenizer_returns_callable_itself(api) -> bool:
    def my_tokenizer(line):
        return list(line)

    return api.get_tokenizer(my_tokenizer) is my_tokenizer


def make_iterator(api, source: dict, generator: bool = False):
    """The iterator build_vocab_from_iterator receives for a recorded source."""
    kind, data = source["kind"], source["data"]
    if kind == "lists":
        items = [list(line) for line in data]
    elif kind == "basic_english":
        tokenizer = api.get_tokenizer("basic_english")
        items = [tokenizer(line) for line in data]
    elif kind == "split":
        items = [line.split() for line in data]
    elif kind == "strings":
        items = list(data)
    elif kind == "counter":
        return Counter(data)
    elif kind == "ints":
        items = data
    else:
        raise ValueError(f"unknown source kind {kind!r}")
    return (x for x in items) if generator else items


def vocab_state(vocab, with_stoi: bool = True) -> dict:
    """len, itos, default index and (or, to keep the files small, just whether) stoi."""
    itos = vocab.get_itos()
    state = {"len": len(vocab), "itos": record(itos), "default_index": vocab.get_default_index()}
    if with_stoi:
        state["stoi"] = record(vocab.get_stoi())
    else:
        state["stoi_inverts_itos"] = vocab.get_stoi() == {t: i for i, t in enumerate(itos)}
    return state


def build(api, torch, sources: dict, spec: dict):
    kwargs = {k: decode(v, torch) for k, v in spec["kwargs"].items() if k != "iterator"}
    generator = spec["kwargs"].get("iterator") == "generator"
    iterator = make_iterator(api, sources[spec["source"]], generator)
    return api.build_vocab_from_iterator(iterator, **kwargs)


def run_build(api, torch, sources: dict, case: dict) -> dict:
    """Build one vocabulary; return its state, or the error."""
    try:
        vocab = build(api, torch, sources, case)
    except Exception as exc:  # noqa: BLE001
        return {"error": error_record(exc)}
    return {"state": vocab_state(vocab, with_stoi=False)}


def run_factory(api, case: dict) -> dict:
    ordered_dict = OrderedDict(case["ordered_dict"])
    vocab = api.vocab(ordered_dict, **case["kwargs"])
    return {"state": vocab_state(vocab), "ordered_dict_after": dict(ordered_dict)}


def run_ops(api, torch, sources: dict, scenario: dict) -> list[dict]:
    """Apply a scenario's operations in order; one record per operation."""
    vocab = build(api, torch, sources, scenario["build"])
    results = []
    for op in scenario["ops"]:
        name, raw_args = op[0], op[1 : 1 + _ARITY[op[0]]]
        out = _outcome(vocab, name, [decode(a, torch, vocab) for a in raw_args])
        if op_label(op) in LIST_FORM:
            plain = [_as_list(decode(a, torch, vocab)) for a in raw_args]
            out["list_form"] = _outcome(vocab, name, plain)["result"]
        if name in MUTATING:
            out["state"] = vocab_state(vocab, with_stoi=False)
        results.append(out)
    return results


def _outcome(vocab, name: str, args: list) -> dict:
    try:
        if name == "len":
            value = len(vocab)
        elif name == "getitem":
            value = vocab[args[0]]
        elif name == "call":
            value = vocab(args[0])
        elif name == "contains":
            value = args[0] in vocab
        else:
            value = getattr(vocab, name)(*args)
    except Exception as exc:  # noqa: BLE001
        return {"error": error_record(exc)}
    return {"result": record(value)}


def _as_list(arg):
    return arg.tolist() if hasattr(arg, "tolist") else list(arg)


# How many arguments each op takes; one more string is its error label.
_ARITY = {
    "len": 0,
    "get_default_index": 0,
    "get_itos": 0,
    "get_stoi": 0,
    "getitem": 1,
    "call": 1,
    "contains": 1,
    "lookup_indices": 1,
    "lookup_token": 1,
    "lookup_tokens": 1,
    "set_default_index": 1,
    "insert_token": 2,
    "append_token": 1,
}


# Labels of calls torchtext refuses only for the container (a tuple, a tensor,
# a generator): the result for the same items in a list is recorded with them.
LIST_FORM = {"not_a_list", "not_a_sequence"}

# Labels of calls that torchtext accepts and mllm_utils.text deliberately refuses.
ACCEPTED_BY_TORCHTEXT = {"float_tensor_index"}


def op_label(op: list) -> str | None:
    """The label an op carries: torchtext's error, or a known difference (``None``: plain success)."""
    extra = len(op) - 1 - _ARITY[op[0]]
    return op[-1] if extra == 1 else None


# ---------------------------------------------------------------------------
# Recording with torchtext
# ---------------------------------------------------------------------------


def torchtext_api():
    """torchtext's functions under the names mllm_utils.text uses."""
    import torchtext

    torchtext.disable_torchtext_deprecation_warning()
    from torchtext.data.utils import get_tokenizer
    from torchtext.vocab import build_vocab_from_iterator, vocab

    return SimpleNamespace(
        get_tokenizer=get_tokenizer,
        build_vocab_from_iterator=build_vocab_from_iterator,
        vocab=vocab,
        version=torchtext.__version__,
    )


SURPRISES: list[str] = []


def _check_labels(where: str, expected: str | None, outcome: dict) -> None:
    """Note where torchtext raised and no error was expected, or the other way round."""
    if expected in ACCEPTED_BY_TORCHTEXT:
        expected = None
    raised = "error" in outcome
    if raised != (expected is not None):
        SURPRISES.append(
            f"{where}: expected {'error ' + expected if expected else 'success'}, torchtext gave {outcome}"
        )


def dumps(data: dict) -> str:
    """JSON with one line per top-level key and per item of a top-level list (small diffs).

    ASCII only: invisible characters (no-break space, zero-width joiner) stay visible as escapes.
    """
    lines = []
    for key, value in data.items():
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(item) for item in value)
            text = f"[\n  {items}\n ]" if value else "[]"
        elif isinstance(value, dict):
            items = ",\n  ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
            text = f"{{\n  {items}\n }}" if value else "{}"
        else:
            text = json.dumps(value)
        lines.append(f" {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> None:
    import torch

    api = torchtext_api()
    if api.version.split("+")[0] != "0.18.0":
        sys.exit(f"record with torchtext 0.18.0, this is {api.version}")
    sources = dict(BUILD_SOURCES, **EXTRA_SOURCES)
    meta = {
        "torchtext_version": api.version,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "generated_by": "tools/make_torchtext_fixtures.py",
    }

    errors = []
    for case in TOKENIZER_ERRORS:
        outcome = tokenizer_error(api, case)
        _check_labels(case["name"], case["error"], outcome)
        errors.append(dict(case, outcome=outcome))
    tokenizers = dict(
        meta,
        corpus=TOKENIZER_CORPUS,
        outputs=tokenize_corpus(api, TOKENIZER_CORPUS),
        errors=errors,
        callable_returned_as_is=tokenizer_returns_callable_itself(api),
    )

    builds = []
    for case in build_cases():
        outcome = run_build(api, torch, sources, case)
        _check_labels(case["name"], case.get("error"), outcome)
        builds.append(dict(case, outcome=outcome))
    factory = [dict(case, outcome=run_factory(api, case)) for case in FACTORY_CASES]
    vocab_builds = dict(meta, sources=sources, builds=builds, factory=factory)

    scenarios = []
    for scenario in OP_SCENARIOS:
        outcomes = run_ops(api, torch, sources, scenario)
        for i, (op, outcome) in enumerate(zip(scenario["ops"], outcomes, strict=True)):
            _check_labels(f"{scenario['name']} op {i} {op}", op_label(op), outcome)
        scenarios.append(dict(scenario, outcomes=outcomes))
    vocab_ops = dict(meta, sources=sources, scenarios=scenarios)
    if SURPRISES:
        sys.exit("Not written: fix the error labels first.\n" + "\n".join(SURPRISES))

    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, data in [("tokenizers", tokenizers), ("vocab_builds", vocab_builds), ("vocab_ops", vocab_ops)]:
        path = FIXTURES / f"{name}.json"
        tmp = path.with_suffix(".json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(dumps(data))
        os.replace(tmp, path)
        print(f"wrote {path.relative_to(ROOT)}")
    print(
        f"{len(TOKENIZER_CORPUS)} lines, {len(builds)} builds, {len(factory)} factory calls, "
        f"{sum(len(s['ops']) for s in scenarios)} vocab operations, "
        f"torchtext {api.version} on torch {torch.__version__}"
    )


if __name__ == "__main__":
    main()
