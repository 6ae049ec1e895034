"""The ``mllm-classroom`` command: ``release`` (student versions) and ``grade`` (a class's submissions)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mllm_classroom.lessons import MIN_CELL_TIMEOUT, TIMEOUT_FACTOR, ClassroomError, lesson_paths
from mllm_classroom.lms import LAYOUTS


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, need a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {value}, need at least 1")
    return value


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="mllm-classroom", allow_abbrev=False,
        description="Make the student versions of the course's notebooks, and grade a class's submissions.",
    )
    main.add_argument("--notebooks", type=Path, default=Path("notebooks"),
                      help="folder of the lesson notebooks (default: notebooks)")
    sub = main.add_subparsers(dest="command", required=True)
    rel = sub.add_parser("release", help="make the learner's versions (and their solutions pages)",
                         allow_abbrev=False)
    rel.add_argument("names", nargs="*", metavar="NOTEBOOK", help="05 or 05_lstm (default: all)")
    rel.add_argument("--out", type=Path, default=Path("student"), help="folder to write (default: student)")
    rel.add_argument("--solutions", type=Path, default=None,
                     help="folder for the solutions pages (default: solutions, beside --out)")
    rel.add_argument("--no-solution-links", action="store_true",
                     help="for a graded class: no link to the solutions after each exercise, no solutions pages")
    gra = sub.add_parser("grade", help="grade a class's submissions", allow_abbrev=False)
    gra.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                     help="the zip your LMS gave (Canvas, Moodle) or its folder, or one folder per student")
    gra.add_argument("names", nargs="*", metavar="NOTEBOOK", help="05 or 05_lstm (default: every one handed in)")
    gra.add_argument("--out", type=Path, default=Path("grades"), help="folder for the CSVs and feedback")
    gra.add_argument("--jobs", type=positive_int, default=2, help="students graded at once (default: 2)")
    gra.add_argument("--timeout", type=positive_int, default=None,
                     help=f"seconds a cell may run (default: {TIMEOUT_FACTOR}x the notebook's measured run time, "
                          f"at least {MIN_CELL_TIMEOUT})")
    gra.add_argument("--budget", type=positive_int, default=None, metavar="SECONDS",
                     help="seconds one submission's own process may use in all, its cells and the calls of its "
                          "functions (default: 4x the notebook's measured run time, at least 120)")
    gra.add_argument("--no-sandbox", action="store_true",
                     help="run submissions with your own rights, outside the sandbox (unsafe; every row says so)")
    gra.add_argument("--lms", choices=LAYOUTS, default=None,
                     help="the layout of SUBMISSIONS (default: recognised from the file names)")
    gra.add_argument("--canvas-gradebook", type=Path, metavar="FILE",
                     help="the gradebook CSV exported from Canvas: written back with the assignment's grades")
    gra.add_argument("--canvas-assignment", metavar='"TITLE (ID)"',
                     help="the Canvas assignment's column (alone: a CSV of just that column)")
    gra.add_argument("--moodle-worksheet", type=Path, metavar="FILE",
                     help="Moodle's offline grading worksheet: written back with grades and feedback comments")
    return main


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        lessons = lesson_paths(args.notebooks, args.names)
        if args.command == "release":
            from mllm_classroom.release import release

            links = not args.no_solution_links
            for row in release(lessons, args.out, args.solutions, links=links):
                print(f"{row['notebook']}: {row['exercises']} exercises, {row['points']:g} points")
            where = f", solutions to {args.solutions or args.out.parent / 'solutions'}/" if links else \
                " (no links to the solutions)"
            print(f"learner's versions written to {args.out}/{where}")
            return 0
        results, lines = grade_command(args, lessons)
    except ClassroomError as error:
        print(f"mllm-classroom: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    graded = sum(r.status == "graded" for r in results)
    flagged = sum(bool(r.review) for r in results)
    print(f"{graded} of {len(results)} submissions graded; {args.out / 'grades.csv'}, "
          f"{args.out / 'totals.csv'}, {args.out / 'feedback'}/")
    if flagged:
        print(f"{flagged} held for review: see the review column of {args.out / 'grades.csv'}")
    return 0


def grade_command(args, lessons: list[Path]) -> tuple[list, list[str]]:
    """``grade``: read what the LMS gave, lay it out one folder per student, grade, write the LMS's CSV."""
    import tempfile

    from mllm_classroom import lms, lms_import
    from mllm_classroom.grade import grade
    from mllm_classroom.reports import write_csv

    download = lms.read_download(args.submissions, args.lms)
    sheet = lms_import.read_sheet(download.layout, args.canvas_gradebook, args.canvas_assignment,
                                  args.moodle_worksheet)
    download.choose([p.stem for p in lesson_paths(args.notebooks)], [p.stem for p in lessons],
                    roster={sid: sheet.names.get(sid, "") for sid in sheet.students} if sheet is not None else None)
    if not args.names:  # every notebook found in the submissions
        lessons = [p for p in lessons if p.stem in download.notebooks()]
    if not download.students or not lessons:
        raise ClassroomError(f"SUBMISSIONS: no file in {args.submissions} is a notebook of {args.notebooks}/ "
                             f"handed in by a student of a {download.layout} download (a file counts when its "
                             "name starts with the notebook's, e.g. 05_lstm.ipynb; --lms names the layout)")
    if lms.out_is_inside(args.out, args.submissions):
        raise ClassroomError(f"--out: {args.out} is inside SUBMISSIONS; the submissions folder is never written")
    if sheet is not None and not sheet.groups:  # the LMS's own names (a team's folder is named by its group)
        download.display.update(sheet.names)
    if args.no_sandbox:
        print("mllm-classroom: --no-sandbox: submissions run with your rights and can read and change your "
              "files; every row of grades.csv says so", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="mllm-lms-") as tmp:
        folder = download.lay_out(Path(tmp) / "students", lms_import.roster(sheet, download))
        results = grade(folder, lessons, args.out, args.jobs, args.timeout, not args.no_sandbox,
                        annotate=download.annotate, budget=args.budget)
    write_csv(args.out / "files.csv", *download.manifest())
    kinds = {}
    for up in download.uploads:
        kind = up.what.split(" (")[0].split(":")[0].split(",")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    lines = [f"{download.layout} download: {len(download.students)} students, {len(download.uploads)} files ("
             + "; ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda k: -k[1]))
             + f"), each in {args.out / 'files.csv'}"]
    if sheet is not None:
        lines += lms_import.write_back(sheet, results, lessons, download, args.out)
    return results, lines
