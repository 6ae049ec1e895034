"""The teacher's kit of the course: student versions and sandboxed grading (``mllm-classroom``).

    mllm-classroom release [--out student] [NOTEBOOK ...]
    mllm-classroom grade SUBMISSIONS [--out grades] [--jobs 2] [NOTEBOOK ...]

(or ``python -m mllm_classroom ...``; ``make release`` and ``make grade`` are shortcuts). A teacher's tool,
installed with ``pip install -e ".[teach]"`` (it needs nbgrader, and bubblewrap on Linux for the sandbox);
learners and Colab never import it. Modules, one concern each:

- ``lessons``: the lesson notebooks, their exercises, measured run times and peaks, and what is secret in them;
- ``engine``: nbgrader's command line, run in a temporary course folder, and student versions made with it;
- ``sandbox``: the bubblewrap sandbox every submitted notebook's kernel runs in;
- ``review``: what a submission's own code does that a grader should not trust (read, never run);
- ``grade``: a class graded into results; ``reports``: grades.csv, totals.csv and feedback pages;
- ``lms``: what an LMS gives (a Canvas or Moodle zip, a plain folder), laid out one folder per student;
  ``lms_import``: the grades written back in the LMS's import CSV;
- ``cli``: the ``mllm-classroom`` command.
"""
