"""Run the notebooks at the full size, for real or as a smoke test, and time them.

    python tools/full_size.py smoke [NOTEBOOK ...]   every notebook's full-size code paths (full data, full
                                                     models, full-size plots and tables) with training capped
                                                     to a few steps (MLLM_SMOKE=1): minutes, for CI
    python tools/full_size.py run [NOTEBOOK ...] [--out DIR] [--root DIR]
                                                     the real full size (MLLM_QUICK=0): executed copies, a
                                                     progress log and a JSON of timings go to --out

Neither ever writes into ``notebooks/``: each notebook runs from a copy in memory, in a fresh kernel
whose working folder is a folder of its own (``--out``/``NN_name-files``, or a temporary one), so what a
notebook writes (10's checkpoint at the full size) stays out of the repository; the notebooks read their
data through the package, never relative to their folder. With ``--root`` pointing at another checkout
(say a ``git archive`` of a commit), that checkout's notebooks run and its ``mllm_utils`` is imported
(it goes first on ``PYTHONPATH``).

Every stream a cell prints goes to the log as it arrives (``--out``/``progress.log``), so a run of
hours shows its epochs while it runs. ``timings.json`` gets one entry per notebook: seconds, the
kernel's peak resident memory, the slowest cells, the error if any, and the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from notebooks import RUN_ENV  # noqa: E402  (the committed runs' environment: AVX2 caps, no progress bars)

_KERNELS: set = set()  # the running kernels' process ids, stopped with this process


def _stop(signum, frame):
    """SIGTERM (a CI timeout, a kill): stop the kernel too, or it keeps computing without anyone to read it."""
    for pid in list(_KERNELS):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    os._exit(128 + signum)  # not sys.exit: asyncio's callbacks would swallow it and go on to the next notebook


def machine() -> str:
    """One line naming the CPU, its core count and the torch build (for the timing records)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        torch_version = f"torch {torch.__version__}" + (
            f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
        )
    except ImportError:
        torch_version = "no torch"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{model}, {os.cpu_count()} cores, {torch_version}, load {load:.1f} at start"


def two_sizes(path: Path) -> bool:
    """True when the notebook has a full size of its own (its start() call names a full_time)."""
    nb = nbformat.read(path, as_version=4)
    return any(c.cell_type == "code" and "full_time=" in c.source for c in nb.cells)


def resolve(names: list[str], root: Path) -> list[Path]:
    """The notebooks named (a name's start, e.g. 07, or a path); none named: every one with a full size."""
    folder = root / "notebooks"
    if not names:
        return [p for p in sorted(folder.glob("*.ipynb")) if two_sizes(p)]
    paths = []
    for name in names:
        hits = [folder / name] if (folder / name).exists() else sorted(folder.glob(f"{name}*.ipynb"))
        hits = [Path(name)] if Path(name).exists() else hits
        if len(hits) != 1:
            raise SystemExit(f"no single notebook matches {name!r} in {folder}: {[h.name for h in hits]}")
        paths.append(hits[0].resolve())
    return paths


class _LoggingClient:
    """A NotebookClient that writes every cell's start, end and printed stream to a log as it happens."""

    @staticmethod
    def make(nb, km, folder, log, timeout, keep_going=False):
        from nbclient import NotebookClient

        class Client(NotebookClient):
            def output(self, outs, msg, display_id, cell_index):
                if msg["msg_type"] == "stream":
                    text = msg["content"].get("text", "")
                    log(f"  [cell {cell_index}] " + text.rstrip("\n").replace("\n", f"\n  [cell {cell_index}] "))
                elif msg["msg_type"] == "error":
                    log(f"  [cell {cell_index}] ERROR {msg['content'].get('ename')}: {msg['content'].get('evalue')}")
                return super().output(outs, msg, display_id, cell_index)

        started = {}

        def on_start(cell, cell_index):
            started[cell_index] = time.perf_counter()

        def on_done(cell, cell_index, **_):
            seconds = time.perf_counter() - started.get(cell_index, time.perf_counter())
            cell.metadata.setdefault("mllm", {})["seconds"] = round(seconds, 2)
            if seconds >= 5:
                log(f"  [cell {cell_index}] done in {seconds:.0f} s")

        return Client(nb, km=km, timeout=timeout, resources={"metadata": {"path": str(folder)}},
                      allow_errors=keep_going, on_cell_start=on_start, on_cell_executed=on_done)  # fmt: skip


