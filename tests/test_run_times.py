"""One source of truth for run times: the README's course table, student/README.md's table and the package
data that each notebook's start line reads all give the time `tools/notebooks.py run` measured."""

import json

import pytest

from mllm_utils import runtime
from tools import run_times


def test_the_tables_and_the_start_lines_give_the_measured_run_times():
    times = run_times.measured()
    assert set(times) == {p.stem for p in run_times.notebook_paths()}
    assert not run_times.problems(times), "\n".join(run_times.problems(times))


def test_quick_time_reads_the_measured_time(tmp_path):
    times = json.loads(run_times.DATA.read_text(encoding="utf-8"))
    stem, seconds = next(iter(times.items()))
    phrase = runtime.quick_time(stem, "the lengths 4 to 20")
    assert phrase == (f"about {runtime.format_duration(seconds)} on a 2-core CPU, as measured for the course "
                      "(the lengths 4 to 20)")
    with pytest.raises(ValueError, match="no measured run time for '99_nothing'"):
        runtime.quick_time("99_nothing")


def test_problems_name_each_table_that_disagrees(monkeypatch, tmp_path):
    times = run_times.measured()
    data = tmp_path / "run_times.json"
    data.write_text(json.dumps({stem: seconds + 1000 for stem, seconds in times.items()}), encoding="utf-8")
    monkeypatch.setattr(run_times, "DATA", data)
    found = run_times.problems(times)
    assert sum(" when last executed, run_times.json says " in p for p in found) == len(times)
    assert sum("README.md's course table says" in p for p in found) == len(times)
    assert sum(p.startswith("student/README.md says") for p in found) == len(times)


@pytest.mark.parametrize("kept, measured, agree", [(27, 27, True), (27, 31, True), (10, 15, True), (40, 59, True),
                                                   (4, 68, False), (40, 61, False)])
def test_a_measured_time_may_drift_a_little_from_the_one_shown(kept, measured, agree):
    """A re-run a few seconds slower leaves what the notebooks print as it is (their outputs settle)."""
    assert run_times.agrees(kept, measured) is agree
