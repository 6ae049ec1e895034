"""A hostile class, graded end to end with the real sandbox (issues: grading a hostile class, twice).

Each hostile student hands in wrong answers plus one attack: points without the work, reading what a
student must not see, or harming the teacher or a classmate. The checks run in the judge, outside the
student's process, so no attack inside that process can change a verdict; the test checks every effect
from outside: no points gained unflagged, nothing hidden or secret in any feedback or CSV, no file
outside the sandbox created, changed or removed, no process left, no connection to a listener, the
memory of each sandbox and of the grader bounded, the host's disk untouched, and the honest classmates
graded in full whatever came before them or beside them in their shard.
"""

import base64
import csv
import hashlib
import json
import os
import pickle
import pwd
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from mllm_classroom import grade as grading
from mllm_classroom import sandbox
from mllm_classroom.lessons import secret_lines, squeeze

SECRET_TOKEN = "SECRET-TOKEN-4f1c9a"
SECRET_KEY = "SECRET-SSH-KEY-77d2e0"
PORT = 47321
MARKER = "/tmp/mllm-hostile-marker"
SLEEPER = "mllm-hostile-sleeper"
HOST_SOCKET = "/tmp/mllm-hostile.sock"
HIDDEN_INPUT = "x  y\\tz"  # the hidden test's input text: never in any feedback

IMPORTS = ("import torch\nimport torch.nn as nn\nfrom mllm_utils.checks import check_close, check_equal, "
           "check_not_called, check_true, switched_off, torch_calls, weights_of\n\n\n"
           "def count(module):\n    return sum(p.numel() for p in module.parameters())")
SOLUTION_1 = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
CHECK_1 = ("check_close('double', double(torch.tensor([1.0, 2.0])), [2.0, 4.0])\n### BEGIN HIDDEN TESTS\n"
           "check_close('double, hidden case', double(torch.tensor([3.5])), [7.0])  # hidden-line-of-exercise-1\n"
           "### END HIDDEN TESTS")
SOLUTION_2 = "def words(text):\n    ### BEGIN SOLUTION\n    return text.split()\n    ### END SOLUTION"
CHECK_2 = ("check_equal('words', words('a b'), ['a', 'b'])\n### BEGIN HIDDEN TESTS\n"
           f"check_equal('words, hidden case', words('{HIDDEN_INPUT}'), ['x', 'y', 'z'])  # hidden-line-of-exercise-2\n"
           "### END HIDDEN TESTS")
SOLUTION_3 = ("def linear_relu(x, layer):\n    ### BEGIN SOLUTION\n"
              "    return torch.clamp(x @ layer.weight.T + layer.bias, min=0)\n    ### END SOLUTION")
CHECK_3 = ("torch.manual_seed(0)\nlayer = nn.Linear(3, 2)\nx = torch.randn(4, 3)\n"
           "with torch_calls() as names:\n    got = linear_relu(x, weights_of(layer))\n"
           "check_close('linear_relu', got, torch.relu(layer(x)).detach())\n"
           "check_not_called('no relu', names, ('relu',))\n"
           "### BEGIN HIDDEN TESTS\ntorch.manual_seed(1)  # hidden-line-of-exercise-3\nlayer = nn.Linear(5, 7)\n"
           "x = torch.randn(2, 5)\ncheck_close('linear_relu, other sizes', linear_relu(x, weights_of(layer)), "
           "torch.relu(layer(x)).detach())\n### END HIDDEN TESTS")
SOLUTION_4 = ("def linear_params(n_in, n_out):\n    ### BEGIN SOLUTION\n    return n_in * n_out + n_out\n"
              "    ### END SOLUTION")
CHECK_4 = ("with switched_off('torch.nn.Linear'):\n    got = linear_params(3, 2)\n"
           "check_equal('linear_params(3, 2)', got, count(nn.Linear(3, 2)))\n### BEGIN HIDDEN TESTS\n"
           "with switched_off('torch.nn.Linear'):\n    got = linear_params(7, 5)\n"
           "check_equal('linear_params(7, 5)', got, count(nn.Linear(7, 5)))  # hidden-line-of-exercise-4\n"
           "### END HIDDEN TESTS")
SOLUTION_5 = ("class Scale(nn.Module):\n    def __init__(self, k):\n        ### BEGIN SOLUTION\n"
              "        super().__init__()\n"
              "        self.k = nn.Parameter(torch.tensor(float(k)))\n\n    def forward(self, x):\n"
              "        return self.k * x\n        ### END SOLUTION")
CHECK_5 = ("check_close('Scale(2)', Scale(2)(torch.ones(3)).detach(), [2.0, 2.0, 2.0])\n### BEGIN HIDDEN TESTS\n"
           "check_close('Scale(-3)', Scale(-3)(torch.arange(3.0)).detach(), [0.0, -3.0, -6.0])"
           "  # hidden-line-of-exercise-5\n### END HIDDEN TESTS")
RIGHT_SCALE = ("class Scale(nn.Module):\n    def __init__(self, k):\n        super().__init__()\n"
               "        self.k = nn.Parameter(torch.tensor(float(k)))\n\n    def forward(self, x):\n"
               "        return self.k * x")
RIGHT = {"ex1-solution": "def double(x):\n    return 2 * x",
         "ex2-solution": "def words(text):\n    return text.split()",
         "ex3-solution": "def linear_relu(x, layer):\n    return torch.clamp(x @ layer.weight.T + layer.bias, min=0)",
         "ex4-solution": "def linear_params(n_in, n_out):\n    return n_in * n_out + n_out",
         "ex5-solution": RIGHT_SCALE}
