"""The course's texts: *War and Peace*, shipped with the package and checked.

Project Gutenberg changes its files and blocks robots, so the novel (eBook
#2600, public domain in the USA) ships inside the package, xz-compressed, and
is checked against a pinned SHA-256 before use. The WikiText-2 loader lives in
:mod:`mllm_utils.wikitext`.

Introduced in notebook 01 (tokenization); the character model of notebook 07
trains on it.
"""

from __future__ import annotations

import hashlib
import lzma
from importlib import resources

WAR_AND_PEACE_FILE = "war_and_peace.txt.xz"
# SHA-256 of the uncompressed file: Project Gutenberg eBook #2600 (2009 edition, updated 2016).
WAR_AND_PEACE_SHA256 = "3bb73e3f3bdc6b5e46f8ad49f750cc84883d96701d1057e2446b1d27cf8d974c"
_START = "*** START OF THIS PROJECT GUTENBERG EBOOK WAR AND PEACE ***"
_END = "*** END OF THIS PROJECT GUTENBERG EBOOK WAR AND PEACE ***"


def _read_shipped(name: str) -> bytes:
    path = resources.files("mllm_utils") / "data" / name
    try:
        return lzma.decompress(path.read_bytes())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{name} is missing from the mllm_utils package (looked in {path}). Reinstall the "
            "course package: `pip install -e .` in the repository, or rerun colab_setup.sh."
        ) from None
    except lzma.LZMAError as exc:
        raise OSError(
            f"{name} in the mllm_utils package is corrupt ({exc}). Restore it with "
            f"`git checkout -- mllm_utils/data/{name}` and reinstall the package."
        ) from None


def war_and_peace_raw() -> str:
    """The whole Gutenberg file as text, with its header, footer and licence, hash-checked."""
    data = _read_shipped(WAR_AND_PEACE_FILE)
    digest = hashlib.sha256(data).hexdigest()
    if digest != WAR_AND_PEACE_SHA256:
        raise OSError(
            f"{WAR_AND_PEACE_FILE} does not match its pinned SHA-256 (got {digest[:12]}..., "
            f"expected {WAR_AND_PEACE_SHA256[:12]}...). Restore it with "
            f"`git checkout -- mllm_utils/data/{WAR_AND_PEACE_FILE}`."
        )
    return data.decode("utf-8-sig")


def strip_gutenberg(text: str) -> str:
    """The book between Project Gutenberg's START and END lines (header, footer, licence dropped)."""
    if not isinstance(text, str):
        raise TypeError(
            f"strip_gutenberg takes the text as a str, got {type(text).__name__}: read files with "
            "encoding='utf-8', or decode bytes first"
        )
    start, end = text.find(_START), text.find(_END)
    if start < 0 or end < 0 or end < start:
        raise ValueError(
            "This text lacks Project Gutenberg's START/END lines for War and Peace; "
            "pass the shipped file (war_and_peace_raw()) or strip it yourself."
        )
    book = text[start + len(_START) : end].strip()
    # Gutenberg's closing line sits just before the END marker.
    last_line = book.rsplit("\n", 1)[-1]
    if last_line.startswith(("End of the Project Gutenberg", "End of Project Gutenberg")):
        book = book[: -len(last_line)].rstrip()
    return book


def war_and_peace() -> str:
    """The text of *War and Peace* (Maude translation), without the Gutenberg header and footer."""
    return strip_gutenberg(war_and_peace_raw())
