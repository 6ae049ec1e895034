"""A hostile class, graded end to end with the real nbgrader and the real sandbox (issue: grading a hostile class).

Each hostile student hands in wrong answers plus one attack: points without the work, reading what a
student must not see, or harming the teacher or a classmate. Every attack cell raises
``RuntimeError("ATTACK WORKED ...")`` when it sees its own effect from inside, and the test checks the
effect from outside as well: no points gained unflagged, nothing hidden or secret in any feedback or CSV,
no file outside the sandbox created, changed or removed, no process left, no connection to a listener on
loopback, and the honest classmates graded in full whatever came before them in their shard.
"""

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

if importlib.util.find_spec("nbgrader") is None:
    message = "nbgrader is not installed: these tests run in the teacher's environment (`make test` makes it)"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)

from mllm_classroom import grade as grading  # noqa: E402
from mllm_classroom.lessons import secret_lines  # noqa: E402

SECRET_TOKEN = "SECRET-TOKEN-4f1c9a"
SECRET_KEY = "SECRET-SSH-KEY-77d2e0"
PORT = 47321
MARKER = "/tmp/mllm-hostile-marker"
SLEEPER = "mllm-hostile-sleeper"

IMPORTS = "import torch\nfrom mllm_utils.checks import check_close, check_equal"
SOLUTION_1 = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
CHECK_1 = ("check_close('double', double(torch.tensor([1.0, 2.0])), [2.0, 4.0])\n### BEGIN HIDDEN TESTS\n"
           "check_close('double, hidden case', double(torch.tensor([3.5])), [7.0])  # hidden-line-of-exercise-1\n"
           "### END HIDDEN TESTS")
SOLUTION_2 = "def words(text):\n    ### BEGIN SOLUTION\n    return text.split()\n    ### END SOLUTION"
CHECK_2 = ("check_equal('words', words('a b'), ['a', 'b'])\n### BEGIN HIDDEN TESTS\n"
           "check_equal('words, hidden case', words('x  y\\tz'), ['x', 'y', 'z'])  # hidden-line-of-exercise-2\n"
           "### END HIDDEN TESTS")
RIGHT = {"ex1-solution": "def double(x):\n    return 2 * x",
         "ex2-solution": "def words(text):\n    return text.split()"}
WRONG = {"ex1-solution": "def double(x):\n    return x", "ex2-solution": "def words(text):\n    return []"}

