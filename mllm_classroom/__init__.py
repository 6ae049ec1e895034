"""The teacher's kit of the course: student versions and sandboxed grading (``mllm-classroom``).

    mllm-classroom release [--out student] [NOTEBOOK ...]
    mllm-classroom grade SUBMISSIONS [--out grades] [--jobs 2] [NOTEBOOK ...]

(or ``python -m mllm_classroom ...``; ``make release`` and ``make grade`` are shortcuts). A teacher's tool,
installed with ``pip install -e ".[teach]"`` (it needs bubblewrap on Linux for the sandbox); learners and
Colab never import it. Modules, one concern each:

- ``lessons``: the lesson notebooks, their exercises, measured run times and peaks, and what is secret in them;
- ``release``: the learner's version of each lesson (stubs, visible checks, a link to the solution);
- ``sandbox``: the bubblewrap sandbox (and the cgroup) every process that runs notebook code starts in;
- ``channel``: the framed messages between the grader and those processes; ``codec``: what may cross;
- ``worker``: such a process: the student's (runs the submission) or the judge's (runs the lesson and the checks);
- ``judge``: one submission graded, in a process of its own; ``grade``: a class graded into results;
- ``review``: what a submission's own code does that a grader should not trust (read, never run), a second line;
- ``reports``: grades.csv, totals.csv and feedback pages;
- ``lms``: what an LMS gives (a Canvas or Moodle zip, a plain folder), laid out one folder per student;
  ``lms_import``: the grades written back in the LMS's import CSV;
- ``cli``: the ``mllm-classroom`` command.
"""
