"""The sandbox every submitted notebook runs in: bubblewrap around the kernel, nothing else.

nbgrader (the hidden tests, the gradebook) stays in the teacher's process; the kernel that runs a
student's code, and everything it starts, sees only:

- the Python environment and the course package (``mllm_utils``), read-only, and the system's /usr;
- a private, empty working folder and a private /tmp (both gone when the kernel ends);
- the folder of its own connection sockets (jupyter_client's ``ipc`` transport, so no network is needed);
- an environment of its own (none of the teacher's variables), no network at all (a namespace with
  nothing in it), its own process list (it cannot see or signal the grader), and limits on memory
  (address space), processes, file size and wall time. When the kernel ends, the whole namespace ends
  with it: nothing it started is left running.

When the grader runs as root (a container, a CI machine), the kernel runs as ``nobody`` as well, with no
capabilities, so that the process limit holds (the kernel does not count root's processes).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from mllm_classroom.lessons import ClassroomError

SETTINGS_ENV = "MLLM_SANDBOX"  # JSON settings, from the grader to the nbgrader process it starts
HOME = "/home/student"
WORK = f"{HOME}/work"
NOBODY = 65534
MIB = 1024 * 1024
# Memory: the notebook's measured peak address space times MEMORY_FACTOR, at least MIN_MEMORY_MIB, at most
# MAX_MEMORY_MIB (and that cap when a notebook was never measured).
MEMORY_FACTOR = 1.5
MIN_MEMORY_MIB = 2048
MAX_MEMORY_MIB = 4096
PROCESSES = 64  # threads count too: PyTorch and OpenMP start a few per core
FILE_MIB = 64  # the largest file a kernel may write
TMP_MIB = 256  # its private /tmp (memory-backed)
MESSAGE_MIB = 64  # the largest message the grader takes from a kernel
# Variables a kernel gets from the grader's environment when set there: the course's run settings
# (tools/notebooks.py RUN_ENV) and the numeric libraries' thread and CPU settings. Nothing else.
PASSED_ENV = ("MLLM_QUICK", "TQDM_DISABLE", "PYTHONHASHSEED", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
              "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
HOW_TO_GET_ONE = (
    "grading runs every submission in a sandbox, and none can start here: {why}. "
    "On Debian or Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install bubblewrap`; "
    "on Windows use WSL2 (Ubuntu) and install it there; macOS has no bubblewrap (grade in a Linux VM or WSL2). "
    "Where a distribution restricts user namespaces (Ubuntu 24.04 with AppArmor), the `bubblewrap` package's "
    "profile allows it: install the package rather than a copy of bwrap. To grade without a sandbox anyway, "
    "pass --no-sandbox (each row of grades.csv then says so)"
)


@dataclass
class Settings:
    """What a kernel's sandbox allows. Written as JSON into the nbgrader process's environment."""

    memory_mib: int = MAX_MEMORY_MIB
    processes: int = PROCESSES
    file_mib: int = FILE_MIB
    wall_seconds: int = 3600  # the kernel's whole life: cell timeouts plus a margin
    python: str = sys.executable
    read_only: list = field(default_factory=list)  # folders bound read-only at the same path
    env: dict = field(default_factory=dict)
    kernel_script: str | None = None  # tests only: run this file instead of ipykernel (read-write folder)
    parent: str = field(default_factory=tempfile.gettempdir)  # where each kernel's private folders are made

    def to_env(self) -> dict:
        return {SETTINGS_ENV: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls) -> Settings:
        text = os.environ.get(SETTINGS_ENV)
        if not text:
            raise RuntimeError(f"{SETTINGS_ENV} is not set: the sandboxed kernel manager needs its settings")
        return cls(**json.loads(text))


def memory_mib(peak_mib: float | None) -> int:
    """The address-space limit for a notebook whose measured peak was ``peak_mib`` (None: never measured)."""
    if not peak_mib:
        return MAX_MEMORY_MIB
    return int(min(MAX_MEMORY_MIB, max(MIN_MEMORY_MIB, MEMORY_FACTOR * peak_mib)))


def python_folders() -> list[str]:
    """The read-only folders a kernel needs: this Python's environment, its base install, the course package."""
    folders = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    user_site = os.path.expanduser(f"~/.local/lib/python{sys.version_info.major}.{sys.version_info.minor}")
    if any(p.startswith(user_site) for p in sys.path):  # a `pip install --user` environment
        folders.add(user_site)
    spec = importlib.util.find_spec("mllm_utils")
    if spec is None or not spec.submodule_search_locations:
        raise ClassroomError("the course package mllm_utils is not installed in this Python: "
                             '`pip install -e ".[teach]"` in the course folder')
    # Only the package's own folder: an editable install lives in the course's clone, whose notebooks
    # hold every solution.
    folders.update(os.path.realpath(p) for p in spec.submodule_search_locations)
    return sorted(f for f in folders if os.path.isdir(f))


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    return args


def _parents(path: str) -> list[str]:
    """Folders above ``path`` made readable in the sandbox (bwrap makes them 0700 for root otherwise)."""
    parts = Path(path).parents
    return [str(p) for p in reversed(parts) if str(p) != "/"]


