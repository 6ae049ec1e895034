"""Keep the course notebooks consistent: headers, execution, normalised files.

    python tools/notebooks.py headers [--check] [NOTEBOOK ...]  rewrite (or check) every badge and Colab setup cell
    python tools/notebooks.py run [NOTEBOOK ...]    execute top to bottom in a fresh kernel, quick size,
                                                    and save the outputs (what nbval then compares)

The repository address comes from one place, ``[project.urls] Repository`` in
pyproject.toml. ``tests/test_notebook_hygiene.py`` fails when any notebook's
badge or setup cell differs from what ``headers`` writes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BADGE_TAG = "colab-badge"
SETUP_TAG = "colab-setup"
# Environment of every committed run (and of `pytest`): quick size, no progress bars, a fixed hash seed.
# No CPU code paths are fixed (no MKL_CBWR, ATEN_CPU_CAPABILITY or ONEDNN_MAX_CPU_ISA): the printed outputs
# do not depend on the last bit of a float sum, which another CPU, thread count or library changes, and
# `make test-perturbed` (tools/perturb.py) proves it on every run of CI. Fixing the paths only moved the
# problem from one machine to the next, and MKL's COMPATIBLE path made float64 training twice as slow.
RUN_ENV = {
    "MLLM_QUICK": "1",
    "TQDM_DISABLE": "1",
    "PYTHONHASHSEED": "0",
}


def repository_url() -> str:
    """The course's public address, from pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["urls"]["Repository"].rstrip("/")


def notebook_paths() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def badge_source(path: Path, url: str) -> str:
    github = url.removeprefix("https://github.com/")
    colab = f"https://colab.research.google.com/github/{github}/blob/main/notebooks/{path.name}"
    return (
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab})\n"
        "\n"
        "In Colab, run the setup cell below first; it installs this course's package "
        "(and leaves Colab's own PyTorch alone). Outside Colab it does nothing."
    )


def setup_source(url: str) -> str:
    folder = url.rsplit("/", 1)[-1]
    # Silent when it works: the cell's output is then the same in Colab and everywhere else, so the
    # Colab-shaped test environment (tools/environments.py) compares it like every other cell.
    return f'''# Setup for Google Colab: fetch the course and install its package. Does nothing elsewhere.
import sys

if "google.colab" in sys.modules:
    import importlib
    import os
    import subprocess

    REPO_URL = "{url}"
    # Where the course is cloned (MLLM_COURSE_DIR names another folder, e.g. a clone you already have).
    REPO_DIR = os.environ.get("MLLM_COURSE_DIR", "/content/{folder}")
    if not os.path.isdir(REPO_DIR):
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", REPO_URL, REPO_DIR], check=True)
    setup = ["bash", f"{{REPO_DIR}}/colab_setup.sh", sys.executable]
    result = subprocess.run(setup, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"colab_setup.sh failed:\\n{{result.stdout}}{{result.stderr}}")
    importlib.invalidate_caches()'''


def header_cells(path: Path, url: str) -> tuple:
    badge = nbformat.v4.new_markdown_cell(badge_source(path, url))
    badge.metadata["tags"] = [BADGE_TAG]
    setup = nbformat.v4.new_code_cell(setup_source(url))
    setup.metadata["tags"] = [SETUP_TAG]
    return badge, setup


def header_problems(nb, path: Path, url: str) -> list[str]:
    """What differs between a notebook's header cells (cells 1 and 2) and the generated ones."""
    badge, setup = header_cells(path, url)
    problems = []
    for index, want, tag in ((1, badge, BADGE_TAG), (2, setup, SETUP_TAG)):
        cell = nb.cells[index] if len(nb.cells) > index else None
        if cell is None or tag not in cell.metadata.get("tags", []):
            problems.append(f"cell {index} should be the '{tag}' cell")
        elif cell.source != want.source or cell.cell_type != want.cell_type:
            problems.append(f"the '{tag}' cell differs from `python tools/notebooks.py headers`")
    return problems


