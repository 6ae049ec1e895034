"""mllm_classroom.sandbox on its own: what a command run in it sees (the hostile class is in test_grading_hostile)."""

import importlib.util
import os
import shutil
import subprocess

import pytest

from mllm_classroom import sandbox

if shutil.which("bwrap") is None:
    if os.environ.get("CI"):
        pytest.fail("bwrap is not installed: `make sandbox-setup`", pytrace=False)
    pytest.skip("bwrap is not installed: `make sandbox-setup`", allow_module_level=True)


def run(settings, box, code):
    argv = sandbox.command(settings, box, [settings.python, "-c", code])
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)


def test_a_read_only_folder_under_tmp_is_seen_above_the_private_tmp(tmp_path):
    """A course cloned into /tmp (CI's clone, a teacher's scratch copy) is bound on top of the private /tmp."""
    package = tmp_path / "course" / "somepkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("ANSWER = 42\n", encoding="utf-8")
    for folder in (tmp_path, tmp_path / "course", package):
        folder.chmod(0o755)
    box = sandbox.make_box(str(tmp_path))
    settings = sandbox.Settings(read_only=[*sandbox.python_folders(), str(package)], parent=str(tmp_path),
                                env={"PYTHONPATH": str(package.parent)})
    done = run(settings, box, "import somepkg, os; print(somepkg.ANSWER, os.listdir('/tmp'))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("42 "), done.stdout
    done = run(settings, box, f"open({str(package / 'x.py')!r}, 'w')")
    assert done.returncode != 0 and "Read-only file system" in done.stderr, done.stderr


def test_the_course_package_imports_and_nothing_else_of_the_clone_is_there(tmp_path):
    box = sandbox.make_box(str(tmp_path))
    settings = sandbox.Settings(read_only=sandbox.python_folders(), parent=str(tmp_path))
    clone = os.path.dirname(os.path.dirname(importlib.util.find_spec("mllm_utils").origin))
    code = (f"import mllm_utils, os; print(sorted(os.listdir({clone!r}))); "
            f"print(os.path.exists({os.path.join(clone, 'notebooks')!r}), os.environ.get('HOME'), os.getcwd())")
    done = run(settings, box, code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "mllm_utils" in lines[0] and "notebooks" not in lines[0], lines
    assert lines[1] == f"False {sandbox.HOME} {sandbox.WORK}"
