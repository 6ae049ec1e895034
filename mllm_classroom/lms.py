"""Submissions as an LMS gives them, laid out one folder per student for :func:`mllm_classroom.grade.grade`.

    mllm-classroom grade SUBMISSIONS [--lms canvas|moodle|folders] ...

SUBMISSIONS is the zip a teacher downloaded, or its unpacked folder, in one of three layouts (recognised from
the names, or named with ``--lms``):

- ``canvas`` ("Download Submissions", canvas-lms ``lib/content_zipper.rb``): one flat zip, each file
  ``{name}[_LATE]_{user id}_{attachment id}_{the student's file name}``, the name being the sortable name
  lowercased with every non-word character removed; with anonymous grading there is no name and the id
  is ``anon_{id}``. A file uploaded again under the same name is renamed ``-1``, ``-2`` ... by Canvas.
- ``moodle`` ("Download all submissions", moodle ``mod/assign/classes/downloader.php``): a folder per
  participant, ``{full name}_{participant id}_assignsubmission_file/`` (older Moodle: a trailing ``_``;
  team submissions: ``{group}_{group id}_...``; blind marking: ``Participant_{id}_...``), or, without
  folders, files ``{full name}_{id}_assignsubmission_file_{file}``. Moodle writes every ``_`` of a
  name as a space, so the first ``_`` ends the name.
- ``folders``: one folder per student, or flat files ``{student} - {file}`` (Google Classroom's copies).

Students are keyed by the LMS's own id; the name is kept for display. A file counts for a notebook when
its name starts with the notebook's (``05_lstm-1.ipynb``, ``Copy of 05_lstm.ipynb``). Of several files
for one notebook the newest upload is graded: Canvas's ``-N`` decides there, Moodle's file time; in a plain
folder, where only a file's name says whose it is, none is graded and the row's points are left empty for
the teacher (anyone could have named a file after a classmate). A Canvas name is read by its fixed fields
from the left (name, user id, attachment id): an id later in the name never counts; a name that reads as
two students' (a name ending in ``_123``) is decided by the gradebook's roster, and without one its
leftmost reading is taken only when that is a notebook, and held for the teacher when another file claims
the same student.
Every file of the download gets a row in ``files.csv`` saying what became of it; none is dropped.

A zip is checked whole before anything is read out of it: a member that climbs out (``..``), is absolute,
or is a link, more than ``MAX_MEMBERS`` members or more than ``MAX_TOTAL_BYTES`` in all refuse the zip.
Only the notebooks to grade are copied out, under names of our own, into the caller's temporary folder.
The teacher's zip or folder is only read.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from mllm_classroom.lessons import ClassroomError

LAYOUTS = ("canvas", "moodle", "folders")
MAX_MEMBERS = 20_000
MAX_TOTAL_BYTES = 4 * 1024**3  # all members together, as the zip declares them
MAX_NOTEBOOK_BYTES = 100 * 1024**2  # one notebook; larger ones are reported, not graded
SYSTEM_FILES = {".ds_store", "thumbs.db", "desktop.ini"}

CANVAS_ANONYMOUS = re.compile(r"^(?:(?P<late>LATE)_)?(?P<id>anon_[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<file>.+)$", re.S)
CANVAS_NAMED = re.compile(r"^(?P<name>\w*?)_(?:(?P<late>LATE)_)?(?P<id>\d+)_(?P<attachment>\d+)_(?P<file>.+)$", re.S)
CANVAS_TEXT = re.compile(r"^(?:(?P<name>\w*?)_)?(?:(?P<late>LATE)_)?(?P<id>anon_[A-Za-z0-9]+|\d+)_(?:text|link)\.html$")
CANVAS_AGAIN = re.compile(r"-(?P<n>\d+)(?=\.[^.]*$|$)")  # 05_lstm-2.ipynb: the third upload of 05_lstm.ipynb
MOODLE_FOLDER = re.compile(r"^(?P<name>[^_/]*?)(?:_(?P<id>\d+))?_assignsubmission_(?P<plugin>[a-z]+)_?$")
MOODLE_FILE = re.compile(r"^(?P<name>[^_/]*?)(?:_(?P<id>\d+))?_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.+)$")
PLAIN_FILE = re.compile(r"^(?P<name>.+?) - (?P<file>.+)$")


@dataclass
class Upload:
    """One file of a download, and what the LMS's name for it says."""

    path: str  # where it is in the download, "/"-separated
    size: int = 0
    mtime: float = 0.0
    link: bool = False
    student: str | None = None  # the LMS id ("123456", "anon_Xy3kq", "5012", "ada"); None: fits no pattern
    display: str = ""
    file: str = ""  # the student's own file name
    late: bool = False
    order: tuple = ()  # a larger one is a newer upload
    notebook: str | None = None
    what: str = ""  # what became of it (files.csv)
    readings: list = field(default_factory=list)  # Canvas: every way its name can be read (see parse_canvas)
    unsure: bool = False  # whose it is rests on its name alone (a Canvas name with several readings, no roster)


