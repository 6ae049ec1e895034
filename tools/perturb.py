"""Compare the committed notebook outputs under perturbed float arithmetic: another machine, simulated.

    python tools/perturb.py [--setup kernels|nudge[=PATH,...] ...] [--plain PATH ...] [--] [PYTEST ARGS ...]

For each setup (default: both) this runs ``pytest`` (nbval, the project's conftest) on the given paths
(default: ``notebooks/``), or on the setup's own paths (``--setup kernels=student/``), with
``MLLM_PERTURB`` set and ``tools/perturb_site`` on PYTHONPATH, so every kernel starts with other code
paths (``kernels``) or with one weight nudged by 1e-7 before training (``nudge``); see
``tools/perturb_site/sitecustomize.py``. An output that either setup changes depends on the last bits of
a float sum, and would change on an AMD or another Intel CPU.

``--plain PATH ...`` also runs the unperturbed comparison of those paths at the same time. All runs go
side by side, so they load every core of a small machine (``make test-loaded`` uses this). Exit
status: non-zero if any run failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "tools" / "perturb_site"
SETUPS = ("kernels", "nudge")


def start(name: str, setup: str | None, paths: list[str]) -> subprocess.Popen:
    env = dict(os.environ)
    if setup:
        env["MLLM_PERTURB"] = setup
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH")]))
    # A quick-size cell takes a minute at most: one that runs 10 minutes is stuck, and fails with its name.
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-cell-timeout", "600", *paths]
    print(f"{name}: pytest {' '.join(command[3:])}", flush=True)
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def setup_arg(text: str) -> tuple[str, list[str] | None]:
    """``kernels`` or ``kernels=student/,notebooks/05_lstm.ipynb``: a setup and, if given, its own paths."""
    name, sep, paths = text.partition("=")
    if name not in SETUPS:
        raise argparse.ArgumentTypeError(f"unknown setup {name!r}: it must be one of {', '.join(SETUPS)}")
    if sep and not paths.strip(","):
        raise argparse.ArgumentTypeError(f"--setup {text!r}: no path after '='; give one or leave out '='")
    return name, [path for path in paths.split(",") if path] or None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="append", type=setup_arg, metavar="SETUP[=PATH,...]",
                        help=f"a setup to run ({' or '.join(SETUPS)}; default: all), on its own paths if given")
    parser.add_argument("--plain", nargs="+", metavar="PATH", help="also compare these paths unperturbed")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then the paths and pytest options")
    args = parser.parse_args(argv)
    rest = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    rest = rest or ["notebooks/"]
    started = time.monotonic()
    setups = args.setup or [(setup, None) for setup in SETUPS]
    runs = [(f"perturbed ({setup})", start(f"perturbed ({setup})", setup, paths or rest)) for setup, paths in setups]
    if args.plain:
        runs.append(("unperturbed", start("unperturbed", None, args.plain)))
    failed = []
    for name, proc in runs:
        out, _ = proc.communicate()
        print(f"===== {name}: exit {proc.returncode} =====\n{out}", flush=True)
        if proc.returncode:
            failed.append(name)
    print(f"{len(runs) - len(failed)} of {len(runs)} runs passed in {time.monotonic() - started:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
