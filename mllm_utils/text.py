"""The parts of torchtext's text API that the course uses, without torchtext.

torchtext stopped at 0.18, which needs torch 2.3 and does not load on today's
torch or in Colab. The posts use a handful of its functions; this module
reproduces them under the same names, with the same outputs and the same
ordering rules, so that code written for torchtext runs unchanged:

- :func:`get_tokenizer` (``None`` for a whitespace split, ``"basic_english"``),
- :func:`build_vocab_from_iterator` and :func:`vocab`,
- :class:`Vocab` (look-ups both ways, default index, inserting tokens).

Where torchtext's error is opaque (a C++ ``RuntimeError`` or a pybind11
``TypeError``) ours says what was wrong and what to do; the exception types are
kept where code might catch them. ``tests/test_text_parity.py`` checks all of
this against fixtures recorded from the real torchtext 0.18. The deliberate
differences, each tested there:

- ``max_tokens <= len(specials)`` raises ``ValueError`` (torchtext: an ``assert``),
  and ``basic_english`` on a non-string ``TypeError`` (torchtext: ``AttributeError``);
- look-ups take any iterable (a tuple, a generator, a 1-D tensor), where
  torchtext's C++ binding wants a list;
- a float tensor is not an index (torchtext truncates 1.7 to 1);
- :func:`vocab` does not remove the specials from the caller's dict;
- a default index outside the vocabulary (``set_default_index(99)`` on 10 tokens, or
  ``-1``) raises ``ValueError`` (torchtext stores it and returns it for every unknown token);
- ``specials`` given as one string (``specials="<unk>"``) raises ``TypeError`` (torchtext
  splits it into the characters ``<``, ``u``, ``n``, ``k``, ``>``);
- ``min_freq`` and ``max_tokens`` must be ints (``TypeError`` for ``2.5``).

Introduced in notebook 01 (tokenization).
"""

from __future__ import annotations

import operator
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping

__all__ = ["Vocab", "basic_english", "build_vocab_from_iterator", "get_tokenizer", "vocab"]

# torchtext's basic_english rules, applied in this order after lower-casing.
_BASIC_ENGLISH_RULES = [
    (re.compile(r"\'"), " '  "),
    (re.compile(r"\""), ""),
    (re.compile(r"\."), " . "),
    (re.compile(r"<br \/>"), " "),
    (re.compile(r","), " , "),
    (re.compile(r"\("), " ( "),
    (re.compile(r"\)"), " ) "),
    (re.compile(r"\!"), " ! "),
    (re.compile(r"\?"), " ? "),
    (re.compile(r"\;"), " "),
    (re.compile(r"\:"), " "),
    (re.compile(r"\s+"), " "),
]


def basic_english(line: str) -> list[str]:
    """Split ``line`` into tokens exactly as torchtext's ``basic_english`` does.

    Lower-case, put spaces around ``. , ( ) ! ?`` and after ``'``, drop ``"``,
    turn ``<br />``, ``;`` and ``:`` into spaces, then split on whitespace.
    Everything else (hyphens, digits, unicode dashes and quotes) is kept.
    """
    if not isinstance(line, str):
        raise TypeError(f"basic_english takes a str, got {type(line).__name__}")
    line = line.lower()
    for pattern, replacement in _BASIC_ENGLISH_RULES:
        line = pattern.sub(replacement, line)
    return line.split()


def _split(line: str) -> list[str]:
    return line.split()


def get_tokenizer(tokenizer: str | Callable | None, language: str = "en") -> Callable:
    """Return a tokenizer function, like ``torchtext.data.utils.get_tokenizer``.

    ``None`` gives a plain whitespace split, ``"basic_english"`` the rules of
    :func:`basic_english` (English only), and a callable is returned as it is.
    """
    if tokenizer is None:
        return _split
    if callable(tokenizer):
        return tokenizer
    if tokenizer == "basic_english":
        if language != "en":
            raise ValueError(f"basic_english only supports language='en', got language={language!r}")
        return basic_english
    raise ValueError(
        f"Unknown tokenizer {tokenizer!r}. This course supports None (whitespace split), "
        "'basic_english', or any function that maps a string to a list of tokens "
        "(spacy, moses and the other torchtext back ends are not included)."
    )