CANVAS_SPLIT = re.compile(r"_(?:(?P<late>LATE)_)?(?P<id>[1-9]\d*)_(?P<attachment>[1-9]\d*)_")


def canvas_readings(name: str) -> list[dict]:
    """Every way to read a Canvas file name as ``{name}[_LATE]_{user id}_{attachment id}_{file}``, one per
    student id and file.

    Canvas keeps a name's trailing ``_123`` (``sanitize_user_name`` only removes ``_123_``), so a student who
    calls themselves ``x_999`` makes a name that also reads as student 999's; ids never start with 0.
    """
    readings, start = [], 0
    while match := CANVAS_SPLIT.search(name, start):
        first = name[: match.start()]
        reading = {"name": first, "late": bool(match["late"]), "id": match["id"], "attachment": match["attachment"],
                   "file": name[match.end():]}
        if re.fullmatch(r"\w*", first) and reading["file"] and not any(
                (r["id"], r["file"]) == (reading["id"], reading["file"]) for r in readings):
            readings.append(reading)
        start = match.start() + 1
    return readings


def parse_canvas(up: Upload) -> None:
    """``{name}[_LATE]_{user id}_{attachment id}_{file}`` (anonymous: ``[LATE_]anon_{id}_...``), flat.

    Where a name can be read in more than one way, every reading is kept (``up.readings``) and
    :meth:`Download.choose` decides with what it knows (the notebooks' names, the gradebook's roster).
    """
    name = up.path
    if "/" in name:
        return
    text = CANVAS_TEXT.match(name)
    if text and not (CANVAS_ANONYMOUS.match(name) or CANVAS_NAMED.match(name)):
        up.student, up.display, up.late = text["id"], text["name"] or text["id"], bool(text["late"])
        up.what = "a text entry or a link, not a file"
        return
    match = CANVAS_ANONYMOUS.match(name)
    readings = [{"name": "", "late": bool(match["late"]), "id": match["id"], "attachment": match["attachment"],
                 "file": match["file"]}] if match else canvas_readings(name)
    up.readings = readings
    if readings:
        take_reading(up, readings[0])


def canvas_zip_name(sortable_name: str) -> str:
    """A student's name as Canvas writes it into a submissions zip (``content_zipper.rb``: ``_123_`` becomes
    ``123``, lowercased, every non-word character removed)."""
    return re.sub(r"[^\w]", "", re.sub(r"_(\d+)_", r"\1", sortable_name).lower())


def take_reading(up: Upload, reading: dict) -> None:
    again = CANVAS_AGAIN.search(reading["file"])
    up.student, up.display, up.file, up.late = (reading["id"], reading["name"] or reading["id"], reading["file"],
                                                reading["late"])
    up.order = (int(again["n"]) if again else 0, int(reading["attachment"]))


