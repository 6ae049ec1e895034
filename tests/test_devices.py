"""Device-clean code, tested without a GPU: PyTorch's ``meta`` device plays the GPU.

A GPU run fails where a tensor created on the CPU (a factory call without
``device=``, a generator, an optimizer's state loaded before the model moved)
meets one on the GPU. Here the models and their inputs go to ``meta`` (shapes
and dtypes, no data, no arithmetic: every step is instant), while
:class:`CudaRules`, a torch function mode, checks every call the way CUDA
would: all tensor arguments on one device (a 0-dim CPU tensor is allowed, as
CUDA allows it), a random generator on the device it draws for, no
``.numpy()`` of a device tensor. Reading a meta tensor's values on the host
(``.item()``, ``bool()``, ``.cpu()``, ``.tolist()``) gives zeros, like a GPU whose
memory holds zeros, so training loops, evaluations and checkpoints run to the
end. Then every package model, training loop, mask, cache and generation path
runs under it, and so do the cells of notebooks 02, 07 and 10 that put a model
on ``mllm_utils.device()`` at the full size (with ``MLLM_SMOKE=1``, so their
training stops after a few steps).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

import mllm_utils
from mllm_utils import (
    attention,
    chardata,
    charlstm,
    chartrain,
    checkpoints,
    generation,
    rnn,
    runtime,
    sampling,
    transformer,
)
from mllm_utils import train as train_loop

# Loading a checkpoint into a model on meta copies nothing, and torch says so: expected here.
pytestmark = pytest.mark.filterwarnings("ignore:for .*copying from a non-meta parameter:UserWarning")

META = torch.device("meta")
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

# Calls that move data between devices by design, or only read metadata.
CROSS_DEVICE = {
    "to", "cpu", "cuda", "copy_", "__get__", "__set__", "_has_compatible_shallow_copy_type", "new_tensor",
    "__reduce_ex__", "__deepcopy__", "__setstate__", "__getitem__", "__setitem__", "__repr__", "__format__",
    "__len__", "size", "dim", "numel", "shape", "device", "dtype", "is_floating_point", "requires_grad_",
    "detach", "_parse_to", "set_", "__iter__", "module_load",
}  # fmt: skip
# Reads of a device tensor's values on the host: allowed on a GPU (they wait for it); zeros here.
HOST_READS = {"item", "__bool__", "__int__", "__float__", "__index__", "tolist"}
# Allowed on a CPU tensor only: on a GPU tensor they raise.
CPU_ONLY = {"numpy", "__array__"}


class DeviceMix(AssertionError):
    """A call that would fail on a GPU: tensors on two devices, a generator elsewhere, numpy of a device tensor."""


def _tensors(args, kwargs):
    """The tensors among the arguments, and inside lists of tensors (torch.cat, the _foreach ops).

    Not a full tree walk: torch.tensor(list) of a whole novel would take seconds.
    """
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], (torch.Tensor, list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    found.append(item)
                elif isinstance(item, (list, tuple)):
                    found.extend(t for t in item if isinstance(t, torch.Tensor))
    return found


def _zeros_like_on_cpu(t, dtype=None):
    return torch.zeros(t.shape, dtype=dtype or t.dtype)


class CudaRules(TorchFunctionMode):
    """CUDA's placement rules on every torch call; meta tensors read as zeros on the host."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __enter__(self):
        # Moving a module to a GPU keeps its Parameter objects (an optimizer built before the move still
        # holds them); CPU -> meta would make new ones unless they are swapped in place.
        # (load_state_dict copies, as it does everywhere: swapping fails on nn.LSTM's weak references.)
        self._swap = torch.__future__.get_swap_module_params_on_conversion()
        self._load = load = torch.nn.Module.load_state_dict

        def load_state_dict(module, *args, **kwargs):
            torch.__future__.set_swap_module_params_on_conversion(False)
            try:
                return load(module, *args, **kwargs)
            finally:
                torch.__future__.set_swap_module_params_on_conversion(True)

        torch.nn.Module.load_state_dict = load_state_dict
        # torch 2.4's swap_tensors finds the parameter's gradient edge through view_as, which has none
        # under no_grad (a move inside one) or through a torch function mode: swap without either.
        self._swap_tensors = swap_tensors = torch.utils.swap_tensors

        def swap_without_the_mode(t1, t2):
            with torch._C.DisableTorchFunction(), torch.enable_grad():
                return swap_tensors(t1, t2)

        torch.utils.swap_tensors = swap_without_the_mode
        torch.__future__.set_swap_module_params_on_conversion(True)
        return super().__enter__()

    def __exit__(self, *exc):
        torch.__future__.set_swap_module_params_on_conversion(self._swap)
        torch.nn.Module.load_state_dict = self._load
        torch.utils.swap_tensors = self._swap_tensors
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        self.calls += 1
        first = args[0] if args else None
        if isinstance(first, torch.Tensor) and first.is_meta:
            if name in HOST_READS:
                value = _zeros_like_on_cpu(first)
                return func(value, *args[1:], **kwargs)
            if name in CPU_ONLY:
                raise DeviceMix(f"{name}() of a tensor on {first.device}: a GPU tensor must go .cpu() first")
            if name == "cpu" or (name == "to" and self._target(args, kwargs) == "cpu"):
                dtype = self._dtype(args, kwargs)
                return _zeros_like_on_cpu(first, dtype)
        if name not in CROSS_DEVICE:
            self._check(name, args, kwargs)
        if name == "lstm" and isinstance(first, torch.Tensor) and first.is_meta and len(args) >= 9:
            return self._lstm_shapes(*args[:9])
        return func(*args, **kwargs)

    @staticmethod
    def _lstm_shapes(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        """nn.LSTM on meta, its devices checked: outputs of the right shapes that depend on every input.

        PyTorch's meta LSTM runs a Python shape function per time step and layer (seconds per call);
        this keeps the gradient flowing to every weight, so the optimizer's step still meets them all.
        """
        h0, c0 = hx
        hidden, directions = h0.shape[-1], 2 if bidirectional else 1
        batch, steps = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
        tie = x.sum() * 0 + h0.sum() * 0 + c0.sum() * 0 + sum(p.sum() * 0 for p in params)
        shape = (batch, steps, directions * hidden) if batch_first else (steps, batch, directions * hidden)
        out = torch.zeros(shape, dtype=x.dtype, device=x.device) + tie
        return out, torch.zeros_like(h0) + tie, torch.zeros_like(c0) + tie

    @staticmethod
    def _target(args, kwargs):
        try:
            device = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
        except (TypeError, RuntimeError):
            return None
        return None if device is None else torch.device(device).type

    @staticmethod
    def _dtype(args, kwargs):
        try:
            return torch._C._nn._parse_to(*args[1:], **kwargs)[1]
        except (TypeError, RuntimeError):
            return None

    @staticmethod
    def _check(name, args, kwargs):
        tensors = _tensors(args, kwargs)
        devices = {t.device for t in tensors if not (t.device.type == "cpu" and t.dim() == 0)}
        if len(devices) > 1:
            shapes = [(tuple(t.shape), str(t.device)) for t in tensors]
            raise DeviceMix(f"{name}: tensors on {sorted(map(str, devices))} in one call: {shapes}")
        generator = kwargs.get("generator")
        if isinstance(generator, torch.Generator):
            target = kwargs.get("device")
            target = torch.device(target) if target is not None else (next(iter(devices)) if devices else None)
            if target is None:
                target = torch.get_default_device() if hasattr(torch, "get_default_device") else torch.device("cpu")
            if target.type != generator.device.type:
                raise DeviceMix(f"{name}: a generator on {generator.device} draws for {target}")


class MpsRules(CudaRules):
    """CUDA's rules, and no float64 on the device (Apple's MPS has none)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs)
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, torch.Tensor) and t.is_meta and t.dtype == torch.float64:
                raise DeviceMix(f"{getattr(func, '__name__', func)} made a float64 tensor on the device: MPS has none")
        return result


@pytest.fixture
def cuda_rules():
    with CudaRules() as mode:
        yield mode


# ---------------------------------------------------------------- the check itself catches what it should


def test_the_rules_catch_a_cpu_tensor_meeting_a_device_tensor(cuda_rules):
    x = torch.ones(3, 4, device=META)
    with pytest.raises(DeviceMix, match="cpu.*meta|meta.*cpu"):
        x + torch.ones(4)  # a factory call without device=
    with pytest.raises(DeviceMix):
        torch.lstm_cell(torch.ones(2, 4, device=META), (torch.zeros(2, 3), torch.zeros(2, 3)),
                        torch.ones(12, 4, device=META), torch.ones(12, 3, device=META))  # fmt: skip
    with pytest.raises(DeviceMix, match="generator"):
        torch.rand(2, generator=torch.Generator(), device=META)
    with pytest.raises(DeviceMix, match="numpy"):
        x.numpy()
    x * torch.tensor(2.0)  # a CPU scalar is fine, as on CUDA
    assert x.sum().item() == 0 and x[0].tolist() == [0.0] * 4  # host reads: zeros


def test_the_rules_catch_an_optimizer_state_loaded_before_the_move(cuda_rules):
    """The defect charlstm.train had: Adam's state loaded while the parameters were on the CPU."""
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state = optimizer.state_dict()
    fresh = torch.optim.Adam(model.parameters())
    fresh.load_state_dict(state)  # the state goes where the parameters are now: the CPU
    model.to(META)
    model(torch.ones(1, 3, device=META)).sum().backward()
    with pytest.raises((DeviceMix, RuntimeError)):
        fresh.step()


# ---------------------------------------------------------------- modules: no tensor outside parameters and buffers


def package_modules():
    return [
        charlstm.CharLSTM(11, 4, 8, 2),
        transformer.TransformerLM(11, embed_dim=8, num_heads=2, num_layers=2, context_len=16),
        attention.MultiHeadAttention(8, 2),
        rnn.RNN(5, 6),
    ]


@pytest.mark.parametrize("module", package_modules(), ids=lambda m: type(m).__name__)
def test_every_tensor_of_a_module_moves_with_it(module):
    """A tensor kept as a plain attribute (not a parameter or a registered buffer) stays behind on .to()."""
    module.to(META)
    for sub in module.modules():
        for attr, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not attr.startswith("_"):
                raise AssertionError(f"{type(sub).__name__}.{attr} is a tensor outside parameters and buffers")
    assert all(t.is_meta for t in [*module.parameters(), *module.buffers()])


# ---------------------------------------------------------------- forward passes, masks, caches, generation


def test_attention_masks_and_cache(cuda_rules):
    mha = attention.MultiHeadAttention(8, 2).to(META)
    x = torch.randn(2, 5, 8, device=META)
    pad = torch.zeros(2, 5, dtype=torch.bool, device=META)
    for need_weights in (True, False):
        mha(x, need_weights=need_weights, is_causal=True)
        mha(x, key_padding_mask=pad, need_weights=need_weights)
        mha(x, attn_mask=attention.causal_mask(5, device=META), need_weights=need_weights)
        mha(x, attn_mask=attention.causal_mask(5, dtype=torch.bool, device=META), need_weights=need_weights)
    _, _, cache = mha(x, is_causal=True, use_cache=True)
    out, _, (k, v) = mha(x[:, :2], is_causal=True, past_kv=cache, use_cache=True)
    assert out.is_meta and k.shape == (2, 2, 7, 4)
    q = torch.randn(2, 2, 5, 4, device=META)
    attention.scaled_dot_product_attention(q, q, q, attention.causal_mask(5, device=META))


def test_transformer_forward_cache_and_generation(cuda_rules):
    model = transformer.TransformerLM(11, embed_dim=8, num_heads=2, num_layers=2, context_len=16).to(META)
    x = torch.randint(11, (2, 6), device=META)
    logits, cache = model(x)
    more, _ = model(x[:, :1], state=cache)
    _, _, weights = model(x, need_weights=True)
    assert logits.shape == (2, 6, 11) and more.shape == (2, 1, 11) and weights[0].is_meta
    for options in ({"greedy": True}, {"temperature": 0.8, "top_k": 3, "top_p": 0.9}):
        assert generation.generate(model, [1, 2, 3], 4, **options).is_meta
    # A seeded CPU generator with a device model: the draws happen on the CPU, the tokens go back.
    new = generation.generate(model, [1, 2, 3], 4, top_p=0.9, generator=torch.Generator().manual_seed(0))
    assert new.is_meta and new.shape == (4,)
    generation.generate_refeed(model, [1, 2, 3], 3, top_k=2)


def test_lstm_forward_step_state_and_generation(cuda_rules):
    model = charlstm.CharLSTM(11, 4, 8, 2).to(META)
    x = torch.randint(11, (3, 5), device=META)
    _, state = model(x)
    model(x[:, :1], state)  # one character: the torch.lstm_cell path, carrying the state
    model.step(x[:, 0])  # a fresh state: zeros made on the input's device
    assert generation.generate(model, torch.tensor([[1, 2]]), 5, temperature=0.7).is_meta


def test_rnn_and_sampling(cuda_rules):
    layer = rnn.RNN(5, 6).to(META)
    out, h = layer(torch.randn(4, 2, 5, device=META))
    assert out.is_meta and h.is_meta
    logits = torch.randn(3, 11, device=META)
    for options in ({}, {"top_k": 4}, {"top_p": 0.8}, {"temperature": 0.5, "top_k": 3, "top_p": 0.5}):
        assert sampling.sample(logits, **options).is_meta
        assert sampling.distribution(logits, **options).is_meta
    assert sampling.greedy(logits).is_meta


# ---------------------------------------------------------------- training loops, evaluation, checkpoints

TEXT = "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. " * 12


def char_data():
    return chardata.prepare(TEXT)


def test_chartrain_step_and_evaluate_run_where_the_model_is(cuda_rules):
    itos, train_data, val_data = char_data()
    model = charlstm.CharLSTM(len(itos), 4, 8, 2).to(META)
    optimizer = torch.optim.Adam(model.parameters())
    X, Y = next(chardata.batches(train_data, 4, 16))
    chartrain.train_step(model, optimizer, X.to(META), Y.to(META), 1e-3, 1.0)
    chartrain.evaluate(model, val_data, seq_len=16)  # device=None: where the model is (the data moves)
    assert next(model.parameters()).is_meta
    chartrain.evaluate(model, val_data, seq_len=16, device="cpu")  # elsewhere, then back
    assert next(model.parameters()).is_meta, "evaluate(device=...) left the model on another device"


@pytest.fixture
def few_steps(monkeypatch):
    """The smoke test's caps, tighter: on meta an LSTM step is many small Python-level shape functions."""
    monkeypatch.setenv("MLLM_SMOKE", "1")
    monkeypatch.setattr(charlstm, "SMOKE_STEPS", 1)
    monkeypatch.setattr(chartrain, "SMOKE_TOKENS", 256)
    monkeypatch.setattr(transformer, "SMOKE_STEPS", 1)


def test_lstm_training_on_a_device_resumes_there(cuda_rules, tmp_path, few_steps):
    """07's training cell run twice on a GPU: the second run resumes Adam's state onto the device."""
    itos, train_data, val_data = char_data()
    path = tmp_path / "lstm.pt"
    settings = dict(batch_size=4, seq_len=16, warmup=1, val_seq_len=16, log=lambda *_: None)
    torch.manual_seed(0)
    charlstm.train(charlstm.CharLSTM(len(itos), 4, 8, 2), train_data, val_data, itos, path, epochs=1,
                   device=META, **settings)  # fmt: skip
    saved = torch.load(path, weights_only=True)  # no map_location: the file holds CPU tensors only
    states = [t for t in tree_flatten(saved["optimizer"])[0] if isinstance(t, torch.Tensor)]
    assert states and all(t.device.type == "cpu" for t in [*states, *saved["model"].values()])
    resumed = charlstm.train(charlstm.CharLSTM(len(itos), 4, 8, 2), train_data, val_data, itos, path, epochs=2,
                             device=META, **settings)  # fmt: skip
    assert resumed["epoch"] == 2
    # And a checkpoint written on the device resumes on the CPU (outside the rules: real arithmetic).


def test_a_device_checkpoint_resumes_on_the_cpu(tmp_path, few_steps):
    itos, train_data, val_data = char_data()
    path = tmp_path / "lstm.pt"
    settings = dict(batch_size=4, seq_len=16, warmup=1, val_seq_len=16, log=lambda *_: None)
    with CudaRules():
        charlstm.train(charlstm.CharLSTM(len(itos), 4, 8, 2), train_data, val_data, itos, path, epochs=1,
                       device=META, **settings)  # fmt: skip
    model = charlstm.CharLSTM(len(itos), 4, 8, 2)
    resumed = charlstm.train(model, train_data, val_data, itos, path, epochs=2, **settings)
    assert resumed["epoch"] == 2 and next(model.parameters()).device.type == "cpu"
    assert resumed["history"]["step"][-1] > 0  # real arithmetic again, from the device's (zero) weights
    assert all(math.isfinite(v) for v in resumed["history"]["val"])


def test_transformer_training_on_a_device(cuda_rules, tmp_path):
    itos, train_data, val_data = char_data()
    model = transformer.TransformerLM(len(itos), embed_dim=8, num_heads=2, num_layers=1, context_len=32).to(META)
    run = transformer.train(model, train_data, val_data, itos, tmp_path / "t.pt", steps=3, batch_size=2,
                            seq_len=32, warmup=1, eval_every=2, eval_tokens=64, log=lambda *_: None)  # fmt: skip
    assert all(t.device.type == "cpu" for t in run["model"].values())
    loaded, _, _ = transformer.load_model(tmp_path / "t.pt")
    assert next(loaded.parameters()).device.type == "cpu"


def test_the_small_training_loop_on_a_device(cuda_rules):
    model = torch.nn.Sequential(torch.nn.Embedding(7, 4), torch.nn.Flatten(), torch.nn.Linear(12, 7)).to(META)
    X, Y = torch.randint(7, (20, 3)), torch.randint(7, (20,))  # the data stays on the CPU
    batches = train_loop.Batches(X, Y, 8)
    optimizer = torch.optim.Adam(model.parameters())
    history = train_loop.train(model, F.cross_entropy, optimizer, batches, 2, val_batches=batches)
    assert len(history["train"]) == 2 and next(model.parameters()).is_meta
    train_loop.evaluate(model, F.cross_entropy, train_loop.Batches(X, Y, 8, shuffle=False))
    assert next(model.parameters()).is_meta, "evaluate() moved the model"


# ---------------------------------------------------------------- the notebooks' full-size cells on a device


@functools.cache
def novel():
    """The whole novel, encoded and split, as notebooks 07 and 10 read it (once per session)."""
    return chardata.prepare()


def cell_with(notebook: str, marker: str) -> str:
    nb = nbformat.read(NOTEBOOKS / notebook, as_version=4)
    found = [c.source for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert len(found) == 1, f"{notebook}: {len(found)} code cells contain {marker!r} (the test finds its cell by it)"
    return found[0]


@pytest.fixture
def full_size_on_a_device(monkeypatch, cuda_rules, few_steps):
    """The full size with a GPU found (meta plays it) and training capped (the smoke test's caps)."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setenv("MLLM_QUICK", "0")
    monkeypatch.setattr(runtime, "device", lambda: META)
    monkeypatch.setattr(mllm_utils, "device", lambda: META)
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _figures():
    """mllm_utils.figures (issue 26), which the notebooks' figure cells call, once it exists."""
    try:
        from mllm_utils import figures
    except ImportError:
        return None
    return figures


def run_cells(sources, namespace):
    for source in sources:
        exec(compile(source, "<notebook cell>", "exec"), namespace)  # noqa: S102 (the course's own cells)
    return namespace


def test_notebook_07_trains_and_resumes_on_a_device(full_size_on_a_device, tmp_path):
    import matplotlib.pyplot as plt

    itos, train_data, val_data = novel()
    namespace = dict(
        torch=torch, mllm_utils=mllm_utils, charlstm=charlstm, chartrain=chartrain, checkpoints=checkpoints,
        math=math, re=re, plt=plt, figures=_figures(), WORK=tmp_path, QUICK=False, SIZE="full", itos=itos,
        train_data=train_data, val_data=val_data, post_token_steps=1.27e9, format_duration=runtime.format_duration,
        plural=runtime.plural,
    )  # fmt: skip
    train_cell = cell_with("07_war_and_peace.ipynb", "result = charlstm.train(demo_model")
    run_cells([train_cell], namespace)
    assert next(namespace["demo_model"].parameters()).is_meta
    run_cells([train_cell], namespace)  # the markdown invites re-running it: it resumes on the device
    run_cells([cell_with("07_war_and_peace.ipynb", "loaded = torch.load(checkpoint_file")], namespace)
    run_cells([cell_with("07_war_and_peace.ipynb", "model, card = demo_model")], namespace)
    assert next(namespace["model"].parameters()).device.type == "cpu"


def test_notebook_10_trains_on_a_device(full_size_on_a_device, tmp_path, monkeypatch):
    import time

    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)  # the cell writes war_and_peace_transformer_full.pt into the working folder
    itos, train_data, val_data = novel()
    _, _, shipped = transformer.load_model()
    torch.manual_seed(0)
    namespace = dict(
        torch=torch, mllm_utils=mllm_utils, transformer=transformer, chartrain=chartrain, time=time, plt=plt,
        SIZE="full", itos=itos, train_data=train_data, val_data=val_data, check_true=lambda *a, **k: None,
        figures=_figures(),
        demo=transformer.TransformerLM(len(itos), **{k: v for k, v in shipped["model_config"].items()
                                                      if k != "vocab_size"}),
    )  # fmt: skip
    run_cells([cell_with("10_masked_attention.ipynb", "yours, _, your_checkpoint = transformer.load_model")], namespace)
    assert namespace["yours"] is not None and (tmp_path / "war_and_peace_transformer_full.pt").exists()


def test_notebook_02_trains_on_a_device(full_size_on_a_device):
    from mllm_utils.cbow import build_vocab, cbow_pairs, encode_paragraphs, wikitext_paragraphs
    from mllm_utils.train import Batches, train
    from mllm_utils.wikitext import wikitext2_excerpt

    paragraphs = wikitext_paragraphs(wikitext2_excerpt())
    vocab = build_vocab(paragraphs, min_freq=50)
    contexts, centers = cbow_pairs(encode_paragraphs(paragraphs, vocab), window=8)
    source = cell_with("02_word_vectors.ipynb", "class CBOW(nn.Module)")
    namespace = run_cells([source.split("torch.manual_seed(0)")[0]], dict(nn=torch.nn, torch=torch))
    namespace.update(SIZE="full", mllm_utils=mllm_utils, vocab=vocab, contexts=contexts, centers=centers,
                     Batches=Batches, train=train, F=F, source="excerpt")  # fmt: skip
    run_cells([cell_with("02_word_vectors.ipynb", "history = train(model")], namespace)
    assert next(namespace["model"].parameters()).device.type == "cpu"


def test_start_says_what_the_full_size_does_on_a_gpu(monkeypatch, capsys):
    monkeypatch.delenv("MLLM_QUICK", raising=False)
    monkeypatch.delenv("MLLM_SMOKE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "Tesla T4")
    size = mllm_utils.start("1 minute on a 2-core CPU", "110 minutes on a 2-core CPU", gpu_time="an estimated "
                            "10 minutes on a T4 GPU", full_does="trains the LSTM from scratch",
                            afterwards="the later sections sample your LSTM")  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert size == "full"
    assert lines[0] == "Run size: full (a GPU was found: Tesla T4), seed 0"
    assert lines[1] == "Expected time on this GPU, Tesla T4: an estimated 10 minutes on a T4 GPU"
    assert lines[2] == "It trains the LSTM from scratch; the later sections sample your LSTM."
    assert lines[3].startswith("Quick size: 1 minute on a 2-core CPU. To run it, set MLLM_QUICK=1")


def test_numpy_is_only_taken_from_cpu_tensors_in_the_package():
    """``.numpy()`` of a GPU tensor raises: the package calls it on CPU copies only (a source check)."""
    root = Path(mllm_utils.__file__).parent
    offenders = []
    for path in sorted(root.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if ".numpy()" in line and ".cpu()" not in line and "np." not in line:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_no_float64_on_a_device_without_it(monkeypatch):
    """Apple's MPS has no float64: the package's float64 sums ask runtime.wide_float first (meta plays MPS)."""
    monkeypatch.setattr(runtime, "FLOAT32_ONLY_DEVICES", {"mps", "meta"})
    monkeypatch.setattr(sampling, "FLOAT32_ONLY_DEVICES", {"mps", "meta"})
    with MpsRules():
        with pytest.raises(DeviceMix, match="float64"):
            torch.ones(2, device=META).double()
        logits = torch.randn(3, 11, device=META)
        for options in ({}, {"top_p": 0.8}, {"top_k": 3, "top_p": 0.5}):
            sampling.sample(logits, **options)
        model = transformer.TransformerLM(11, embed_dim=8, num_heads=2, num_layers=1, context_len=16).to(META)
        generation.generate(model, [1, 2], 3, top_p=0.9)
        chartrain.evaluate(model, torch.randint(11, (100,)), seq_len=16)
