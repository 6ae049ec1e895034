"""What grading writes: grades.csv and totals.csv for the teacher, a feedback page per student and notebook.

Feedback is built from the judge's verdicts alone (:mod:`mllm_classroom.judge`): per exercise the points
and, for a check that failed, its name, what was wrong and the teacher's hint; for a visible check also
the expected value (the student can see that one in the notebook). Nothing the student's process printed,
raised, returned or named reaches a feedback page, and a hidden check's values are never shown.

Every cell of the CSV files is made safe for a spreadsheet (OWASP's rule for CSV injection: a cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``) and stripped of
control characters and terminal escapes.
"""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

import nbformat

from mllm_classroom.lessons import exercises, plain_text, scrub, secret_lines
from mllm_classroom.release import write_atomically

FORMULA = ("=", "+", "-", "@", "\t", "\r")
BUILTIN_NAMES = {"TypeError", "ValueError", "IndexError", "KeyError", "AttributeError", "RuntimeError",
                 "NameError", "ZeroDivisionError", "AssertionError", "NotImplementedError", "RecursionError",
                 "MemoryError", "OverflowError", "UnboundLocalError", "StopIteration", "ImportError",
                 "ModuleNotFoundError", "LookupError", "ArithmeticError", "FloatingPointError"}


def fmt(value) -> str:
    return "" if value is None else f"{value:g}"


