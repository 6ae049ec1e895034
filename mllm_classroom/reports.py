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

from mllm_classroom.lessons import capped, exercises, plain_text, scrub, secret_lines
from mllm_classroom.release import write_atomically

FORMULA = ("=", "+", "-", "@", "\t", "\r")
MAX_CELL_CHARS = 4_000  # one CSV cell (spreadsheets hold 32,767; a teacher reads far less)
MAX_FIELD_CHARS = 300  # one field of a verdict in a feedback page
# What kind of problem a check found, by the first words of its message (mllm_utils.checks): all a student
# reads of a hidden test, whose names and values come from inputs the student never saw.
PROBLEM_KINDS = (
    ("wrong shape", "the result has the wrong shape"),
    ("has no shape", "the result has no shape"),
    ("not the expected kind", "the result is not the expected kind of value"),
    ("not the expected value", "the result is not the expected value"),
    ("largest difference", "the values differ from the expected ones"),
    ("the result has nan", "the result has nan or inf values"),
    ("the result is complex", "the result is complex"),
    ("the result is not made of numbers", "the result is not made of numbers"),
    ("the result cannot be read", "the result cannot be read as an array of numbers"),
    ("the result contains", "the result contains an object the check cannot compare"),
    ("the calls", "the calls it made could not be observed"),
)
BUILTIN_NAMES = {"TypeError", "ValueError", "IndexError", "KeyError", "AttributeError", "RuntimeError",
                 "NameError", "ZeroDivisionError", "AssertionError", "NotImplementedError", "RecursionError",
                 "MemoryError", "OverflowError", "UnboundLocalError", "StopIteration", "ImportError",
                 "ModuleNotFoundError", "LookupError", "ArithmeticError", "FloatingPointError"}


def fmt(value) -> str:
    return "" if value is None else f"{value:g}"


def safe_cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: one line, no control characters, no formula."""
    text = capped(" ".join(plain_text(value).replace("\t", " ").splitlines()), MAX_CELL_CHARS)
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
        if hidden:  # the kind of problem only: a hidden test's name, values and messages come from its inputs
            return f"a hidden test (another case of this exercise) failed: {hidden_problem(verdict)}"
        problem = scrub(capped(verdict.get("problem", ""), MAX_FIELD_CHARS), secrets)
        lines = [f"{scrub(capped(verdict.get('name', ''), MAX_FIELD_CHARS), secrets)}: {problem}"]
        if verdict.get("expected"):
            lines.append(f"  expected: {scrub(capped(verdict['expected'], MAX_FIELD_CHARS), secrets)}")
        if verdict.get("hint"):
            lines.append(f"  hint: {scrub(capped(verdict['hint'], MAX_FIELD_CHARS), secrets)}")
        return "\n".join(lines)
    if kind == "unusable":
        return "the check could not use what your code returned" + (" in a hidden test" if hidden else "")
    return "did not pass"


def hidden_problem(verdict: dict) -> str:
    """A hidden check's problem by its kind alone (never its name, its values or what the function returned)."""
    problem = plain_text(verdict.get("problem", ""))
    if re.match(r"^\S+ changed (its argument|\S+)", problem):
        return "it changed one of its arguments (work on new tensors, never write into an argument)"
    if "called what the exercise asks you to do without" in problem:
        return "it called what the exercise asks you to do without"
    for start, words in PROBLEM_KINDS:
        if problem.startswith(start):
            return words
    return "the result is not right"


def teacher_note(verdict: dict) -> str:
    """The same verdict for grades.csv: more detail (the teacher may see what the student's code said)."""
    verdict = {k: capped(v, MAX_FIELD_CHARS) if isinstance(v, str) else v for k, v in verdict.items()}
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


