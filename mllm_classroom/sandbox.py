"""The sandbox every process that runs notebook code for the grader starts in: bubblewrap, and limits per
sandbox (not per process, not per user).

A sandboxed worker (:mod:`mllm_classroom.worker`) sees only:

- the Python environment and the course's two packages, read-only, and the system's /usr;
- a private working folder and /tmp, each a size-limited tmpfs (memory, so counted in the memory limit);
  nothing on the host's disk is its, and the grader never opens a path inside it;
- one end of a socketpair to the grader (no network at all: a namespace with nothing in it);
- an environment of its own, its own process list (it runs as pid 1 there: when it ends, everything it
  started ends), and no way to signal or see the grader.

Limits hold for the whole sandbox (:class:`Limits`): memory and the number of processes through a cgroup of
its own, CPU shared equally between sandboxes (one cgroup each), wall time through the grader, and, per
process, address space and file size through rlimits. Where the cgroup comes from (:func:`limit_mode`):

- root (CI, a container): a cgroup made directly (cgroup v2, or v1's memory, pids and cpu hierarchies),
  and a uid of its own for every sandbox, with no capabilities;
- a user with systemd (most Linux laptops, WSL2 with systemd on): ``systemd-run --user --scope``;
- neither (WSL2 without systemd, some containers): per-process limits only, said in every row of grades.csv.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mllm_classroom.channel import Channel, pair
from mllm_classroom.lessons import ClassroomError

HOME = "/home/student"
WORK = f"{HOME}/work"
MIB = 1024 * 1024
# Memory: the notebook's measured peak address space times MEMORY_FACTOR, at least MIN_MEMORY_MIB, at most
# MAX_MEMORY_MIB (and that cap when a notebook was never measured). It bounds the whole sandbox's memory
# (its files in /tmp and its working folder included) and each of its processes' address space.
MEMORY_FACTOR = 1.5
MIN_MEMORY_MIB = 2048
MAX_MEMORY_MIB = 4096
PROCESSES = 64  # in the whole sandbox; threads count too (PyTorch and OpenMP start a few per core)
FILE_MIB = 64  # the largest file it may write
TMP_MIB = 256  # its /tmp, and its working folder, each
UID_BASE = 2_000_000_000  # as root, each sandbox runs as a uid of its own from here on (no such user exists)
CGROUP_NAME = "mllm-classroom"
# Variables a worker gets from the grader's environment when set there: the course's run settings
# (tools/notebooks.py RUN_ENV) and the numeric libraries' CPU settings. Nothing else.
PASSED_ENV = ("MLLM_QUICK", "TQDM_DISABLE", "PYTHONHASHSEED", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
              "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
HOW_TO_GET_ONE = (
    "grading runs every submission in a sandbox, and none can start here: {why}. "
    "On Debian or Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install bubblewrap`; "
    "on Windows use WSL2 (Ubuntu) and install it there; macOS has no bubblewrap (grade in a Linux VM or WSL2). "
    "Where a distribution restricts user namespaces (Ubuntu 24.04 with AppArmor), the `bubblewrap` package's "
    "profile allows it: install the package rather than a copy of bwrap. To grade without a sandbox anyway, "
    "pass --no-sandbox (each row of grades.csv then says so)"
)
_numbers = itertools.count()
_uids = random.SystemRandom()


@dataclass
class Limits:
    """What one sandbox may use, all its processes together (memory, processes) or each (file size)."""

    memory_mib: int = MAX_MEMORY_MIB
    processes: int = PROCESSES
    file_mib: int = FILE_MIB
    tmp_mib: int = TMP_MIB
    threads: int = 1


_import_mib: int | None = None  # import_mib(), measured once per process or handed down by the grader


def import_mib() -> int:
    """The address space (MiB) a process of this Python maps by importing torch and the course package.

    About 0.6 GiB with a CPU build of PyTorch and 3 GiB with a CUDA build (what `pip install torch` gives
    on Linux), nearly all of it never touched. Each process's address-space limit is this plus the memory
    limit, so that a CUDA build is not refused at `import torch`; the memory it really uses is bounded by
    the sandbox's cgroup where there is one. Measured once, in a process of its own; the grader hands its
    measure to each submission's process (``use_import_mib``)."""
    global _import_mib
    if _import_mib is None:
        _import_mib = _measure_import_mib()
    return _import_mib