WRONG = {"ex1-solution": "def double(x):\n    return x", "ex2-solution": "def words(text):\n    return []",
         "ex3-solution": "def linear_relu(x, layer):\n    return x @ layer.weight.T",
         "ex4-solution": "def linear_params(n_in, n_out):\n    return n_in * n_out",
         "ex5-solution": RIGHT_SCALE.replace("self.k * x", "x + self.k")}
PATCH = "c.check_close = c.check_equal = c.check_true = lambda *a, **k: None"


class _Exec:  # pickled into the np.load attack: unpickling it runs exec in the student's process
    def __reduce__(self):
        return exec, ("import mllm_utils.checks as c\n" + PATCH,)


PICKLE = base64.b64encode(pickle.dumps(_Exec())).decode()
WORKED = "raise RuntimeError('ATTACK WORKED: ' + {what!r})"

# Attacks as cells, put before exercise 1's check unless BEFORE says otherwise.
ATTACKS = {
    # points without the work
    "patch_checks": "import mllm_utils.checks as c\n" + PATCH,
    "always_equal": "class Anything:\n    def __eq__(self, other):\n        return True\n"
                    "def words(text):\n    return Anything()",
    "torch_function": "class Zero(torch.Tensor):\n    @classmethod\n"
                      "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                      "        return torch.zeros(())\n"
                      "def double(x):\n    return x.as_subclass(Zero)",
    "swallow_errors": "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",
    "builtins": "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})",
    "displayhook": "torch.sys.displayhook('looks fine')\ndef double(x):\n    torch.sys.displayhook(4)\n    return x",
    "getattr_dict": "import mllm_utils.checks as c\ng = getattr\nns = g(c, '__di' + 'ct__')\n"
                    "ns['check_close'] = ns['check_equal'] = lambda *a, **k: None",
    "pydoc_setattr": "import pydoc\nimport mllm_utils.checks as c\nput = pydoc.locate('builtins.setattr')\n"
                     "put(c, 'check_close', lambda *a, **k: None)",
    "savetxt_module": "import numpy as np\nnp.savetxt('evil.py', [], comments='', header='import mllm_utils.checks "
                      "as c\\nc.check_close = lambda *a, **k: None')\nimport evil",
    "np_load_pickle": f"import io\nimport numpy as np\nnp.load(io.BytesIO(__import__('base64').b64decode('{PICKLE}')), "
                      "allow_pickle=True)",
    "dispatch_mode": "from torch.utils._python_dispatch import TorchDispatchMode\n"
                     "class Zeros(TorchDispatchMode):\n"
                     "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
                     "        return func(*args, **(kwargs or {}))\n"
                     "Zeros().__enter__()",
    "forge_observation": "import mllm_utils.checks as c\nclass Blind:\n    def __init__(self):\n"
                         "        self.calls = []\n"
                         "    def __enter__(self):\n        return self.calls\n    def __exit__(self, *a):\n"
                         "        return False\nc.torch_calls = Blind\n"
                         "def linear_relu(x, layer):\n    return torch.relu(x @ layer.weight.T + layer.bias)",
    "call_the_layer": "def linear_relu(x, layer):\n    return torch.clamp(layer.forward(x), min=0)",
    # arguments changed in place, so that expected values computed after the call would follow them
    "state_write_back": "def linear_relu(x, layer):\n    with torch.no_grad():\n        x.zero_()\n"
                        "        layer.weight.zero_()\n        layer.bias.zero_()\n"
                        "    return torch.zeros(x.shape[0], 2)",
    "watch_clear": "from mllm_utils.checks import WATCHING\ndef linear_relu(x, layer):\n"
                   "    out = torch.relu(x @ layer.weight.T + layer.bias)\n    for w in WATCHING:\n"
                   "        w.calls.clear()\n    return out",
    "watch_overflow": "def linear_relu(x, layer):\n    for _ in range(130_000):\n        torch.neg(x)\n"
                      "    return torch.relu(x @ layer.weight.T + layer.bias)",
    "alias_before_switch_off": "from torch.nn import Linear as Lin\n"
                               "def linear_params(n_in, n_out):\n"
                               "    return sum(p.numel() for p in Lin(n_in, n_out).parameters())",
    "hidden_input_in_text": "def double(x):\n    return 2 * x if x.shape == (2,) else [f'leak {x.tolist()}']",
    "class_forward": "class Scale(nn.Module):\n    def __init__(self, k):\n        super().__init__()\n"
                     "        self.k = nn.Parameter(torch.tensor(float(k)))\n\n    def forward(self, x):\n"
                     "        return x + self.k",
    "watch_clear_attrgetter": "import operator\nimport mllm_utils\ndef linear_relu(x, layer):\n"
                              "    out = torch.relu(x @ layer.weight.T + layer.bias)\n"
                              "    for w in operator.attrgetter('checks.WATCH' + 'ING')(mllm_utils):\n"
                              "        w.calls.clear()\n    return out",
    "change_then_complex": "def linear_relu(x, layer):\n    out = torch.clamp(x @ layer.weight.T + layer.bias, min=0)\n"
                           "    with torch.no_grad():\n        layer.weight.zero_()\n"
                           "    layer.weight.data = layer.weight.data.to(torch.complex64)\n    return out",
    "huge_hidden_text": "def double(x):\n    return 2 * x if x.shape == (2,) else ['x' * 3_000_000 + str(x.tolist())]",
    "surrogate_error": "raise ValueError('\\udcff' * 3)",
    "hidden_sleeper": "import time\ndef double(x):\n    if x.shape != (2,):\n        time.sleep(600)\n    return 2 * x",
    "sleepy_cells": "import time\ntime.sleep(25)",  # eight such cells, each under the cell time limit
    "pickle_tofile": f"import numpy as np\nnp.frombuffer(__import__('base64').b64decode('{PICKLE}'), np.uint8)"
                     ".tofile('p.npy')\nnp.load('p.npy', allow_pickle=True)",
    # seeing what a student must not see
    "read_solutions": "import os\nSIGNS = ('hidden-line-of-exercise', '99_hostile')\nfound = []\n"
                      "for top in ['/', os.getcwd(), os.path.expanduser('~')]:\n"
                      "    for root, dirs, files in os.walk(top):\n"
                      "        if root.startswith(('/proc', '/sys', '/usr', '/dev')):\n"
                      "            dirs[:] = []\n            continue\n"
                      "        for f in files:\n            p = os.path.join(root, f)\n"
                      "            if f.endswith(('.ipynb', '.db', '.json', '.py')):\n"
                      "                try:\n                    text = open(p, errors='ignore').read()\n"
                      "                except OSError:\n                    continue\n"
                      "                if any(w in text for w in SIGNS):\n                    found.append(p)\n"
                      "if found:\n    raise RuntimeError('ATTACK WORKED: read ' + str(found))",
    "environment": "import os\n"
                   f"if {SECRET_TOKEN!r} in str(os.environ):\n    " + WORKED.format(what="token") + "\n"
                   "for p in ['~/.ssh/id_rsa', '/root/.ssh/id_rsa']:\n"
                   "    p = os.path.expanduser(p)\n    if os.path.exists(p):\n        " + WORKED.format(what="key"),
    "hook_hidden_tests": "get_ipython().events.register('pre_run_cell', lambda info: print(info.raw_cell))",
    "history_in_error": "def words(text):\n    raise ValueError('\\u200b\\n'.join(In) + '\\x1b[31m')",
    "inputs_in_result": "def words(text):\n"
                        "    return text.split() if text == 'a b' else [text, repr(text), '\\x1b[2J']",
    # harm
    "write_files": "import os\nfor p in [os.path.expanduser('~/owned.txt'), " + repr(MARKER) + ", '/root/owned.txt']:\n"
                   "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\n"
                   "for p in [os.path.expanduser('~/teacher-notes.txt')]:\n    try:\n        os.remove(p)\n"
                   "    except OSError:\n        pass",
    "grader_processes": "import os, signal\nfor pid in os.listdir('/proc'):\n    if pid.isdigit() and pid != '1':\n"
                        "        try:\n            cmd = open(f'/proc/{pid}/cmdline').read()\n"
                        "        except OSError:\n            continue\n"
                        "        if 'mllm_classroom' in cmd or 'pytest' in cmd:\n"
                        "            os.kill(int(pid), signal.SIGKILL)\n"
                        "            " + WORKED.format(what="saw the grader"),
    "leave_process": "import subprocess, sys\n"
                     f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {SLEEPER!r}],"
                     " start_new_session=True)",
    "network": "import socket\ns = socket.socket()\ns.settimeout(2)\n"
               f"try:\n    s.connect(('127.0.0.1', {PORT}))\n    s.sendall(b'hello')\n"
               "    " + WORKED.format(what="connected") + "\nexcept OSError:\n    pass",
    "host_unix_socket": "import socket\ns = socket.socket(socket.AF_UNIX)\n"
                        f"try:\n    s.connect({HOST_SOCKET!r})\n    " + WORKED.format(what="unix socket") +
                        "\nexcept OSError:\n    pass",
    "memory": "try:\n    hog = bytearray(10 * 1024 ** 3)\n    " + WORKED.format(what="10 GiB") + "\n"
              "except MemoryError:\n    pass",
    "memory_in_processes": "import os, time\nimport numpy as np\nfor i in range(5):\n    if os.fork() == 0:\n"
                           "        try:\n            a = np.ones(int(1.9 * 1024 ** 3) // 8)\n"
                           "            time.sleep(8)\n        finally:\n            os._exit(0)\ntime.sleep(10)",
    "fork_bomb": "import os, time\nmade = 0\nfor i in range(300):\n    try:\n        pid = os.fork()\n"
                 "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(25)\n        os._exit(0)\n"
                 "    made += 1\nif made >= 300:\n    " + WORKED.format(what="300 processes"),
    "big_file": "try:\n    open('big.bin', 'wb').write(b'x' * (512 * 1024 ** 2))\n    "
                + WORKED.format(what="512 MiB file") + "\nexcept OSError:\n    pass",
    "fill_disk": "import os\nfor i in range(40):\n    try:\n"
                 "        open(f'f{i}.bin', 'wb').write(os.urandom(60 * 2 ** 20))\n"
                 "    except OSError:\n        break\nif i == 39:\n    " + WORKED.format(what="2.4 GB on disk"),
    "flood_output": "import time\nend = time.time() + 5\nwhile time.time() < end:\n    print('x' * 10000)",
    "flood_channel": "import os, socket, struct\nfor fd in range(3, 20):\n    try:\n"
                     "        s = socket.socket(fileno=os.dup(fd))\n    except OSError:\n        continue\n"
                     "    try:\n        s.sendall(struct.pack('<Q', 2 ** 40) + b'x' * 2 ** 20)\n"
                     "    except OSError:\n        pass",
    "widget_comms": "import ipywidgets\nkeep = [ipywidgets.Text(value='x' * 2 ** 20) for _ in range(200)]",
    "symlinks": "import os\nfor name in ('kernel.json', 'ipc', 'out', 'feedback'):\n    try:\n"
                "        os.symlink('/etc/shadow', name)\n    except OSError:\n        pass",
    "kill_everything": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(-1, signal.SIGKILL)",
    "hang": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
}
BEFORE = {"always_equal": "ex2-check", "history_in_error": "ex2-check", "inputs_in_result": "ex2-check",
          "forge_observation": "ex3-check", "call_the_layer": "ex3-check", "state_write_back": "ex3-check",
          "watch_clear": "ex3-check", "watch_overflow": "ex3-check", "alias_before_switch_off": "ex4-check",
          "watch_clear_attrgetter": "ex3-check", "change_then_complex": "ex3-check",
          "class_forward": "ex5-check"}
