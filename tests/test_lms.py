"""Grading what an LMS gives (mllm_classroom.lms) and writing grades it imports (mllm_classroom.lms_import).

Zips and folders are built here in each LMS's layout (canvas-lms ``lib/content_zipper.rb``, moodle
``mod/assign/classes/downloader.php``): late, resubmitted, anonymous, team, old Moodle, blind marking,
stray files, names with commas and accents, and members that must never be extracted. The CSVs written
are read back with each LMS's own rules (Canvas ``lib/gradebook_importer.rb``, Moodle
``mod/assign/feedback/offline/importgradeslib.php``), written out again below, and compared with the
grades. One test grades a Canvas zip and a Moodle zip through the command line, with the real grader and
sandbox, on a lesson of one exercise.
"""

import csv
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from mllm_classroom import cli, lms, lms_import
from mllm_classroom.grade import Result
from mllm_classroom.lessons import ClassroomError
from tools import classroom_fixtures as fixtures

ROOT = Path(__file__).resolve().parent.parent
STEMS = ["05_lstm", "06_gru", "99_answer"]


# ---------------------------------------------------------------- helpers: a tiny lesson, zips, the LMSs' rules


def one_exercise_lesson(path):
    fixtures.one_exercise_lesson(path)
    return path


def submission(answer: int) -> str:
    """A student's 99_answer notebook: right for 42."""
    solution = nbformat.v4.new_code_cell(f"answer = {answer}")
    solution.metadata["nbgrader"] = {"grade": False, "grade_id": "ex1-solution", "locked": False,
                                     "schema_version": 3, "solution": True, "task": False}
    check = nbformat.v4.new_code_cell("assert answer == 42")
    check.metadata["nbgrader"] = {"grade": True, "grade_id": "ex1-check", "locked": True, "points": 1,
                                  "schema_version": 3, "solution": False, "task": False}
    solution.id, check.id = "solution", "check"
    nb = nbformat.v4.new_notebook(cells=[solution, check])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nbformat.writes(nb)


def make_zip(path, members, times=None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(times or {}).get(name, (2025, 3, 1, 12, 0, 0)))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return path


def digest(path: Path) -> dict:
    """Every file under ``path`` (or ``path`` itself): size, time and content, to prove nothing changed."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink())
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns, p.is_symlink() or hashlib.sha256(p.read_bytes())
                     .hexdigest()) for p in files}


def canvas_reads(path: Path) -> tuple[list, dict, dict]:
    """What Canvas's gradebook importer takes from a CSV, by its rules: (header, points possible by assignment
    id, {user id: {assignment id: grade}}). Asserts the header is one Canvas accepts."""
    text = path.read_bytes().decode("utf-8-sig")
    lines = text.splitlines()[:3]
    counts = {d: {len(next(csv.reader([line], delimiter=d))) for line in lines} for d in ",;"}
    delimiter = ";" if len(counts[";"]) == 1 and max(counts[";"]) > max(counts[","]) else ","
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    header = rows[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1], header
    info = 3
    if re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        info = 5
    assert "Section" in header[info - 1], header
    assignments = {}
    for index, title in enumerate(header[info:], start=info):
        match = re.fullmatch(r"(.*)\s\((\d+)\)", title)
        if match and not re.search(r"Current|Final|Override", title):
            assignments[index] = match[2]
    points, grades = {}, {}
    for row in rows[1:]:
        if "Points Possible" in row[0]:
            points = {a: row[i] for i, a in assignments.items()}
        elif all(re.match(r"^\s*(Muted|Manual Posting.*)?\s*$", c, re.I) for c in row):
            continue
        else:
            grades[int(row[1])] = {a: row[i].strip() for i, a in assignments.items()}
    return header, points, grades


def moodle_reads(path: Path) -> dict:
    """What Moodle's worksheet import takes, by its rules: {participant id: (grade, feedback, modified)}."""
    rows = list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8-sig"), newline="")))
    header = rows[0]
    ident, grade, modified = header.index("Identifier"), header.index("Grade"), header.index("Last modified (grade)")
    feedback = header.index("Feedback comments")
    maximum = header.index("Maximum Grade")
    taken = {}
    for row in rows[1:]:
        value = row[grade].strip()
        assert value == "" or 0 <= float(value) <= float(row[maximum]), "Moodle skips a grade out of range"
        taken[row[ident][len("Participant "):]] = (value, row[feedback], row[modified])
    return taken


# ---------------------------------------------------------------- names: each LMS's layout, parsed


@pytest.mark.parametrize("name, student, display, late, file, order", [
    ("smithbob_123456_7890123_05_lstm.ipynb", "123456", "smithbob", False, "05_lstm.ipynb", (0, 7890123)),
    ("smithbob_LATE_123456_7890124_05_lstm-2.ipynb", "123456", "smithbob", True, "05_lstm-2.ipynb", (2, 7890124)),
    ("anon_Xy3kq_7890125_05_lstm.ipynb", "anon_Xy3kq", "anon_Xy3kq", False, "05_lstm.ipynb", (0, 7890125)),
    ("LATE_anon_Ab12c_7890126_Copy of 05_lstm-1.ipynb", "anon_Ab12c", "anon_Ab12c", True, "Copy of 05_lstm-1.ipynb",
     (1, 7890126)),
    ("müllerjürgen_42_7_05_lstm.ipynb", "42", "müllerjürgen", False, "05_lstm.ipynb", (0, 7)),
    ("o_brien_43_8_05_lstm.ipynb", "43", "o_brien", False, "05_lstm.ipynb", (0, 8)),
    ("_44_9_05_lstm.ipynb", "44", "44", False, "05_lstm.ipynb", (0, 9)),
])
def test_canvas_names(name, student, display, late, file, order):
    up = lms.Upload(name)
    lms.parse_canvas(up)
    assert (up.student, up.display, up.late, up.file, up.order) == (student, display, late, file, order)
    assert lms.notebook_of(up.file, STEMS) == "05_lstm"


