"""One source of truth for the notebooks' run times: the time `tools/notebooks.py run` measured.

    python tools/run_times.py write    rewrite mllm_utils/data/run_times.json and the README course table's times
    python tools/run_times.py check    say where they differ from the notebooks' measured times (exit 1)

Each lesson's quick run time is measured when it is executed (``tools/notebooks.py run``, stored in its
metadata as ``mllm.quick_run_seconds``). ``write`` copies those times into ``mllm_utils/data/run_times.json``,
the one figure everything else shows: the README's course table ("Quick size, 2-core CPU"),
``student/README.md``'s table (``mllm-classroom release`` reads the file) and each notebook's start line
(``mllm_utils.runtime.quick_time``, package data, so Colab prints it too). ``tests/test_run_times.py`` fails
when a table differs from the file, or the file from a notebook's latest measured time by more than
``DRIFT`` (a notebook's own output prints the file's figure: a re-run that measures a second more must not
change what it prints, or the outputs would never settle).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mllm_classroom.lessons import measured_seconds  # noqa: E402
from tools.notebooks import NOTEBOOKS, notebook_paths  # noqa: E402

DATA = ROOT / "mllm_utils" / "data" / "run_times.json"
README = ROOT / "README.md"
STUDENT_README = ROOT / "student" / "README.md"
TIME_COLUMN = "Quick size, 2-core CPU"
DRIFT = (1.5, 5)  # the file's time agrees with a measured one within this factor, or this many seconds


def measured() -> dict[str, int]:
    """Each lesson's measured quick run time in whole seconds, by stem, in course order."""
    times = {}
    for path in notebook_paths():
        seconds = measured_seconds(nbformat.read(path, as_version=4))
        if seconds is None:
            raise SystemExit(f"{path.name} has no measured run time: run `python tools/notebooks.py run {path.name}`")
        times[path.stem] = int(round(seconds))
    return times


def cell_text(seconds: int) -> str:
    return f"{seconds} s"


def readme_table(text: str) -> tuple[int, list[tuple[int, list[str]]]]:
    """The course table of README.md: the index of its time column and each row (line number, cells)."""
    lines = text.splitlines()
    start = lines.index("## The course")
    header = next(i for i in range(start, len(lines)) if lines[i].startswith("| #"))
    cells = [c.strip() for c in lines[header].strip("|").split("|")]
    column = cells.index(TIME_COLUMN)
    rows = []
    for i in range(header + 2, len(lines)):
        if not lines[i].startswith("|"):
            break
        rows.append((i, [c.strip() for c in lines[i].strip().strip("|").split(" | ")]))
    return column, rows


def row_stem(cells: list[str]) -> str:
    match = re.search(r"\[([^\]]+)\]\(student/", " ".join(cells))
    return match.group(1) if match else ""


def readme_times(text: str) -> dict[str, str]:
    column, rows = readme_table(text)
    return {row_stem(cells): cells[column] for _, cells in rows}


def student_readme_times(text: str) -> dict[str, str]:
    """student/README.md's table: notebook -> its run time cell."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"\| \[([^\]]+)\]\([^)]*\) \| [^|]* \| [^|]* \| ([^|]*) \|$", line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def agrees(kept: int, measured: int) -> bool:
    factor, seconds = DRIFT
    return abs(kept - measured) <= seconds or max(kept, measured) <= factor * min(kept, measured)


def problems(times: dict[str, int]) -> list[str]:
    """Where the data file strays from the measured ``times``, and where the README's or student/README.md's
    tables differ from the data file."""
    data = json.loads(DATA.read_text(encoding="utf-8")) if DATA.exists() else {}
    found = []
    if set(data) != set(times):
        found.append(f"{shown(DATA)} has times for {sorted(data)}, the course's notebooks are "
                     f"{sorted(times)}: `python tools/run_times.py write`")
    in_readme = readme_times(README.read_text(encoding="utf-8"))
    student = student_readme_times(STUDENT_README.read_text(encoding="utf-8"))
    for stem, seconds in times.items():
        kept = data.get(stem)
        if kept is not None and not agrees(kept, seconds):
            found.append(f"{stem} ran in {seconds} s when last executed, {shown(DATA)} says {kept} s: "
                         "`python tools/run_times.py write`, then `make release` and run the notebook again")
        want = cell_text(kept) if kept is not None else None
        if in_readme.get(stem) != want:
            found.append(f"README.md's course table says {in_readme.get(stem)!r} for {stem}, the data file {want!r}: "
                         "`python tools/run_times.py write`")
        if student.get(stem) != want:
            found.append(f"student/README.md says {student.get(stem)!r} for {stem}, the data file {want!r}: "
                         "`make release`")
        intro = intro_time(stem)
        if kept is not None and intro != quick_phrase(kept):
            found.append(f"{stem}'s first cell gives the quick size as {intro!r}, the data file "
                         f"{quick_phrase(kept)!r}: "
                         "edit its **Expected time:** line")
    return found


def quick_phrase(seconds: int) -> str:
    """How a notebook's introduction states its quick time, as its start line prints it."""
    from mllm_utils.runtime import format_duration

    return f"about {format_duration(seconds)} on a 2-core CPU"


def intro_time(stem: str) -> str | None:
    """The quick time a notebook's first cell states: its **Expected time:** line, up to 'CPU'."""
    first = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4).cells[0].source
    found = re.search(r"\*\*Expected time:\*\* (?:quick size )?(about [^.;(]*? on a 2-core CPU)", first)
    return found.group(1) if found else None


def write(times: dict[str, int]) -> None:
    DATA.write_text(json.dumps(times, indent=1) + "\n", encoding="utf-8")
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    column, rows = readme_table(text)
    for index, cells in rows:
        stem = row_stem(cells)
        if stem in times:
            cells[column] = cell_text(times[stem])
            lines[index] = "| " + " | ".join(cells) + " |\n"
    README.write_text("".join(lines), encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv not in (["write"], ["check"]):
        print(__doc__, file=sys.stderr)
        return 2
    times = measured()
    if argv == ["write"]:
        write(times)
        print(f"wrote {DATA.relative_to(ROOT)} and README.md's course times: {times}")
        return 0
    found = problems(times)
    print("\n".join(found) or "run times agree: data file, README.md, student/README.md")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
