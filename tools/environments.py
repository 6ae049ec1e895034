"""The course in the environments it promises besides CI's own: built once, cached, then tested.

    python tools/environments.py test colab     # Colab-shaped: installed by the notebooks' own setup cell
    python tools/environments.py test oldest    # oldest supported: Python 3.10, lowest torch, requirements.txt
    python tools/environments.py path NAME      # build NAME if needed and print its folder

Each environment is a virtual environment under ``$MLLM_ENV_CACHE`` (default
``~/.cache/mllm-course/envs``), outside the clone, named after a hash of what goes into it (the
Python and torch versions, the constraints, requirements.txt, the package's declared dependencies). A
later run with the same inputs reuses it and downloads nothing; a change builds a new one and removes the old. A build
that is interrupted has no ``.complete`` mark, and the next build removes it.

``test`` runs nbval (strict: every output compared, the project's sanitizer, no extra rules) on one
version of every notebook: ``colab`` on the learner's versions (student/, what the Colab badge opens),
``oldest`` on the lessons (notebooks/, every cell of the learner's versions and the solutions besides),
with its unit tests too; CI's own environment compares both versions (``make test-loaded``). It
prints one summary line per environment,
``NAME: N notebooks run, N cells compared, N cells differing``, and exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
COLAB_CONSTRAINTS = ROOT / "tools" / "colab-constraints.txt"
NBGRADER_HYGIENE = "tests/test_notebook_hygiene.py::test_nbgrader_reads_the_markup"
NBGRADER_LMS = "tests/test_lms.py::test_canvas_and_moodle_zips_graded_through_the_command_line"
# Raise when build() changes what it installs, so cached environments are built anew.
BUILD = 1
# A quick-size cell takes a minute at most: one that runs 10 minutes is stuck, and fails with its name
# instead of holding CI until its own limit.
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
         "--nbval-cell-timeout", "600"]


def lowest_torch() -> str:
    """The lowest torch the package declares (``torch>=2.5`` -> ``2.5.0``)."""
    for dep in project()["dependencies"]:
        name, _, bound = dep.partition(">=")
        if name.strip() == "torch":
            parts = bound.strip().split(".")
            return ".".join(parts + ["0"] * (3 - len(parts)))
    raise SystemExit("pyproject.toml declares no lower bound for torch ('torch>=X')")


def project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


@dataclass
class Env:
    name: str
    python: str  # major.minor
    torch: str
    what: str
    packages: list[str] = field(default_factory=list)  # installed with `pip install`
    constraints: Path | None = None
    requirements: Path | None = None  # installed after torch, as a learner would
    unit_tests: bool = False
    notebooks: str = "notebooks"  # which version of the notebooks it compares: notebooks (lessons) or student

    def inputs(self) -> bytes:
        """Everything that decides what the environment holds, for the cache key."""
        spec = [BUILD, self.python, self.torch, self.packages, project()["dependencies"],
                project()["optional-dependencies"]["course"]]
        files = [p.read_bytes() for p in (self.constraints, self.requirements) if p]
        return b"\0".join([json.dumps(spec).encode(), *files])

    def folder(self) -> Path:
        cache = Path(os.environ.get("MLLM_ENV_CACHE", Path.home() / ".cache" / "mllm-course" / "envs"))
        return cache / f"{self.name}-{hashlib.sha256(self.inputs()).hexdigest()[:12]}"


ENVS = {
    "colab": Env(
        name="colab",
        python="3.13",
        torch="2.11.0",
        what="Colab-shaped: Python 3.13, torch 2.11.0 and Colab's own versions of everything else "
        "(tools/colab-constraints.txt); the course installed by each notebook's setup cell "
        "(colab_setup.sh from this clone, google.colab importable)",
        # What Colab has installed that the course or its kernel uses; nbval is the test runner.
        packages=["pip", "numpy", "matplotlib", "ipywidgets", "ipykernel", "ipython", "jupyter_client",
                  "tqdm", "pooch", "requests", "packaging", "nbformat", "nbclient", "pytest", "nbval==0.11.0"],
        constraints=COLAB_CONSTRAINTS,
        notebooks="student",
    ),
    "oldest": Env(
        name="oldest",
        python="3.10",
        torch=lowest_torch(),
        what="oldest supported: Python 3.10, the lowest torch pyproject.toml declares, requirements.txt",
        requirements=ROOT / "requirements.txt",
        unit_tests=True,
    ),
}


def find_python(version: str) -> str:
    """An interpreter for ``version``: pyenv's newest patch release of it, else ``pythonX.Y`` on PATH."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(pyenv.glob(f"{version}.*/bin/python{version}"),
                   key=lambda p: [int(x) for x in p.parent.parent.name.split(".") if x.isdigit()])
    if found:
        return str(found[-1])
    exe = shutil.which(f"python{version}")
    if exe:
        return exe
    raise SystemExit(f"Python {version} is needed for this environment: install it (pyenv install {version}).")