def parse_moodle(up: Upload) -> None:
    """``{full name}_{id}_assignsubmission_{plugin}[_]/{file}``, or ``..._{plugin}_{file}`` without folders."""
    top, _, rest = up.path.partition("/")
    match = MOODLE_FOLDER.match(top) if rest else MOODLE_FILE.match(top)
    if not match:
        return
    name = match["name"].strip()
    up.student = match["id"] or name.lower().replace(" ", "-")  # Moodle's "Default group" has no id
    up.display = f"Participant {match['id']}" if name == "Participant" and match["id"] else name
    up.file = rest if rest else match["file"]
    up.order = (up.mtime, up.path)
    if match["plugin"] != "file":
        up.what = f"Moodle's {match['plugin']} submission, not a file"


def parse_folders(up: Upload) -> None:
    """``{student}/{file}`` (any depth), or ``{student} - {file}``."""
    top, _, rest = up.path.partition("/")
    match = None if rest else PLAIN_FILE.match(top)
    if rest or match:
        name = (top if rest else match["name"]).strip()
        up.student, up.display = (safe_name(name), name) if name else (None, "")
        up.file = rest if rest else match["file"]
        up.order = (up.mtime, up.path)


PARSERS = {"canvas": parse_canvas, "moodle": parse_moodle, "folders": parse_folders}


def notebook_of(file: str, stems: list[str]) -> str | None:
    """The notebook a student's file is for: its name starts with the notebook's (Drive's "Copy of " aside)."""
    name = PurePosixPath(file).name.lower()
    if not name.endswith(".ipynb"):
        return None
    name = name.removeprefix("copy of ")
    found = [stem for stem in stems if name.startswith(stem.lower())]
    return max(found, key=len) if found else None


def is_system_file(path: str) -> bool:
    parts = path.split("/")
    return parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts) or parts[-1].lower() in SYSTEM_FILES


def member_name(info: zipfile.ZipInfo) -> str:
    """A member's name as its maker meant it: UTF-8 when the zip did not flag it (Python reads cp437 then)."""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            name = name.encode("cp437").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    return name


def refuse(source: Path, member: str, why: str) -> ClassroomError:
    return ClassroomError(f"SUBMISSIONS: {source}: member {member!r} {why}; the zip is refused and nothing was "
                          "extracted (download it again from the LMS, or unpack it yourself and check it)")


def zip_uploads(source: Path) -> tuple[list[Upload], dict[str, zipfile.ZipInfo], list[str]]:
    """Every file member of a zip, and its folders, each checked; raise for a member that must not be extracted."""
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as error:
        raise ClassroomError(f"SUBMISSIONS: {source} is not a zip that can be read ({error})") from None
    with archive:
        infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ClassroomError(f"SUBMISSIONS: {source} has {len(infos)} members, more than the {MAX_MEMBERS} a class's "
                             "download has; the zip is refused and nothing was extracted")
    total = sum(info.file_size for info in infos)
    if total > MAX_TOTAL_BYTES:
        raise ClassroomError(f"SUBMISSIONS: {source} would unpack to {total / 1024**2:,.0f} MiB, more than the "
                             f"{MAX_TOTAL_BYTES / 1024**2:,.0f} MiB allowed (a zip bomb?); the zip is refused and "
                             "nothing was extracted")
    uploads, members, folders = [], {}, []
    for info in infos:
        name = member_name(info)
        path = name.replace("\\", "/")
        if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
            raise refuse(source, name, "is an absolute path")
        if ".." in path.split("/"):
            raise refuse(source, name, "climbs out of the folder it would be unpacked into (..)")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise refuse(source, name, "is a symbolic link")
        if info.is_dir():
            folders.append(path.strip("/"))
            continue
        path = path.strip("/")
        uploads.append(Upload(path, info.file_size, time.mktime((*info.date_time, 0, 0, -1))))
        members[path] = info
    return uploads, members, folders


