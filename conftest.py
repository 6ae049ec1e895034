"""Test-session settings shared by the unit tests and nbval.

The notebooks' committed outputs come from the quick size with progress bars
off, so the kernels nbval starts must see the same environment (they inherit
this process's). ``tools/notebooks.py`` uses the very same values.
"""

import os

import pytest

from tools.notebooks import RUN_ENV

for _name, _value in RUN_ENV.items():
    if _name == "MLLM_QUICK" and os.environ.get(_name) == "0":
        continue  # `make test-full` runs the full size, comparing no outputs
    os.environ[_name] = _value


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Say plainly when a notebook cell failed because it wrote to stderr."""
    outcome = yield
    report = outcome.get_result()
    outputs = getattr(item, "test_outputs", None)
    if report.when != "call" or not report.failed or not outputs:
        return
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    if stderr:
        report.sections.append(
            (
                "stderr written by this notebook cell",
                "This cell printed to stderr (usually a warning). The course keeps stderr "
                "clean: fix the cause of the message rather than hiding it.\n\n" + stderr,
            )
        )