def use_import_mib(mib: int) -> None:
    """Take ``import_mib()`` as measured by the grader, not again in this process."""
    global _import_mib
    _import_mib = int(mib)


def _measure_import_mib() -> int:
    code = ("import torch, mllm_utils\n"
            "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmPeak:')) // 1024)")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        return int(done.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return MAX_MEMORY_MIB  # not measured: as much again as the largest limit


def memory_mib(peak_mib: float | None) -> int:
    """The memory limit for a notebook whose measured peak was ``peak_mib`` (None: never measured)."""
    if not peak_mib:
        return MAX_MEMORY_MIB
    return int(min(MAX_MEMORY_MIB, max(MIN_MEMORY_MIB, MEMORY_FACTOR * peak_mib)))


def python_folders() -> list[str]:
    """The read-only folders a worker needs: this Python's environment, its base install, the two packages."""
    folders = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    user_site = os.path.expanduser(f"~/.local/lib/python{sys.version_info.major}.{sys.version_info.minor}")
    if any(p.startswith(user_site) for p in sys.path):  # a `pip install --user` environment
        folders.add(user_site)
    for package in ("mllm_utils", "mllm_classroom"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ClassroomError(f"the course package {package} is not installed in this Python: "
                                 '`pip install -e ".[teach]"` in the course folder')
        # Only the package's own folder: an editable install lives in the course's clone, whose notebooks
        # hold every solution.
        folders.update(os.path.realpath(p) for p in spec.submodule_search_locations)
    return sorted(f for f in folders if os.path.isdir(f))


# ---------------------------------------------------------------------------------------------------------
# Limits per sandbox: cgroups


@cache
def limit_mode() -> str:
    """How limits per sandbox are set here: "cgroup2", "cgroup1", "systemd" or "rlimit" (per process only)."""
    if not sys.platform.startswith("linux"):
        return "rlimit"
    if os.geteuid() == 0:
        root = Path("/sys/fs/cgroup")
        controllers = root / "cgroup.controllers"
        if controllers.exists() and {"memory", "pids"} <= set(controllers.read_text().split()):
            try:
                _cgroup2_parent()
                return "cgroup2"
            except OSError:
                pass
        if all((root / c / "cgroup.procs").exists() for c in ("memory", "pids")):
            try:
                for c in ("memory", "pids"):
                    (root / c / CGROUP_NAME).mkdir(exist_ok=True)
                if (root / "cpu" / "cgroup.procs").exists():
                    (root / "cpu" / CGROUP_NAME).mkdir(exist_ok=True)
                    _share(root / "cpu" / CGROUP_NAME / "cpu.shares", 1024)
                return "cgroup1"
            except OSError:
                pass
        return "rlimit"
    if shutil.which("systemd-run"):
        done = subprocess.run(["systemd-run", "--user", "--scope", "--quiet", "-p", "MemoryMax=64M", "-p",
                               "TasksMax=8", "true"], capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
        if done.returncode == 0:
            return "systemd"
    return "rlimit"


def describe_limits(limits: Limits) -> str:
    """The ``limits`` column of grades.csv: what held for this submission."""
    mode = limit_mode()
    where = {"cgroup2": "cgroup v2", "cgroup1": "cgroup v1", "systemd": "systemd scope"}.get(mode)
    calls = "" if seccomp_filter() is not None else "; no seccomp filter (libseccomp missing)"
    if where:
        return f"per sandbox ({where}): {limits.memory_mib} MiB, {limits.processes} processes{calls}"
    return (f"per process only (no cgroup here): {limits.memory_mib} MiB each besides the {import_mib()} MiB of "
            f"address space that importing PyTorch maps, {limits.processes} processes{calls}")


def _cgroup2_parent() -> Path:
    parent = Path("/sys/fs/cgroup") / CGROUP_NAME
    parent.mkdir(exist_ok=True)
    # A cgroup with processes cannot have children with controllers: this one only ever holds sandboxes.
    wanted = [c for c in ("memory", "pids", "cpu") if c in (Path("/sys/fs/cgroup") / "cgroup.controllers").read_text()]
    (Path("/sys/fs/cgroup") / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))
    (parent / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))
    if "cpu" in wanted:
        _share(parent / "cpu.weight", 100)
    return parent


def _share(path: Path, one_process: int) -> None:
    """All the sandboxes together weigh as much as one busy process per core (``one_process`` is a nice-0
    process's weight): a cgroup counts as one process against the machine's others, so without this a
    grading run beside other work gets a fraction of one core for all its sandboxes, and an honest call runs
    past its time limit (measured: a 2.2 s check given 22 s, stopped, beside three other busy processes)."""
    most = 10_000 if path.name == "cpu.weight" else 262_144  # the kernel's ceilings
    try:
        path.write_text(str(min(most, one_process * (os.cpu_count() or 1))))
    except OSError:  # a cgroup we may not weigh: the limits still hold, only the sharing is the kernel's
        pass


class Cgroup:
    """The cgroup(s) of one sandbox, made before it starts and removed once it is empty."""

    def __init__(self, name: str, limits: Limits):
        self.mode = limit_mode()
        self.dirs: list[Path] = []
        memory = limits.memory_mib * MIB
        if self.mode == "cgroup2":
            folder = _cgroup2_parent() / name
            folder.mkdir()
            self.dirs = [folder]
            self._write(folder / "memory.max", memory)
            self._write(folder / "memory.swap.max", 0, required=False)
            self._write(folder / "pids.max", limits.processes)
        elif self.mode == "cgroup1":
            root = Path("/sys/fs/cgroup")
            for controller in ("memory", "pids", "cpu"):
                if (root / controller / "cgroup.procs").exists():
                    folder = root / controller / CGROUP_NAME / name
                    folder.mkdir(parents=True)
                    self.dirs.append(folder)
            self._write(root / "memory" / CGROUP_NAME / name / "memory.limit_in_bytes", memory)
            self._write(root / "memory" / CGROUP_NAME / name / "memory.memsw.limit_in_bytes", memory, required=False)
            self._write(root / "pids" / CGROUP_NAME / name / "pids.max", limits.processes)

    @staticmethod
    def _write(path: Path, value, required=True) -> None:
        try:
            path.write_text(str(value))
        except OSError:
            if required:
                raise

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def empty(self) -> bool:
        return all(not (d / "cgroup.procs").read_text().split() for d in self.dirs if d.exists())

    def kill(self) -> None:
        """Kill every process left in the cgroup(s), then remove them."""
        for _ in range(50):
            pids = set()
            for d in self.dirs:
                try:
                    pids.update(int(p) for p in (d / "cgroup.procs").read_text().split())
                except OSError:
                    continue
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.05)
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------------------
# The sandbox


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/fonts"):
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    return args


