"""WikiText-2: download, verify and read it, or fall back to a shipped excerpt.

torchtext's ``WikiText2`` no longer works (torchtext stopped at 0.18 and its
Amazon S3 address is gone), so this module does its job:

- :func:`wikitext2_dir` finds the three split files: in a folder you name
  (argument ``folder`` or the environment variable ``MLLM_WIKITEXT2_DIR``),
  or else in the user's cache, downloading ``wikitext-2-v1.zip`` there once.
  The download is checked against the MD5 that torchtext 0.18 pins for it
  *before* it is unzipped, and each split's line count is checked after.
- :func:`wikitext2` returns a split's lines the way torchtext's ``WikiText2``
  yielded them: raw, in file order, with the trailing ``"\\n"``, blank lines
  and ``" = Title = "`` lines included.
- :func:`wikitext2_excerpt` returns the small excerpt shipped with the package
  (whole articles from the validation split), and :func:`wikitext2_or_excerpt`
  is what notebooks call: the excerpt at the quick size or when the download
  fails, saying so in one printed line.

WikiText is by Merity et al. (2016), CC BY-SA 3.0; see ``mllm_utils/data/README.md``.

Introduced in notebook 02 (word vectors).
"""

from __future__ import annotations

import hashlib
import lzma
import os
import zipfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from mllm_utils._validate import check_bool, check_choice, check_number, check_path, describe

__all__ = [
    "ENV_VAR",
    "LINE_COUNTS",
    "MD5",
    "MIRRORS",
    "WikiTextError",
    "wikitext2",
    "wikitext2_dir",
    "wikitext2_excerpt",
    "wikitext2_or_excerpt",
]

ENV_VAR = "MLLM_WIKITEXT2_DIR"
ZIP_NAME = "wikitext-2-v1.zip"
# The MD5 torchtext 0.18 pins for wikitext-2-v1.zip.
MD5 = "542ccefacc6c27f945fb54453812b3cd"
# Tried in order. The original address (s3.amazonaws.com/research.metamind.io) is gone;
# add a mirror here when one appears. smerity.com refuses Python's default User-Agent.
MIRRORS = ["https://wikitext.smerity.com/wikitext-2-v1.zip"]
USER_AGENT = "mllm-course/0.1 (+https://github.com/mastering-llms/mllm-course)"
LINE_COUNTS = {"train": 36_718, "valid": 3_760, "test": 4_358}
SPLITS = tuple(LINE_COUNTS)

EXCERPT_FILE = "wikitext2_excerpt.txt.xz"
# SHA-256 of the uncompressed excerpt (checked on every load).
EXCERPT_SHA256 = "4e7d8650044e680c74123547322586ed1c3beb447de1a133d85e1e626d6b5167"


class WikiTextError(OSError):
    """WikiText-2 could not be found, downloaded or verified; the message says what to do."""


def _what_to_do(cache: Path) -> str:
    return (
        f"What to do: download {ZIP_NAME} by hand (from {MIRRORS[0]} or any copy whose MD5 is "
        f"{MD5}), unzip it, and set {ENV_VAR} to the folder holding wiki.train.tokens, "
        f"wiki.valid.tokens and wiki.test.tokens (or pass folder=...). A broken partial "
        f"download can be deleted from {cache}."
    )


def _count_lines(path: Path) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def _check_folder(folder: Path, line_counts: dict, hint: str) -> Path:
    """Raise WikiTextError unless ``folder`` holds every split with the expected line count."""
    for split, expected in line_counts.items():
        path = folder / f"wiki.{split}.tokens"
        if not path.is_file():
            raise WikiTextError(f"{path} does not exist. {hint}")
        got = _count_lines(path)
        if got != expected:
            raise WikiTextError(
                f"{path} has {got} lines, but the WikiText-2 {split} split has {expected}: the "
                f"file is truncated or not WikiText-2 (v1, tokenized). {hint}"
            )
    return folder