@pytest.mark.parametrize("name, student, what", [
    ("smithbob_123456_text.html", "123456", "a text entry or a link, not a file"),
    ("smithbob_LATE_123456_link.html", "123456", "a text entry or a link, not a file"),
    ("05_lstm.ipynb", None, ""),
    ("notes/smithbob_1_2_05_lstm.ipynb", None, ""),
])
def test_canvas_names_that_are_not_a_file(name, student, what):
    up = lms.Upload(name)
    lms.parse_canvas(up)
    assert (up.student, up.what) == (student, what)


@pytest.mark.parametrize("path, student, display, file, what", [
    ("Bob Smith_1234_assignsubmission_file/05_lstm.ipynb", "1234", "Bob Smith", "05_lstm.ipynb", ""),
    ("Bob Smith_1234_assignsubmission_file_/05_lstm.ipynb", "1234", "Bob Smith", "05_lstm.ipynb", ""),  # old Moodle
    ("Smith, Bob_1235_assignsubmission_file/week 5/05_lstm (1).ipynb", "1235", "Smith, Bob",
     "week 5/05_lstm (1).ipynb", ""),
    ("Jürgen Müller_1236_assignsubmission_file/05_lstm.ipynb", "1236", "Jürgen Müller", "05_lstm.ipynb", ""),
    ("Participant_5012_assignsubmission_file/05_lstm.ipynb", "5012", "Participant 5012", "05_lstm.ipynb", ""),
    ("Team Rocket_77_assignsubmission_file/05_lstm.ipynb", "77", "Team Rocket", "05_lstm.ipynb", ""),
    ("Default group_assignsubmission_file/05_lstm.ipynb", "default-group", "Default group", "05_lstm.ipynb", ""),
    ("Bob Smith_1234_assignsubmission_file_05_lstm.ipynb", "1234", "Bob Smith", "05_lstm.ipynb", ""),  # no folders
    ("Bob Smith_1234_assignsubmission_onlinetext/onlinetext.html", "1234", "Bob Smith", "onlinetext.html",
     "Moodle's onlinetext submission, not a file"),
    ("05_lstm.ipynb", None, "", "", ""),
])
def test_moodle_names(path, student, display, file, what):
    up = lms.Upload(path)
    lms.parse_moodle(up)
    assert (up.student, up.display, up.file, up.what) == (student, display, file, what)


@pytest.mark.parametrize("path, student, file", [
    ("ada/05_lstm.ipynb", "ada", "05_lstm.ipynb"),
    ("Smith, Bob - 05_lstm.ipynb", "Smith, Bob", "05_lstm.ipynb"),  # Google Classroom's copies
    ("Zoë Ångström - Copy of 05_lstm.ipynb", "Zoë Ångström", "Copy of 05_lstm.ipynb"),
    ("05_lstm.ipynb", None, ""),
])
def test_plain_folder_names(path, student, file):
    up = lms.Upload(path)
    lms.parse_folders(up)
    assert (up.student, up.file) == (student, file)
    assert student is None or lms.notebook_of(file, STEMS) == "05_lstm"


@pytest.mark.parametrize("file, stem", [
    ("05_lstm.ipynb", "05_lstm"), ("05_LSTM-3.ipynb", "05_lstm"), ("Copy of 05_lstm.ipynb", "05_lstm"),
    ("05_lstm.pdf", None), ("lstm_05.ipynb", None), ("sub/06_gru (1).ipynb", "06_gru"),
])
def test_which_notebook_a_file_is(file, stem):
    assert lms.notebook_of(file, STEMS) == stem


def test_a_zip_name_not_flagged_utf8_is_read_as_utf8():
    info = zipfile.ZipInfo("müllerjürgen_42_7_05_lstm.ipynb".encode().decode("cp437"))
    info.flag_bits = 0
    assert lms.member_name(info) == "müllerjürgen_42_7_05_lstm.ipynb"


# ---------------------------------------------------------------- recognising and choosing


def canvas_class(tmp_path):
    """A Canvas download: resubmitted (the older file has the newer time), late, stray, no pattern."""
    members = {
        "smithbob_123_900_99_answer.ipynb": submission(41),
        "smithbob_123_901_99_answer-1.ipynb": submission(42),  # uploaded again: Canvas's -1
        "leeann_LATE_124_902_99_answer.ipynb": submission(42),
        "müllerjürgen_125_903_report.pdf": b"%PDF-1.4",
        "wu_126_text.html": "<p>my answer is 42</p>",
        "README.txt": "downloaded from Canvas",
        "__MACOSX/._smithbob_123_900_99_answer.ipynb": b"",
    }
    times = {"smithbob_123_900_99_answer.ipynb": (2025, 3, 2, 12, 0, 0)}  # newer time, older upload
    return make_zip(tmp_path / "class-notebook_99_submissions.zip", members, times)


