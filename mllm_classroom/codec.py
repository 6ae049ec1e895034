"""What crosses between the judge and the student's process, and how.

To the student (a call's arguments): a pickle made by the judge. The student's process unpickles what the
trusted side made; modules go without their hooks, tensors with their gradients, generators as their state.

Back from the student (a result, and the state of the arguments after the call): plain data only, never a
pickle. :func:`encode` turns a value into a JSON tree plus blobs of raw bytes (tensors, arrays);
:func:`decode` rebuilds it on the judge's side from that alone, checking every field: known kinds, known
dtypes, shapes that match the bytes, sizes under limits. A module comes back as its class's name, the
arguments its constructor was called with, and its weights; the judge builds a new one from its own class
(:func:`rebuild_module`). Nothing a student's object does can run on the judge's side.
"""

from __future__ import annotations

import copy
import io
import math
import pickle
import types

import numpy as np
import torch

MAX_DEPTH = 24
MAX_ITEMS = 2_000_000  # list items, dict entries and tensor elements are counted together, per value
MAX_STR = 4_000_000  # characters, all strings of a value together
MAX_INT_DIGITS = 400

DTYPES = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
NP_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64", "bool"}


class EncodeError(TypeError):
    """A value that cannot cross as plain data (an object of the student's own kind, a lambda ...)."""


class DecodeError(ValueError):
    """Bytes from the student's side that do not describe a plain value."""


# ---------------------------------------------------------------------------------------------------------
# Arguments, judge -> student (a pickle of trusted objects)


def _rebuild_tensor(data, requires_grad, is_parameter, grad):
    tensor = torch.nn.Parameter(data, requires_grad=requires_grad) if is_parameter else data.requires_grad_(
        requires_grad)
    if grad is not None:
        tensor.grad = grad
    return tensor


def _rebuild_generator(state, device):
    generator = torch.Generator(device=device)
    generator.set_state(state)
    return generator


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, torch.Generator):
            return _rebuild_generator, (obj.get_state(), str(obj.device))
        if type(obj) in (torch.Tensor, torch.nn.Parameter) and (obj.grad is not None or obj.grad_fn is not None):
            grad = None if obj.grad is None else obj.grad.detach().clone()
            return _rebuild_tensor, (obj.detach(), obj.requires_grad, isinstance(obj, torch.nn.Parameter), grad)
        return NotImplemented


def _strip_hooks(value, seen=None):
    """Remove every module's hooks in a deep copy (they are the judge's: lambdas, counters)."""
    for item in _walk(value, set()):
        if isinstance(item, torch.nn.Module):
            for module in item.modules():
                for name, hooks in vars(module).items():
                    if name.startswith("_") and name.endswith("hooks") and isinstance(hooks, dict):
                        hooks.clear()


def _walk(value, seen, depth=0):
    """Every object reachable through lists, tuples, dicts and namespaces (each once)."""
    if id(value) in seen or depth > MAX_DEPTH:
        return
    seen.add(id(value))
    yield value
    if isinstance(value, list | tuple):
        for item in value:
            yield from _walk(item, seen, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item, seen, depth + 1)
    elif isinstance(value, types.SimpleNamespace):
        for item in vars(value).values():
            yield from _walk(item, seen, depth + 1)


