"""Numerical perturbations for the course's kernels (tools/perturb.py puts this folder on PYTHONPATH).

Python imports ``sitecustomize`` at start-up, before any notebook code, so the variables that PyTorch,
MKL and oneDNN read when they load can still be changed here. ``MLLM_PERTURB`` names the setups, comma
separated:

- ``kernels``: other float code paths than an unperturbed run's, which takes the widest this CPU has
  (AVX2 or AVX-512): PyTorch's default (non-vectorised) kernels, MKL's oldest path
  (``MKL_CBWR=COMPATIBLE``, SSE2), oneDNN held to SSE4.1, and two threads for every intra-op sum,
  whatever the notebook asks for (``torch.set_num_threads`` is pinned at 2);
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


def _perturb() -> None:
    if "kernels" in _SETUPS:
        os.environ["ATEN_CPU_CAPABILITY"] = "default"
        os.environ["MKL_CBWR"] = "COMPATIBLE"
        os.environ["ONEDNN_MAX_CPU_ISA"] = "SSE41"
        os.environ["OMP_NUM_THREADS"] = "2"
        os.environ["MKL_NUM_THREADS"] = "2"
    import torch

    if "kernels" in _SETUPS:
        torch.set_num_threads(2)
        torch.set_num_threads = lambda n: None  # the notebooks' own set_num_threads(1) is ignored

    if "nudge" in _SETUPS:
        import weakref

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