def command(settings: Settings, box: Path, argv: list[str]) -> list[str]:
    """The bubblewrap command that runs ``argv`` in a sandbox whose private folders are in ``box``."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ClassroomError(HOW_TO_GET_ONE.format(why="bwrap (bubblewrap) is not installed"))
    root = os.geteuid() == 0
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if root:  # privileged bwrap: no user namespace, so that the drop to nobody below is real
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user"]
    args += _system_binds()
    # The private /tmp and home first: a folder bound below comes on top of them (a course cloned into /tmp).
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(TMP_MIB * MIB), "--tmpfs", "/tmp",
             "--perms", "0755", "--dir", "/home",
             "--perms", "0777", "--size", str(TMP_MIB * MIB), "--tmpfs", HOME,
             "--bind", str(box / "work"), WORK]
    made = {"/tmp", "/home", HOME}
    for folder in settings.read_only:
        for parent in _parents(folder):
            if parent not in made:
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        args += ["--ro-bind", folder, folder]
    writable = [str(box / "ipc")]
    if settings.kernel_script:
        writable.append(os.path.dirname(settings.kernel_script))
    for folder in writable:
        for parent in _parents(folder):  # made on the private /tmp (or beside the read-only folders)
            if parent not in made and parent != "/tmp":
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        args += ["--bind", folder, folder]
    args += ["--chdir", WORK, "--clearenv"]
    for name, value in kernel_env(settings).items():
        args += ["--setenv", name, value]
    args += ["--"]
    if root:
        args += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    # Limits set inside the new namespaces: the process count is then the sandbox's own.
    args += ["prlimit", f"--as={settings.memory_mib * MIB}", f"--nproc={settings.processes}",
             f"--fsize={settings.file_mib * MIB}", "--core=0", "--nofile=1024", "--"]
    return args + argv


def kernel_env(settings: Settings) -> dict:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update(settings.env)
    env.update({
        "HOME": HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "MPLCONFIGDIR": "/tmp/matplotlib",
        "PATH": os.pathsep.join([os.path.dirname(settings.python), "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
        # glibc reserves 64 MiB of address space per malloc arena, up to 8 per core: cap them, so that the
        # memory limit means the same on a 2-core grader and a 16-core laptop.
        "MALLOC_ARENA_MAX": "2",
    })
    return env


def make_box(parent: str) -> Path:
    """A kernel's private folders: ``work`` (its working folder) and ``ipc`` (its sockets)."""
    box = Path(tempfile.mkdtemp(prefix="kernel-", dir=parent))
    for name in ("work", "ipc"):
        (box / name).mkdir()
        if os.geteuid() == 0:
            os.chown(box / name, NOBODY, NOBODY)
    return box


def check_available() -> None:
    """Start one sandbox and run ``true`` in it; raise ClassroomError with what to do when that fails."""
    if not sys.platform.startswith("linux"):
        raise ClassroomError(HOW_TO_GET_ONE.format(why=f"this is {sys.platform}, not Linux"))
    with tempfile.TemporaryDirectory(prefix="mllm-sandbox-check-") as tmp:
        box = make_box(tmp)
        settings = Settings(read_only=python_folders(), parent=tmp)
        argv = command(settings, box, [settings.python, "-c", "import mllm_utils"])
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise ClassroomError(HOW_TO_GET_ONE.format(why=f"bwrap failed: {why}"))


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run in the sandbox, over ipc sockets in a folder of their own.

    The kernel spec named by the notebook is not used: a submission chooses none of what runs it.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.settings = Settings.from_env()
        self.box = make_box(self.settings.parent)
        self.transport = "ipc"
        self.connection_file = str(self.box / "ipc" / "kernel.json")
        self.ip = str(self.box / "ipc" / "kernel")
        self._timer: threading.Timer | None = None

    def client(self, **kwargs):
        """A client whose sockets refuse any one message over MESSAGE_MIB: a kernel cannot flood the grader."""
        import zmq.asyncio

        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, MESSAGE_MIB * MIB)
        client = super().client(context=context, **kwargs)
        client._created_context = True  # destroyed with the client
        return client

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        if self.settings.kernel_script:
            argv = [self.settings.python, self.settings.kernel_script]
        else:
            argv = [self.settings.python, "-m", "ipykernel_launcher"]
        argv += ["-f", self.connection_file, "--HistoryManager.hist_file=:memory:"]
        if os.geteuid() == 0:  # the kernel (nobody) must read the key and make its sockets
            os.chown(self.connection_file, NOBODY, NOBODY)
        kw["env"] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}  # bwrap's own
        kw["cwd"] = str(self.box / "work")
        await super()._async_launch_kernel(command(self.settings, self.box, argv), **kw)
        pid = self.provisioner.process.pid  # bwrap: killing its group ends every process in the sandbox
        self._timer = threading.Timer(self.settings.wall_seconds, _kill_group, [pid])
        self._timer.daemon = True
        self._timer.start()

    async def _async_interrupt_kernel(self) -> None:
        """Ask the kernel to interrupt itself, over its control channel.

        A signal would go to bwrap's process group and end the whole sandbox; the kernel leads a session of
        its own in there (``--new-session``, which also keeps it off any terminal), so it signals itself.
        """
        if self.has_kernel:
            self._connect_control_socket()
            self.session.send(self._control_socket, self.session.msg("interrupt_request", content={}))

    interrupt_kernel = _async_interrupt_kernel

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        if self._timer is not None:
            self._timer.cancel()
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self.box, ignore_errors=True)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    except OSError:
        pass
