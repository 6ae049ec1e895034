"""The WikiText-2 loader, run for real against a small archive served on 127.0.0.1."""

import hashlib
import http.server
import io
import socket
import threading
import zipfile
from pathlib import Path

import pytest

from mllm_utils import wikitext
from mllm_utils.wikitext import WikiTextError, wikitext2, wikitext2_excerpt, wikitext2_or_excerpt

# A miniature WikiText-2 with the real folder layout and line conventions.
SPLITS = {
    "train": " \n = Alpha = \n \n Alpha is a letter @-@ like thing . \n \n",
    "valid": " \n = Beta = \n \n Beta comes second . \n",
    "test": " \n = Gamma = \n \n = = History = = \n \n Gamma is third , 3 @.@ 5 . \n",
}
LINE_COUNTS = {split: text.count("\n") for split, text in SPLITS.items()}


def make_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for split, text in SPLITS.items():
            archive.writestr(f"wikitext-2/wiki.{split}.tokens", text)
    return buffer.getvalue()


ZIP = make_zip()
ZIP_MD5 = hashlib.md5(ZIP).hexdigest()


class Server:
    """Serves /good.zip, and /truncated.zip that promises the whole file but sends half."""

    def __init__(self):
        self.requests = []  # (path, User-Agent) per request
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append((self.path, self.headers.get("User-Agent")))
                if self.path not in ("/good.zip", "/truncated.zip"):
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/zip")
                self.send_header("Content-Length", str(len(ZIP)))
                self.end_headers()
                body = ZIP if self.path == "/good.zip" else ZIP[: len(ZIP) // 2]
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args):  # keep the test output clean
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with Server() as s:
        yield s


@pytest.fixture(autouse=True)
def no_env_folder(monkeypatch):
    monkeypatch.delenv(wikitext.ENV_VAR, raising=False)


def load(split, url, cache, md5=ZIP_MD5, **kwargs):
    urls = url if isinstance(url, list) else [url]
    return wikitext2(split, urls=urls, md5=md5, cache_dir=cache, line_counts=LINE_COUNTS, timeout=5, **kwargs)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/good.zip"  # nothing listens there any more


def test_download_verifies_unzips_and_returns_raw_lines(server, tmp_path):
    lines = load("test", f"{server.url}/good.zip", tmp_path)
    assert lines == SPLITS["test"].splitlines(keepends=True)
    assert lines[1] == " = Gamma = \n" and lines[0] == " \n"  # titles and blanks kept, like torchtext
    assert (tmp_path / "wikitext-2" / "wiki.train.tokens").read_text(encoding="utf-8") == SPLITS["train"]
    # An explicit User-Agent is sent (the smerity.com mirror refuses Python's default one).
    assert server.requests == [("/good.zip", wikitext.USER_AGENT)]


def test_second_call_reads_the_cache_without_downloading(server, tmp_path):
    load("valid", f"{server.url}/good.zip", tmp_path)
    assert load("train", f"{server.url}/good.zip", tmp_path) == SPLITS["train"].splitlines(True)
    assert len(server.requests) == 1


def test_wrong_hash_fails_before_unzipping(server, tmp_path):
    with pytest.raises(WikiTextError) as info:
        load("valid", f"{server.url}/good.zip", tmp_path, md5="0" * 32)
    message = str(info.value)
    assert "corrupt" in message and wikitext.ENV_VAR in message and "by hand" in message
    assert not (tmp_path / "wikitext-2").exists()
    assert not (tmp_path / wikitext.ZIP_NAME).exists()


def test_truncated_download_fails_clearly(server, tmp_path):
    with pytest.raises(WikiTextError) as info:
        load("valid", f"{server.url}/truncated.zip", tmp_path)
    message = str(info.value)
    assert "Could not download WikiText-2" in message and "truncated.zip" in message
    assert wikitext.ENV_VAR in message
    assert not (tmp_path / "wikitext-2").exists()


def test_server_down_says_offline_and_what_to_do(tmp_path):
    with pytest.raises(WikiTextError) as info:
        load("valid", closed_port_url(), tmp_path)
    message = str(info.value)
    assert "offline" in message and wikitext.ENV_VAR in message and wikitext.MD5 in message


def test_next_mirror_is_tried_when_the_first_fails(server, tmp_path):
    lines = load("valid", [closed_port_url(), f"{server.url}/good.zip"], tmp_path)
    assert lines == SPLITS["valid"].splitlines(keepends=True)