def test_a_canvas_download_is_recognised_and_the_newest_upload_chosen(tmp_path):
    source = canvas_class(tmp_path)
    before = digest(source)
    download = lms.read_download(source)
    assert download.layout == "canvas" and download.ignored == 1
    download.choose(STEMS, STEMS)
    assert download.students == ["123", "124", "125", "126"]
    assert download.chosen["123", "99_answer"].path == "smithbob_123_901_99_answer-1.ipynb"
    rows = {r[0]: r for r in download.manifest()[1]}
    assert rows["smithbob_123_900_99_answer.ipynb"][5] == "an older upload, not graded (graded: 99_answer-1.ipynb)"
    assert rows["leeann_LATE_124_902_99_answer.ipynb"][4:] == ["late", "graded"]
    assert rows["müllerjürgen_125_903_report.pdf"][5] == "matches no notebook"
    assert rows["wu_126_text.html"][5] == "a text entry or a link, not a file"
    assert rows["README.txt"][1:] == ["", "", "", "", "fits no canvas name pattern: whose is it?"]
    folder = download.lay_out(tmp_path / "laid", also=["127"])
    assert sorted(p.name for p in folder.iterdir()) == ["123", "124", "125", "126", "127"]
    assert (folder / "123" / "99_answer.ipynb").read_text() == submission(42)
    assert [p.name for p in (folder / "125").iterdir()] == []
    results = [Result(s, "99_answer") for s in ("123", "124", "125")]
    download.annotate(results)
    assert results[0].notes[0] == ("2 files for 99_answer; graded the newest upload (Canvas's resubmission "
                                   "number), 99_answer-1.ipynb")
    assert (results[1].late, results[1].file) == ("late", "leeann_LATE_124_902_99_answer.ipynb")
    assert results[2].notes == ["also handed in: report.pdf (matches no notebook)"]
    assert digest(source) == before


def test_a_moodle_folder_is_recognised_and_read_in_place(tmp_path):
    source = tmp_path / "Course-Notebook 99-12"
    for path, text in {
        "Bob Smith_1234_assignsubmission_file_/99_answer.ipynb": submission(41),
        "Bob Smith_1234_assignsubmission_file_/99_answer (1).ipynb": submission(42),
        "Smith, Ann_1235_assignsubmission_file_/Copy of 99_answer.ipynb": submission(42),
        "Smith, Ann_1235_assignsubmission_file_/.ipynb_checkpoints/99_answer-checkpoint.ipynb": "{}",
        "Jürgen Müller_1236_assignsubmission_onlinetext_/onlinetext.html": "42",
    }.items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(text, encoding="utf-8")
    os.utime(source / "Bob Smith_1234_assignsubmission_file_/99_answer (1).ipynb", (2e9, 2e9))
    (source / "Bob Smith_1234_assignsubmission_file_" / "link.ipynb").symlink_to("/etc/passwd")
    before = digest(source)
    download = lms.read_download(source)
    assert download.layout == "moodle" and download.ignored == 1
    download.choose(STEMS, ["99_answer"])
    assert download.chosen["1234", "99_answer"].file == "99_answer (1).ipynb"  # the newer file
    assert download.chosen["1235", "99_answer"].file == "Copy of 99_answer.ipynb"
    rows = {r[0]: r for r in download.manifest()[1]}
    assert rows["Bob Smith_1234_assignsubmission_file_/link.ipynb"][5] == "a link, not followed"
    folder = download.lay_out(tmp_path / "laid")
    assert (folder / "1234" / "99_answer.ipynb").read_text(encoding="utf-8") == submission(42)
    assert sorted(p.name for p in folder.iterdir()) == ["1234", "1235", "1236"]
    assert digest(source) == before


def test_a_zip_of_the_unpacked_folder_and_a_plain_folder(tmp_path):
    wrapped = make_zip(tmp_path / "w.zip", {"Notebook 99/Bob Smith_1234_assignsubmission_file/99_answer.ipynb": "{}"})
    download = lms.read_download(wrapped)
    assert (download.layout, download.prefix, download.students) == ("moodle", "Notebook 99/", ["1234"])
    plain = tmp_path / "plain"
    (plain / "ada").mkdir(parents=True)
    (plain / "ada" / "99_answer.ipynb").write_text("{}")
    (plain / "Smith, Bob - 99_answer.ipynb").write_text("{}")
    (plain / "unnamed.ipynb").write_text("{}")
    (plain / "fay").mkdir()
    (plain / "fay" / ".keep").write_text("")  # handed in nothing: still a student, reported missing
    download = lms.read_download(plain)
    download.choose(STEMS, STEMS)
    assert download.layout == "folders" and download.students == ["Smith, Bob", "ada", "fay"]
    assert {r[0]: r[5] for r in download.manifest()[1]}["unnamed.ipynb"] == "fits no folders name pattern: whose is it?"
    assert lms.read_download(plain, "canvas").layout == "canvas"  # --lms decides
    drive = make_zip(tmp_path / "drive.zip", {"Notebook 99/Ada Lovelace - 99_answer.ipynb": "{}",
                                              "Notebook 99/Smith, Bob - Copy of 99_answer.ipynb": "{}"})
    download = lms.read_download(drive)
    assert (download.layout, download.prefix, download.students) == ("folders", "Notebook 99/",
                                                                     ["Ada Lovelace", "Smith, Bob"])
    with zipfile.ZipFile(drive) as archive:
        archive.extractall(tmp_path / "drive")
    assert lms.read_download(tmp_path / "drive").students == ["Ada Lovelace", "Smith, Bob"]


