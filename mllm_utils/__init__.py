"""Companion package of the Mastering-LLMs notebook course.

The notebooks teach; this package carries what two or more of them share
(data loading, the torchtext-compatible text tools, the training loop,
sampling, plots, exercise checks). Importing it has no side effects.
"""

from mllm_utils.runtime import device, is_quick, run_size, seed_everything, smoke, smoke_cap, start

__version__ = "0.1.0"

__all__ = ["__version__", "device", "is_quick", "run_size", "seed_everything", "smoke", "smoke_cap", "start"]
