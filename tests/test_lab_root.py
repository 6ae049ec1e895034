"""`make lab` opens a JupyterLab in which the learner reaches the solutions offline.

The lab `make lab` starts (its very command, read from `make -n lab`) is started here with this
environment's JupyterLab; the test asks it, as the browser would, for the start page (student/), a learner's
notebook and the solutions page that notebook links to (solutions/ beside student/: before, the lab's root was
student/, and "../solutions/" was "outside root contents directory").
"""

import json
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tools.browser_test import free_port

ROOT = Path(__file__).resolve().parent.parent


def lab_command() -> list[str]:
    """The `jupyter lab ...` command of `make lab`, its environment variables and the venv left out."""
    venv = Path(sys.executable).parent.parent
    dry = subprocess.run(["make", "-s", "-n", "lab", f"VENV={venv}", "LAB_ARGS="], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    joined = dry.replace("\\\n", " ")
    line = next(ln for ln in joined.splitlines() if re.search(r"/jupyter lab\b", ln))
    words = shlex.split(line)
    start = next(i for i, w in enumerate(words) if w.endswith("/jupyter") and words[i + 1] == "lab")
    return words[start:]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_make_lab_starts_in_student_and_reaches_the_solutions():
    command = lab_command()
    assert not any(w.rstrip("/") == "student" for w in command[2:]), f"the lab is rooted in student/: {command}"
    if not Path(command[0]).exists():
        pytest.fail(f"{command[0]} is missing: this test runs in an environment with JupyterLab (.venv-teach)")
    port, token = free_port(), "mllm-lab-root-test"
    proc = subprocess.Popen([*command, "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--allow-root",
                             f"--IdentityProvider.token={token}", "--LabApp.news_url=None",
                             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, _ = get(f"{base}/api/status?token={token}")
                if status == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, f"`{shlex.join(command)}` exited with {proc.returncode}"
            assert time.monotonic() < deadline, "JupyterLab did not answer within 60 s"
            time.sleep(0.5)
        status, page = get(f"{base}/?token={token}")
        assert status == 200 and b"jupyter-config-data" in page
        config = json.loads(re.search(rb'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1))
        assert config.get("treePath") == "student", "the lab does not open at student/"
        learner = next(p for p in sorted((ROOT / "student").glob("*.ipynb")))
        for path in (f"student/{learner.name}", f"solutions/{learner.stem}.md"):
            status, body = get(f"{base}/api/contents/{path}?content=0&token={token}")
            assert status == 200, f"the lab cannot open {path}: HTTP {status} {body[:200]!r}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