class Vocab:
    """A bidirectional map between tokens and indices, like ``torchtext.vocab.Vocab``.

    Build one with :func:`build_vocab_from_iterator` (or :func:`vocab`). Index
    with ``vocab[token]``; map a list with ``vocab(tokens)``; go back with
    :meth:`lookup_token` / :meth:`lookup_tokens`. Unknown tokens raise
    ``RuntimeError`` unless :meth:`set_default_index` was called.
    """

    def __init__(self, tokens: Iterable[str], default_index: int | None = None):
        if isinstance(tokens, str):
            raise TypeError(f"Vocab takes a list of tokens, not one string ({tokens[:20]!r}): split it first")
        if not hasattr(tokens, "__iter__"):
            raise TypeError(f"Vocab takes a list of tokens, got {type(tokens).__name__}")
        self._itos: list[str] = []
        self._stoi: dict[str, int] = {}
        for token in tokens:
            _check_token(token, "Vocab", hint=_TOKENS_HINT)
            if token in self._stoi:
                raise RuntimeError(
                    f"Duplicate token found in tokens list: {token!r}. Each token may "
                    "appear only once (check your specials against the corpus tokens)."
                )
            self._stoi[token] = len(self._itos)
            self._itos.append(token)
        self._default_index = None
        self.set_default_index(default_index)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: str) -> bool:
        _check_token(token, "'in'")
        return token in self._stoi

    def __getitem__(self, token: str) -> int:
        _check_token(token, "vocab[...]", hint=" (to turn an index into a token, use lookup_token)")
        index = self._stoi.get(token)
        if index is not None:
            return index
        if self._default_index is not None:
            return self._default_index
        raise RuntimeError(
            f"Token {token!r} not found and default index is not set. Either add it "
            "(append_token), or call vocab.set_default_index(vocab['<unk>']) so that "
            "unknown tokens map to an unknown-token index."
        )

    def __call__(self, tokens: Iterable[str]) -> list[int]:
        return self.lookup_indices(tokens)

    def __repr__(self) -> str:
        head = ", ".join(repr(t) for t in self._itos[:5])
        more = ", ..." if len(self._itos) > 5 else ""
        return f"Vocab(size={len(self)}, tokens=[{head}{more}], default_index={self._default_index})"

    def forward(self, tokens: Iterable[str]) -> list[int]:
        """Same as ``vocab(tokens)`` (torchtext's Vocab is a module)."""
        return self.lookup_indices(tokens)

    def lookup_indices(self, tokens: Iterable[str]) -> list[int]:
        """The index of every token in ``tokens`` (a list, or any iterable, of strings)."""
        if isinstance(tokens, str):
            raise TypeError(
                "lookup_indices takes a list of tokens, not a single string: for one "
                f"token use vocab[{tokens!r}], for a sentence tokenize it first."
            )
        return [self[token] for token in tokens]

    def lookup_token(self, index) -> str:
        """The token at ``index`` (an int or anything with ``__index__``, e.g. a 0-d tensor)."""
        i = _as_index(index, "lookup_token")
        if not 0 <= i < len(self._itos):
            raise RuntimeError(
                f"Specified index {i} is out of bounds of the size of itos dictionary: "
                f"{len(self._itos)}. Valid indices are 0 to {len(self._itos) - 1}."
            )
        return self._itos[i]

    def lookup_tokens(self, indices: Iterable) -> list[str]:
        """The tokens at ``indices`` (a list of ints or a 1-D tensor)."""
        if getattr(indices, "ndim", 1) != 1:
            raise TypeError(
                f"lookup_tokens takes a list or 1-D tensor of indices, got {indices.ndim} "
                "dimensions: flatten it or look up each row separately."
            )
        return [self.lookup_token(i) for i in indices]

    def get_itos(self) -> list[str]:
        """A new list: index -> token."""
        return list(self._itos)

    def get_stoi(self) -> dict[str, int]:
        """A new dict: token -> index."""
        return dict(self._stoi)

    def set_default_index(self, index: int | None) -> None:
        """Map unknown tokens to ``index`` from now on; ``None`` unsets it."""
        if index is not None:
            index = _as_index(index, "set_default_index", " (e.g. vocab['<unk>']) or None")
            if not 0 <= index < len(self._itos):
                raise ValueError(
                    f"set_default_index got index {index}, but this vocabulary's indices are 0 to "
                    f"{len(self._itos) - 1}: unknown tokens would map to no token. Use vocab['<unk>']"
                )
        self._default_index = index

    def get_default_index(self) -> int | None:
        """The index unknown tokens map to, or ``None`` if unset."""
        return self._default_index

    def insert_token(self, token: str, index: int) -> None:
        """Insert ``token`` at ``index``, shifting later tokens up by one."""
        _check_token(token, "insert_token")
        index = _as_index(index, "insert_token")
        if not 0 <= index <= len(self._itos):
            raise RuntimeError(
                f"Specified index {index} is out of bounds for vocab of size "
                f"{len(self._itos)}: insert at 0 to {len(self._itos)}."
            )
        self._raise_if_present(token)
        self._itos.insert(index, token)
        for i in range(index, len(self._itos)):
            self._stoi[self._itos[i]] = i

    def append_token(self, token: str) -> None:
        """Add ``token`` at the end of the vocabulary."""
        _check_token(token, "append_token")
        self._raise_if_present(token)
        self._stoi[token] = len(self._itos)
        self._itos.append(token)

    def _raise_if_present(self, token: str) -> None:
        if token in self._stoi:
            raise RuntimeError(
                f"Token {token!r} already exists in the Vocab with index: {self._stoi[token]}. "
                "A Vocab holds each token once: check `token in vocab` before adding it."
            )