# Attacks on the notebook file itself (its JSON), not by code.
FILE_ATTACKS = ("skip_execution_tags", "markdown_solution", "raw_solution", "nbgrader_x", "schema_version_4",
                "deep_json", "deep_attributes", "future_barry")
HONEST = ["ada", "bob", "zed"]  # ada and bob start each shard; zed is graded after every attacker in its shard
# Answers right, but by a way the exercise forbids: no points, or flagged and withheld.
SHORTCUTS = {"forge_observation": "ex3", "call_the_layer": "ex3", "watch_clear": "ex3", "watch_overflow": "ex3",
             "alias_before_switch_off": "ex4", "watch_clear_attrgetter": "ex3"}
# Right answers written the way honest students write them (issue 32): full points, nothing flagged.
VARIANTS = {
    "variants_a": {
        "ex1-solution": "%%time\ndef double(x):\n    return 2 * x",
        "extra": ["import warnings\nwarnings.filterwarnings('ignore')",
                  "x = torch.ones(3)\nfor i in range(3):\n    print(double(x + i))",
                  "layer = nn.Linear(3, 2)\nprint(linear_relu(x, layer))"],
        "tags": ["my-own-tag", "skip-execution"],
    },
    "variants_b": {
        "extra": ["!nvidia-smi -L", "nn.Linear?", "%time y = double(torch.ones(2))",
                  "from mllm_utils.checks import check_close\ncheck_close('mine', double(torch.ones(2)), [2.0, 2.0])",
                  "model, accuracy = Scale(3), 1.0\nprint(model(torch.ones(2)))"],
    },
}
BUDGET = 60  # --budget: what one submission's own process may use in all
# Right answers everywhere, but a flagged cell moved before every check: all points held, whatever the order.
ORDER_ATTACK = "withhold_order"


