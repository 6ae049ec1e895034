"""Run a command while busy processes keep every core loaded: the course on a busy machine.

    python tools/under_load.py [--busy N] -- COMMAND ...

Notebooks must not depend on how fast the machine is (no timing asserts, no timeouts that a slow
laptop or a shared grading server would hit). This starts N processes that spin on the CPU (default:
one per core, so the command shares every core with them), runs COMMAND, stops them whatever
happens, and exits with COMMAND's status. Each busy process also stops by itself after --limit
seconds, so none can outlive a killed parent for long.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import time


def spin(limit: float) -> None:
    end = time.monotonic() + limit
    x = 0
    while time.monotonic() < end:
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="busy processes (default: cores)")
    parser.add_argument("--limit", type=float, default=3600, help="seconds after which each stops by itself")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: python tools/under_load.py -- COMMAND ...")
    if args.busy < 1:
        parser.error(f"--busy must be at least 1, got {args.busy}")
    busy = [mp.Process(target=spin, args=(args.limit,), daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    start = time.monotonic()
    try:
        print(f"under load: {args.busy} busy processes on {os.cpu_count()} cores, running: {' '.join(command)}",
              flush=True)
        code = subprocess.run(command).returncode
    finally:
        for p in busy:
            p.terminate()
        for p in busy:
            p.join()
    print(f"under load: exit {code} after {time.monotonic() - start:.0f} s", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