# The feedback page's style: the system's fonts, text that wraps at any width (WCAG's reflow at 320 CSS px: no
# line of a message needs scrolling sideways), the browser's light or dark scheme, and black on white on paper.
FEEDBACK_CSS = """
:root { color-scheme: light dark; --text: #1b1b1b; --page: #ffffff; --muted: #4a4a4a; --box: #f3f4f6;
  --line: #c9ccd1; --pass: #0b6b2b; --fail: #a3141b; }
@media (prefers-color-scheme: dark) {
  :root { --text: #e8e8e8; --page: #16181c; --muted: #b9bcc2; --box: #23262c; --line: #4a4f58;
    --pass: #7fd69a; --fail: #ff9a9f; } }
* { box-sizing: border-box; }
body { margin: 0 auto; padding: 1rem; max-width: 52rem; font: 1rem/1.5 system-ui, -apple-system, "Segoe UI",
  Roboto, sans-serif; color: var(--text); background: var(--page); overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; margin: 0 0 .5rem; }
h2 { font-size: 1.15rem; margin: 0 0 .25rem; }
.next { border-left: .25rem solid var(--line); padding: .25rem .75rem; }
.exercise { border-top: 1px solid var(--line); padding: .75rem 0; }
.status { margin: 0 0 .5rem; color: var(--muted); }
.status strong.passed { color: var(--pass); }
.status strong.failed { color: var(--fail); }
pre.message { margin: 0; padding: .5rem .75rem; background: var(--box); border-radius: .25rem;
  font: .9rem/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  white-space: pre-wrap; overflow-wrap: anywhere; }
@media print {
  :root { --text: #000; --page: #fff; --muted: #000; --box: #fff; --line: #000; --pass: #000; --fail: #000; }
  body { max-width: none; padding: 0; }
  .exercise { break-inside: avoid; }
  pre.message { border: 1px solid #000; } }
"""


def exercise_heading(e) -> str:
    """An exercise by its task (``Exercise 2: a vocabulary of the top-k tokens``): the title a lesson gives it when
    the exercise list carries one (``e.title``), else its number, never the grader's id ``ex2``."""
    number = re.sub(r"\D", "", str(e.name)) or str(e.name)
    title = " ".join(plain_text(getattr(e, "title", "") or "").split())
    return f"Exercise {number}" + (f": {title}" if title else "")


def feedback_page(r, exercise_list: list, full: float, secrets: set[str]) -> str:
    """A student's page for one notebook: the points, what to do next, and each exercise with its verdict."""
    who = plain_text(r.display + " (" + r.student + ")" if r.display else r.student)
    title = html.escape(f"{r.notebook}: feedback for {who}")
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             "<meta name='color-scheme' content='light dark'>",
             f"<title>{title}</title><style>{FEEDBACK_CSS}</style></head><body><main>",
             f"<h1>{html.escape(r.notebook)}</h1>", f"<p>Feedback for {html.escape(who)}.</p>"]
    if r.status != "graded":
        status = "nothing was handed in" if r.status == "missing" else r.status
        parts.append(f"<p>Not graded: {html.escape(plain_text(status))}.</p>"
                     "<p class='next'><strong>Next:</strong> ask your teacher how to hand this notebook in.</p>"
                     "</main></body></html>\n")
        return "".join(parts)
    score = sum(r.points.values())
    parts.append(f"<p>Score: <strong>{score:g} of {full:g}</strong> points.</p>")
    rows, failed = [], []
    for e in exercise_list:
        got = r.points.get(e.name)
        passed = not r.review and got is not None and got >= e.points
        if r.review:
            message = "held for review"
        elif passed:
            message = "passed"
        elif e.name in r.verdicts:
            message = verdict_text(r.verdicts[e.name], secrets)
        else:
            message = "did not pass"
        heading = exercise_heading(e)
        if not passed and not r.review:
            failed.append(heading.split(":")[0].removeprefix("Exercise "))
        state = "passed" if passed else "held" if r.review else "failed"
        verdict = "passed" if passed else "held for review" if r.review else "not passed yet"
        rows.append(f"<section class='exercise'><h2>{html.escape(heading)}</h2>"
                    f"<p class='status'><strong class='{state}'>{verdict}</strong>: {fmt(got) or '0'} of "
                    f"{e.points:g} points</p>"
                    + ("" if passed or message == "held for review" else
                       f"<pre class='message'>{html.escape(message)}</pre>") + "</section>")
    if r.review:
        next_step = "your teacher reads your notebook before these points are given; nothing to do until then."
    elif failed:
        which = (f"exercise {failed[0]}" if len(failed) == 1
                 else f"exercises {', '.join(failed[:-1])} and {failed[-1]}")
        next_step = (f"open {html.escape(r.notebook)}.ipynb and, for {html.escape(which)}, read the message below, "
                     "fix your code and run the exercise's check cell again until it passes (in the notebook the "
                     "check says the same, with the case it tried).")
    else:
        next_step = "every exercise passed: nothing left to do in this notebook."
    parts.append(f"<p class='next'><strong>Next:</strong> {next_step}</p>")
    if r.review:
        parts.append("<p>Some of the points are held until your teacher has read your notebook: it holds something "
                     "a grader cannot trust (listed below).</p><ul>")
        parts += [f"<li>{html.escape(plain_text(f))}</li>" for f in r.review]
        parts.append("</ul>")
    parts += rows
    parts.append("</main></body></html>\n")
    return "".join(parts)