WORKED = "raise RuntimeError('ATTACK WORKED: ' + {what!r})"
ATTACKS = {
    # points without the work
    "patch_checks": "import mllm_utils.checks as c\nc.check_close = lambda *a, **k: None\n"
                    "c.check_equal = lambda *a, **k: None\ncheck_close = c.check_close\ncheck_equal = c.check_equal",
    "always_equal": "class Anything:\n    def __eq__(self, other):\n        return True\n"
                    "def words(text):\n    return Anything()",
    "torch_function": "class Zero(torch.Tensor):\n    @classmethod\n"
                      "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                      "        return torch.zeros(())\n"
                      "def double(x):\n    return x.as_subclass(Zero)",
    "swallow_errors": "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",
    "builtins": "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})",
    # seeing what a student must not see
    "read_solutions": "import os\nSIGNS = ('hidden-line-of-exercise', 'def words', '99_hostile')\nfound = []\n"
                      "for top in ['/', os.getcwd(), os.path.expanduser('~')]:\n"
                      "    for root, dirs, files in os.walk(top):\n"
                      "        if root.startswith(('/proc', '/sys', '/usr', '/dev')):\n"
                      "            dirs[:] = []\n            continue\n"
                      "        for f in files:\n            p = os.path.join(root, f)\n"
                      "            if f.endswith(('.ipynb', '.db')):\n"
                      "                try:\n                    text = open(p, errors='ignore').read()\n"
                      "                except OSError:\n                    continue\n"
                      "                if any(w in text for w in SIGNS):\n"
                      "                    found.append(p)\n                    print(text)\n"
                      "if found:\n    raise RuntimeError('ATTACK WORKED: read ' + str(found))",
    "environment": "import os\nprint(dict(os.environ))\n"
                   f"if {SECRET_TOKEN!r} in str(os.environ):\n    " + WORKED.format(what="token") + "\n"
                   "for p in ['~/.ssh/id_rsa', '/root/.ssh/id_rsa']:\n"
                   "    p = os.path.expanduser(p)\n    if os.path.exists(p):\n        print(open(p).read())\n"
                   "        " + WORKED.format(what="ssh key"),
    "hook_hidden_tests": "get_ipython().events.register('pre_run_cell', lambda info: print(info.raw_cell))",
    "history": "def words(text):\n    raise ValueError(' '.join(In))",
    # harm
    "write_files": "import os\nfor p in [os.path.expanduser('~/owned.txt'), " + repr(MARKER) + ", '/root/owned.txt']:\n"
                   "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\n"
                   "for p in [os.path.expanduser('~/teacher-notes.txt')]:\n    try:\n        os.remove(p)\n"
                   "    except OSError:\n        pass",
    "grader_processes": "import os, signal\nfor pid in os.listdir('/proc'):\n    if pid.isdigit():\n"
                        "        try:\n            cmd = open(f'/proc/{pid}/cmdline').read()\n"
                        "        except OSError:\n            continue\n"
                        "        if 'nbgrader' in cmd or 'autograde' in cmd or 'pytest' in cmd:\n"
                        "            print(cmd)\n"
                        "            os.kill(int(pid), signal.SIGKILL)\n"
                        "            " + WORKED.format(what="saw the grader"),
    "leave_process": "import subprocess, sys\n"
                     f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {SLEEPER!r}],"
                     " start_new_session=True)",
    "network": "import socket\ns = socket.socket()\ns.settimeout(2)\n"
               f"try:\n    s.connect(('127.0.0.1', {PORT}))\n    s.sendall(b'hello')\n"
               "    " + WORKED.format(what="connected") + "\nexcept OSError:\n    pass",
    "memory": "try:\n    hog = bytearray(10 * 1024 ** 3)\n    " + WORKED.format(what="10 GiB") + "\n"
              "except MemoryError:\n    pass",
    "fork_bomb": "import os, time\nmade = 0\nfor i in range(300):\n    try:\n        pid = os.fork()\n"
                 "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(20)\n        os._exit(0)\n"
                 "    made += 1\nif made >= 300:\n    " + WORKED.format(what="300 processes"),
    "big_file": "try:\n    open('big.bin', 'wb').write(b'x' * (512 * 1024 ** 2))\n    "
                + WORKED.format(what="512 MiB file") + "\nexcept OSError:\n    pass",
    "flood_output": "import time\nend = time.time() + 5\nwhile time.time() < end:\n    print('x' * 10000)",
    "kill_everything": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(-1, signal.SIGKILL)",
    "hang": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
}
# An attack cell goes before the check of exercise 1, unless it must come after a later solution to count.
BEFORE = {"always_equal": "ex2-check", "history": "ex2-check"}
HONEST = ["ada", "bob", "zed"]  # ada and bob start each shard; zed is graded after every attacker in its shard


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
    ])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["mllm"] = {"quick_run_seconds": 5, "quick_peak_mib": 1200}
    return nb


def submission(answers, attack=None, tamper=False, before="ex1-check"):
    nb = lesson_notebook()
    for c in nb.cells:
        gid = c.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = answers[gid]
        elif gid and c.metadata["nbgrader"]["grade"]:
            c.source = c.source.split("### BEGIN HIDDEN TESTS")[0].rstrip()
    if attack:
        at = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == before][0]
        nb.cells.insert(at, cell(attack))
    if tamper:  # the notebook's JSON edited: checks emptied, points raised, locks lifted
        for c in nb.cells:
            meta = c.metadata.get("nbgrader", {})
            if meta.get("grade"):
                c.source, meta["points"], meta["locked"] = "pass", 100, False
    return nb


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
    for i, (name, attack) in enumerate(ATTACKS.items()):
        (subs / f"h{i:02d}_{name}").mkdir(parents=True)
        nb = submission(WRONG, attack, before=BEFORE.get(name, "ex1-check"))
        nbformat.write(nb, subs / f"h{i:02d}_{name}" / lesson.name)
    (subs / "h99_tamper").mkdir()
    nbformat.write(submission(WRONG, tamper=True), subs / "h99_tamper" / lesson.name)
    before_home, before_subs = digest(home), digest(subs)
    Path(MARKER).unlink(missing_ok=True)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PORT))
    listener.listen(5)
    listener.setblocking(False)
    out = base / "grades"
    env = {**os.environ, "HOME": str(home), "MLLM_TEST_TOKEN": SECRET_TOKEN}
    command = [sys.executable, "-m", "mllm_classroom", "--notebooks", str(lessons), "grade", str(subs),
               "--out", str(out), "--timeout", "8"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=base)
    try:
        connection = listener.accept()
    except BlockingIOError:
        connection = None
    listener.close()
    rows = {r["student"]: r for r in grading_rows(out)}
    return {"done": done, "rows": rows, "out": out, "home": home, "subs": subs, "lesson": lesson,
            "before_home": before_home, "before_subs": before_subs, "connection": connection}