def cell(source, **nbgrader):
    c = nbformat.v4.new_code_cell(source)
    if nbgrader:
        c.metadata["nbgrader"] = {"schema_version": 3, "task": False, "solution": False, "grade": False,
                                  "locked": False, **nbgrader}
    return c


def lesson_notebook():
    nb = nbformat.v4.new_notebook(cells=[
        cell(IMPORTS),
        cell(SOLUTION_1, grade_id="ex1-solution", solution=True),
        cell(CHECK_1, grade_id="ex1-check", grade=True, locked=True, points=1),
        cell(SOLUTION_2, grade_id="ex2-solution", solution=True),
        cell(CHECK_2, grade_id="ex2-check", grade=True, locked=True, points=1),
        cell(SOLUTION_3, grade_id="ex3-solution", solution=True),
        cell(CHECK_3, grade_id="ex3-check", grade=True, locked=True, points=1),
        cell(SOLUTION_4, grade_id="ex4-solution", solution=True),
        cell(CHECK_4, grade_id="ex4-check", grade=True, locked=True, points=1),
        cell(SOLUTION_5, grade_id="ex5-solution", solution=True),
        cell(CHECK_5, grade_id="ex5-check", grade=True, locked=True, points=1),
    ])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["mllm"] = {"quick_run_seconds": 5, "quick_peak_mib": 1200}
    return nb


def submission(answers, attack=None, before="ex1-check", times=1):
    nb = lesson_notebook()
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = answers[gid]
        elif gid and c.metadata["nbgrader"]["grade"]:
            c.source = c.source.split("### BEGIN HIDDEN TESTS")[0].rstrip()
    if attack:
        at = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == before][0]
        for _ in range(times):
            nb.cells.insert(at, cell(attack))
    return nb


def file_attack(name: str) -> str:
    """A submission whose notebook file itself is the attack (the JSON a student can edit by hand)."""
    nb = submission(WRONG)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    if name == "skip_execution_tags":
        for gid in ("ex1-check", "ex2-check", "ex3-check"):
            by_id[gid].metadata["tags"] = ["skip-execution"]
    elif name in ("markdown_solution", "raw_solution"):
        solution = by_id["ex1-solution"]
        solution.cell_type = "markdown" if name == "markdown_solution" else "raw"
        solution.source = "import mllm_utils.checks as c\n" + PATCH + "\ndef double(x):\n    return 2 * x"
        solution.pop("outputs", None)
        solution.pop("execution_count", None)
    elif name == "nbgrader_x":
        nb.cells[0].metadata["nbgrader"] = "x"
    elif name == "schema_version_4":
        by_id["ex2-check"].metadata["nbgrader"]["schema_version"] = 4
    elif name == "deep_attributes":
        nb.cells.insert(1, cell("x = 1\ny = x" + ".real" * 3000))
    elif name == "future_barry":
        nb.cells.insert(1, cell("from __future__ import barry_as_FLUFL"))
        nb.cells.insert(2, cell("import mllm_utils.checks as c\nif 1 <> 2:\n    " + PATCH))
    text = nbformat.writes(nb)
    if name == "deep_json":
        data = json.loads(text)
        data["cells"][0]["metadata"]["deep"] = "DEEP"
        text = json.dumps(data).replace('"DEEP"', "[" * 3000 + "]" * 3000)
    return text


def digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def sleepers() -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="ignore")
        except OSError:
            continue
        if SLEEPER in cmd and "pytest" not in cmd:
            found.append(pid)
    return found


class Watch(threading.Thread):
    """While grading runs: the memory of each student's sandbox (its processes' proportional set sizes summed by
    the sandbox's own uid, as root) and of the grader's own processes, and the host disk's free space, sampled
    every 0.2 s."""

    def __init__(self, disk: Path):
        super().__init__(daemon=True)
        self.disk, self.stop = disk, threading.Event()
        self.sandbox_mib, self.grader_mib, self.disk_drop_mib, self.judges = 0.0, 0.0, 0.0, 0

    @staticmethod
    def pss_mib(pid) -> float:
        """A process's proportional share of the memory it uses: pages shared after a fork count once in all."""
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
        except (OSError, ValueError):
            pass
        return 0.0

    @staticmethod
    def ours(pid: str, parents: dict) -> bool:
        """Is ``pid`` this test process or one of its descendants (ppid chain, read from /proc as needed)?"""
        me, seen = str(os.getpid()), set()
        while pid not in ("0", "1", "") and pid not in seen:
            if pid == me:
                return True
            seen.add(pid)
            if pid not in parents:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    parents[pid] = next((line.split(":", 1)[1].strip() for line in status.splitlines()
                                         if line.startswith("PPid:")), "0")
                except OSError:
                    return False
            pid = parents[pid]
        return False

    def run(self):
        start = shutil.disk_usage(self.disk).free
        while not self.stop.is_set():
            by_uid, students, grader, judges = {}, set(), 0, 0
            parents = {}
            for pid in os.listdir("/proc"):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                parents[pid] = fields.get("PPid", "0").strip()
                if fields.get("State", "").strip().startswith("Z"):
                    continue  # ended, not yet reaped: holds no memory and runs nothing
                if not self.ours(pid, parents):
                    continue  # another grading run on this machine (a teacher's, a benchmark): not this class's
                uid = int(fields.get("Uid", "0").split()[0])
                rss = self.pss_mib(pid)
                if uid >= sandbox.UID_BASE:
                    by_uid[uid] = by_uid.get(uid, 0) + rss
                    if b"--role\x00student" in cmd:
                        students.add(uid)
                    judges += b"--role\x00judge" in cmd
                elif b"mllm_classroom" in cmd and b"worker" not in cmd:
                    grader = max(grader, rss)
            self.sandbox_mib = max([self.sandbox_mib, *(by_uid[u] for u in students)])
            self.grader_mib = max(self.grader_mib, grader)
            self.judges = max(self.judges, judges)
            self.disk_drop_mib = max(self.disk_drop_mib, (start - shutil.disk_usage(self.disk).free) / 2**20)
            time.sleep(0.2)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    lessons = base / "lessons"
    lessons.mkdir()
    lesson = lessons / "99_hostile.ipynb"
    nbformat.write(lesson_notebook(), lesson)
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET_KEY, encoding="utf-8")
    (home / "teacher-notes.txt").write_text("keep me", encoding="utf-8")
    subs = base / "submissions"
    for name in HONEST:
        (subs / name).mkdir(parents=True)
        nbformat.write(submission(RIGHT), subs / name / lesson.name)
    for name, variant in VARIANTS.items():
        nb = submission({**RIGHT, **{k: v for k, v in variant.items() if k.endswith("-solution")}})
        at = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "ex5-check"][0]
        for extra in reversed(variant["extra"]):  # after exercise 4's check, before exercise 5's
            added = cell(extra)
            added.metadata["tags"] = variant.get("tags", [])
            nb.cells.insert(at, added)
        (subs / name).mkdir(parents=True)
        nbformat.write(nb, subs / name / lesson.name)
    for i, (name, attack) in enumerate(ATTACKS.items()):
        answers = WRONG
        if name in SHORTCUTS:
            answers = {**WRONG, f"{SHORTCUTS[name]}-solution": RIGHT[f"{SHORTCUTS[name]}-solution"]}
        (subs / f"h{i:02d}_{name}").mkdir(parents=True)
        nbformat.write(submission(answers, attack, before=BEFORE.get(name, "ex1-check"),
                                  times=8 if name == "sleepy_cells" else 1),
                       subs / f"h{i:02d}_{name}" / lesson.name)
    for name in FILE_ATTACKS:
        (subs / f"j_{name}").mkdir(parents=True)
        (subs / f"j_{name}" / lesson.name).write_text(file_attack(name), encoding="utf-8")
    order = submission(RIGHT)  # exercise 1 moved to the end, a flagged cell just before it
    first = [c for c in order.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("ex1-")]
    order.cells = [c for c in order.cells if c not in first] + [cell("import os")] + first
    (subs / ORDER_ATTACK).mkdir()
    nbformat.write(order, subs / ORDER_ATTACK / lesson.name)
    formula = subs / "=HYPERLINK(\"http-evil\",\"x\")"  # a student's id that a spreadsheet would run
    formula.mkdir()
    nbformat.write(submission(RIGHT), formula / lesson.name)
    before_home, before_subs = digest(home), digest(subs)
    Path(MARKER).unlink(missing_ok=True)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PORT))
    listener.listen(5)
    listener.setblocking(False)
    Path(HOST_SOCKET).unlink(missing_ok=True)
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(HOST_SOCKET)
    unix.listen(5)
    unix.setblocking(False)
    out = base / "grades"
    env = {**os.environ, "HOME": str(home), "MLLM_TEST_TOKEN": SECRET_TOKEN}
    command = [sys.executable, "-m", "mllm_classroom", "--notebooks", str(lessons), "grade", str(subs),
               "--out", str(out), "--timeout", "30", "--budget", str(BUDGET)]
    watch = Watch(Path(tempfile_dir()))
    watch.start()
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=base)
    seconds = time.monotonic() - started
    watch.stop.set()
    watch.join()
    connections = []
    for sock in (listener, unix):
        try:
            connections.append(sock.accept())
        except BlockingIOError:
            pass
        sock.close()
    Path(HOST_SOCKET).unlink(missing_ok=True)
    rows = {r["student"]: r for r in grading_rows(out)}
    return {"done": done, "rows": rows, "out": out, "home": home, "subs": subs, "lesson": lesson, "watch": watch,
            "before_home": before_home, "before_subs": before_subs, "connections": connections, "seconds": seconds}


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()