def write_headers(check: bool, paths: list[Path]) -> int:
    url = repository_url()
    bad = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        problems = header_problems(nb, path, url)
        if not problems:
            continue
        if check:
            bad += 1
            print(f"{path.name}: " + "; ".join(problems))
            continue
        badge, setup = header_cells(path, url)
        # Drop stale header cells wherever they are, then put fresh ones after the title.
        nb.cells = [c for c in nb.cells if not {BADGE_TAG, SETUP_TAG} & set(c.metadata.get("tags", []))]
        nb.cells[1:1] = [badge, setup]
        save(nb, path)
        print(f"{path.name}: headers rewritten (run it again: `python tools/notebooks.py run {path.name}`)")
    return 1 if bad else 0


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_ids(nb) -> list[str]:
    """Model ids of the saved widget state, in the order the kernel created them."""
    return list(nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {}))


def stable_widget_id(stem: str, n: int) -> str:
    """The n-th widget's id in a committed notebook: the same on every run, unique in the notebook."""
    return hashlib.md5(f"{stem}:widget:{n}".encode()).hexdigest()


def renumber_widgets(nb, stem: str) -> None:
    """Replace the kernel's random widget ids (uuid4) by stable ones, in the state and the outputs.

    The saved state is what lets JupyterLab, nbviewer and GitHub draw each widget as a control
    before the notebook runs (without it they show the repr, ``VBox(children=...``); random ids
    would change every committed notebook on every run.
    """
    ids = widget_ids(nb)
    if not ids:
        nb.metadata.pop("widgets", None)
        return
    stable = [stable_widget_id(stem, n) for n in range(len(ids))]
    if set(ids) == set(stable):  # already renumbered (nbformat saves the state sorted by id)
        return
    mapping = dict(zip(ids, stable, strict=True))
    pattern = re.compile("|".join(map(re.escape, mapping)))

    def rename(obj):
        # Ids appear as keys of the state, in "IPY_MODEL_<id>" references and in view outputs.
        return json.loads(pattern.sub(lambda m: mapping[m.group(0)], json.dumps(obj)))

    nb.metadata["widgets"] = rename(nb.metadata["widgets"])
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.from_dict(o) for o in rename(cell.outputs)]


def normalise(nb, stem: str) -> None:
    """Strip what differs between machines and runs but is not the lesson."""
    renumber_widgets(nb, stem)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)


def save(nb, path: Path) -> None:
    normalise(nb, path.stem)
    tmp = path.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, path)


def run(paths: list[Path]) -> None:
    import asyncio

    os.environ.update(RUN_ENV)
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        peak_mib = asyncio.run(execute(nb, path.parent))
        seconds = time.perf_counter() - start
        # Kept with the notebook: grading derives each cell's timeout from the run time and the sandbox's
        # memory limit from the kernel's peak address space (mllm_classroom.lessons, mllm_classroom.sandbox).
        nb.metadata["mllm"] = {"quick_run_seconds": max(1, round(seconds)), "quick_peak_mib": peak_mib}
        save(nb, path)
        print(f"{path.name}: executed in {seconds:.1f} s, kernel's peak address space {peak_mib} MiB")


async def execute(nb, folder: Path) -> int:
    """Run ``nb`` in a fresh kernel (its outputs filled in); return the kernel's peak address space in MiB."""
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel(cwd=str(folder))
    try:
        client = NotebookClient(nb, km=km, timeout=1200, resources={"metadata": {"path": str(folder)}})
        await client.async_execute()
        status = Path(f"/proc/{km.provisioner.process.pid}/status").read_text()
        return round(int(re.search(r"VmPeak:\s+(\d+) kB", status).group(1)) / 1024)
    finally:
        await km.shutdown_kernel(now=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    headers = sub.add_parser("headers", help="rewrite every notebook's badge and Colab setup cell")
    headers.add_argument("--check", action="store_true", help="only report differences (exit 1)")
    headers.add_argument("notebooks", nargs="*", help="paths or names (default: all)")
    runner = sub.add_parser("run", help="execute notebooks in quick mode and save their outputs")
    runner.add_argument("notebooks", nargs="*", help="paths or names (default: all)")
    args = parser.parse_args(argv)
    paths = [Path(p) if Path(p).exists() else NOTEBOOKS / p for p in args.notebooks] or notebook_paths()
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if args.command == "headers":
        return write_headers(args.check, paths)
    run(paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