def grading_rows(out):
    import csv

    with open(out / "grades.csv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_the_class_is_graded(hostile):
    assert hostile["done"].returncode == 0, hostile["done"].stderr
    assert len(hostile["rows"]) == len(HONEST) + len(ATTACKS) + 1


def test_honest_students_get_full_points_whatever_their_classmates_did(hostile):
    for name in HONEST:
        row = hostile["rows"][name]
        assert (row["score"], row["status"], row["review"], row["sandbox"]) == ("2", "graded", "", "bubblewrap"), row


@pytest.mark.parametrize("name", [f"h{i:02d}_{n}" for i, n in enumerate(ATTACKS)] + ["h99_tamper"])
def test_no_attack_gains_points_or_sees_its_effect(hostile, name):
    row = hostile["rows"][name]
    assert row["score"] == "0", row
    assert row["withheld"] in ("", "0") or row["review"], row  # points the checks gave are withheld only when flagged
    assert "ATTACK WORKED" not in row["notes"] + row["status"], row


def test_attacks_that_use_what_a_grader_cannot_trust_are_flagged(hostile):
    for name in ("patch_checks", "always_equal", "torch_function", "swallow_errors", "builtins", "read_solutions",
                 "environment", "hook_hidden_tests", "history", "grader_processes", "kill_everything"):
        [row] = [r for student, r in hostile["rows"].items() if student.endswith(name)]
        assert row["review"], row


def test_no_feedback_or_report_shows_a_secret(hostile):
    secrets = secret_lines(nbformat.read(hostile["lesson"], as_version=4))
    assert any("hidden-line-of-exercise-1" in s for s in secrets)
    texts = [p.read_text(encoding="utf-8") for p in hostile["out"].rglob("*") if p.is_file()]
    assert len(texts) >= len(hostile["rows"]) + 2
    for text in texts:
        for secret in [*secrets, SECRET_TOKEN, SECRET_KEY, "hidden-line-of-exercise", "BEGIN SOLUTION"]:
            assert secret not in text


def test_nothing_outside_the_sandbox_was_touched(hostile):
    assert digest(hostile["home"]) == hostile["before_home"], "the teacher's home changed"
    assert digest(hostile["subs"]) == hostile["before_subs"], "the submissions folder changed"
    assert not Path(MARKER).exists()
    assert hostile["connection"] is None, "a submission reached a server on the teacher's loopback"
    assert sleepers() == [], "a process started by a submission is still running"


def test_a_kernel_that_kills_or_hangs_costs_only_its_own_submission(hostile):
    for name in ("kill_everything", "hang"):
        [row] = [r for student, r in hostile["rows"].items() if student.endswith(name)]
        assert row["score"] == "0"
    [hang] = [r for student, r in hostile["rows"].items() if student.endswith("hang")]
    assert hang["status"] == ("grading failed: a cell ran past 8 s and did not stop when interrupted "
                              "(the rest was not run)")
    assert hostile["rows"]["zed"]["score"] == "2"


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
    assert [(r.points, r.sandbox) for r in results] == [({"ex1": 1.0, "ex2": 1.0}, "off (--no-sandbox)")] * 2
    assert json.dumps([r["sandbox"] for r in grading_rows(tmp_path / "grades")]) == json.dumps(
        ["off (--no-sandbox)"] * 2)