def folder_uploads(source: Path) -> list[Upload]:
    """Every file under a folder (links are listed, never followed)."""
    uploads = []
    for root, dirs, files in os.walk(source):
        here = Path(root)
        for name in sorted(files) + [d for d in sorted(dirs) if (here / d).is_symlink()]:
            path = here / name
            rel = path.relative_to(source).as_posix()
            if path.is_symlink():
                uploads.append(Upload(rel, link=True))
            else:
                info = path.stat()
                uploads.append(Upload(rel, info.st_size, info.st_mtime))
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink())
    return uploads


def recognise(uploads: list[Upload]) -> str:
    """The layout whose names most files fit: Moodle's and Canvas's are unmistakable, folders otherwise."""
    scores = {}
    for layout in ("moodle", "canvas"):
        trial = [Upload(u.path) for u in uploads]
        for up in trial:
            PARSERS[layout](up)
        scores[layout] = sum(up.student is not None for up in trial)
    best = max(scores, key=scores.get)
    return best if scores[best] and 2 * scores[best] >= len(uploads) else "folders"


@dataclass
class Download:
    """A class's submissions as the LMS gave them, every file accounted for."""

    source: Path
    layout: str
    uploads: list[Upload]
    members: dict = field(default_factory=dict)  # path -> ZipInfo, for a zip
    prefix: str = ""  # a folder every file was inside (a zip of the unpacked folder)
    ignored: int = 0  # system files: __MACOSX/, .DS_Store, hidden files
    folders: list = field(default_factory=list)  # one folder per student: every student's folder, empty ones too
    chosen: dict = field(default_factory=dict)  # (student, notebook) -> the Upload graded
    held: dict = field(default_factory=dict)  # (student, notebook) -> the files that claim it: none graded
    display: dict = field(default_factory=dict)  # student -> name to show

    @property
    def students(self) -> list[str]:
        return sorted({u.student for u in self.uploads if u.student is not None} | set(self.folders))

    def notebooks(self) -> set[str]:
        """The notebooks a file will be graded for (after :meth:`choose`)."""
        return {u.notebook for u in self.uploads if u.what == "graded"}

    def choose(self, all_stems: list[str], graded_stems: list[str], roster: dict | None = None) -> None:
        """Match each file to a notebook; of several for one notebook, the newest is graded (in a plain folder,
        where nothing but a file's name says whose it is, none is graded: they are held for the teacher).

        A Canvas name that reads in more than one way is decided by the gradebook's ``roster`` (id -> the name
        Canvas shows): the reading whose name part is that student's name as Canvas writes it in the zip, else
        whose id is a student's; without a roster, the readings whose file is a notebook of the course. If more
        than one is left, the file is not graded and files.csv says why."""
        groups: dict = {}
        for up in self.uploads:
            if len(up.readings) > 1:
                # Fixed fields, read from the left: an id later in the name (the student's own file name) never
                # counts. The roster may say that the leftmost id is no student's (a name ending in _123).
                fits = up.readings
                if roster:
                    named = [r for r in fits if r["id"] in roster and roster[r["id"]]
                             and canvas_zip_name(roster[r["id"]]) == r["name"]]
                    known = [r for r in fits if r["id"] in roster]
                    choice = named[0] if len(named) == 1 else known[0] if known else None
                elif notebook_of(fits[0]["file"], all_stems):
                    choice = fits[0]  # unsure when a later reading is a notebook too (whose is it, then?)
                    up.unsure = any(notebook_of(r["file"], all_stems) for r in fits[1:])
                else:
                    choice = None
                if choice is not None:
                    take_reading(up, choice)
                else:
                    ids = ", ".join(r["id"] for r in fits)
                    up.what = (f"its name reads as more than one student's ({ids}): not graded; pass the "
                               "gradebook (--canvas-gradebook) so that the roster decides")
        for up in self.uploads:
            up.notebook = notebook_of(up.file or up.path, all_stems) if not up.link else None
            if up.what:
                continue
            if up.link:
                up.what = "a link, not followed"
            elif up.student is None:
                up.what = f"fits no {self.layout} name pattern: whose is it?"
            elif up.notebook is None:
                up.what = "matches no notebook" + (" (a zip: not opened)" if up.path.lower().endswith(".zip") else "")
            elif up.notebook not in graded_stems:
                up.what = f"not graded in this run ({up.notebook} was not asked for)"
            elif up.size > MAX_NOTEBOOK_BYTES:
                up.what = f"not graded: {up.size / 1024**2:.0f} MiB, over the {MAX_NOTEBOOK_BYTES // 1024**2} MiB " \
                          "a notebook may have (clear its outputs)"
            else:
                groups.setdefault((up.student, up.notebook), []).append(up)
        for key, ups in groups.items():
            ups.sort(key=lambda u: u.order)
            if len(ups) > 1 and (self.layout == "folders" or any(u.unsure for u in ups)):
                # Only a name says whose each is (anyone can name a file after a classmate): none is graded,
                # the row's points are left for the teacher, and every file is named.
                self.held[key] = ups
                for up in ups:
                    up.what = (f"one of {len(ups)} files that claim to be this student's {key[1]}: none graded, "
                               "held for the teacher")
                continue
            self.chosen[key] = newest = ups[-1]
            newest.what = "graded"
            for up in ups[:-1]:
                up.what = f"an older upload, not graded (graded: {newest.file})"
        for up in self.uploads:
            if up.student is not None:
                self.display.setdefault(up.student, up.display)
        for student in self.folders:
            self.display.setdefault(student, student)

    def lay_out(self, folder: Path, also: list[str] = ()) -> Path:
        """``folder/{id}/{notebook}.ipynb`` for every file to grade; an empty folder for every other student
        of the download, and for each of ``also`` (students the LMS lists): they are reported missing."""
        folder.mkdir(parents=True, exist_ok=True)
        for student in sorted({*self.students, *also}):
            (folder / safe_name(student)).mkdir(exist_ok=True)
        archive = zipfile.ZipFile(self.source) if self.members else None
        try:
            for (student, stem), up in sorted(self.chosen.items()):
                target = folder / safe_name(student) / f"{stem}.ipynb"
                try:
                    with (archive.open(self.members[up.path]) if archive is not None else
                          open(self.source / self.prefix / up.path, "rb")) as src, open(target, "wb") as dst:
                        copy_capped(src, dst, up, self.source)
                except (OSError, RuntimeError, zipfile.BadZipFile, zlib.error) as error:  # encrypted, damaged
                    raise ClassroomError(f"SUBMISSIONS: {self.source}: {up.path!r} cannot be read ({error})") from None
        finally:
            if archive is not None:
                archive.close()
        return folder

    def annotate(self, results: list) -> None:
        """What the LMS said, onto each result: the name, the late mark, the file graded, and notes."""
        strays: dict = {}
        for up in self.uploads:
            if up.student is not None and up.what and not up.what.startswith(("graded", "an older", "not graded in")):
                strays.setdefault(up.student, []).append(f"{up.file or up.path} ({up.what})")
        counts: dict = {}
        for up in self.uploads:
            if up.student is not None and (up.what == "graded" or up.what.startswith("an older")):
                counts[up.student, up.notebook] = counts.get((up.student, up.notebook), 0) + 1
        for r in results:
            r.display = self.display.get(r.student, "")
            held = self.held.get((r.student, r.notebook))
            if held:  # none graded: the points are left empty for the teacher
                names = ", ".join(self.prefix + u.path for u in held)
                r.status = (f"held for review: {len(held)} files claim to be this student's {r.notebook} "
                            f"({names}); none graded, grade by hand")
                r.points = {}
                r.review.append(f"{len(held)} files claim to be this student's {r.notebook}: none graded")
                r.file = names
            up = self.chosen.get((r.student, r.notebook))
            if up is not None:
                r.late, r.file = ("late" if up.late else ""), self.prefix + up.path
                many = counts.get((r.student, r.notebook), 1)
                if many > 1:
                    how = "Canvas's resubmission number" if self.layout == "canvas" else "the file's time"
                    r.notes.insert(0, f"{many} files for {r.notebook}; graded the newest upload ({how}), {up.file}")
            if strays.get(r.student):
                r.notes.append("also handed in: " + ", ".join(strays[r.student]))

    def manifest(self) -> tuple[list[str], list[list[str]]]:
        header = ["file", "student", "display_name", "notebook", "late", "what"]
        rows = [[self.prefix + u.path, u.student or "", self.display.get(u.student, u.display) if u.student else "",
                 u.notebook or "", "late" if u.late else "", u.what] for u in self.uploads]
        return header, rows


