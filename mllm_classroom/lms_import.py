"""Grades back into the LMS: the CSV it imports, written beside grades.csv.

- Canvas (gradebook import, canvas-lms ``lib/gradebook_importer.rb``): the header is
  ``Student,ID[,SIS User ID,SIS Login ID],Section,<assignment title> (<assignment id>),...``; a row whose
  first cell holds "Points Possible" describes the assignments, rows of only "Muted" or "Manual Posting"
  are skipped, every other row is a student, matched by ``ID`` (Canvas's user id, the one in the zip).
  ``--canvas-gradebook FILE`` (the gradebook the teacher exported) comes back as ``canvas-import.csv``
  with the assignment's column filled and every other cell as it was; ``--canvas-assignment "Title (id)"``
  names the column, or, alone, makes a CSV of just ``Student,ID,Section,Title (id)`` for the students
  of the download.
- Moodle (offline grading worksheet, ``mod/assign/feedback/offline/importgradeslib.php``): the columns
  ``Identifier`` ("Participant {id}", the id of the download's folders), ``Grade`` and
  ``Last modified (grade)`` must be there (English headers); ``Feedback comments`` is filled when the
  assignment has it. ``--moodle-worksheet FILE`` comes back as ``moodle-import.csv``, and the feedback
  pages as ``moodle-feedback.zip``, laid out for Moodle's "Upload multiple feedback files in a zip".
  Team assignments (a ``Group`` column): each member gets the grade of their group's submission.

Scores are scaled to the assignment's maximum in the LMS (Canvas's Points Possible, Moodle's Maximum
Grade) when that differs from the notebooks' points. A student the LMS lists who handed in nothing gets
0 and "missing" (not with Canvas's anonymous grading, whose ids cannot be matched).
"""

from __future__ import annotations

import csv
import io
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from mllm_classroom.lessons import ClassroomError, exercises
from mllm_classroom.release import write_atomically

