"""Grading a class: how long `mllm-classroom grade` takes for 30 students and one notebook.

    python benchmarks/bench_grading.py [--students 30] [--notebook 05_lstm] [--jobs 2] [--no-sandbox]

Needs the teacher's environment (`make teach-setup`; run with .venv-teach/bin/python). The class is
synthetic: a third of the students submit the solutions, a third the plausible wrong answers kept for the
tests, a third the blank learner's version. Prints the wall time for the whole class, per student, the calls
the judge made into the students' processes, and the scores it found (which must be full / below full /
zero). Goal: 30 students in at most 5 minutes on a 2-core machine.
"""

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from machine import cpu_name  # noqa: E402  (benchmarks/machine.py)

from mllm_classroom import grade as grading  # noqa: E402
from mllm_classroom.lessons import exercises  # noqa: E402
from tools import classroom_fixtures as fixtures  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--notebook", default="05_lstm")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-sandbox", action="store_true", help="grade outside the sandbox, to measure its cost")
    args = parser.parse_args()
    lesson = fixtures.LESSONS / f"{args.notebook}.ipynb"
    full = sum(e.points for e in exercises(nbformat.read(lesson, as_version=4)))
    kinds = ["right", "wrong", "blank"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "class"
        for i in range(args.students):
            (folder / f"student{i:02d}").mkdir(parents=True)
            nb = fixtures.submission(args.notebook, kinds[i % 3])
            nbformat.write(nb, folder / f"student{i:02d}" / f"{args.notebook}.ipynb")
        start = time.perf_counter()
        results = grading.grade(folder, [lesson], Path(tmp) / "grades", jobs=args.jobs,
                                use_sandbox=not args.no_sandbox)
        seconds = time.perf_counter() - start
    scores = Counter()
    for i, r in enumerate(sorted(results, key=lambda r: r.student)):
        score = sum(r.points.values())
        kind = kinds[i % 3]
        ok = {"right": score == full, "wrong": score < full, "blank": score == 0}[kind] and r.status == "graded"
        scores[kind, ok] += 1
    print(f"machine: {cpu_name()}, jobs {args.jobs}, sandbox {'off' if args.no_sandbox else 'on (bubblewrap)'}")
    print(f"graded {len(results)} submissions of {args.notebook} in {seconds:.1f} s "
          f"({seconds / len(results):.1f} s per student); goal: 30 in 300 s")
    graded = [r for r in results if r.seconds]
    if graded:
        print(f"each submission: {sum(r.seconds for r in graded) / len(graded):.1f} s in its own grading process "
              f"(the student's sandbox running the notebook, the judge running the checks), "
              f"{sum(r.calls for r in graded) / len(graded):.0f} calls of the student's functions from the judge")
    print("scores as expected:", {f"{kind} {'ok' if ok else 'WRONG'}": n for (kind, ok), n in sorted(scores.items())})


if __name__ == "__main__":
    main()