async def _execute(nb, folder: Path, log, timeout, keep_going=False) -> dict:
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel(cwd=str(folder))
    pid = km.provisioner.process.pid
    _KERNELS.add(pid)
    error, peak = None, {}
    try:
        client = _LoggingClient.make(nb, km, folder, log, timeout, keep_going)
        try:
            await client.async_execute()
        except Exception as err:  # noqa: BLE001 (a failing cell is a result to record, not a crash)
            error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            for key in ("VmHWM", "VmPeak"):
                found = re.search(rf"{key}:\s+(\d+) kB", status)
                peak[key] = round(int(found.group(1)) / 1024) if found else None
        except (OSError, AttributeError):
            pass
    finally:
        await km.shutdown_kernel(now=True)
        _KERNELS.discard(pid)
    failed_cells = {
        f"cell {i}": f"{out['ename']}: {out['evalue'][:200]}"
        for i, cell in enumerate(nb.cells) for out in cell.get("outputs", []) if out.get("output_type") == "error"
    }  # fmt: skip
    if failed_cells and error is None:
        error = f"{len(failed_cells)} cell(s) failed: {', '.join(failed_cells)}"
    return {"error": error, "failed_cells": failed_cells, "peak_rss_mib": peak.get("VmHWM"),
            "peak_address_space_mib": peak.get("VmPeak")}  # fmt: skip


def run(paths: list[Path], root: Path, out: Path | None, env: dict, timeout, label: str,
        keep_going: bool = False) -> int:  # fmt: skip
    os.environ.update(env)
    if root != ROOT:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    log_file = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        log_file = open(out / "progress.log", "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def log(text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        print(line, flush=True)
        if log_file is not None:
            log_file.write(line + "\n")

    results_file = out / "timings.json" if out is not None else None
    results = json.loads(results_file.read_text()) if results_file is not None and results_file.exists() else {}
    failed = 0
    where = machine()
    log(f"{label}: {len(paths)} notebook(s) from {root}, {where}")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        log(f"{path.name}: started")
        start = time.perf_counter()
        # The kernel works in a folder of its own: what a notebook writes (10's checkpoint) stays out of notebooks/,
        # beside the executed copy when there is an --out folder, else in a temporary folder that goes away.
        with contextlib.ExitStack() as stack:
            if out is not None:
                workdir = out / f"{path.stem}-files"
                workdir.mkdir(exist_ok=True)
            else:
                workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"mllm-{path.stem}-")))
            result = asyncio.run(_execute(nb, workdir, log, timeout, keep_going))
        seconds = time.perf_counter() - start
        slowest = sorted(((c.metadata.get("mllm", {}).get("seconds", 0), i) for i, c in enumerate(nb.cells)
                          if c.cell_type == "code"), reverse=True)[:5]  # fmt: skip
        result.update(seconds=round(seconds, 1), slowest_cells={f"cell {i}": s for s, i in slowest},
                      machine=where, mode=label, finished=time.strftime("%Y-%m-%d %H:%M:%S"))  # fmt: skip
        failed += result["error"] is not None
        log(f"{path.name}: {'FAILED ' + result['error'] if result['error'] else 'passed'} in {seconds:.1f} s, "
            f"kernel's peak RSS {result['peak_rss_mib']} MiB")  # fmt: skip
        if out is not None:
            nbformat.write(nb, out / path.name)  # the executed copy, never the committed notebook
            results[path.stem] = result
            results_file.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("smoke", "full-size code paths, training capped (MLLM_SMOKE=1)"),
                       ("run", "the real full size (MLLM_QUICK=0)")):  # fmt: skip
        p = sub.add_parser(name, help=text)
        p.add_argument("notebooks", nargs="*", help="names (e.g. 07) or paths (default: every notebook with a "
                       "full size of its own; the others run the same code at either size)")  # fmt: skip
        p.add_argument("--root", type=Path, default=ROOT, help="the checkout whose notebooks and package run")
        p.add_argument("--out", type=Path, default=None, help="folder for executed copies, progress.log, timings")
        p.add_argument("--keep-going", action="store_true", help="run every cell after a failing one too, and "
                       "list every failing cell")  # fmt: skip
        p.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: none for run, "
                       "600 for smoke)")  # fmt: skip
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    root = args.root.resolve()
    paths = resolve(args.notebooks, root)
    env = {**RUN_ENV, "MLLM_QUICK": "0"}
    if args.command == "smoke":
        # One thread: the smoke test checks code paths, not speed, and several threads on a busy CI machine
        # wait for each other (a cell of 1 s took 80 s with 2 threads while the machine was loaded).
        env.update({"MLLM_SMOKE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        timeout = args.timeout or 600
    else:
        env.pop("MLLM_SMOKE", None)
        os.environ.pop("MLLM_SMOKE", None)
        timeout = args.timeout
    return run(paths, root, args.out.resolve() if args.out else None, env, timeout, args.command, args.keep_going)


if __name__ == "__main__":
    sys.exit(main())
