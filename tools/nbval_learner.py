"""pytest plugin: in a learner's version (student/), every cell that waits for an exercise must stop at it.

The learner's versions are run under nbval like the lessons (their kept outputs must equal the lesson's).
Their check cells, and the few cells that use an exercise's function, carry the tag ``raises-exception``:
nbval then accepts an error there, but does not require one. This plugin does: such a cell passes only if
it stopped with ``NotDone`` (the stub's one line), so a check that would pass a stub fails CI.
Loaded by the root conftest.py.
"""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cell = getattr(item, "cell", None)
    if report.when != "call" or not report.passed or cell is None or "student" not in item.path.parts:
        return
    if "raises-exception" not in cell.get("metadata", {}).get("tags", []):
        return
    outputs = getattr(item, "test_outputs", None) or []
    errors = [o.get("ename") for o in outputs if o.get("output_type") == "error"]
    if errors != ["NotDone"]:
        report.outcome = "failed"
        report.longrepr = (f"this cell of a learner's version waits for an exercise: run on the stubs it must stop "
                           f"with NotDone (one line), but it raised {errors or 'nothing'}")