MAX_NAME_BYTES = 120  # a folder name, in UTF-8 bytes (file systems allow 255)


def safe_name(student: str) -> str:
    """A student's folder name: the id, with nothing a file system or grade() would read otherwise, and short
    enough for any file system (a long one is cut and given a hash of the whole, so that two stay apart)."""
    name = re.sub(r'[\x00-\x1f/\\:*?"<>|]', "_", student).lstrip(".") or "_"
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256(student.encode()).hexdigest()[:10]
    cut = name.encode()[: MAX_NAME_BYTES - 11].decode("utf-8", errors="ignore")
    return f"{cut}-{digest}"


def copy_capped(src, dst, up: Upload, source: Path) -> None:
    left = min(up.size, MAX_NOTEBOOK_BYTES) if up.size else MAX_NOTEBOOK_BYTES
    while chunk := src.read(1024 * 1024):
        left -= len(chunk)
        if left < 0:
            raise refuse(source, up.path, "holds more than it declares (a zip bomb?)")
        dst.write(chunk)


def read_download(source: Path, layout: str | None = None) -> Download:
    """The files of a download (a zip or a folder), recognised or read as ``layout``."""
    if layout is not None and layout not in LAYOUTS:
        raise ClassroomError(f"--lms: got {layout!r}, need one of {', '.join(LAYOUTS)}")
    if source.is_file():
        uploads, members, folders = zip_uploads(source)
    elif source.is_dir():
        uploads, members = folder_uploads(source), {}
        folders = [p.name for p in source.iterdir() if p.is_dir() and not p.is_symlink()]
    else:
        raise ClassroomError(f"SUBMISSIONS: {source} is not a folder or a zip (the download from your LMS, "
                             "or a folder with one folder per student)")
    kept = [u for u in uploads if not is_system_file(u.path)]
    ignored = len(uploads) - len(kept)
    prefix = ""
    tops = {u.path.split("/")[0] for u in kept}
    if len(tops) == 1 and all("/" in u.path for u in kept):  # one folder around it all: look inside
        inner = [Upload(u.path.split("/", 1)[1]) for u in kept]
        plain = all("/" not in u.path for u in inner) and 2 * sum(bool(PLAIN_FILE.match(u.path)) for u in inner) \
            >= len(inner)  # a Drive folder of "{student} - {file}", zipped
        if (layout or recognise(inner)) in ("canvas", "moodle") or plain and layout in (None, "folders"):
            prefix = tops.pop() + "/"
            members = {path[len(prefix):]: info for path, info in members.items()}
            for up in kept:
                up.path = up.path[len(prefix):]
    layout = layout or recognise(kept)
    for up in kept:
        PARSERS[layout](up)
    # One folder per student: a student's folder counts even when it holds nothing (reported missing).
    tops = {path.split("/")[0] for path in folders + [u.path for u in uploads if "/" in u.path]}
    named = sorted(safe_name(t) for t in tops if not is_system_file(t)) if layout == "folders" and not prefix else []
    if not kept and not named:
        raise ClassroomError(f"SUBMISSIONS: {source} holds no files to grade")
    return Download(source, layout, kept, members, prefix, ignored, folders=named)


def out_is_inside(out: Path, source: Path) -> bool:
    return source.is_dir() and any(p == source.resolve() for p in (out.resolve(), *out.resolve().parents))

