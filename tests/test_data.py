import pytest

from mllm_utils import data


def test_war_and_peace_is_the_pinned_book_without_gutenberg_boilerplate():
    text = data.war_and_peace()
    assert "*** START OF" not in text and "*** END OF" not in text
    assert "Project Gutenberg" not in text  # header, footer and licence are gone
    assert text.startswith("An Anonymous Volunteer, and David Widger")  # the edition's credit line
    assert "Well, Prince, so Genoa and Lucca are now just family estates" in text[:20000]
    assert text.endswith("of which we are not\nconscious.")
    assert 3_000_000 < len(text) < 3_300_000


def test_raw_file_keeps_the_licence():
    raw = data.war_and_peace_raw()
    assert "*** START OF THIS PROJECT GUTENBERG EBOOK WAR AND PEACE ***" in raw
    assert "Project Gutenberg" in raw[-20000:]


def test_corrupt_or_altered_file_is_refused(monkeypatch):
    monkeypatch.setattr(data, "_read_shipped", lambda name: b"not the book")
    with pytest.raises(OSError, match="does not match its pinned SHA-256"):
        data.war_and_peace_raw()


def test_undecodable_file_says_how_to_restore(monkeypatch, tmp_path):
    bad = tmp_path / "mllm_utils" / "data"
    bad.mkdir(parents=True)
    (bad / "war_and_peace.txt.xz").write_bytes(b"garbage")
    monkeypatch.setattr(data.resources, "files", lambda package: tmp_path / "mllm_utils")
    with pytest.raises(OSError, match="corrupt.*git checkout"):
        data.war_and_peace_raw()
    (bad / "war_and_peace.txt.xz").unlink()
    with pytest.raises(FileNotFoundError, match="Reinstall"):
        data.war_and_peace_raw()


def test_strip_gutenberg_needs_the_markers():
    with pytest.raises(ValueError, match="START/END"):
        data.strip_gutenberg("just some text")
    marked = f"header\n{data._START}\nthe book\n{data._END}\nfooter"
    assert data.strip_gutenberg(marked) == "the book"
    closing = f"{data._START}\nthe book\n\nEnd of the Project Gutenberg EBook of X\n{data._END}"
    assert data.strip_gutenberg(closing) == "the book"
