"""Numerical perturbations for the course's kernels (tools/perturb.py puts this folder on PYTHONPATH).

Python imports ``sitecustomize`` at start-up, before any notebook code, so the variables that PyTorch,
MKL and oneDNN read when they load can still be changed here. ``MLLM_PERTURB`` names the setups, comma
separated:

- ``kernels``: the code paths of a CPU one instruction set below this one, as another machine would
  take them: on an AVX-512 CPU (CI's Intel Xeon, an AMD Zen 4) those of an AVX2 one (an AMD Zen 2 or 3,
  most laptops): PyTorch's AVX2 kernels, MKL's AVX2 path (``MKL_CBWR=AVX2``), oneDNN held to AVX2; on
  a CPU without AVX-512, PyTorch's default (non-vectorised) kernels, MKL's SSE4.2 path and oneDNN held
  to SSE4.1. The thread count stays the notebook's own (one, in every notebook that trains), as on a
  learner's machine: forced to two beside one busy process, 07's learner's version ran one cell over
  nine minutes, against 28 s for the whole notebook with its own one thread.
- ``nudge``: the unperturbed code paths, but one weight moved by 1e-7 before each optimizer's first
  step (a stand-in for another machine's last bits, which a chaotic training amplifies).

A printed value that either setup changes depends on the last bit of a float sum, so it would differ
on another CPU. Only kernels (``ipykernel_launcher``) are perturbed; the test runner itself is not.
"""

import os
import sys

_SETUPS = {s for s in os.environ.get("MLLM_PERTURB", "").split(",") if s}
_UNKNOWN = _SETUPS - {"kernels", "nudge"}
if _UNKNOWN:
    raise SystemExit(f"MLLM_PERTURB: unknown setup(s) {sorted(_UNKNOWN)}; known: kernels, nudge")
# sys.argv is still ["-m"] while site runs; orig_argv holds the command line (`python -m ipykernel_launcher`).
_IS_KERNEL = "ipykernel_launcher" in getattr(sys, "orig_argv", sys.argv)[:4]


def _has_avx512() -> bool:
    """Whether this CPU has AVX-512 (read before torch loads, since the variables must be set first)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:  # not Linux: take the paths below AVX2, which every x86-64 CPU has
        return False


def _perturb() -> None:
    if "kernels" in _SETUPS:
        aten, mkl, onednn = ("avx2", "AVX2", "AVX2") if _has_avx512() else ("default", "SSE4_2", "SSE41")
        os.environ["ATEN_CPU_CAPABILITY"] = aten
        os.environ["MKL_CBWR"] = mkl
        os.environ["ONEDNN_MAX_CPU_ISA"] = onednn
    if "nudge" in _SETUPS:
        import weakref

        import torch

        _nudged = weakref.WeakSet()

        def _nudge(optimizer, args, kwargs):
            if optimizer in _nudged:
                return
            _nudged.add(optimizer)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.numel():
                        with torch.no_grad():
                            p[(0,) * p.dim()] += 1e-7  # its first entry, whatever its layout
                        return

        # From the submodule itself: torch.optim deletes its `optimizer` attribute on some releases.
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(_nudge)


if _SETUPS and _IS_KERNEL:
    try:
        _perturb()
    except BaseException as error:  # a perturbation not in place must fail the run, not pass it unperturbed
        print(f"tools/perturb_site: cannot perturb this kernel: {error!r}", file=sys.stderr, flush=True)
        os._exit(70)