def test_a_canvas_name_that_reads_as_another_students_is_decided_by_the_roster_or_not_graded():
    """Canvas keeps a trailing `_999` in a name: `x_999` makes a file that also reads as student 999's. The fixed
    fields are read from the left; a later id counts only where the roster says the leftmost is no student's."""
    name = "x_999_123_456_99_answer.ipynb"
    up = lms.Upload(name)
    lms.parse_canvas(up)
    assert [(r["name"], r["id"]) for r in up.readings] == [("x", "999"), ("x_999", "123"), ("x_999_123", "456")]
    download = lms.Download(Path("."), "canvas", [up])
    download.choose(STEMS, STEMS)
    assert up.what.startswith("its name reads as more than one student's (999, 123, 456): not graded")
    up = lms.Upload(name)
    lms.parse_canvas(up)
    lms.Download(Path("."), "canvas", [up]).choose(STEMS, STEMS, roster={"123": "", "124": ""})
    assert (up.student, up.file, up.what) == ("123", "99_answer.ipynb", "graded")  # 999 is no student's
    crafted = lms.Upload("x_999_123_456_99_answer_999_7_99_answer.ipynb")  # the file's own name plays along
    lms.parse_canvas(crafted)
    download = lms.Download(Path("."), "canvas", [crafted])
    download.choose(STEMS, STEMS)
    assert crafted.what.startswith("its name reads as more than one student's (999, 123,")
    crafted = lms.Upload("x_999_123_456_99_answer_999_7_99_answer.ipynb")
    lms.parse_canvas(crafted)
    download = lms.Download(Path("."), "canvas", [crafted])
    download.choose(STEMS, STEMS, roster={"123": "", "124": ""})
    assert (crafted.student, crafted.what) == ("123", "graded")


def test_an_id_later_in_a_canvas_name_never_counts():
    """Mallory (id 2002) uploads `x_1001_1_03_recurrent_networks-99.ipynb`: it also reads as Ada's (id 1001) with a
    larger resubmission number than Ada's own upload. Without the roster, it is not Ada's; Ada's own is graded."""
    stems = ["03_recurrent_networks"]
    mallory = lms.Upload("mallory_2002_555_x_1001_1_03_recurrent_networks-99.ipynb")
    ada = lms.Upload("lovelaceada_1001_7_03_recurrent_networks.ipynb")
    for up in (mallory, ada):
        lms.parse_canvas(up)
    download = lms.Download(Path("."), "canvas", [mallory, ada])
    download.choose(stems, stems)
    assert download.chosen == {("1001", "03_recurrent_networks"): ada} and ada.what == "graded"
    assert mallory.what.startswith("its name reads as more than one student's (2002, 1001")
    results = [Result("1001", "03_recurrent_networks", points={"ex1": 4.0})]
    download.annotate(results)
    assert results[0].points == {"ex1": 4.0} and results[0].status == "graded"
    # Mallory's own name part holds a notebook's name: it is hers (the leftmost id), never Ada's
    sly = lms.Upload("mallory_2002_556_03_recurrent_networks_1001_1_03_recurrent_networks-99.ipynb")
    ada = lms.Upload("lovelaceada_1001_7_03_recurrent_networks.ipynb")
    for up in (sly, ada):
        lms.parse_canvas(up)
    download = lms.Download(Path("."), "canvas", [sly, ada])
    download.choose(stems, stems)
    assert (sly.student, ada.student, ada.what) == ("2002", "1001", "graded")


def test_two_canvas_files_claiming_one_student_by_an_unsure_name_are_both_held(tmp_path):
    """Without the roster, a file whose name reads two ways is taken by its leftmost reading; when another file
    claims the same student, neither is graded and the row's points are left empty for the teacher."""
    stems = ["99_answer"]
    own = lms.Upload("ada_999_7_99_answer.ipynb")
    odd = lms.Upload("ada_999_8_99_answer_5_6_99_answer.ipynb")  # (ada, 999, 8) or (ada_999_8_99_answer, 5, 6)
    for up in (own, odd):
        lms.parse_canvas(up)
    download = lms.Download(Path("."), "canvas", [own, odd])
    download.choose(stems, stems)
    assert download.chosen == {} and set(download.held) == {("999", "99_answer")}
    assert all(u.what.startswith("one of 2 files that claim to be this student's 99_answer: none graded")
               for u in (own, odd))
    results = [Result("999", "99_answer", status="missing")]
    download.annotate(results)
    assert results[0].points == {} and results[0].status.startswith("held for review: 2 files claim")


def test_with_the_roster_a_canvas_name_is_read_by_the_students_own_name():
    """Mallory, named x_999 in Canvas (id 1), uploads a file whose zip name also reads as Ada's (id 999), with a
    larger resubmission number than Ada's own upload: the roster's names keep each file with its owner."""
    stems = ["98_answer"]
    mallory = lms.Upload("x_999_1_98_answer-99.ipynb")  # reads as (x, 999, 1, answer-99) and (x_999, 1, 98, ...)
    ada = lms.Upload("lovelaceada_999_7_98_answer.ipynb")
    for up in (mallory, ada):
        lms.parse_canvas(up)
    download = lms.Download(Path("."), "canvas", [mallory, ada])
    download.choose(stems, stems, roster={"999": "Lovelace, Ada", "1": "x_999"})
    assert (ada.student, ada.what) == ("999", "graded")
    assert mallory.student == "1" and mallory.what != "graded"  # hers, and no notebook of the course
    assert lms.canvas_zip_name("O'Brien_12_, Tess") == "obrien12tess"


def test_a_file_name_too_long_for_a_folder_is_shortened_not_fatal(tmp_path):
    drive = tmp_path / "drive"
    drive.mkdir()
    long = "A" * 230
    (drive / f"{long} - 99_answer.ipynb").write_text(submission(42))
    (drive / "Ada - 99_answer.ipynb").write_text(submission(42))
    download = lms.read_download(drive)
    download.choose(STEMS, STEMS)
    folder = download.lay_out(tmp_path / "laid")
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 2 and all(len(n.encode()) <= lms.MAX_NAME_BYTES for n in names)
    assert lms.safe_name(long) != lms.safe_name(long + "B")  # cut names stay apart


