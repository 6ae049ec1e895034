"""pytest plugin: say plainly when a notebook cell failed because it wrote to stderr.

nbval's own message is "Unexpected output fields from running code: {'stderr'}".
This adds a report section with the text the cell wrote and what to do about it.
Loaded by the root conftest.py.
"""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
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
