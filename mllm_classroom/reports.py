"""What grading writes: grades.csv and totals.csv for the teacher, a feedback page per student and notebook.

Feedback shows, per exercise, the points and the check's own message (expected, got, hint), nothing else:
no cell's source and no other output, so no hidden test and no solution reaches a student, whatever the
submission printed. Every message is scrubbed of any line of the hidden tests or solutions as well.
"""

from __future__ import annotations

import csv
import html
from pathlib import Path

import nbformat

from mllm_classroom.lessons import exercises, scrub, secret_lines
from mllm_classroom.release import write_atomically


def fmt(value) -> str:
    return "" if value is None else f"{value:g}"


def write_csv(path: Path, header: list, rows: list) -> None:
    write_atomically(path, lambda f: csv.writer(f).writerows([header, *rows]))


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
              "display_name", "late", "file"]
    rows = []
    for r in results:
        rows.append([r.student, r.notebook, *[fmt(r.points.get(n)) for n in names], fmt(sum(r.points.values())),
                     fmt(full[r.notebook]), r.status, "; ".join(r.notes), "; ".join(map(str, r.review)),
                     fmt(r.withheld) if r.review else "", r.sandbox, r.display, r.late, r.file])
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
    """A student's page for one notebook: the points and each failed check's message, scrubbed."""
    title = html.escape(f"{r.notebook}: feedback for {r.display + ' (' + r.student + ')' if r.display else r.student}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head><body>",
             f"<h1>{html.escape(r.notebook)}</h1>"]
    if r.status != "graded":
        parts.append(f"<p>Not graded: {html.escape(scrub(r.status, secrets))}.</p></body></html>\n")
        return "".join(parts)
    score = sum(r.points.values())
    parts.append(f"<p>Score: <b>{score:g} of {full:g}</b> points.</p>")
    if r.review:
        parts.append("<p>Some of the points are held until your teacher has read your code: it does something a "
                     "grader cannot trust (listed below). The checks' messages are held with them.</p><ul>")
        parts += [f"<li>{html.escape(scrub(str(f), secrets))}</li>" for f in r.review]
        parts.append("</ul>")
    parts.append("<table border='1' cellpadding='4'><tr><th>exercise</th><th>points</th><th>check</th></tr>")
    for e in exercise_list:
        got = r.points.get(e.name)
        if r.review:
            message = "held for review"
        elif got is not None and got >= e.points:
            message = "passed"
        else:
            message = r.messages.get(e.name, "did not pass")
        body = html.escape(scrub(message, secrets))
        parts.append(f"<tr><td>{html.escape(e.name)}</td><td>{fmt(got) or '0'} of {e.points:g}</td>"
                     f"<td><pre>{body}</pre></td></tr>")
    parts.append("</table>")
    if r.notes and not r.review:
        notes = [n for n in r.notes if not n.startswith("points withheld")]
        parts.append("<p>Notes:</p><ul>" + "".join(f"<li>{html.escape(scrub(n, secrets))}</li>" for n in notes)
                     + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