def test_in_a_plain_folder_two_files_claiming_one_student_are_held_for_review(tmp_path):
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "Ada Lovelace - 99_answer.ipynb").write_text(submission(42))
    (drive / "Ada Lovelace - 99_answer final.ipynb").write_text(submission(7))  # uploaded by someone else?
    os.utime(drive / "Ada Lovelace - 99_answer final.ipynb", (2e9, 2e9))
    download = lms.read_download(drive)
    download.choose(STEMS, STEMS)
    assert download.chosen == {}  # neither is graded: not the newest, not the first
    folder = download.lay_out(tmp_path / "laid")
    assert [p.name for p in (folder / "Ada Lovelace").iterdir()] == []
    results = [Result("Ada Lovelace", "99_answer", status="missing")]  # what grade() says of an empty folder
    download.annotate(results)
    assert results[0].points == {} and results[0].withheld == 0.0  # empty for the teacher, never 0 of 1
    assert results[0].status == ("held for review: 2 files claim to be this student's 99_answer (Ada Lovelace - "
                                 "99_answer.ipynb, Ada Lovelace - 99_answer final.ipynb); none graded, grade by hand")
    assert results[0].review == ["2 files claim to be this student's 99_answer: none graded"]


# ---------------------------------------------------------------- zips that are refused, whole


def evil_zip(tmp_path, name, **info):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("smithbob_123_900_99_answer.ipynb", submission(42))
        member = zipfile.ZipInfo(name)
        for key, value in info.items():
            setattr(member, key, value)
        archive.writestr(member, "/etc/passwd" if info else "{}")
    return path


@pytest.mark.parametrize("name, info, message", [
    ("../../home/teacher/.bashrc", {}, "climbs out of the folder it would be unpacked into (..)"),
    ("smithbob_123_901_..\\..\\x.ipynb", {}, "climbs out of the folder it would be unpacked into (..)"),
    ("/etc/cron.d/evil", {}, "is an absolute path"),
    ("C:\\Users\\teacher\\evil.ipynb", {}, "is an absolute path"),
    ("smithbob_123_902_99_answer.ipynb", {"external_attr": (stat.S_IFLNK | 0o777) << 16}, "is a symbolic link"),
])
def test_a_zip_with_a_member_that_must_not_be_extracted_is_refused(tmp_path, capsys, name, info, message):
    source = evil_zip(tmp_path, name, **info)
    notebooks = one_exercise_lesson(tmp_path / "notebooks" / "99_answer.ipynb").parent
    before = digest(tmp_path)
    status = cli.main(["--notebooks", str(notebooks), "grade", str(source), "--out", str(tmp_path / "grades")])
    error = capsys.readouterr().err
    assert status == 2 and message in error and "the zip is refused and nothing was extracted" in error, error
    assert repr(name) in error and "Traceback" not in error
    assert digest(tmp_path) == before, "nothing written, the zip unchanged"


def test_a_zip_bomb_is_refused(tmp_path, monkeypatch):
    source = make_zip(tmp_path / "bomb.zip", {"smithbob_123_900_99_answer.ipynb": b"\0" * 2_000_000})
    assert source.stat().st_size < 20_000
    monkeypatch.setattr(lms, "MAX_TOTAL_BYTES", 1_000_000)
    with pytest.raises(ClassroomError, match=r"would unpack to 2 MiB, more than the 1 MiB allowed \(a zip bomb\?\)"):
        lms.read_download(source)
    monkeypatch.setattr(lms, "MAX_MEMBERS", 3)
    many = make_zip(tmp_path / "many.zip", {f"s_{i}_{i}_99_answer.ipynb": "{}" for i in range(4)})
    with pytest.raises(ClassroomError, match="has 4 members, more than the 3"):
        lms.read_download(many)


def test_a_notebook_too_large_is_reported_not_graded(tmp_path, monkeypatch):
    monkeypatch.setattr(lms, "MAX_NOTEBOOK_BYTES", 1024 * 1024)
    source = make_zip(tmp_path / "c.zip", {"smithbob_123_900_99_answer.ipynb": b" " * 3 * 1024 * 1024})
    download = lms.read_download(source)
    download.choose(STEMS, STEMS)
    assert download.manifest()[1][0][5] == "not graded: 3 MiB, over the 1 MiB a notebook may have (clear its outputs)"
    assert not download.chosen


# ---------------------------------------------------------------- grades written back, read with the LMS's rules


def results_for(grades: dict, stem="99_answer") -> list:
    """Results as grade() returns them: {student: points, or a status}."""
    out = []
    for student, grade in grades.items():
        if isinstance(grade, str):
            out.append(Result(student, stem, status=grade))
        else:
            out.append(Result(student, stem, points={"ex1": grade}))
    return out


GRADEBOOK = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Notebook 98 (4241),Notebook 99 (4242),Current Score,"
    "Unposted Current Score,Final Score\n"
    "    Points Possible,,,,,10.00,4.00,(read only),(read only),(read only)\n"
    ",,,,,Manual Posting,,,,\n"
    '"Smith, Bob",123,s123,bob@uni.edu,"Section A, Mon",7.00,,70.00,70.00,70.00\n'
    '"Lee, Ann",124,s124,ann@uni.edu,"Section A, Mon",9.00,1.00,95.00,95.00,95.00\n'
    '"Müller, Jürgen",125,s125,jm@uni.edu,Section B,8.00,,80.00,80.00,80.00\n'
    '"Student, Test",999,,,Section B,,,,,\n'
)