def grading_rows(out):
    with open(out / "grades.csv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def row_of(hostile, name):
    [row] = [r for student, r in hostile["rows"].items() if student.endswith(name)]
    return row


def test_the_class_is_graded(hostile):
    assert hostile["done"].returncode == 0, hostile["done"].stderr
    assert len(hostile["rows"]) == len(HONEST) + len(VARIANTS) + len(ATTACKS) + len(FILE_ATTACKS) + 2


def test_honest_students_get_full_points_whatever_their_classmates_did(hostile):
    for name in [*HONEST, *VARIANTS]:
        row = hostile["rows"][name]
        assert (row["score"], row["status"], row["review"], row["sandbox"]) == ("5", "graded", "", "bubblewrap"), row


@pytest.mark.parametrize("name", list(ATTACKS) + list(FILE_ATTACKS))
def test_no_attack_gains_points(hostile, name):
    row = row_of(hostile, name)
    assert row["score"] == "0", row
    assert row["withheld"] in ("", "0") or row["review"], row  # points are withheld only when flagged
    assert "ATTACK WORKED" not in row["notes"] + row["status"], row


def test_shortcuts_are_caught_or_flagged(hostile):
    call = row_of(hostile, "call_the_layer")
    assert call["ex3"] == "0" and "linear_relu raised AttributeError" in call["notes"], call
    for name, exercise in SHORTCUTS.items():  # right values by a forbidden way: caught (0) or held by review
        row = row_of(hostile, name)
        assert row[exercise] == "0" and (row["review"] or name == "call_the_layer"), row
    for name in ("forge_observation", "watch_clear", "alias_before_switch_off"):
        assert row_of(hostile, name)["withheld"] == "1", name


def test_an_argument_changed_in_place_fails_and_changes_nothing_of_the_judges(hostile):
    row = row_of(hostile, "state_write_back")
    assert row["ex3"] == "0" and "changed argument" in row["notes"].replace("changed its argument", "changed argument")


def test_a_class_exercise_runs_the_students_own_forward(hostile):
    assert row_of(hostile, "class_forward")["ex5"] == "0"
    assert hostile["rows"]["ada"]["ex5"] == "1"


def test_points_are_held_by_what_ran_before_each_check_not_by_cell_order(hostile):
    row = hostile["rows"][ORDER_ATTACK]
    assert (row["score"], row["withheld"]) == ("0", "5"), row


def test_what_review_cannot_trust_is_flagged(hostile):
    for name in ("patch_checks", "always_equal", "torch_function", "swallow_errors", "builtins", "np_load_pickle",
                 "dispatch_mode", "forge_observation", "read_solutions", "environment", "hook_hidden_tests",
                 "history_in_error", "grader_processes", "kill_everything", *FILE_ATTACKS):
        if name in ("deep_json", "skip_execution_tags"):
            continue  # not a notebook at all: its status says so; tags are not read by the grader (no effect)
        assert row_of(hostile, name)["review"], name


def test_a_broken_file_costs_only_its_own_row(hostile):
    assert row_of(hostile, "deep_json")["status"] == "not a notebook (JSON nested too deeply)"
    for name in ("nbgrader_x", "schema_version_4", "deep_attributes"):
        assert row_of(hostile, name)["status"] == "graded", name
    assert "a markdown cell in the place of the solution" in row_of(hostile, "markdown_solution")["review"]
    assert "code that does not parse" in row_of(hostile, "future_barry")["review"]


def test_no_feedback_or_report_shows_a_secret_or_an_escape(hostile):
    secrets = secret_lines(nbformat.read(hostile["lesson"], as_version=4))
    assert any("hidden-line-of-exercise-1" in s for s in secrets)
    texts = {p: p.read_text(encoding="utf-8") for p in hostile["out"].rglob("*") if p.is_file()}
    assert len(texts) >= len(hostile["rows"]) + 2
    for path, text in texts.items():
        flat = squeeze(text)
        for secret in [*secrets, SECRET_TOKEN, SECRET_KEY, "hidden-line-of-exercise", "BEGINSOLUTION"]:
            assert secret not in flat, (path, secret)
        assert "\x1b" not in text and "\u200b" not in text, path
        if path.suffix == ".html":
            assert "y\\tz" not in text and "x  y" not in text, path  # a hidden test's input
            assert "3.5" not in text and "leak" not in text, path


def test_csv_cells_are_never_formulas(hostile):
    with open(hostile["out"] / "grades.csv", encoding="utf-8", newline="") as f:
        cells = [c for row in csv.reader(f) for c in row]
    assert not any(c.startswith(("=", "+", "-", "@", "\t", "\r")) for c in cells)
    assert any(c.startswith("'=HYPERLINK") for c in cells)


def test_nothing_outside_the_sandbox_was_touched(hostile):
    assert digest(hostile["home"]) == hostile["before_home"], "the teacher's home changed"
    assert digest(hostile["subs"]) == hostile["before_subs"], "the submissions folder changed"
    assert not Path(MARKER).exists()
    assert hostile["connections"] == [], "a submission reached a server on the teacher's machine"
    assert sleepers() == [], "a process started by a submission is still running"


def test_limits_hold_per_sandbox_and_the_grader_stays_small(hostile):
    watch = hostile["watch"]
    limit = sandbox.memory_mib(1200)
    if os.geteuid() == 0 and sandbox.limit_mode() in ("cgroup1", "cgroup2"):
        assert watch.sandbox_mib <= limit * 1.1, f"a sandbox held {watch.sandbox_mib:.0f} MiB (limit {limit})"
    assert watch.grader_mib < 1500, f"the grader's own process grew to {watch.grader_mib:.0f} MiB"
    assert watch.judges <= 4, f"{watch.judges} judges at once: a forked judge outlived its submission"
    assert watch.disk_drop_mib < 300, f"the host's disk lost {watch.disk_drop_mib:.0f} MiB while grading"
    for name in ("memory_in_processes", "fill_disk", "fork_bomb", "flood_channel", "widget_comms", "symlinks"):
        assert row_of(hostile, name)["score"] == "0"


def test_a_process_that_kills_or_hangs_costs_only_its_own_submission(hostile):
    hang = row_of(hostile, "hang")
    assert "ran past 30 s and did not stop when interrupted" in hang["notes"], hang
    assert row_of(hostile, "kill_everything")["score"] == "0"
    assert hostile["rows"]["zed"]["score"] == "5"


def test_sandbox_users_are_not_real_users():
    if os.geteuid() != 0:
        pytest.skip("as root only: a uid of its own per sandbox")
    with pytest.raises(KeyError):
        pwd.getpwuid(sandbox.UID_BASE)


def test_grading_without_a_sandbox_stops_with_what_to_do(tmp_path):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nbformat.write(lesson_notebook(), lessons / "99_hostile.ipynb")
    nbformat.write(submission(RIGHT), tmp_path / "class" / "ada" / "99_hostile.ipynb")
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no bwrap on this PATH
    done = subprocess.run([sys.executable, "-m", "mllm_classroom", "--notebooks", str(lessons), "grade",
                           str(tmp_path / "class"), "--out", str(tmp_path / "grades")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert "sandbox" in done.stderr and "apt-get install bubblewrap" in done.stderr and "--no-sandbox" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_no_sandbox_is_said_in_every_row(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nbformat.write(lesson_notebook(), lessons / "99_hostile.ipynb")
    for name in ("ada", "ben"):
        (tmp_path / "class" / name).mkdir(parents=True)
        nbformat.write(submission(RIGHT), tmp_path / "class" / name / "99_hostile.ipynb")
    results = grading.grade(tmp_path / "class", [lessons / "99_hostile.ipynb"], tmp_path / "grades",
                            use_sandbox=False)
    assert [(r.points, r.sandbox) for r in results] == [({f"ex{k}": 1.0 for k in range(1, 6)},
                                                         "off (--no-sandbox)")] * 2
    assert [r["sandbox"] for r in grading_rows(tmp_path / "grades")] == ["off (--no-sandbox)"] * 2


def test_a_hidden_test_leaves_no_trace_of_its_inputs_and_no_text_swells_a_report(hostile):
    """A 3,000,000-character string spelling a hidden call's input, returned there: neither the string nor the
    hidden check's name reaches the feedback; every CSV cell stays short (spreadsheets hold 32,767)."""
    row = row_of(hostile, "huge_hidden_text")
    assert row["ex1"] == "0", row
    page = (hostile["out"] / "feedback" / next(s for s in hostile["rows"] if s.endswith("huge_hidden_text"))
            / "99_hostile.html").read_text(encoding="utf-8")
    assert len(page) < 20_000 and "xxxxxxxx" not in page and "3.5" not in page and "hidden case" not in page
    assert "a hidden test (another case of this exercise) failed" in page
    with open(hostile["out"] / "grades.csv", encoding="utf-8", newline="") as f:
        assert max(len(c) for r in csv.reader(f) for c in r) <= 4_001


def test_a_character_utf8_cannot_hold_stops_nothing(hostile):
    """ValueError("\\udcff"): the class is graded, grades.csv written whole, the character replaced."""
    assert hostile["done"].returncode == 0, hostile["done"].stderr
    assert not list(hostile["out"].glob(".*.tmp"))
    row = row_of(hostile, "surrogate_error")
    assert row["status"] == "graded" and "raised ValueError: ???" in row["notes"], row


def test_an_argument_changed_and_then_made_unreadable_fails(hostile):
    row = row_of(hostile, "change_then_complex")
    assert row["ex3"] == "0" and "changed argument 2 (its weight)" in row["notes"], row


def test_one_submissions_time_is_bounded_by_its_calls_and_its_budget(hostile):
    """A function that sleeps on hidden calls only is stopped after the call limit (CALL_FLOOR, the reference
    check being fast); cells that sleep under the cell limit each are stopped when the budget is spent."""
    sleeper = row_of(hostile, "hidden_sleeper")
    assert sleeper["ex1"] == "0" and "a call of double ran past" in sleeper["notes"], sleeper
    honest = max(float(hostile["rows"][name]["seconds"]) for name in HONEST)
    # at most its budget beyond an honest classmate's time, and some slack for a loaded machine (unbounded, the
    # eight cells below would take 200 s)
    assert float(sleeper["seconds"]) < honest + BUDGET + 60, (sleeper, honest)
    cells = row_of(hostile, "sleepy_cells")
    assert f"it used its whole time budget ({BUDGET} s)" in cells["notes"], cells
    assert float(cells["seconds"]) < honest + BUDGET + 60, (cells, honest)
    assert cells["score"] == "0"


def test_honest_variants_are_graded_in_full_and_unflagged(hostile):
    for name in VARIANTS:
        row = hostile["rows"][name]
        assert (row["score"], row["review"], row["withheld"], row["status"]) == ("5", "", "", "graded"), row


def test_no_character_and_no_length_stops_or_swells_the_reports(tmp_path):
    from mllm_classroom.reports import write_reports

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nbformat.write(lesson_notebook(), lessons / "99_hostile.ipynb")
    huge = "x" * 3_000_000
    result = grading.Result("ada", "99_hostile", points={f"ex{k}": 0.0 for k in range(1, 6)},
                            notes=["cell 3 raised ValueError: \udcff\udcfe", huge], display="Ada \ud800",
                            verdicts={"ex1": {"part": "hidden", "kind": "check", "name": "E=12, H=3, head 0",
                                              "problem": f"the result cannot be read as an array of numbers ({huge})",
                                              "expected": "3.5", "hint": "E=12"},
                                      "ex2": {"part": "visible", "kind": "check", "name": "words", "problem": huge,
                                              "expected": huge, "hint": "\udcff"}})
    write_reports([result], [lessons / "99_hostile.ipynb"], tmp_path / "out")
    with open(tmp_path / "out" / "grades.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    notes = rows[1][rows[0].index("notes")]
    assert max(len(c) for r in rows for c in r) <= 4_001 and "raised ValueError: ??" in notes
    page = (tmp_path / "out" / "feedback" / "ada" / "99_hostile.html").read_text(encoding="utf-8")
    assert len(page) < 10_000 and "E=12" not in page and "3.5" not in page and "Ada ?" in page
    assert "a hidden test (another case of this exercise) failed: the result cannot be read as an array of numbers" \
        in page


def test_a_call_an_exercise_must_make_is_counted_by_the_judge(tmp_path):
    """03's "two calls of rnn_forward": the function the exercise must call runs in the judge (a stand-in in the
    student's process sends each call there), so the judge counts the calls itself and adding to a count in the
    student's process gains nothing; calling one's own copy is not calling it."""
    nb = nbformat.v4.new_notebook(cells=[
        cell("import torch\nfrom mllm_utils.checks import check_close, check_equal, function_calls\n\n\n"
             "def step(x, w):\n    return x + w"),
        cell("def twice(x, w):\n    ### BEGIN SOLUTION\n    return step(step(x, w), w)\n    ### END SOLUTION",
             grade_id="ex1-solution", solution=True),
        cell("w = torch.nn.Parameter(torch.ones(2))  # a weight with a gradient: the result is part of a graph\n"
             "with function_calls('step') as calls:\n    got = twice(torch.ones(2), w)\n"
             "check_equal('calls of step', len(calls), 2)\ncheck_close('twice', got.detach(), [3.0, 3.0])",
             grade_id="ex1-check", grade=True, locked=True, points=1),
    ])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["mllm"] = {"quick_run_seconds": 5, "quick_peak_mib": 1200}
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nbformat.write(nb, lessons / "98_proxy.ipynb")
    answers = {"honest": "def twice(x, w):\n    return step(step(x, w), w)",
               "forger": "from mllm_utils.checks import WATCHING\ndef twice(x, w):\n    for watch in WATCHING:\n"
                         "        if isinstance(getattr(watch, 'calls', None), list):\n"
                         "            watch.calls.extend(['step', 'step'])\n    return x + 2 * w",
               "own_copy": "def my_step(x, w):\n    return x + w\n"
                           "def twice(x, w):\n    return my_step(my_step(x, w), w)"}
    for name, answer in answers.items():
        mine = nbformat.from_dict(json.loads(nbformat.writes(nb)))
        mine.cells[1].source = answer
        (tmp_path / "class" / name).mkdir(parents=True)
        nbformat.write(mine, tmp_path / "class" / name / "98_proxy.ipynb")
    results = {r.student: r for r in grading.grade(tmp_path / "class", [lessons / "98_proxy.ipynb"],
                                                   tmp_path / "grades", timeout=120, use_sandbox=False)}
    assert results["honest"].points == {"ex1": 1.0} and results["honest"].review == [], results["honest"]
    assert results["forger"].points == {"ex1": 0.0} and results["forger"].withheld == 0.0, results["forger"]
    assert "calls of step" in json.dumps(results["forger"].verdicts), results["forger"].verdicts
    assert results["own_copy"].points == {"ex1": 0.0}, results["own_copy"]
