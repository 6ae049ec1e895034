"""What the benchmark scripts print about the machine they ran on (run them as `python benchmarks/NAME.py`)."""

import platform


def cpu_name() -> str:
    """The CPU's model name where the system says it (Linux), else the platform's guess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