def sh(*cmd, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run(list(map(str, cmd)), check=True, **kw)


def build(env: Env) -> Path:
    """The environment's folder, built first if no complete one with the same inputs exists."""
    folder = env.folder()
    if (folder / ".complete").is_file():
        return folder
    # Older inputs, or a build that was interrupted (no .complete mark): removed, then built anew.
    for stale in folder.parent.glob(f"{env.name}-*"):
        print(f"removing {stale}", flush=True)
        shutil.rmtree(stale)
    sh(find_python(env.python), "-m", "venv", folder)
    pip = [folder / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    pip_c = pip + (["--constraint", env.constraints] if env.constraints else [])
    sh(*pip_c, f"torch=={env.torch}", *env.packages)
    if env.requirements:
        sh(*pip, "--requirement", env.requirements, cwd=ROOT)
    sh(folder / "bin" / "python", "-c", "import torch, numpy; print('torch', torch.__version__, numpy.__version__)")
    # matplotlib builds its font cache on first import and says so on stderr: not inside a notebook.
    sh(folder / "bin" / "python", "-c", "import matplotlib.pyplot", env={**os.environ, "MPLBACKEND": "Agg"})
    (folder / ".complete").write_text(env.what + "\n")
    return folder


def count(junit: Path) -> tuple[int, int, int]:
    """(notebooks, cells compared, cells differing or failing) from nbval's JUnit report: the lessons and the
    learner's versions."""
    folders = ("notebooks", "student")
    cases = [c for c in ET.parse(junit).iter("testcase")
             if c.get("classname", "").startswith(tuple(f + "." for f in folders))
             or c.get("file", "").startswith(tuple(f + "/" for f in folders))]
    nbs = {c.get("file") or c.get("classname") for c in cases}
    bad = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    return len(nbs), len(cases) - len(skipped), len(bad)


def test(env: Env) -> int:
    start = time.monotonic()
    cached = (env.folder() / ".complete").is_file()
    folder = build(env)
    built = time.monotonic() - start
    print(f"{env.name}: environment {'reused from the cache' if cached else 'built'} in {built:.0f} s", flush=True)
    py = folder / "bin" / "python"
    run_env = {**os.environ}
    run_env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory() as tmp:
        if env.name == "colab":
            # A fresh Colab runtime: the course is not installed until a notebook's setup cell runs.
            sh(py, "-m", "pip", "uninstall", "--quiet", "--yes", "mllm-utils")
            fake = Path(tmp) / "fake-colab" / "google" / "colab"
            fake.mkdir(parents=True)
            # Stands in for Colab's module, imported at start-up as Colab's kernels do: the setup cell
            # looks for it in sys.modules.
            (fake / "__init__.py").write_text("")
            (fake.parent.parent / "sitecustomize.py").write_text("import google.colab  # noqa: F401\n")
            run_env["PYTHONPATH"] = str(fake.parent.parent)
            run_env["MLLM_COURSE_DIR"] = str(ROOT)  # the setup cell's clone, already here
            groups = {"notebooks": [env.notebooks]}
        else:
            # requirements.txt installs the package editable: point it at this clone.
            sh(*[py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "-e", ROOT])
            # requirements.txt is a learner's install: nbgrader, a teacher's extra, is not in it, so the
            # tests that grade with it run in CI's own environment (`make test`), not here; so does the run of
            # every notebook with the learners' likely wrong answers (test_visible_checks, about five minutes).
            groups = {"notebooks": [env.notebooks],
                      "unit-tests": ["--ignore=tests/test_classroom.py", "--ignore=tests/test_grading_hostile.py",
                                     "--ignore=tests/test_visible_checks.py", "--deselect", NBGRADER_HYGIENE,
                                     "--deselect", NBGRADER_LMS, "tests"]}
        # The notebooks and the unit tests in two processes at once: a notebook's kernel leaves a core idle.
        commands = {}
        for name, targets in groups.items():
            commands[name] = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *NBVAL,
                              "--ignore=tests/fixtures", f"--junitxml={Path(tmp) / name}.xml", "-o",
                              "junit_family=xunit1", *targets]
        code = max(run_together(commands, Path(tmp), cwd=ROOT, env=run_env))
        junit = Path(tmp) / "notebooks.xml"
        notebooks, compared, differing = count(junit) if junit.is_file() else (0, 0, 0)
    print(f"{env.name}: {notebooks} notebooks run, {compared} cells compared, {differing} cells differing, "
          f"tests {'passed' if code == 0 else 'FAILED'}; {time.monotonic() - start - built:.0f} s "
          f"({(folder / '.complete').read_text().strip()})", flush=True)
    return code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("command", choices=["test", "path"])
    parser.add_argument("names", nargs="+", choices=sorted(ENVS), metavar="NAME", help=" or ".join(sorted(ENVS)))
    args = parser.parse_args(argv)
    if args.command == "path":
        for name in args.names:
            print(build(ENVS[name]))
        return 0
    if len(args.names) == 1:
        return test(ENVS[args.names[0]])
    return side_by_side(args.names)


def side_by_side(names: list[str]) -> int:
    """Test several environments at once: each notebook kernel uses one core, so two runs take about
    the time of one on two cores."""
    print(f"testing {', '.join(names)} side by side; each one's output follows when it ends", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        return max(run_together({name: [sys.executable, __file__, "test", name] for name in names}, Path(tmp)))


def run_together(commands: dict[str, list], folder: Path, **popen) -> list[int]:
    """Start every command at once, each writing to its own log in ``folder``; as each ends, show its log
    whole under its name. Returns their exit statuses."""
    runs = {}
    for name, cmd in commands.items():
        print("+", " ".join(map(str, cmd)), flush=True)
        log = open(folder / f"{name}.log", "w+", encoding="utf-8")  # noqa: SIM115 (closed below)
        runs[name] = (subprocess.Popen(list(map(str, cmd)), stdout=log, stderr=subprocess.STDOUT, **popen), log)
    codes = []
    for name, (proc, log) in runs.items():
        codes.append(proc.wait())
        log.seek(0)
        print(f"===== {name} (exit {codes[-1]}) =====", flush=True)
        sys.stdout.write(log.read())
        log.close()
    return codes


if __name__ == "__main__":
    sys.exit(main())