def canvas_download(tmp_path, anonymous=False):
    if anonymous:
        members = {"anon_Xy3kq_900_99_answer.ipynb": "{}"}
    else:
        members = {"smithbob_123_900_99_answer.ipynb": "{}", "leeann_LATE_124_901_99_answer.ipynb": "{}",
                   "wu_126_902_99_answer.ipynb": "{}"}
    download = lms.read_download(make_zip(tmp_path / "c.zip", members))
    download.choose(STEMS, STEMS)
    return download


def test_canvas_gradebook_filled_and_read_back_by_canvas_rules(tmp_path):
    lesson = one_exercise_lesson(tmp_path / "nb" / "99_answer.ipynb")
    gradebook = tmp_path / "gradebook.csv"
    gradebook.write_bytes(b"\xef\xbb\xbf" + GRADEBOOK.encode())
    download = canvas_download(tmp_path)
    sheet = lms_import.read_sheet("canvas", gradebook, "Notebook 99 (4242)", None)
    assert lms_import.roster(sheet, download) == ["123", "124", "125", "999"]
    results = results_for({"123": 1.0, "124": 0.0, "125": "missing", "126": 1.0, "999": "missing"})
    lines = lms_import.write_back(sheet, results, [lesson], download, tmp_path)
    written = tmp_path / "canvas-import.csv"
    assert written.read_bytes().startswith(b"\xef\xbb\xbf")
    header, points, grades = canvas_reads(written)
    assert points == {"4241": "10.00", "4242": "4.00"}
    assert {student: g["4242"] for student, g in grades.items()} == {123: "4", 124: "0", 125: "0", 999: "0"}
    assert {student: g["4241"] for student, g in grades.items()} == {123: "7.00", 124: "9.00", 125: "8.00", 999: ""}
    original = list(csv.reader(io.StringIO(GRADEBOOK)))
    again = list(csv.reader(io.StringIO(written.read_bytes().decode("utf-8-sig"), newline="")))
    assert len(again) == len(original) and header == original[0]
    for old, new in zip(original, again, strict=True):
        assert [c for i, c in enumerate(old) if i != 6] == [c for i, c in enumerate(new) if i != 6]
    assert lines[0] == "canvas-import.csv: 2 students graded, 2 missing (0) in 'Notebook 99 (4242)'; scaled from 1 " \
                       "to 4 points, the assignment's maximum"
    assert "not in the Canvas file, so not in canvas-import.csv: 126" in lines[1]


def test_a_held_row_is_left_empty_in_the_lms_import(tmp_path):
    """Two files claiming one student: the import leaves that grade as it was (empty), never 0 or the newest's."""
    lesson = one_exercise_lesson(tmp_path / "nb" / "99_answer.ipynb")
    gradebook = tmp_path / "gradebook.csv"
    gradebook.write_text(GRADEBOOK, encoding="utf-8")
    download = canvas_download(tmp_path)
    sheet = lms_import.read_sheet("canvas", gradebook, "Notebook 99 (4242)", None)
    held = "held for review: 2 files claim to be this student's 99_answer (a, b); none graded, grade by hand"
    results = results_for({"123": held, "124": 1.0})
    lines = lms_import.write_back(sheet, results, [lesson], download, tmp_path)
    _, _, grades = canvas_reads(tmp_path / "canvas-import.csv")
    assert (grades[123]["4242"], grades[124]["4242"]) == ("", "4")
    assert "left empty in canvas-import.csv, for you to grade (more than one file claims each): 123" in lines
    assert lms_import.comment(results[:1], {"99_answer": 1.0}).startswith("99_answer: held for your teacher")


def test_canvas_gradebook_with_semicolons_and_one_assignment(tmp_path):
    lesson = one_exercise_lesson(tmp_path / "nb" / "99_answer.ipynb")
    gradebook = tmp_path / "gradebook.csv"
    gradebook.write_text("Student;ID;Section;Notebook 99 (4242);Current Score\n"
                         "Points Possible;;;1,00;(read only)\n\"Smith, Bob\";123;A;;0,00\n", encoding="utf-8")
    sheet = lms_import.read_sheet("canvas", gradebook, None, None)
    assert (sheet.title, sheet.maximum, sheet.delimiter) == ("Notebook 99 (4242)", 1.0, ";")
    lms_import.write_back(sheet, results_for({"123": 1.0}), [lesson], canvas_download(tmp_path), tmp_path)
    assert canvas_reads(tmp_path / "canvas-import.csv")[2] == {123: {"4242": "1"}}


def test_canvas_minimal_import(tmp_path):
    lesson = one_exercise_lesson(tmp_path / "nb" / "99_answer.ipynb")
    download = canvas_download(tmp_path)
    sheet = lms_import.read_sheet("canvas", None, "Notebook 99 (4242)", None)
    results = results_for({"123": 1.0, "124": "not a notebook (invalid JSON, line 3: x)", "126": 0.0})
    lms_import.write_back(sheet, results, [lesson], download, tmp_path)
    header, points, grades = canvas_reads(tmp_path / "canvas-import.csv")
    assert header == ["Student", "ID", "Section", "Notebook 99 (4242)"] and points == {"4242": "1"}
    assert grades == {123: {"4242": "1"}, 124: {"4242": "0"}, 126: {"4242": "0"}}