def _download(urls: Sequence[str], md5: str, cache: Path, timeout: float) -> Path:
    """Fetch the zip from the first mirror that works; pooch checks the MD5 before we unzip."""
    import pooch

    downloader = pooch.HTTPDownloader(
        headers={"User-Agent": USER_AGENT},
        timeout=timeout,
        progressbar=not os.environ.get("TQDM_DISABLE"),
    )
    failures = []
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel("WARNING")  # say it ourselves, on stdout, instead of pooch's log on stderr
    try:
        for url in urls:
            if not (cache / ZIP_NAME).exists():  # otherwise pooch only checks the MD5 of the copy
                print(f"Downloading WikiText-2 from {url} to {cache} (once; about 4.5 MB)")
            try:
                path = pooch.retrieve(url, known_hash=f"md5:{md5}", fname=ZIP_NAME, path=cache, downloader=downloader)
                return Path(path)
            except ValueError as exc:  # pooch: the hash did not match (the file is deleted)
                failures.append(f"{url}: the download is corrupt or incomplete ({exc})")
            except Exception as exc:  # requests' connection, timeout and truncation errors
                failures.append(f"{url}: {type(exc).__name__}: {exc}")
    finally:
        logger.setLevel(level)
    raise WikiTextError(
        f"Could not download WikiText-2 ({'; '.join(failures)}). Are you offline, or behind "
        f"a proxy? {_what_to_do(cache)}"
    )


def _unzip(zip_path: Path, cache: Path, line_counts: dict) -> Path:
    folder = cache / "wikitext-2"
    with zipfile.ZipFile(zip_path) as archive:
        for split in line_counts:
            member = f"wikitext-2/wiki.{split}.tokens"
            target = folder / f"wiki.{split}.tokens"
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            with archive.open(member) as src, open(tmp, "wb") as dst:
                dst.write(src.read())
            os.replace(tmp, target)  # never leave a half-written split behind
    return folder


def _check_download_args(folder, urls, md5, cache_dir, line_counts, splits, timeout) -> None:
    check_path("folder", folder, none_ok=True)
    check_path("cache_dir", cache_dir, none_ok=True)
    for name, value in (("urls", urls), ("splits", splits)):
        if isinstance(value, str):
            raise TypeError(f"{name} must be a list of strings, got the string {value!r}: write {name}=[{value!r}]")
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise TypeError(f"{name} must be a non-empty list of strings, got {describe(value)}")
    for split in splits:
        check_choice("each split", split, SPLITS)
    if not isinstance(md5, str) or len(md5) != 32 or any(c not in "0123456789abcdef" for c in md5.lower()):
        raise ValueError(f"md5 must be 32 hexadecimal digits, got {describe(md5)}")
    if line_counts is not None and not (
        isinstance(line_counts, dict) and all(isinstance(line_counts.get(s), int) for s in splits)
    ):
        raise TypeError(
            f"line_counts must map every split in {list(splits)} to its line count, got {describe(line_counts)}"
        )
    check_number("timeout", timeout, 0, low_open=True, hint="seconds to wait for the server")