def _view_alone(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of a view that has its layout (its strides: a slice with gaps in memory stays one) and none of
    the rest of its storage: the gaps hold zeros. A view whose elements overlap goes as a plain copy."""
    t = tensor.detach()
    if t.numel() == 0 or t.is_contiguous() or any(s <= 0 for s, n in zip(t.stride(), t.shape, strict=True) if n > 1):
        return t.clone(memory_format=torch.contiguous_format)
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    view = torch.zeros(span, dtype=t.dtype, device=t.device).as_strided(t.shape, t.stride())
    try:
        view.copy_(t)
    except RuntimeError:  # strides under which elements overlap
        return t.clone(memory_format=torch.contiguous_format)
    return view


def pack_call(args: tuple, kwargs: dict) -> bytes:
    """The pickle of a call's arguments, as the student's function will get them (a deep copy, no hooks; a view
    of a larger tensor goes as a copy of what it shows, laid out as it is, never with the rest of its storage)."""
    memo = {}
    for _, obj in stateful(args, kwargs):
        if isinstance(obj, torch.Tensor) and type(obj) in (torch.Tensor, torch.nn.Parameter) \
                and obj.untyped_storage().nbytes() > obj.numel() * obj.element_size():
            alone = _view_alone(obj)
            memo[id(obj)] = torch.nn.Parameter(alone, obj.requires_grad) if isinstance(obj, torch.nn.Parameter) \
                else alone.requires_grad_(obj.requires_grad)
    copied = copy.deepcopy((tuple(args), dict(kwargs)), memo)
    _strip_hooks(copied)
    # deepcopy drops a Parameter's gradient: put the judge's back (leftover gradients are part of a test)
    for (_, mine), (_, theirs) in zip(stateful(args, kwargs), stateful(*copied), strict=False):
        if isinstance(mine, torch.nn.Module) and isinstance(theirs, torch.nn.Module):
            pairs = zip(mine.parameters(), theirs.parameters(), strict=False)
        elif isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor):
            pairs = [(mine, theirs)]
        else:
            continue
        for a, b in pairs:
            if a.grad is not None and b.grad is None:
                b.grad = a.grad.detach().clone()
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(copied)
    return buffer.getvalue()


def unpack_call(data: bytes) -> tuple[tuple, dict]:
    args, kwargs = pickle.loads(data)  # made by the judge (trusted), read in the student's process
    return args, kwargs


# ---------------------------------------------------------------------------------------------------------
# The arguments' state after a call (the student's side sends it, the judge's side takes it in)

STATEFUL = (torch.Tensor, torch.nn.Module, torch.optim.Optimizer, torch.Generator)


def stateful(args: tuple, kwargs: dict) -> list[tuple[list, object]]:
    """(path, object) for each tensor, module, optimizer and generator reachable from the arguments.

    Paths are lists of steps (``["a", 0]``, ``["k", "x"]``, ``["i", 2]``, ``["d", "key"]``, ``["n", "attr"]``)
    and are the same on both sides, since both walk the same structure the same way.
    """
    found: list[tuple[list, object]] = []
    seen: set[int] = set()

    def visit(value, path, depth):
        if id(value) in seen or depth > MAX_DEPTH:
            return
        seen.add(id(value))
        if isinstance(value, STATEFUL):
            found.append((path, value))
            return
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                visit(item, [*path, "i", i], depth + 1)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str | int):
                    visit(item, [*path, "d", key], depth + 1)
        elif isinstance(value, types.SimpleNamespace):
            for key, item in vars(value).items():
                visit(item, [*path, "n", key], depth + 1)

    for i, arg in enumerate(args):
        visit(arg, ["a", i], 0)
    for key, arg in kwargs.items():
        visit(arg, ["k", key], 0)
    return found


def snapshot(obj):
    """What to compare after the call, to send only what changed."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone(), None if obj.grad is None else obj.grad.detach().clone()
    if isinstance(obj, torch.nn.Module):
        return {k: v.detach().clone() for k, v in obj.state_dict().items()}, {
            k: None if p.grad is None else p.grad.detach().clone() for k, p in obj.named_parameters()}
    if isinstance(obj, torch.Generator):
        return obj.get_state().clone()
    return None  # optimizers: always sent


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.is_meta or b.is_meta:  # a tensor on the meta device has no values: only its layout can change
        return a.is_meta and b.is_meta and a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


def state_after(obj, before):
    """The plain state of ``obj`` after the call, or None when nothing changed."""
    if isinstance(obj, torch.Tensor):
        grad = None if obj.grad is None else obj.grad.detach()
        if _same(obj.detach(), before[0]) and _same(grad, before[1]):
            return None
        return {"value": obj.detach(), "grad": grad}
    if isinstance(obj, torch.nn.Module):
        state = {k: v.detach() for k, v in obj.state_dict().items()}
        grads = {k: None if p.grad is None else p.grad.detach() for k, p in obj.named_parameters()}
        if state.keys() == before[0].keys() and all(_same(state[k], before[0][k]) for k in state) \
                and grads.keys() == before[1].keys() and all(_same(grads[k], before[1][k]) for k in grads):
            return None
        return {"state": state, "grads": grads, "training": obj.training}
    if isinstance(obj, torch.Generator):
        state = obj.get_state()
        return None if _same(state, before) else {"generator": state}
    if isinstance(obj, torch.optim.Optimizer):
        return {"optimizer": obj.state_dict()}
    return None


def apply_state(obj, state) -> None:
    """Take in the student's state of one argument (decoded), after checking it fits the judge's object."""
    if not isinstance(state, dict):
        raise DecodeError("an argument's state is not a dict")
    if isinstance(obj, torch.Tensor):
        value, grad = state.get("value"), state.get("grad")
        _fits("the argument", obj, value)
        with torch.no_grad():
            obj.copy_(value)
        if grad is not None:
            _fits("the argument's gradient", obj, grad)
        obj.grad = None if grad is None else grad.to(obj.dtype)
    elif isinstance(obj, torch.nn.Module):
        load_weights(obj, state.get("state"), state.get("grads"))
        if type(state.get("training")) is bool:
            obj.train(state["training"])
    elif isinstance(obj, torch.Generator):
        new = state.get("generator")
        old = obj.get_state()
        if not isinstance(new, torch.Tensor) or new.dtype != torch.uint8 or new.shape != old.shape:
            raise DecodeError("a generator's state of the wrong size")
        obj.set_state(new)
    elif isinstance(obj, torch.optim.Optimizer):
        load_optimizer(obj, state.get("optimizer"))


def _fits(what, mine, theirs):
    if not isinstance(theirs, torch.Tensor) or theirs.shape != mine.shape:
        shape = tuple(theirs.shape) if isinstance(theirs, torch.Tensor) else type(theirs).__name__
        raise DecodeError(f"{what}: expected shape {tuple(mine.shape)}, got {shape}")


def load_weights(module: torch.nn.Module, state, grads) -> None:
    """Load a state dict and gradients (decoded, from the student's side) into the judge's ``module``."""
    mine = module.state_dict()
    if not isinstance(state, dict) or set(state) != set(mine):
        extra = sorted(set(state or {}) - set(mine))[:3]
        missing = sorted(set(mine) - set(state or {}))[:3]
        raise DecodeError(f"the weights do not fit this module (missing {missing}, unexpected {extra})")
    for key, value in state.items():
        _fits(f"weight {key}", mine[key], value)
    module.load_state_dict({k: v.to(mine[k].dtype) for k, v in state.items()})
    params = dict(module.named_parameters())
    for key, grad in (grads or {}).items():
        if key in params:
            if grad is not None:
                _fits(f"gradient of {key}", params[key], grad)
            params[key].grad = None if grad is None else grad.to(params[key].dtype)


HYPER = (bool, int, float, type(None))


def load_optimizer(optimizer: torch.optim.Optimizer, state) -> None:
    """Load an optimizer's state dict from the student's side, after checking its shape against ours."""
    mine = optimizer.state_dict()
    if not isinstance(state, dict) or set(state) != {"state", "param_groups"}:
        raise DecodeError("an optimizer state without exactly 'state' and 'param_groups'")
    groups = state["param_groups"]
    if not isinstance(groups, list) or len(groups) != len(mine["param_groups"]):
        raise DecodeError("an optimizer state with another number of parameter groups")
    for theirs, ours in zip(groups, mine["param_groups"], strict=True):
        if not isinstance(theirs, dict) or set(theirs) != set(ours) or theirs["params"] != ours["params"]:
            raise DecodeError("an optimizer's parameter group that differs from the one it was given")
        for key, value in theirs.items():
            if key != "params" and not (isinstance(value, HYPER) or (type(value) is tuple and all(
                    isinstance(v, HYPER) for v in value))):
                raise DecodeError(f"an optimizer setting {key!r} that is not a number")
    indices = {i for group in mine["param_groups"] for i in group["params"]}
    params = {i: p for group, ours in zip(optimizer.param_groups, mine["param_groups"], strict=True)
              for i, p in zip(ours["params"], group["params"], strict=True)}
    per_param = state["state"]
    if not isinstance(per_param, dict) or not set(per_param) <= indices:
        raise DecodeError("an optimizer state for parameters it does not have")
    for index, entry in per_param.items():
        if not isinstance(entry, dict):
            raise DecodeError("an optimizer's per-parameter state that is not a dict")
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                if value.dim() > 0 and value.shape != params[index].shape:
                    raise DecodeError(f"optimizer state {key!r} of the wrong shape")
            elif not isinstance(value, HYPER):
                raise DecodeError(f"optimizer state {key!r} that is not a tensor or a number")
    optimizer.load_state_dict(state)


# ---------------------------------------------------------------------------------------------------------
# Plain values, student -> judge


class _Budget:
    def __init__(self, error=EncodeError):
        self.items = 0
        self.chars = 0
        self.error = error

    def count(self, items=0, chars=0):
        self.items += items
        self.chars += chars
        if self.items > MAX_ITEMS or self.chars > MAX_STR:
            raise self.error("the value is too large")


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    tensor = tensor.detach().to("cpu").contiguous()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.numpy().tobytes()


def encode(value, blobs: list, module_init=None, depth=0, budget=None, handles=None):
    """``value`` as JSON-able data, its tensors' and arrays' bytes appended to ``blobs``.

    ``module_init(module)`` gives the (args, kwargs) a module was built with, or None when unknown; a module is
    also kept in ``handles`` (by a number sent with it), so that the judge can have it run later.
    """
    budget = budget or _Budget()
    if depth > MAX_DEPTH:
        raise EncodeError("the value is nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        budget.count(chars=len(value) if kind is str else 0)
        return value
    if kind is int:
        if len(str(abs(value))) > MAX_INT_DIGITS:
            raise EncodeError("an integer too large to send back")
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if kind is list:
        budget.count(items=len(value))
        return [encode(v, blobs, module_init, depth + 1, budget, handles) for v in value]
    if kind is tuple or kind is torch.Size:
        budget.count(items=len(value))
        return {"$": "tuple" if kind is tuple else "size",
                "v": [encode(v, blobs, module_init, depth + 1, budget, handles) for v in value]}
    if kind is dict:
        budget.count(items=len(value))
        return {"$": "dict", "k": [encode(k, blobs, module_init, depth + 1, budget, handles) for k in value],
                "v": [encode(v, blobs, module_init, depth + 1, budget, handles) for v in value.values()]}
    if kind in (torch.Tensor, torch.nn.Parameter):
        if value.dtype not in DTYPE_NAMES:
            raise EncodeError(f"a tensor of dtype {value.dtype}, which the grader does not take")
        if value.device.type == "meta":  # sizes and a dtype, no values: a check may ask where a tensor was made
            return {"$": "tensor", "meta": True, "dtype": DTYPE_NAMES[value.dtype], "shape": list(value.shape),
                    "grad": bool(value.requires_grad)}
        budget.count(items=value.numel())
        blobs.append(_tensor_bytes(value))
        return {"$": "tensor", "b": len(blobs) - 1, "dtype": DTYPE_NAMES[value.dtype], "shape": list(value.shape),
                "grad": bool(value.requires_grad)}
    if kind is np.ndarray or isinstance(value, np.generic):
        array = np.asarray(value)
        if array.dtype.name not in NP_DTYPES:
            raise EncodeError(f"an array of dtype {array.dtype}, which the grader does not take")
        budget.count(items=array.size)
        blobs.append(np.ascontiguousarray(array).tobytes())
        return {"$": "array" if kind is np.ndarray else "npscalar", "b": len(blobs) - 1, "dtype": array.dtype.name,
                "shape": list(array.shape)}
    if kind is torch.dtype:
        if value not in DTYPE_NAMES:
            raise EncodeError(f"the dtype {value}, which the grader does not take")
        return {"$": "dtype", "v": DTYPE_NAMES[value]}
    if kind is torch.device:
        return {"$": "device", "v": str(value)}
    if isinstance(value, torch.nn.Module):
        init = module_init(value) if module_init else None
        state = {k: encode(v, blobs, None, depth + 1, budget) for k, v in value.state_dict().items()}
        data = {"$": "module", "class": type(value).__name__, "module": type(value).__module__,
                "bases": [c.__name__ for c in type(value).__mro__[1:] if c.__module__ == "__main__"][:16],
                "init": None if init is None else encode([list(init[0]), dict(init[1])], blobs, None, depth + 1,
                                                          budget),
                "state": state, "training": value.training}
        if handles is not None:
            handles[id(value)] = value
            data["handle"] = id(value)
        return data
    if kind is torch.Generator:
        blobs.append(_tensor_bytes(value.get_state()))
        return {"$": "generator", "b": len(blobs) - 1}
    raise EncodeError(f"a {kind.__name__} object, which the grader cannot take back "
                      "(return tensors, arrays, numbers, strings, lists, tuples, dicts or a model)")


def _shape(data, blob_len: int, itemsize: int) -> tuple:
    shape = data.get("shape")
    if not isinstance(shape, list) or len(shape) > 16 or not all(type(s) is int and 0 <= s for s in shape):
        raise DecodeError("a shape that is not a list of sizes")
    count = math.prod(shape)
    if count > MAX_ITEMS or count * itemsize != blob_len:
        raise DecodeError("a shape that does not match its bytes")
    return tuple(shape)


def decode(data, blobs: list[bytes], depth=0, budget=None):
    """The value that :func:`encode` described, rebuilt from plain data only (modules stay descriptions:
    :class:`ModuleData`, which :func:`rebuild_module` turns into a module of the judge's own class)."""
    budget = budget or _Budget(DecodeError)
    if depth > MAX_DEPTH:
        raise DecodeError("a value nested too deeply")
    if data is None or type(data) in (bool, int, float):
        if type(data) is int and len(str(abs(data))) > MAX_INT_DIGITS:
            raise DecodeError("an integer too large")
        return data
    if type(data) is str:
        budget.count(chars=len(data))
        return data
    if type(data) is list:
        budget.count(items=len(data))
        return [decode(v, blobs, depth + 1, budget) for v in data]
    if type(data) is not dict:
        raise DecodeError(f"a {type(data).__name__} where a value belongs")
    kind = data.get("$")
    try:
        if kind == "float":
            if data["v"] not in ("nan", "inf", "-inf"):
                raise DecodeError("a float that is not nan or inf")
            return float(data["v"])
        if kind in ("tuple", "size"):
            items = data["v"]
            if type(items) is not list:
                raise DecodeError("a tuple without items")
            budget.count(items=len(items))
            values = tuple(decode(v, blobs, depth + 1, budget) for v in items)
            if kind == "size":
                if not all(type(v) is int for v in values):
                    raise DecodeError("a torch.Size of non-integers")
                return torch.Size(values)
            return values
        if kind == "dict":
            keys, values = data["k"], data["v"]
            if type(keys) is not list or type(values) is not list or len(keys) != len(values):
                raise DecodeError("a dict whose keys and values do not pair up")
            budget.count(items=len(keys))
            out = {}
            for k, v in zip(keys, values, strict=True):
                key = decode(k, blobs, depth + 1, budget)
                if not isinstance(key, str | int | float | bool | tuple | type(None)):
                    raise DecodeError("a dict key that is not a plain value")
                out[key] = decode(v, blobs, depth + 1, budget)
            return out
        if kind == "tensor":
            dtype = DTYPES.get(data["dtype"])
            if dtype is None:
                raise DecodeError("a tensor of an unknown dtype")
            if data.get("meta") is True:
                shape = data.get("shape")
                if not isinstance(shape, list) or len(shape) > 16 or not all(type(n) is int and 0 <= n for n in shape) \
                        or math.prod(shape) > MAX_ITEMS:
                    raise DecodeError("a shape that is not a list of sizes")
                return torch.empty(shape, dtype=dtype, device="meta").requires_grad_(
                    data.get("grad") is True and dtype.is_floating_point)
            blob = _blob(blobs, data["b"])
            item = torch.empty(0, dtype=dtype).element_size()
            shape = _shape(data, len(blob), item)
            budget.count(items=math.prod(shape))
            raw = torch.frombuffer(bytearray(blob), dtype=torch.int16 if dtype == torch.bfloat16 else dtype) \
                if blob else torch.empty(0, dtype=torch.int16 if dtype == torch.bfloat16 else dtype)
            tensor = (raw.view(torch.bfloat16) if dtype == torch.bfloat16 else raw).reshape(shape).clone()
            if data.get("grad") is True and tensor.is_floating_point():
                tensor.requires_grad_(True)
            return tensor
        if kind in ("array", "npscalar"):
            if data["dtype"] not in NP_DTYPES:
                raise DecodeError("an array of an unknown dtype")
            dtype = np.dtype(data["dtype"])
            blob = _blob(blobs, data["b"])
            shape = _shape(data, len(blob), dtype.itemsize)
            array = np.frombuffer(blob, dtype=dtype).reshape(shape).copy()
            return array[()] if kind == "npscalar" else array
        if kind == "dtype":
            if data["v"] not in DTYPES:
                raise DecodeError("an unknown dtype")
            return DTYPES[data["v"]]
        if kind == "device":
            return torch.device(str(data["v"])[:32])
        if kind == "generator":
            state = torch.frombuffer(bytearray(_blob(blobs, data["b"])), dtype=torch.uint8).clone()
            generator = torch.Generator()
            if state.shape != generator.get_state().shape:
                raise DecodeError("a generator state of the wrong size")
            generator.set_state(state)
            return generator
        if kind == "module":
            name, where = data["class"], data["module"]
            if type(name) is not str or not name.isidentifier() or type(where) is not str or len(where) > 200:
                raise DecodeError("a module without a class name")
            init = None if data["init"] is None else decode(data["init"], blobs, depth + 1, budget)
            if init is not None and not (type(init) is list and len(init) == 2 and type(init[0]) is list
                                         and type(init[1]) is dict and all(type(k) is str for k in init[1])):
                raise DecodeError("a module's constructor arguments that are not (args, kwargs)")
            state = data["state"]
            if type(state) is not dict:
                raise DecodeError("a module's weights that are not a dict")
            weights = {}
            for key, value in state.items():
                tensor = decode(value, blobs, depth + 1, budget)
                if not isinstance(tensor, torch.Tensor):
                    raise DecodeError("a module weight that is not a tensor")
                weights[key] = tensor
            handle = data.get("handle")
            bases = data.get("bases")
            if not (type(bases) is list and len(bases) <= 16 and all(type(b) is str and len(b) <= 200
                                                                    for b in bases)):
                raise DecodeError("a module without the names of its classes")
            return ModuleData(name, where, init, weights, data.get("training") is True,
                              handle if type(handle) is int else None, bases)
    except KeyError as error:
        raise DecodeError(f"a {kind!r} without its field {error}") from None
    raise DecodeError(f"an unknown kind of value {str(kind)[:40]!r}")


def _blob(blobs, index) -> bytes:
    if type(index) is not int or not 0 <= index < len(blobs):
        raise DecodeError("a reference to a blob that is not there")
    return blobs[index]


class ModuleData:
    """A module as the student's side described it: class name, constructor arguments, weights, and the number
    under which the student's process keeps the module itself (to run its forward there)."""

    def __init__(self, name, where, init, weights, training, handle=None, bases=None):
        self.name, self.where, self.init, self.weights, self.training = name, where, init, weights, training
        self.handle = handle
        self.bases = bases  # the notebook's own classes it is built on, nearest first

    def __repr__(self):
        return f"<a {self.name} from the student's side>"


MAX_INIT_INT = 100_000  # a size in a model's constructor arguments (the lessons' largest is 4,096)
MAX_REBUILD_BYTES = 256 * 2**20  # all tensors of a rebuilt module, buffers that are not sent back included


def module_bytes(module: torch.nn.Module) -> int:
    """What a module's tensors take: parameters, buffers (persistent or not) and tensors kept as attributes."""
    seen, total = set(), 0
    for sub in module.modules():
        tensors = [*sub._parameters.values(), *sub._buffers.values(),
                   *(v for v in vars(sub).values() if isinstance(v, torch.Tensor))]
        for t in tensors:
            if isinstance(t, torch.Tensor) and id(t) not in seen:
                seen.add(id(t))
                total += t.numel() * t.element_size()
    return total


def _plain_init(value, depth=0) -> bool:
    if depth > 4:
        return False
    if type(value) is int:
        return abs(value) <= MAX_INIT_INT
    if value is None or type(value) in (bool, float, str):
        return True
    if type(value) in (list, tuple):
        return len(value) <= 16 and all(_plain_init(v, depth + 1) for v in value)
    return False


def rebuild_module(data: ModuleData, classes: dict) -> torch.nn.Module:
    """A new module of the judge's own class named ``data.name`` (from ``classes``: the lesson's and the
    solution's classes, and torch.nn's), built with the student's constructor arguments and loaded with
    the student's weights. The arguments are plain values; the module is first built on the meta device
    so that sizes a student made up cost nothing before they are compared with the weights."""
    cls = classes.get(data.name)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)) or data.where != "__main__":
        raise DecodeError(f"a {data.name}, which is not a model class of this notebook")
    if data.init is None:
        raise DecodeError(f"a {data.name} whose constructor arguments are unknown")
    ours = [c.__name__ for c in cls.__mro__[1:] if c.__module__ == "__main__"][:16]
    if data.bases is not None and data.bases != ours:  # a GRUModel that is not a SequenceModel, as asked
        theirs = ", ".join(data.bases) or "no class of the notebook"
        raise DecodeError(f"a {data.name} built on {theirs}, not on {', '.join(ours) or 'nn.Module alone'} "
                          "as the exercise asks")
    args, kwargs = data.init
    if not all(_plain_init(v) for v in [*args, *kwargs.values()]) or "device" in kwargs or len(args) > 16:
        raise DecodeError(f"a {data.name} built from arguments that are not plain numbers or strings (each at "
                          f"most {MAX_INIT_INT:,})")
    try:
        with torch.device("meta"):
            shell = cls(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - the student's arguments do not fit our class
        raise DecodeError(f"a {data.name} that cannot be rebuilt from {args}, {kwargs} "
                          f"({type(error).__name__})") from None
    mine = shell.state_dict()
    if set(mine) != set(data.weights) or any(tuple(mine[k].shape) != tuple(data.weights[k].shape) for k in mine):
        raise DecodeError(f"a {data.name} whose weights do not fit {data.name}{tuple(args)}")
    size = module_bytes(shell)  # sizes the student chose (a mask of context_len squared) cost nothing yet
    if size > MAX_REBUILD_BYTES:
        raise DecodeError(f"a {data.name} that would take {size / 2**20:,.0f} MiB to rebuild (at most "
                          f"{MAX_REBUILD_BYTES // 2**20} MiB)")
    module = cls(*args, **kwargs)
    load_weights(module, data.weights, None)
    module.train(data.training)
    return module