def safe_cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: one line, no control characters, no formula."""
    text = " ".join(plain_text(value).replace("\t", " ").splitlines())
    return "'" + text if text.startswith(FORMULA) else text


def write_csv(path: Path, header: list, rows: list) -> None:
    safe = [[safe_cell(c) for c in header], *[[safe_cell(c) for c in row] for row in rows]]
    write_atomically(path, lambda f: csv.writer(f).writerows(safe))


def verdict_text(verdict: dict, secrets: set[str]) -> str:
    """What a student reads about a failed exercise: the judge's verdict, in the checks' own words."""
    kind = verdict.get("kind")
    function = f"`{plain_text(verdict.get('function', ''))[:60]}`" if verdict.get("function") else "your code"
    hidden = verdict.get("part") == "hidden"
    if kind == "missing":
        return "no solution for this exercise was found in the notebook (its cell was deleted or changed kind)"
    if kind == "not_done":
        return f"not done yet: {function} still raises NotDone"
    if kind == "undefined":
        return f"{function} is not defined in your notebook (its cell was not run, or it has another name)"
    if kind == "raised":
        what = verdict.get("type") if verdict.get("type") in BUILTIN_NAMES else "an exception"
        return f"{function} raised {what}" + (" in a hidden test" if hidden else "")
    if kind == "stopped":
        return f"the notebook was stopped while this exercise was checked: {plain_text(verdict.get('why', ''))[:200]}"
    if kind == "unsendable":
        return (f"{function} returned something the grader cannot take back: return tensors, arrays, numbers, "
                "strings, lists, tuples, dicts or a model")
    if kind == "check":
        problem = scrub(verdict.get("problem", ""), secrets)
        if hidden:  # what kind of problem, not the numbers: they come from inputs the student never saw
            problem = re.sub(r"[-+]?\d[\d.e+-]*", "#", problem)
        lines = [f"{plain_text(verdict.get('name', ''))}: {problem}"]
        if hidden:
            lines.append("  (a hidden test: its values are not shown)")
        elif verdict.get("expected"):
            lines.append(f"  expected: {plain_text(verdict['expected'])[:300]}")
        if verdict.get("hint"):
            lines.append(f"  hint: {plain_text(verdict['hint'])}")
        return "\n".join(lines)
    if kind == "unusable":
        return "the check could not use what your code returned" + (" in a hidden test" if hidden else "")
    return "did not pass"


def teacher_note(verdict: dict) -> str:
    """The same verdict for grades.csv: more detail (the teacher may see what the student's code said)."""
    kind = verdict.get("kind")
    part = verdict.get("part", "")
    if kind == "check":
        return f"{part} check failed: {verdict.get('name', '')}: {verdict.get('problem', '')}"
    if kind == "raised":
        return f"{part}: {verdict.get('function', '')} raised {verdict.get('type', '')}"
    if kind == "unusable":
        return f"{part}: the check could not use the result: {verdict.get('type', '')}: {verdict.get('message', '')}"
    return f"{part}: {kind}: {verdict.get('why', verdict.get('function', ''))}".strip(": ")


def write_reports(results: list, lessons: list[Path], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    names, full, secrets, found = [], {}, {}, {}
    for path in lessons:
        lesson = nbformat.read(path, as_version=4)
        found[path.stem] = exercises(lesson)
        full[path.stem] = sum(e.points for e in found[path.stem])
        secrets[path.stem] = secret_lines(lesson)
        names += [e.name for e in found[path.stem] if e.name not in names]
    header = ["student", "notebook", *names, "score", "max_score", "status", "notes", "review", "withheld", "sandbox",
              "limits", "display_name", "late", "file", "seconds"]
    rows = []
    for r in results:
        notes = list(r.notes) + [f"{name}: {teacher_note(v)}" for name, v in sorted(r.verdicts.items())]
        rows.append([r.student, r.notebook, *[fmt(r.points.get(n)) for n in names], fmt(sum(r.points.values())),
                     fmt(full[r.notebook]), r.status, "; ".join(notes), "; ".join(map(str, r.review)),
                     fmt(r.withheld) if r.review else "", r.sandbox, r.limits, r.display, r.late, r.file,
                     fmt(r.seconds) if r.seconds else ""])
    write_csv(out / "grades.csv", header, rows)
    students = sorted({r.student for r in results})
    totals = []
    for student in students:
        mine = {r.notebook: sum(r.points.values()) for r in results if r.student == student}
        display = next((r.display for r in results if r.student == student), "")
        totals.append([student, *[fmt(mine.get(p.stem, 0)) for p in lessons], fmt(sum(mine.values())), display])
    write_csv(out / "totals.csv", ["student", *[p.stem for p in lessons], "total", "display_name"], totals)
    for r in results:
        target = out / "feedback" / r.student / f"{r.notebook}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        page = feedback_page(r, found[r.notebook], full[r.notebook], secrets[r.notebook])
        write_atomically(target, lambda f, page=page: f.write(page))


def feedback_page(r, exercise_list: list, full: float, secrets: set[str]) -> str:
    """A student's page for one notebook: the points, and each failed exercise's verdict."""
    who = plain_text(r.display + " (" + r.student + ")" if r.display else r.student)
    title = html.escape(f"{r.notebook}: feedback for {who}")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title></head><body>",
             f"<h1>{html.escape(r.notebook)}</h1>"]
    if r.status != "graded":
        status = "nothing was handed in" if r.status == "missing" else r.status
        parts.append(f"<p>Not graded: {html.escape(plain_text(status))}.</p></body></html>\n")
        return "".join(parts)
    score = sum(r.points.values())
    parts.append(f"<p>Score: <b>{score:g} of {full:g}</b> points.</p>")
    if r.review:
        parts.append("<p>Some of the points are held until your teacher has read your notebook: it holds something "
                     "a grader cannot trust (listed below).</p><ul>")
        parts += [f"<li>{html.escape(plain_text(f))}</li>" for f in r.review]
        parts.append("</ul>")
    parts.append("<table><caption>Exercises</caption><tr><th scope='col'>exercise</th><th scope='col'>points</th>"
                 "<th scope='col'>check</th></tr>")
    for e in exercise_list:
        got = r.points.get(e.name)
        if r.review:
            message = "held for review"
        elif got is not None and got >= e.points:
            message = "passed"
        elif e.name in r.verdicts:
            message = verdict_text(r.verdicts[e.name], secrets)
        else:
            message = "did not pass"
        parts.append(f"<tr><td>{html.escape(e.name)}</td><td>{fmt(got) or '0'} of {e.points:g}</td>"
                     f"<td><pre>{html.escape(message)}</pre></td></tr>")
    parts.append("</table></body></html>\n")
    return "".join(parts)
