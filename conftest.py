"""Test-session settings shared by the unit tests and nbval.

The notebooks' committed outputs come from the quick size with progress bars
off, so the kernels nbval starts must see the same environment (they inherit
this process's). ``tools/notebooks.py`` uses the very same values.
"""

import os

from tools.notebooks import RUN_ENV

pytest_plugins = ["tools.nbval_stderr", "tools.nbval_learner"]

for _name, _value in RUN_ENV.items():
    if _name == "MLLM_QUICK" and os.environ.get(_name) == "0":
        continue  # `make test-full` runs the full size, comparing no outputs
    os.environ[_name] = _value
