"""mllm_classroom.sandbox on its own: what a worker in it sees (the hostile class is in test_grading_hostile)."""

import importlib.util
import os
import shutil

import pytest

from mllm_classroom import sandbox

if shutil.which("bwrap") is None:
    if os.environ.get("CI"):
        pytest.fail("bwrap is not installed: `make sandbox-setup`", pytrace=False)
    pytest.skip("bwrap is not installed: `make sandbox-setup`", allow_module_level=True)


def run(code: str, limits=None) -> dict:
    box = sandbox.Sandbox("student", limits or sandbox.Limits(memory_mib=2048))
    channel = box.start()
    try:
        channel.send({"op": "run", "code": code})
        return channel.recv(timeout=120)[0]
    finally:
        box.kill()


def test_the_course_package_imports_and_nothing_else_of_the_clone_is_there():
    clone = os.path.dirname(os.path.dirname(importlib.util.find_spec("mllm_utils").origin))
    code = (f"import mllm_utils, os\nseen = sorted(os.listdir({clone!r}))\n"
            f"assert 'mllm_utils' in seen and 'notebooks' not in seen and 'student' not in seen, seen\n"
            f"assert os.environ['HOME'] == {sandbox.HOME!r} and os.getcwd() == {sandbox.WORK!r}\n"
            "assert not any(os.path.exists(p) for p in ('/root/.ssh', '/root/.gitconfig', '/etc/passwd',\n"
            "                                           '/work/shared'))")
    assert run(code) == {"ok": True}


def test_the_working_folder_and_tmp_are_small_and_private(tmp_path):
    (tmp_path / "host-file").write_text("x", encoding="utf-8")
    code = (f"import os\nassert not os.path.exists({str(tmp_path)!r})\n"
            "try:\n    open('big', 'wb').write(b'x' * (300 * 2 ** 20))\n    raise AssertionError('300 MiB written')\n"
            "except OSError:\n    pass")
    assert run(code) == {"ok": True}


def test_the_sandbox_has_no_network_and_its_own_processes():
    code = ("import socket, os\ns = socket.socket()\ns.settimeout(1)\ntry:\n"
            "    s.connect(('127.0.0.1', 22))\n    raise AssertionError('connected')\nexcept OSError:\n    pass\n"
            "assert os.getpid() == 1, os.getpid()\n"
            "assert sorted(p for p in os.listdir('/proc') if p.isdigit()) == ['1'], os.listdir('/proc')")
    assert run(code) == {"ok": True}


def test_limits_are_per_sandbox_where_a_cgroup_can_be_had():
    described = sandbox.describe_limits(sandbox.Limits(memory_mib=2048))
    if sandbox.limit_mode() == "rlimit":
        assert described.startswith("per process only")
    else:
        assert described.startswith("per sandbox")
        code = ("import os, time\npids = []\nfor i in range(200):\n    try:\n        pid = os.fork()\n"
                "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5)\n        os._exit(0)\n"
                "    pids.append(pid)\nassert len(pids) < 64, len(pids)")
        assert run(code) == {"ok": True}


def test_no_new_namespaces_or_tracing_inside():
    """A nested user namespace would give back every capability inside it: the seccomp filter refuses it,
    with ptrace, mounts, keyrings and BPF, while threads, fork and subprocesses still work."""
    if sandbox.seccomp_filter() is None:
        pytest.skip("libseccomp is not installed here")
    code = ("import ctypes, os, subprocess, threading\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "assert libc.unshare(0x10000000) == -1 and ctypes.get_errno() == 1\n"
            "assert libc.ptrace(16, 1, 0, 0) == -1\n"  # PTRACE_ATTACH
            "t = threading.Thread(target=print)\nt.start()\nt.join()\n"
            "assert subprocess.run(['true']).returncode == 0")
    assert run(code) == {"ok": True}


def test_the_address_space_limit_leaves_room_for_importing_torch():
    """A CUDA build of PyTorch maps about 3 GiB at import: the limit is the memory limit plus what this
    Python's import maps, so a worker starts with any build (the memory itself is bounded by the cgroup)."""
    import torch

    mapped = sandbox.import_mib()
    assert 100 < mapped < 64 * 1024
    if torch.version.cuda:
        assert mapped > 2048, mapped  # the reason for it: more than the smallest memory limit
    limits = sandbox.Limits(memory_mib=2048)
    command = sandbox.bwrap_command(limits, ["true"], info_fd=3, uid=None)
    assert f"--as={(2048 + mapped) * sandbox.MIB}" in command
    assert run("import torch\nx = torch.ones(1000)\nassert float(x.sum()) == 1000.0\n", limits) == {"ok": True}


def test_a_cell_can_be_interrupted_when_the_grader_was_started_with_sigint_ignored():
    """A grader started in the background (nohup, cron, a CI runner) passes SIGINT on as ignored: the worker
    must still stop a cell that runs past its time when interrupted."""
    import signal
    import time

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # what the worker inherits, as from `nohup ... &`
    try:
        box = sandbox.Sandbox("student", sandbox.Limits(memory_mib=2048))
        channel = box.start()
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        channel.send({"op": "run", "code": "started = True\n"})  # the worker has started (torch imported)
        assert channel.recv(timeout=120)[0] == {"ok": True}
        channel.send({"op": "run", "code": "while True:\n    pass\n"})
        time.sleep(2)
        box.interrupt()
        reply = channel.recv(timeout=20)[0]
        assert reply["ok"] is False and reply["ename"] == "KeyboardInterrupt", reply
    finally:
        box.kill()