def _parents(path: str) -> list[str]:
    """Folders above ``path`` made readable in the sandbox (bwrap makes them 0700 for root otherwise)."""
    return [str(p) for p in reversed(Path(path).parents) if str(p) != "/"]


def worker_env(limits: Limits) -> dict:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    threads = str(limits.threads)
    env.update({
        "HOME": HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "MPLCONFIGDIR": "/tmp/matplotlib", "MPLBACKEND": "Agg",
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
        # glibc reserves 64 MiB of address space per malloc arena, up to 8 per core: cap them, so that the
        # memory limit means the same on a 2-core grader and a 16-core laptop.
        "MALLOC_ARENA_MAX": "2",
    })
    return env


# System calls no notebook needs and a sandbox escape would: new namespaces (a nested user namespace gives back
# every capability inside it), mounts, keyrings, tracing other processes, BPF, io_uring, kernel modules.
DENIED_SYSCALLS = ("unshare", "setns", "mount", "umount2", "pivot_root", "keyctl", "add_key", "request_key", "ptrace",
                   "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "kexec_load",
                   "kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
                   "name_to_handle_at", "io_uring_setup", "io_uring_enter", "io_uring_register", "fsopen", "fsmount",
                   "fsconfig", "move_mount", "open_tree", "acct", "swapon", "swapoff", "reboot", "syslog")
CLONE_NEWUSER = 0x10000000