def test_canvas_anonymous_grades_are_not_guessed(tmp_path):
    lesson = one_exercise_lesson(tmp_path / "nb" / "99_answer.ipynb")
    gradebook = tmp_path / "gradebook.csv"
    gradebook.write_text(GRADEBOOK, encoding="utf-8")
    download = canvas_download(tmp_path, anonymous=True)
    sheet = lms_import.read_sheet("canvas", gradebook, "4242", None)
    assert lms_import.roster(sheet, download) == []
    lines = lms_import.write_back(sheet, results_for({"anon_Xy3kq": 1.0}), [lesson], download, tmp_path)
    assert {s: g["4242"] for s, g in canvas_reads(tmp_path / "canvas-import.csv")[2].items()} == {
        123: "", 124: "1.00", 125: "", 999: ""}, "no student is given 0 for a submission that cannot be matched"
    assert "anonymous ids cannot be imported" in lines[1]


WORKSHEET = (
    'Identifier,"Full name","Email address",Status,Grade,"Maximum Grade","Grade can be changed",'
    '"Last modified (submission)","Last modified (grade)","Feedback comments"\n'
    '"Participant 1234","Bob Smith",bob@uni.edu,"Submitted for grading",,100.00,Yes,'
    '"Monday, 3 March 2025, 10:00 AM",-,\n'
    '"Participant 1235","Smith, Ann",ann@uni.edu,"Submitted for grading",,100.00,Yes,'
    '"Monday, 3 March 2025, 11:00 AM","Tuesday, 4 March 2025, 9:00 AM","old comment"\n'
    '"Participant 1237","Zoë Ångström",zoe@uni.edu,"No submission",,100.00,Yes,-,-,\n'
)


def test_moodle_worksheet_filled_and_read_back_by_moodle_rules(tmp_path):
    lesson = one_exercise_lesson(tmp_path / "nb" / "99_answer.ipynb")
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text(WORKSHEET, encoding="utf-8")
    download = lms.read_download(make_zip(tmp_path / "m.zip", {
        "Bob Smith_1234_assignsubmission_file/99_answer.ipynb": "{}",
        "Smith, Ann_1235_assignsubmission_file/99_answer.ipynb": "{}"}))
    download.choose(STEMS, STEMS)
    sheet = lms_import.read_sheet("moodle", None, None, worksheet)
    assert lms_import.roster(sheet, download) == ["1234", "1235", "1237"]
    (tmp_path / "feedback" / "1234").mkdir(parents=True)
    (tmp_path / "feedback" / "1234" / "99_answer.html").write_text("<p>1 of 1</p>")
    results = results_for({"1234": 1.0, "1235": 0.0, "1237": "missing"})
    results[1].review = ["cell 3: assigns to checks.check_close"]
    lms_import.write_back(sheet, results, [lesson], download, tmp_path)
    taken = moodle_reads(tmp_path / "moodle-import.csv")
    assert taken == {
        "1234": ("100", "99_answer: 1 of 1. Details in the feedback file.", "-"),
        "1235": ("0", "99_answer: 0 of 1 (some points held until your teacher has read your code). Details in the "
                      "feedback file.", "Tuesday, 4 March 2025, 9:00 AM"),
        "1237": ("0", "missing: nothing was handed in.", "-"),
    }
    with zipfile.ZipFile(tmp_path / "moodle-feedback.zip") as archive:
        names = archive.namelist()
    assert names == ["Bob Smith_1234_assignsubmission_file/99_answer-feedback.html"]
    info = names[0].split("/")[0].split("_", 4)  # Moodle's importer: fullname_userid_plugintype_pluginname
    assert info[1] == "1234" and info[2:4] == ["assignsubmission", "file"]


def test_moodle_team_submissions_go_to_every_member(tmp_path):
    lesson = one_exercise_lesson(tmp_path / "nb" / "99_answer.ipynb")
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text(
        "Identifier,Full name,Status,Group,Grade,Maximum Grade,Last modified (grade),Feedback comments\n"
        "Participant 1234,Bob Smith,Submitted,Team_Rocket,,1.00,-,\n"
        "Participant 1235,Ann Lee,Submitted,Team_Rocket,,1.00,-,\n"
        "Participant 77,Cy Wu,No submission,Blue Team,,1.00,-,\n", encoding="utf-8")
    download = lms.read_download(make_zip(tmp_path / "m.zip", {
        "Team Rocket_77_assignsubmission_file/99_answer.ipynb": "{}"}))  # 77: the group's id, not Cy's
    download.choose(STEMS, STEMS)
    sheet = lms_import.read_sheet("moodle", None, None, worksheet)
    assert lms_import.roster(sheet, download) == []
    lms_import.write_back(sheet, results_for({"77": 1.0}), [lesson], download, tmp_path)
    taken = moodle_reads(tmp_path / "moodle-import.csv")
    assert {k: v[0] for k, v in taken.items()} == {"1234": "1", "1235": "1", "77": "0"}
    assert taken["1234"][1].startswith("Group Team_Rocket: 99_answer: 1 of 1.")
    assert taken["77"][1] == "Group Blue Team: missing: nothing was handed in."