NOT_ASSIGNMENTS = re.compile(r"Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                             r"Override Score|Override Grade|Override Status")
MUTED = re.compile(r"^\s*(Muted|Manual Posting.*)?\s*$", re.I)
MOODLE_REQUIRED = ("Identifier", "Grade", "Last modified (grade)")
PARTICIPANT = "Participant "


@dataclass
class Sheet:
    """An LMS's grade CSV as read, and where each student's grade goes."""

    lms: str  # "canvas" or "moodle"
    path: Path | None  # the teacher's file; None: a minimal Canvas CSV is made
    rows: list = field(default_factory=list)  # header first
    delimiter: str = ","
    bom: bool = False
    newline: str = "\r\n"
    column: int = -1  # the cell to fill in each student's row
    comment: int = -1  # Moodle's "Feedback comments"; -1: none
    students: dict = field(default_factory=dict)  # LMS id -> row index
    names: dict = field(default_factory=dict)  # LMS id -> the name the LMS shows
    groups: dict = field(default_factory=dict)  # Moodle team assignments: row index -> group name
    maximum: float | None = None  # the assignment's maximum in the LMS
    title: str = ""  # Canvas: the assignment's column header


def number(text: str) -> float | None:
    """A number as an LMS writes it: ``4``, ``4.00``, ``4,5``, ``1.234,5``; None for anything else."""
    text = (text or "").strip()
    if not re.fullmatch(r"-?[0-9.,]+", text):
        return None
    whole, _, last = re.sub(r"[.,](?=[0-9]*[.,])", "", text).replace(",", ".").partition(".")
    return float(f"{whole}.{last}" if last else whole)


def read_csv(path: Path, option: str) -> Sheet:
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ClassroomError(f"{option}: cannot read {path} ({error.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ClassroomError(f"{option}: {path} is not UTF-8 text (saved again by a spreadsheet?); "
                             "use the file as the LMS exported it") from None
    first = text.splitlines()[0] if text.strip() else ""
    delimiter = max(",;\t", key=lambda d: len(next(csv.reader([first], delimiter=d), [])))
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    newline = "\r\n" if "\r\n" in text else "\n"
    return Sheet("", path, rows, delimiter, raw.startswith(b"\xef\xbb\xbf"), newline)


def title_and_id(header: str) -> tuple[str, str | None]:
    match = re.fullmatch(r"(.*)\s\((\d+)\)", header.strip())
    return (match[1], match[2]) if match else (header.strip(), None)


def canvas_gradebook(path: Path, assignment: str | None) -> Sheet:
    sheet = read_csv(path, "--canvas-gradebook")
    sheet.lms = "canvas"
    header = sheet.rows[0] if sheet.rows else []
    first_last = header[:2] == ["LastName", "FirstName"]
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]) and not first_last:
        raise ClassroomError(f"--canvas-gradebook: {path} is not a Canvas gradebook export (its header starts "
                             f"Student,ID,...,Section; got {','.join(header[:4])!r})")
    info = 4 if first_last else 3
    if re.search(r"SIS\s+Login\s+ID", header[info - 1]):
        info += 1
    elif re.search(r"SIS\s+User\s+ID", header[info - 1]) and re.search(r"SIS\s+Login\s+ID", header[info] or ""):
        info += 2 + bool(re.search(r"Integration\s+ID", header[info + 1] if len(header) > info + 1 else ""))
        info += bool(re.search(r"Root\s+Account", header[info] if len(header) > info else ""))
    if len(header) < info or "Section" not in header[info - 1]:
        raise ClassroomError(f"--canvas-gradebook: {path}: column {info} should be Section (Canvas's rule); "
                             f"got {header[info - 1] if len(header) >= info else 'nothing'!r}")
    candidates = [i for i in range(info, len(header)) if not NOT_ASSIGNMENTS.search(header[i])]
    if assignment:
        title, wanted = title_and_id(assignment)
        wanted = assignment.strip() if assignment.strip().isdigit() else wanted  # the id alone
        found = [i for i in candidates if header[i].strip() == assignment.strip()] or \
                [i for i in candidates if wanted and title_and_id(header[i])[1] == wanted] or \
                [i for i in candidates if not wanted and title_and_id(header[i])[0] == title]
    else:
        found = candidates
    if len(found) != 1:
        names = ", ".join(repr(header[i]) for i in candidates) or "none"
        need = f"{assignment!r} is not one of them" if assignment else "name one with --canvas-assignment"
        raise ClassroomError(f"--canvas-assignment: the gradebook's assignments are {names}; {need}")
    sheet.column, sheet.title = found[0], header[found[0]]
    id_column = 2 if first_last else 1
    for index, row in enumerate(sheet.rows[1:], start=1):
        cells = row + [""] * (len(header) - len(row))
        if "Points Possible" in cells[0]:
            if re.search(r"read\s+only", cells[sheet.column]):
                raise ClassroomError(f"--canvas-assignment: {sheet.title!r} is read only in Canvas")
            sheet.maximum = number(cells[sheet.column])
        elif all(MUTED.match(c) for c in row):
            continue
        elif cells[id_column].strip():
            student = cells[id_column].strip()
            sheet.students[student] = index
            sheet.names[student] = f"{cells[1]} {cells[0]}".strip() if first_last else cells[0]
    return sheet


def canvas_minimal(assignment: str) -> Sheet:
    if not all(title_and_id(assignment)):
        raise ClassroomError(f'--canvas-assignment: got {assignment!r}, need "Title (id)" as the gradebook export '
                             "heads its column (the id is the number in the assignment's address, /assignments/ID)")
    return Sheet("canvas", None, [["Student", "ID", "Section", assignment.strip()]], column=3,
                 title=assignment.strip())