def test_missing_file_on_the_server_fails_clearly(server, tmp_path):
    with pytest.raises(WikiTextError, match="404"):
        load("valid", f"{server.url}/missing.zip", tmp_path)


def write_folder(folder: Path, splits=SPLITS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in splits.items():
        (folder / f"wiki.{split}.tokens").write_text(text, encoding="utf-8")
    return folder


def test_local_folder_by_argument_and_by_environment(tmp_path, monkeypatch):
    folder = write_folder(tmp_path / "mine")
    unreachable = "http://127.0.0.1:9/never.zip"  # must not be used
    assert load("valid", unreachable, tmp_path / "cache", folder=folder) == SPLITS["valid"].splitlines(True)
    monkeypatch.setenv(wikitext.ENV_VAR, str(folder))
    assert load("test", unreachable, tmp_path / "cache") == SPLITS["test"].splitlines(True)


def test_local_folder_with_a_truncated_split_is_refused(tmp_path, monkeypatch):
    folder = write_folder(tmp_path / "mine", {**SPLITS, "train": " \n = Alpha = \n"})
    monkeypatch.setenv(wikitext.ENV_VAR, str(folder))
    with pytest.raises(WikiTextError, match=r"wiki\.train\.tokens has 2 lines.*truncated.*MLLM_WIKITEXT2_DIR"):
        load("train", "http://127.0.0.1:9/never.zip", tmp_path / "cache")


def test_local_folder_needs_only_the_split_asked_for(tmp_path):
    folder = write_folder(tmp_path / "mine", {"valid": SPLITS["valid"]})
    never = "http://127.0.0.1:9/never.zip"
    assert load("valid", never, tmp_path / "cache", folder=folder) == SPLITS["valid"].splitlines(True)
    with pytest.raises(WikiTextError, match=r"wiki\.train\.tokens does not exist"):
        load("train", never, tmp_path / "cache", folder=folder)


def test_unknown_split():
    with pytest.raises(ValueError, match="split must be one of"):
        wikitext2("training")


def test_real_line_counts_are_the_published_ones():
    assert wikitext.LINE_COUNTS == {"train": 36_718, "valid": 3_760, "test": 4_358}
    assert wikitext.MD5 == "542ccefacc6c27f945fb54453812b3cd"


def test_excerpt_is_whole_articles_with_raw_lines():
    lines = wikitext2_excerpt()
    assert lines[:2] == [" \n", " = Homarus gammarus = \n"]
    assert all(line.endswith("\n") for line in lines)
    # It ends where an article ends: a paragraph, then the two blank lines before the next title.
    assert lines[-2:] == [" \n", " \n"] and lines[-3].strip() and not lines[-3].startswith(" =")
    articles = [line for line in lines if line.startswith(" = ") and not line.startswith(" = = ")]
    assert len(articles) == 28


def test_quick_size_uses_the_excerpt_and_says_so(capsys):
    lines, source = wikitext2_or_excerpt("train", quick=True)
    assert source == "excerpt" and lines == wikitext2_excerpt()
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "excerpt" in out


def test_failed_download_falls_back_visibly(tmp_path, capsys):
    lines, source = wikitext2_or_excerpt("train", urls=[closed_port_url()], md5=ZIP_MD5, cache_dir=tmp_path, timeout=5)
    assert source == "excerpt" and lines == wikitext2_excerpt()
    captured = capsys.readouterr()
    assert captured.err == ""  # nothing on stderr: notebooks must keep it empty
    tried, fallback = captured.out.splitlines()
    assert tried.startswith("Downloading WikiText-2 from http://127.0.0.1:")
    assert "excerpt" in fallback and wikitext.ENV_VAR in fallback


SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext-2"


@pytest.mark.skipif(not SHARED.is_dir(), reason="no local copy of the real WikiText-2 splits")
def test_real_valid_and_test_splits_pass_the_checks():
    assert len(wikitext2("test", folder=SHARED)) == 4_358
    lines = wikitext2("valid", folder=SHARED)
    assert len(lines) == 3_760 and lines[1] == " = Homarus gammarus = \n"
    excerpt = wikitext2_excerpt()
    assert excerpt == lines[: len(excerpt)]
    next_line = lines[len(excerpt)]
    assert next_line.startswith(" = ") and not next_line.startswith(" = = ")  # the next article