_TOKENS_HINT = ": the iterator must yield lists of str tokens (tokenize each line first)"


def _check_token(token, where: str, hint: str = "") -> None:
    if not isinstance(token, str):
        raise TypeError(f"{where} takes a token (str), got {type(token).__name__}{hint}")


def _as_index(value, where: str, accepted: str = "") -> int:
    """``value`` as an int; integer tensors with one element count, floats do not.

    torchtext (through pybind11) also takes a float tensor and truncates it
    (1.7 -> 1); refusing it catches a bug, e.g. indexing with probabilities.
    """
    try:
        return operator.index(value)
    except TypeError:
        if hasattr(value, "dtype") and hasattr(value, "shape"):
            got = f"a tensor of dtype {value.dtype} and shape {tuple(value.shape)}"
            fix = ": use an integer tensor with one element (e.g. logits.argmax())"
        else:
            got, fix = type(value).__name__, ""
        raise TypeError(f"{where} takes an integer index{accepted}, got {got}{fix}") from None


def _check_specials(specials) -> list[str]:
    if isinstance(specials, str):
        raise TypeError(
            f"specials must be a list of tokens, got the string {specials!r}: write specials=[{specials!r}] "
            "(a string would be split into its characters)"
        )
    return list(specials or [])


def vocab(
    ordered_dict: Mapping[str, int],
    min_freq: int = 1,
    specials: list[str] | None = None,
    special_first: bool = True,
) -> Vocab:
    """A :class:`Vocab` from ``token -> frequency`` in the given order, like ``torchtext.vocab.vocab``.

    Tokens rarer than ``min_freq`` are dropped; ``specials`` are put first (or
    last) whatever their frequency.
    """
    specials = _check_specials(specials)
    if isinstance(min_freq, bool) or not isinstance(min_freq, int):
        raise TypeError(f"min_freq must be an int, got {min_freq!r}")
    if not isinstance(ordered_dict, Mapping):
        raise TypeError(
            "ordered_dict must map tokens to frequencies (an OrderedDict or a Counter), got "
            f"{type(ordered_dict).__name__}"
        )
    counts = OrderedDict(ordered_dict)
    for token in specials:
        counts.pop(token, None)
    tokens = [token for token, freq in counts.items() if freq >= min_freq]
    tokens = specials + tokens if special_first else tokens + specials
    return Vocab(tokens)


def build_vocab_from_iterator(
    iterator: Iterable[Iterable[str]],
    min_freq: int = 1,
    specials: list[str] | None = None,
    special_first: bool = True,
    max_tokens: int | None = None,
) -> Vocab:
    """Count tokens and build a :class:`Vocab`, like torchtext's function of the same name.

    ``iterator`` yields lists of tokens (one list per line or sentence; a string
    would count as a list of its characters). The order is the one torchtext
    uses, and it matters because indices depend on it:

    1. by descending frequency, ties by the tokens' code points (``"B"`` before ``"b"``);
    2. with ``max_tokens``, the list is cut to ``max_tokens - len(specials)``
       *before* specials are removed from it and before ``min_freq`` applies;
    3. tokens rarer than ``min_freq`` are dropped (specials never are);
    4. specials go first, in the given order (last if ``special_first=False``).
    """
    specials = _check_specials(specials)
    if isinstance(iterator, str) or not hasattr(iterator, "__iter__"):
        raise TypeError(
            f"iterator must yield lists of tokens (one list per line), got {type(iterator).__name__}: e.g. "
            "(tokenizer(line) for line in lines)"
        )
    for name, value in (("min_freq", min_freq), ("max_tokens", max_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int, got {value!r}")
    counter: Counter = Counter()
    for tokens in iterator:
        counter.update(tokens)
    by_frequency = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
    if max_tokens is not None:
        if len(specials) >= max_tokens:
            raise ValueError(
                f"max_tokens={max_tokens} leaves no room besides the {len(specials)} specials: "
                "raise max_tokens or pass fewer specials."
            )
        by_frequency = by_frequency[: max_tokens - len(specials)]
    return vocab(OrderedDict(by_frequency), min_freq=min_freq, specials=specials, special_first=special_first)