def moodle_worksheet(path: Path) -> Sheet:
    sheet = read_csv(path, "--moodle-worksheet")
    sheet.lms = "moodle"
    header = sheet.rows[0] if sheet.rows else []
    missing = [name for name in MOODLE_REQUIRED if name not in header]
    if missing:
        raise ClassroomError(f"--moodle-worksheet: {path} is not Moodle's grading worksheet: no column "
                             f"{', '.join(missing)} (download it in English: Moodle reads these headers)")
    if "Scale" in header and "Maximum Grade" not in header:
        raise ClassroomError("--moodle-worksheet: the assignment is graded on a scale; make it a point grade")
    ident, sheet.column = header.index("Identifier"), header.index("Grade")
    sheet.comment = header.index("Feedback comments") if "Feedback comments" in header else -1
    name = header.index("Full name") if "Full name" in header else None
    group = header.index("Group") if "Group" in header else None
    maximum = header.index("Maximum Grade") if "Maximum Grade" in header else None
    for index, row in enumerate(sheet.rows[1:], start=1):
        cells = row + [""] * (len(header) - len(row))
        if not cells[ident].startswith(PARTICIPANT):
            continue
        student = cells[ident][len(PARTICIPANT):].strip()  # as Moodle reads it
        sheet.students[student] = index
        sheet.names[student] = cells[name] if name is not None else cells[ident]
        if group is not None:
            sheet.groups[index] = cells[group]
        if maximum is not None and sheet.maximum is None:
            sheet.maximum = number(cells[maximum])
    return sheet


def read_sheet(layout: str, gradebook: Path | None, assignment: str | None, worksheet: Path | None):
    """The LMS grade CSV the teacher asked for (read and checked before grading), or None."""
    if (gradebook or assignment) and worksheet:
        raise ClassroomError("--moodle-worksheet: not with --canvas-gradebook or --canvas-assignment (one LMS)")
    if (gradebook or assignment) and layout != "canvas":
        raise ClassroomError(f"--canvas-gradebook/--canvas-assignment: SUBMISSIONS is a {layout} download, "
                             "not Canvas's")
    if worksheet and layout != "moodle":
        raise ClassroomError(f"--moodle-worksheet: SUBMISSIONS is a {layout} download, not Moodle's")
    if gradebook:
        return canvas_gradebook(gradebook, assignment)
    if assignment:
        return canvas_minimal(assignment)
    return moodle_worksheet(worksheet) if worksheet else None


def roster(sheet: Sheet | None, download) -> list[str]:
    """The students the LMS lists who get a row of their own in grades.csv even when they sent nothing."""
    if sheet is None or sheet.groups or any(s.startswith("anon_") for s in download.students):
        return []
    return sorted(sheet.students)


def scaled(points: float, full: float, maximum: float | None) -> str:
    value = points * maximum / full if maximum and full and maximum != full else points
    return f"{round(value, 2):g}"


HELD = "held for review"  # grade.py and lms.py: files that claim one student; the points are left empty


def comment(mine: list, full: dict) -> str:
    """A student's short feedback comment: each notebook's points or why it has none. Nothing secret."""
    parts = []
    for r in mine:
        if r.status == "missing":
            parts.append(f"{r.notebook}: missing")
        elif r.status.startswith(HELD):
            parts.append(f"{r.notebook}: held for your teacher to grade (more than one file claims to be yours)")
        elif r.status != "graded":
            parts.append(f"{r.notebook}: {r.status.split(' (')[0].split(':')[0]}, 0 points")
        else:
            held = " (some points held until your teacher has read your code)" if r.review else ""
            parts.append(f"{r.notebook}: {sum(r.points.values()):g} of {full[r.notebook]:g}{held}")
    late = " Handed in late." if any(r.late for r in mine) else ""
    return "; ".join(parts) + "." + late + (" Details in the feedback file." if any(r.status != "missing"
                                                                                     for r in mine) else "")