@pytest.mark.parametrize("layout, gradebook, assignment, worksheet, message", [
    ("moodle", None, "A (1)", None, "SUBMISSIONS is a moodle download, not Canvas's"),
    ("canvas", None, None, "w.csv", "SUBMISSIONS is a canvas download, not Moodle's"),
    ("canvas", None, "Notebook 99", None, 'need "Title (id)"'),
    ("canvas", "bad.csv", None, None, "is not a Canvas gradebook export"),
    ("canvas", "gradebook.csv", None, None, "name one with --canvas-assignment"),
    ("canvas", "gradebook.csv", "Notebook 7 (1)", None, "'Notebook 7 (1)' is not one of them"),
    ("moodle", None, None, "bad.csv", "no column Identifier, Grade, Last modified (grade)"),
])
def test_lms_files_that_do_not_fit(tmp_path, layout, gradebook, assignment, worksheet, message):
    (tmp_path / "bad.csv").write_text("Name,Score\nBob,1\n", encoding="utf-8")
    (tmp_path / "gradebook.csv").write_text(GRADEBOOK, encoding="utf-8")
    (tmp_path / "w.csv").write_text(WORKSHEET, encoding="utf-8")
    paths = [tmp_path / p if p else None for p in (gradebook, worksheet)]
    with pytest.raises(ClassroomError) as error:
        lms_import.read_sheet(layout, paths[0], assignment, paths[1])
    assert message in str(error.value)


# ---------------------------------------------------------------- end to end: the command line, real grading


@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                    reason="bwrap is not installed: `make sandbox-setup`")
def test_canvas_and_moodle_zips_graded_through_the_command_line(tmp_path):
    notebooks = tmp_path / "notebooks"
    one_exercise_lesson(notebooks / "99_answer.ipynb")
    canvas = canvas_class(tmp_path)
    gradebook = tmp_path / "gradebook.csv"
    gradebook.write_text(GRADEBOOK, encoding="utf-8")
    moodle = make_zip(tmp_path / "moodle.zip", {
        "Bob Smith_1234_assignsubmission_file_/99_answer.ipynb": submission(42),
        "Smith, Ann_1235_assignsubmission_file_/99_answer.ipynb": submission(7),
        "Jürgen Müller_1236_assignsubmission_onlinetext_/onlinetext.html": "42",
    })
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text(WORKSHEET, encoding="utf-8")
    before = digest(canvas) | digest(moodle)
    runs = {
        "canvas": [str(canvas), "--canvas-gradebook", str(gradebook), "--canvas-assignment", "Notebook 99 (4242)"],
        "moodle": [str(moodle), "--moodle-worksheet", str(worksheet), "--lms", "moodle"],
    }
    out = {}
    for lms_name, args in runs.items():
        out[lms_name] = tmp_path / f"grades-{lms_name}"
        command = [sys.executable, "-m", "mllm_classroom", "--notebooks", str(notebooks), "grade", *args,
                   "--out", str(out[lms_name]), "--timeout", "30"]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stdout + done.stderr
        out[lms_name, "stdout"] = done.stdout
    assert digest(canvas) | digest(moodle) == before, "the teacher's zips are never changed"
    assert out["canvas", "stdout"].splitlines()[:3] == [
        f"canvas download: 4 students, 6 files (2 graded; 1 an older upload; 1 matches no notebook; 1 a text entry "
        f"or a link; 1 fits no canvas name pattern), each in {out['canvas'] / 'files.csv'}",
        "canvas-import.csv: 2 students graded, 2 missing (0) in 'Notebook 99 (4242)'; scaled from 1 to 4 points, "
        "the assignment's maximum",
        "not in the Canvas file, so not in canvas-import.csv: 126 (see grades.csv; enter them by hand)"]

    rows = {r["student"]: r for r in csv.DictReader(open(out["canvas"] / "grades.csv", encoding="utf-8"))}
    assert {s: (r["score"], r["status"]) for s, r in rows.items()} == {
        "123": ("1", "graded"), "124": ("1", "graded"), "125": ("0", "missing"), "126": ("0", "missing"),
        "999": ("0", "missing")}
    assert rows["123"]["notes"].startswith("2 files for 99_answer; graded the newest upload (Canvas's resubmission")
    assert (rows["124"]["late"], rows["124"]["display_name"]) == ("late", "Lee, Ann")
    assert rows["125"]["notes"] == "also handed in: report.pdf (matches no notebook)"
    assert list(rows["123"])[-4:] == ["display_name", "late", "file", "seconds"]
    files = {r["file"]: r["what"] for r in csv.DictReader(open(out["canvas"] / "files.csv", encoding="utf-8"))}
    assert files["README.txt"] == "fits no canvas name pattern: whose is it?" and len(files) == 6
    _, points, grades = canvas_reads(out["canvas"] / "canvas-import.csv")
    assert {s: g["4242"] for s, g in grades.items()} == {123: "4", 124: "4", 125: "0", 999: "0"}
    assert "Lee, Ann (124)" in (out["canvas"] / "feedback" / "124" / "99_answer.html").read_text(encoding="utf-8")

    rows = {r["student"]: r for r in csv.DictReader(open(out["moodle"] / "grades.csv", encoding="utf-8"))}
    assert {s: (r["score"], r["status"], r["display_name"]) for s, r in rows.items()} == {
        "1234": ("1", "graded", "Bob Smith"), "1235": ("0", "graded", "Smith, Ann"),
        "1236": ("0", "missing", "Jürgen Müller"), "1237": ("0", "missing", "Zoë Ångström")}
    taken = moodle_reads(out["moodle"] / "moodle-import.csv")
    assert {k: v[0] for k, v in taken.items()} == {"1234": "100", "1235": "0", "1237": "0"}
    assert taken["1235"][1] == "99_answer: 0 of 1. Details in the feedback file."
    with zipfile.ZipFile(out["moodle"] / "moodle-feedback.zip") as archive:
        assert sorted(archive.namelist()) == ["Bob Smith_1234_assignsubmission_file/99_answer-feedback.html",
                                              "Smith, Ann_1235_assignsubmission_file/99_answer-feedback.html"]