@cache
def seccomp_filter() -> bytes | None:
    """The seccomp program every sandbox runs under (libseccomp, through ctypes), or None where libseccomp is
    missing: the calls above fail with EPERM, ``clone`` only when it asks for a new user namespace, and
    ``clone3`` (whose flags a filter cannot read) with ENOSYS, so that the C library falls back to ``clone``."""
    import ctypes
    import ctypes.util
    import errno

    try:
        lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    except OSError:
        return None

    class Arg(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                    ("datum_b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(Arg)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    context = lib.seccomp_init(0x7FFF0000)  # SCMP_ACT_ALLOW
    if not context:
        return None
    try:
        rules = [(name, errno.EPERM, ()) for name in DENIED_SYSCALLS]
        rules += [("clone", errno.EPERM, (Arg(0, 7, CLONE_NEWUSER, CLONE_NEWUSER),)),  # 7: SCMP_CMP_MASKED_EQ
                  ("clone3", errno.ENOSYS, ())]
        for name, error, args in rules:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a system call on this architecture
                continue
            array = (Arg * len(args))(*args) if args else None
            if lib.seccomp_rule_add_array(context, 0x00050000 | error, number, len(args), array) != 0:
                return None
        read, write = os.pipe()
        try:
            if lib.seccomp_export_bpf(context, write) != 0:
                return None
        finally:
            os.close(write)
        with os.fdopen(read, "rb") as f:
            return f.read()
    finally:
        lib.seccomp_release(context)


def bwrap_command(limits: Limits, argv: list[str], info_fd: int, uid: int | None,
                  seccomp_fd: int | None = None) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ClassroomError(HOW_TO_GET_ONE.format(why="bwrap (bubblewrap) is not installed"))
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--as-pid-1", "--hostname", "sandbox", "--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if uid is not None:  # privileged bwrap: no user namespace, so that the change of uid below is real
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user"]
    args += _system_binds()
    size = str(limits.tmp_mib * MIB)
    # The private /tmp and home first: a folder bound below comes on top of them (a course cloned into /tmp).
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
             "--perms", "0755", "--dir", "/home",
             "--perms", "0777", "--size", size, "--tmpfs", HOME,
             "--perms", "0777", "--dir", WORK]
    made = {"/tmp", "/home", HOME}
    for folder in python_folders():
        for parent in _parents(folder):
            if parent not in made:
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        args += ["--ro-bind", folder, folder]
    args += ["--chdir", WORK, "--clearenv"]
    for name, value in worker_env(limits).items():
        args += ["--setenv", name, value]
    args += ["--"]
    if uid is not None:
        args += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    args += ["prlimit", f"--as={(limits.memory_mib + import_mib()) * MIB}", f"--nproc={limits.processes}",
             f"--fsize={limits.file_mib * MIB}", "--core=0", "--nofile=1024", "--"]
    return args + argv


class Sandbox:
    """A worker in a sandbox of its own: ``start()`` gives the channel to it; ``interrupt()``, ``kill()``."""

    def __init__(self, role: str, limits: Limits, use_sandbox: bool = True, message_mib: int = 64):
        self.role, self.limits, self.use_sandbox, self.message_mib = role, limits, use_sandbox, message_mib
        self.process: subprocess.Popen | None = None
        self.pid: int | None = None  # the worker's own pid, for interrupts
        self.cgroup: Cgroup | None = None
        self.channel: Channel | None = None
        self.pidfd: int | None = None

    def start(self) -> Channel:
        mine, theirs = pair()
        argv = [sys.executable, "-m", "mllm_classroom.worker", "--fd", str(theirs.fileno()), "--role", self.role,
                "--limit-mib", str(self.message_mib)]
        debug = os.environ.get("MLLM_WORKER_DEBUG") == "1"
        output = None if debug else subprocess.DEVNULL
        if not self.use_sandbox:
            env = {**os.environ, **worker_env(self.limits), "HOME": os.environ.get("HOME", HOME)}
            env.pop("MPLCONFIGDIR", None)
            self.process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                            stdout=output, stderr=output, env=env, start_new_session=True,
                                            cwd=tempfile.gettempdir())
            self.pid = self.process.pid
        else:
            name = f"sandbox-{os.getpid()}-{next(_numbers)}"
            # A uid of its own, drawn at random from 100 million: two sandboxes alive at once do not share one.
            uid = UID_BASE + _uids.randrange(100_000_000) if os.geteuid() == 0 else None
            info_r, info_w = os.pipe()
            program = seccomp_filter()
            seccomp_r = None
            if program is not None:
                seccomp_r, seccomp_w = os.pipe()
                os.write(seccomp_w, program)  # a few hundred bytes: far below a pipe's buffer
                os.close(seccomp_w)
            command = bwrap_command(self.limits, argv, info_w, uid, seccomp_r)
            mode = limit_mode()
            if mode in ("cgroup1", "cgroup2"):
                self.cgroup = Cgroup(name, self.limits)
                files = self.cgroup.procs_files()
                command = ["sh", "-c", 'while [ "$1" != "--" ]; do echo $$ > "$1" || exit 97; shift; done; shift; '
                           'exec "$@"', "sh", *files, "--", *command]
            elif mode == "systemd":
                command = ["systemd-run", "--user", "--scope", "--quiet", "--collect",
                           "-p", f"MemoryMax={self.limits.memory_mib}M", "-p", "MemorySwapMax=0",
                           "-p", f"TasksMax={self.limits.processes}", "-p", "CPUWeight=100", "--", *command]
            passed = (theirs.fileno(), info_w, *([seccomp_r] if seccomp_r is not None else []))
            self.process = subprocess.Popen(command, pass_fds=passed, stdin=subprocess.DEVNULL,
                                            stdout=output, stderr=output, start_new_session=True,
                                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                                                 **({k: v for k, v in os.environ.items()
                                                     if k in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")})})
            os.close(info_w)
            if seccomp_r is not None:
                os.close(seccomp_r)
            self.pid = _child_pid(info_r, self.process)
            try:  # signals go through a pidfd: never to a pid the system has given to another process since
                self.pidfd = os.pidfd_open(self.pid) if self.pid else None
            except (OSError, AttributeError):
                self.pidfd = None
        theirs.close()
        self.channel = Channel(mine, self.message_mib * MIB)
        return self.channel

    def _signal(self, number: int) -> None:
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, number)
            elif self.pid is not None and self.alive():
                os.kill(self.pid, number)
        except OSError:
            pass

    def interrupt(self) -> None:
        """KeyboardInterrupt in the worker (a cell or a call past its time); the sandbox stays."""
        self._signal(signal.SIGINT)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """End the sandbox and everything in it; remove its cgroup."""
        if self.channel is not None:
            self.channel.close()
        if self.process is not None:
            self._signal(signal.SIGKILL)
            if self.process.poll() is None:  # bwrap's group (its pid is ours until we wait for it)
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if self.cgroup is not None:
            self.cgroup.kill()


def remove_cgroups_of(pid: int) -> None:
    """Remove the cgroups left by the sandboxes a process made (a grading process killed at its wall time)."""
    if limit_mode() not in ("cgroup1", "cgroup2"):
        return
    root = Path("/sys/fs/cgroup")
    parents = [root / CGROUP_NAME] if limit_mode() == "cgroup2" else [root / c / CGROUP_NAME
                                                                       for c in ("memory", "pids", "cpu")]
    for parent in parents:
        for folder in parent.glob(f"sandbox-{pid}-*"):
            leftover = Cgroup.__new__(Cgroup)
            leftover.dirs = [folder]
            leftover.kill()


def _child_pid(info_r: int, process: subprocess.Popen) -> int | None:
    """The worker's pid on the host, from bwrap's --info-fd (it runs as pid 1 in its own namespace)."""
    data = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            import select

            if not select.select([info_r], [], [], 0.5)[0]:
                if process.poll() is not None:
                    break
                continue
            chunk = os.read(info_r, 4096)
            if not chunk:
                break
            data += chunk
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError):
                continue
    finally:
        os.close(info_r)
    return None


def check_available() -> None:
    """Start one sandbox and have it answer; raise ClassroomError with what to do when that fails."""
    if not sys.platform.startswith("linux"):
        raise ClassroomError(HOW_TO_GET_ONE.format(why=f"this is {sys.platform}, not Linux"))
    box = Sandbox("student", Limits(memory_mib=MIN_MEMORY_MIB))
    try:
        channel = box.start()
        channel.send({"op": "run", "code": "import mllm_utils"})
        reply, _ = channel.recv(timeout=120)
        if not reply.get("ok"):
            raise ClassroomError(HOW_TO_GET_ONE.format(why=f"the sandbox started but failed: {reply.get('ename')}"))
    except ClassroomError:
        raise
    except Exception as error:  # noqa: BLE001 - any way a sandbox fails to start
        code = box.process.poll() if box.process else None
        raise ClassroomError(HOW_TO_GET_ONE.format(why=f"bwrap failed ({type(error).__name__}, exit {code})")) \
            from None
    finally:
        box.kill()