def write_back(sheet: Sheet, results: list, lessons: list[Path], download, out: Path) -> list[str]:
    """Fill the sheet from the results and write it (and Moodle's feedback zip); return lines to print."""
    full = {p.stem: sum(e.points for e in exercises(nbformat.read(p, as_version=4))) for p in lessons}
    by_student: dict = {}
    for r in results:
        by_student.setdefault(r.student, []).append(r)
    total = sum(full.values())
    team_of = {}
    if sheet.groups:  # Moodle team assignments: the download's folders are groups, found by their name
        names = {download.display.get(s, "").strip(): s for s in by_student}
        team_of = {index: names.get(group.replace("_", " ").strip()) for index, group in sheet.groups.items()}
    filled, missing, rows, held = 0, 0, sheet.rows, []
    width = len(rows[0])
    if sheet.path is None:  # a minimal Canvas CSV: the download's students
        rows.append(["Points Possible", "", "", f"{total:g}"])
        for student in sorted(s for s in by_student if not s.startswith("anon_")):
            sheet.students[student] = len(rows)
            rows.append([download.display.get(student, student), student, "", ""])
    for student, index in sorted(sheet.students.items(), key=lambda item: item[1]):
        key = team_of.get(index) if sheet.groups else student
        mine = by_student.get(key, []) if key else []
        row = rows[index] = rows[index] + [""] * (width - len(rows[index]))
        if any(r.status.startswith(HELD) for r in mine):  # the grade is left as it was, for the teacher
            note = comment(mine, full)
            held.append(student)
        elif any(r.status != "missing" for r in mine):
            points = sum(sum(r.points.values()) for r in mine)
            row[sheet.column] = scaled(points, total, sheet.maximum)
            note = comment(mine, full)
            filled += 1
        elif sheet.lms == "canvas" and any(s.startswith("anon_") for s in download.students):
            continue  # anonymous grading: whose is missing cannot be known
        else:
            row[sheet.column], note = "0", "missing: nothing was handed in."
            missing += 1
        if sheet.comment >= 0:
            row[sheet.comment] = (f"Group {sheet.groups[index]}: " if sheet.groups else "") + note
    name = f"{sheet.lms}-import.csv"
    bom = "\ufeff" if sheet.bom else ""
    write_atomically(out / name, lambda f: (f.write(bom), csv.writer(
        f, delimiter=sheet.delimiter, lineterminator=sheet.newline).writerows(rows)))
    listed = set(team_of.values()) if sheet.groups else set(sheet.students)
    unlisted = sorted(s for s in by_student if s not in listed)
    how = (f"scaled from {total:g} to {sheet.maximum:g} points, the assignment's maximum"
           if sheet.maximum and total and sheet.maximum != total else f"out of {total:g} points")
    column = f" in {sheet.title!r}" if sheet.title else ""
    lines = [f"{name}: {filled} students graded, {missing} missing (0){column}; {how}"]
    if held:
        lines.append(f"left empty in {name}, for you to grade (more than one file claims each): {', '.join(held)}")
    if unlisted:
        lines.append(f"not in the {sheet.lms.capitalize()} file, so not in {name}: {', '.join(unlisted)} "
                     "(see grades.csv; " + ("anonymous ids cannot be imported: grade them in SpeedGrader)"
                                            if any(s.startswith("anon_") for s in unlisted) else "enter them by hand)"))
    if sheet.lms == "moodle":
        lines.append(moodle_feedback_zip(sheet, by_student, team_of, out))
    return lines


def moodle_feedback_zip(sheet: Sheet, by_student: dict, team_of: dict, out: Path) -> str:
    """Each participant's feedback pages, in the folders Moodle's "Upload multiple feedback files" reads."""
    target, count = out / "moodle-feedback.zip", 0
    tmp = target.with_name(f".{target.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for student, index in sorted(sheet.students.items()):
            key = team_of.get(index) if sheet.groups else student
            name = sheet.names.get(student, "").replace("_", " ").strip() or "Participant"
            for r in by_student.get(key, []) if key else []:
                page = out / "feedback" / key / f"{r.notebook}.html"
                if r.status != "missing" and page.exists():
                    archive.write(page, f"{name}_{student}_assignsubmission_file/{r.notebook}-feedback.html")
                    count += 1
    os.replace(tmp, target)
    return f"moodle-feedback.zip: {count} feedback pages for Moodle's \"Upload multiple feedback files in a zip\""