def wikitext2_dir(
    folder: str | os.PathLike | None = None,
    *,
    urls: Sequence[str] = MIRRORS,
    md5: str = MD5,
    cache_dir: str | os.PathLike | None = None,
    line_counts: dict | None = None,
    splits: Sequence[str] = SPLITS,
    timeout: float = 30.0,
) -> Path:
    """The folder holding ``wiki.{train,valid,test}.tokens``, verified; downloads once if needed.

    Looks in ``folder``, then in ``$MLLM_WIKITEXT2_DIR``, then in the cache
    (``cache_dir``, by default the user's cache folder from ``pooch.os_cache``),
    downloading and unzipping ``wikitext-2-v1.zip`` there when it is missing.
    ``urls``, ``md5`` and ``line_counts`` exist so the tests can serve a small
    archive; leave them alone otherwise. A folder of your own only needs the
    ``splits`` you ask for (``wikitext2`` asks for one). Raises
    :class:`WikiTextError` with what went wrong and what to do.
    """
    _check_download_args(folder, urls, md5, cache_dir, line_counts, splits, timeout)
    import pooch

    line_counts = LINE_COUNTS if line_counts is None else line_counts
    cache = Path(cache_dir) if cache_dir is not None else Path(pooch.os_cache("mllm")) / "wikitext2"
    if folder is None and os.environ.get(ENV_VAR):
        folder, source = os.environ[ENV_VAR], f"the folder named by {ENV_VAR}"
    else:
        source = "the folder you passed"
    if folder is not None:
        wanted = {split: line_counts[split] for split in splits}
        return _check_folder(Path(folder).expanduser(), wanted, f"Check {source}. ")
    try:  # already downloaded and unzipped
        return _check_folder(cache / "wikitext-2", line_counts, "")
    except WikiTextError:
        pass
    zip_path = _download(urls, md5, cache, timeout)
    try:
        folder = _unzip(zip_path, cache, line_counts)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise WikiTextError(
            f"{zip_path} matches its MD5 but is not the expected archive ({exc}). " + _what_to_do(cache)
        ) from None
    return _check_folder(folder, line_counts, _what_to_do(cache))


def wikitext2(split: str = "train", folder: str | os.PathLike | None = None, **download) -> list[str]:
    """The lines of a WikiText-2 split, as torchtext's ``WikiText2(split=...)`` yielded them.

    Raw lines in file order with their trailing ``"\\n"``, including blank
    (``" \\n"``) and title (``" = Title = \\n"``) lines. ``folder`` and the
    keyword arguments go to :func:`wikitext2_dir`.
    """
    check_choice("split", split, SPLITS)
    path = wikitext2_dir(folder, splits=[split], **download) / f"wiki.{split}.tokens"
    with open(path, encoding="utf-8") as f:
        return list(f)


def wikitext2_excerpt() -> list[str]:
    """The WikiText-2 excerpt shipped with the package: whole articles from the validation split."""
    path = resources.files("mllm_utils") / "data" / EXCERPT_FILE
    try:
        data = lzma.decompress(path.read_bytes())
    except (FileNotFoundError, lzma.LZMAError) as exc:
        raise OSError(
            f"{EXCERPT_FILE} is missing or corrupt in the mllm_utils package ({exc}). Restore it "
            f"with `git checkout -- mllm_utils/data/{EXCERPT_FILE}` and reinstall the package."
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != EXCERPT_SHA256:
        raise OSError(
            f"{EXCERPT_FILE} does not match its pinned SHA-256 (got {digest[:12]}...). Restore it "
            f"with `git checkout -- mllm_utils/data/{EXCERPT_FILE}`."
        )
    return data.decode("utf-8").splitlines(keepends=True)


def _excerpt_note(lines: list[str]) -> str:
    articles = sum(1 for line in lines if line.startswith(" = ") and not line.startswith(" = = "))
    return f"the WikiText-2 excerpt shipped with mllm_utils ({articles} articles, {len(lines)} lines)"


def wikitext2_or_excerpt(split: str = "train", quick: bool = False, **kwargs) -> tuple[list[str], str]:
    """A split's lines and where they came from: ``"wikitext-2"`` or ``"excerpt"``.

    At the quick size (``quick=True``), or when WikiText-2 cannot be found or
    downloaded, this returns the shipped excerpt instead, and prints one line
    saying so (and why). ``kwargs`` go to :func:`wikitext2`.
    """
    check_choice("split", split, SPLITS)
    check_bool("quick", quick)
    if quick:
        lines = wikitext2_excerpt()
        print(f"Quick size: using {_excerpt_note(lines)} instead of the {split} split.")
        return lines, "excerpt"
    try:
        return wikitext2(split, **kwargs), "wikitext-2"
    except WikiTextError as exc:
        lines = wikitext2_excerpt()
        print(f"Using {_excerpt_note(lines)}, because WikiText-2 is not available: {exc}")
        return lines, "excerpt"
