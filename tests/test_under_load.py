"""tools/under_load.py: the command runs beside busy processes, its status comes back, none is left."""

import os
import sys

import psutil
import pytest

from tools import under_load

CHILD = """
import os, time
start_wall, start_cpu = time.perf_counter(), time.process_time()
x = 0
while time.perf_counter() - start_wall < 1.5:
    x += 1
# Share of one core this process got while the busy ones ran.
print("share", round((time.process_time() - start_cpu) / (time.perf_counter() - start_wall), 2))
raise SystemExit(3)
"""


def test_the_command_shares_the_cpu_and_its_status_is_returned(capfd):
    # Two busy processes per core leave the command at most about a third of a core.
    busy = 2 * (os.cpu_count() or 1)
    code = under_load.main(["--busy", str(busy), "--limit", "30", "--", sys.executable, "-c", CHILD])
    out = capfd.readouterr().out
    share = float(next(line for line in out.splitlines() if line.startswith("share ")).split()[1])
    assert code == 3
    assert share < 0.8, f"the command had {share:.2f} of a core: the busy processes did not load the CPU"
    assert f"{busy} busy processes" in out and "exit 3" in out


def test_no_busy_process_outlives_the_command():
    under_load.main(["--busy", "2", "--limit", "30", "--", sys.executable, "-c", "pass"])
    assert [p for p in psutil.Process().children(recursive=True) if p.is_running()] == []


def test_a_missing_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        under_load.main(["--busy", "1"])
    assert exc.value.code == 2
    assert "no command given" in capsys.readouterr().err
