"""Student versions of the lessons: ``mllm-classroom release``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nbformat

from mllm_classroom.engine import generate, require_nbgrader
from mllm_classroom.lessons import exercises, measured_seconds


def release(lessons: list[Path], out: Path) -> list[dict]:
    """Write the student version of each lesson into ``out`` (plus a README with the table); return the table.

    Solutions become stubs, check cells are locked, hidden tests removed, outputs cleared; the Colab badge
    opens the student copy and the Colab setup cell is kept.
    """
    require_nbgrader()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mllm-release-") as tmp:
        root = Path(tmp)
        generate(root, lessons)
        for path in lessons:
            nb = nbformat.read(root / "release" / path.stem / path.name, as_version=4)
            for cell in nb.cells:
                if "colab-badge" in cell.metadata.get("tags", []):
                    # The Open-in-Colab badge opens the student copy, not the lesson.
                    cell.source = cell.source.replace(f"/notebooks/{path.name}", f"/{out.name}/{path.name}")
            nb.metadata.pop("widgets", None)
            write_atomically(out / path.name, lambda f, nb=nb: nbformat.write(nb, f))
            found = exercises(nb)
            rows.append({
                "notebook": path.stem, "exercises": len(found), "points": sum(e.points for e in found),
                "seconds": measured_seconds(nb),
            })
    write_release_readme(out, rows)
    return rows


def write_atomically(path: Path, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, then put it in place: never half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        write(f)
    os.replace(tmp, path)


def write_release_readme(out: Path, rows: list[dict]) -> None:
    lines = [
        "# Student versions",
        "",
        "Made by `mllm-classroom release` from the lesson notebooks in `notebooks/`: solutions replaced by",
        "stubs, check cells locked, hidden tests removed, outputs cleared. Do not edit these by hand: change the",
        "lesson, then release again (a test fails when the two drift apart). Each opens in Colab from its badge.",
        "",
        "| notebook | exercises | points | run time (quick size, 2-core CPU) |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        seconds = f"{row['seconds']:.0f} s" if row["seconds"] else "not measured"
        lines.append(f"| [{row['notebook']}]({row['notebook']}.ipynb) | {row['exercises']} | "
                     f"{row['points']:g} | {seconds} |")
    total = sum(row["points"] for row in rows)
    lines += ["", f"{sum(row['exercises'] for row in rows)} exercises, {total:g} points in all.", ""]
    (out / "README.md").write_text("\n".join(lines), encoding="utf-8")
