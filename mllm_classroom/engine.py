"""nbgrader's command line, run in a temporary course folder (no JupyterHub, no exchange).

Every command goes through ``python -m mllm_classroom.nbgrader_app``, which is nbgrader with the
sandboxed kernel manager put in place of the one its Execute step starts kernels with: nbgrader itself
(which holds the hidden tests and the gradebook) runs here, with the teacher's rights; only the kernels
that run submitted code run inside the sandbox (:mod:`mllm_classroom.sandbox`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from mllm_classroom.lessons import ClassroomError

# The environment of nbgrader's own process: the quick size, no progress bars, the course's fixed hash seed.
GRADING_ENV = {"MLLM_QUICK": "1", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0"}


def require_nbgrader() -> None:
    try:
        import nbgrader  # noqa: F401
    except ModuleNotFoundError:
        raise ClassroomError(
            'nbgrader is not installed: `pip install -e ".[teach]"` in the course folder (or `make teach-setup`)'
        ) from None


def nbgrader(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run one nbgrader command in the course folder ``root``; its log is returned, not printed."""
    full_env = {**os.environ, **GRADING_ENV, **(env or {})}
    # Keep a teacher's own Jupyter configuration (another course's nbgrader_config.py) out of it.
    full_env["JUPYTER_CONFIG_DIR"] = str(root / ".jupyter")
    # nbgrader runs `alembic` (its database tool) from PATH: use the one beside this Python.
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    command = [sys.executable, "-m", "mllm_classroom.nbgrader_app", *args, f"--CourseDirectory.root={root}",
               "--force"]
    # A session of its own: nothing below it (a kernel, whatever a kernel starts) has the teacher's terminal.
    return subprocess.run(command, cwd=root, env=full_env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, start_new_session=True)


def generate(root: Path, lessons: list[Path]) -> None:
    """Copy the lessons in as one assignment each and let nbgrader make the student versions."""
    for path in lessons:
        source = root / "source" / path.stem
        source.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, source / path.name)
    result = nbgrader(root, "generate_assignment", "*")  # one start of nbgrader for all of them
    made = {p.stem for p in lessons if (root / "release" / p.stem / p.name).exists()}
    if result.returncode != 0 or len(made) != len(lessons):
        failed = ", ".join(p.name for p in lessons if p.stem not in made) or "?"
        errors = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "ERROR" in line]
        raise ClassroomError(f"nbgrader could not make the student version of {failed}:\n" + "\n".join(errors))
