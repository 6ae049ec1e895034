"""The process that runs a notebook's code for the grader, inside a sandbox (:mod:`mllm_classroom.sandbox`).

    python -m mllm_classroom.worker --fd N --role student|judge

It is an IPython shell (magics, ``get_ipython()``, display hooks: what a notebook's code expects) driven
by messages on the inherited end of a socketpair (:mod:`mllm_classroom.channel`), nothing else.

- ``student``: runs a submission's cells, and calls the student's functions when the grader asks, with
  arguments the judge pickled; it answers with plain data only (:mod:`mllm_classroom.codec`). Nothing
  it says is trusted.
- ``judge``: runs the lesson, with its solutions, and the check cells. While a check runs, the names the
  exercise defines are proxies (:class:`Remote`): calling one sends the call to the grader, which has the
  student's process run it; the check then compares, here, what came back. As a zygote (before the first
  check) it forks one judge per submission on request, each with a channel of its own.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import os
import signal
import sys

import torch

from mllm_classroom import codec
from mllm_classroom.channel import Channel, ChannelError

MISSING = object()
MAX_NESTED = 10_000  # calls of a proxied function within one call of the student's


def make_shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False  # no sqlite file and no saving thread (the judge forks)
    shell = InteractiveShell.instance(config=config)
    shell.showtraceback = lambda *a, **k: None  # tracebacks are not read; errors come back as results
    shell.showsyntaxerror = lambda *a, **k: None
    return shell


def run_cell(shell, code: str) -> dict:
    """Run one cell; the error it raised, by type name and message, if any."""
    import matplotlib.pyplot as plt

    result = shell.run_cell(code, store_history=False)
    plt.close("all")  # figures are drawn for nobody here
    error = result.error_before_exec or result.error_in_exec
    if error is None:
        return {"ok": True}
    return {"ok": False, "ename": type(error).__name__[:80], "evalue": str(error)[:500], "error": error}


# ---------------------------------------------------------------------------------------------------------
# The student's side


class InitRecorder:
    """While a call runs, the constructor arguments of every module of the notebook's own classes built in it
    (the outermost constructor's, when plain values), so that the judge can build the same module."""

    def __init__(self, namespace: dict):
        self.classes = [v for v in list(namespace.values()) if isinstance(v, type) and issubclass(v, torch.nn.Module)
                        and v.__module__ == "__main__"]
        self.inits: dict[int, tuple] = {}
        self.keep: list = []  # the modules themselves, so that no id is reused while the call runs
        self.saved: list = []

    def __enter__(self):
        for cls in self.classes:
            own = cls.__dict__.get("__init__", MISSING)
            self.saved.append((cls, own))
            cls.__init__ = self._recording(cls, own)
        return self

    def __exit__(self, *exc):
        for cls, own in reversed(self.saved):
            if own is MISSING:
                with contextlib.suppress(AttributeError):
                    del cls.__init__
            else:
                cls.__init__ = own
        return False

    def _recording(self, cls, own):
        recorder = self

        def __init__(self, *args, **kwargs):
            if id(self) not in recorder.inits and all(codec._plain_init(v) for v in [*args, *kwargs.values()]):
                recorder.inits[id(self)] = (args, kwargs)
                recorder.keep.append(self)
            if own is MISSING:
                return super(cls, self).__init__(*args, **kwargs)
            return own(self, *args, **kwargs)

        return __init__

    def init_of(self, module):
        return self.inits.get(id(module))


def _follow(path, args, kwargs):
    """The object at ``path`` (see :func:`codec.stateful`) in the call's arguments."""
    steps = list(path)
    where, key = steps[0], steps[1]
    obj = args[key] if where == "a" else kwargs[key]
    for i in range(2, len(steps), 2):
        kind, key = steps[i], steps[i + 1]
        obj = vars(obj)[key] if kind == "n" else obj[key]
    return obj


class Proxied:
    """A function of the notebook that an exercise must call (03's ``rnn_forward``, twice), replaced while a
    call runs by a stand-in that has the judge run its own function: the judge counts each call itself, so
    nothing in this process can add to the count. Arguments go as plain data, the result comes back as the
    judge pickled it."""

    def __init__(self, name: str, namespace: dict, channel):
        self.name, self.namespace, self.channel = name, namespace, channel
        self.calls: list = []  # what this process saw: nothing (the judge keeps the count)
        self.saved = MISSING

    def __enter__(self):
        self.saved = self.namespace.get(self.name, MISSING)
        self.namespace[self.name] = self._stand_in()
        return self

    def __exit__(self, *exc):
        if self.saved is MISSING:
            self.namespace.pop(self.name, None)
        else:
            self.namespace[self.name] = self.saved
        return False

    def _stand_in(self):
        from mllm_utils import checks

        channel, name = self.channel, self.name

        def stand_in(*args, **kwargs):
            with checks._paused():  # crossing is not the student's work
                out = []
                try:
                    data = codec.encode([list(args), dict(kwargs)], out)
                except codec.EncodeError as error:
                    raise TypeError(f"{name}: {error}") from None
                channel.send({"op": "nested", "name": name, "args": data}, out)
                header, blobs = channel.recv()
                if header.get("op") != "nested_result":
                    raise RuntimeError(f"{name} could not be run")
                if "raised" in header:
                    cls = BUILTIN_ERRORS.get(str(header["raised"]), RuntimeError)
                    raise cls(f"raised by {name}")
                (result,), _ = codec.unpack_call(blobs[0])
                return result

        stand_in.__name__ = stand_in.__qualname__ = name
        return stand_in


def watches(specs, args, kwargs, namespace, channel=None):
    """The checks' watchers for one call, as the judge asked for them (see mllm_utils.checks)."""
    from mllm_utils import checks

    made = []
    for spec in specs:
        kind = spec.get("kind")
        if kind == "function_calls" and spec.get("proxied") is True and channel is not None \
                and str(spec.get("name", "")).isidentifier():
            made.append(Proxied(spec["name"], namespace, channel))
        elif kind == "torch_calls":
            made.append(checks.torch_calls())
        elif kind == "module_calls":
            module = _follow(spec["path"], args, kwargs)
            if spec.get("sub"):
                module = module.get_submodule(spec["sub"])
            made.append(checks.module_calls(module, grad=spec.get("grad") is True))
        elif kind == "function_calls":
            made.append(checks.function_calls(spec["name"], namespace=namespace))
        elif kind == "switched_off":
            made.append(checks.switched_off(*spec["names"], namespace=namespace))
        else:
            raise ValueError(f"unknown watch {kind!r}")
    return made


HANDLES: dict = {}  # the modules the student's functions returned, by number: the judge may run them


def observed(watch):
    """What a watch saw, small: torch_calls as (name, count) pairs in first-seen order, others as they are."""
    from mllm_utils import checks

    if isinstance(watch, checks.torch_calls):
        counts = {}
        for name in watch.calls:
            counts[name] = counts.get(name, 0) + 1
        return {"counts": [[k, v] for k, v in counts.items()]}
    return {"calls": getattr(watch, "calls", None)}


def layout(value, depth=0):
    """What a list, tuple or dict argument holds, to compare before and after a call: its structure, its plain
    values, and which tensor, module or other object sits where (by identity; their contents are compared as
    their own state). A list rewritten in place, or an item swapped, shows here."""
    if depth > codec.MAX_DEPTH:
        return ("deep",)
    kind = type(value)
    if kind in (list, tuple):
        return (kind.__name__, tuple(layout(v, depth + 1) for v in value))
    if kind is dict:
        return ("dict", tuple((repr(k)[:200], layout(v, depth + 1)) for k, v in value.items()))
    if value is None or kind in (bool, int, float, str, complex):
        return (kind.__name__, value)
    return ("object", id(value))


def containers(args: tuple, kwargs: dict) -> list:
    """(path, object) for each argument that is a list, tuple or dict."""
    return [(["a", i], v) for i, v in enumerate(args) if type(v) in (list, tuple, dict)] + \
        [(["k", k], v) for k, v in kwargs.items() if type(v) in (list, tuple, dict)]


def student_call(shell, header: dict, blobs: list[bytes], channel=None) -> tuple[dict, list[bytes]]:
    namespace = shell.user_ns
    if "handle" in header:  # a module returned earlier: its forward, run here
        function = HANDLES.get(header["handle"])
    else:
        function = namespace.get(header["name"])
    args, kwargs = codec.unpack_call(blobs[0])
    tracked = codec.stateful(args, kwargs)
    before = [codec.snapshot(obj) for _, obj in tracked]
    boxes = containers(args, kwargs)
    shapes = [layout(obj) for _, obj in boxes]
    reply, out = {}, []
    made = []
    recorder = InitRecorder(namespace)
    try:
        made = watches(header.get("watch", []), args, kwargs, namespace, channel)
        with recorder, contextlib.ExitStack() as stack:
            for watch in made:
                stack.enter_context(watch)
            result = function(*args, **kwargs)
        reply["result"] = codec.encode(result, out, recorder.init_of, handles=HANDLES)
    except codec.EncodeError as error:
        reply["unsendable"] = str(error)[:300]
    except BaseException as error:  # noqa: BLE001 - whatever the student's code raises is its answer
        reply["raised"] = type(error).__name__[:80]
        reply["message"] = str(error)[:300]
    try:
        reply["observed"] = [codec.encode(observed(w), out) for w in made]
    except Exception:  # noqa: BLE001 - the judge then says the calls could not be observed
        reply["observed"] = None
    states, unreadable = [], []
    for (path, obj), snap in zip(tracked, before, strict=True):
        try:
            state = codec.state_after(obj, snap)
            if state is not None:
                states.append([path, codec.encode(state, out)])
        except Exception:  # noqa: BLE001 - a state that cannot be read fails the check (fail closed)
            unreadable.append(path)
    reply["state"] = states
    reply["unreadable"] = unreadable
    changed = []
    for (path, obj), shape in zip(boxes, shapes, strict=True):
        try:
            if layout(obj) != shape:
                changed.append(path)
        except Exception:  # noqa: BLE001 - as above: what cannot be compared counts as changed
            changed.append(path)
    reply["changed"] = changed
    return reply, out


def describe(shell, names) -> dict:
    kinds = {}
    for name in names:
        value = shell.user_ns.get(name, MISSING)
        if value is MISSING:
            kinds[name] = "missing"
        elif isinstance(value, type):
            kinds[name] = "class"
        else:
            kinds[name] = "function" if callable(value) else "other"
    return kinds


def serve_student(channel: Channel) -> None:
    shell = make_shell()
    while True:
        header, blobs = channel.recv()
        op = header.get("op")
        if op == "run":
            reply = run_cell(shell, header["code"])
            reply.pop("error", None)
            channel.send(reply)
        elif op == "names":
            channel.send({"kinds": describe(shell, header["names"])})
        elif op == "values":  # the values an exercise's cell computed, which its check reads
            values, out = {}, []
            for name in header["names"]:
                try:
                    values[name] = codec.encode(shell.user_ns.get(name), out, handles=HANDLES)
                except Exception:  # noqa: BLE001 - what cannot cross stays out; the check then misses it
                    continue
            channel.send({"values": values}, out)
        elif op == "call":
            reply, out = student_call(shell, header, blobs, channel)
            reply["id"] = header.get("id")
            channel.send(reply, out)
        elif op == "exit":
            return


# ---------------------------------------------------------------------------------------------------------
# The judge's side


class StudentRaised(Exception):
    """What the student's function raised, as its type name (its message is not carried over)."""


class StudentStopped(Exception):
    """The student's process stopped while it ran (its time or memory limit), so nothing came back."""


class StudentUnsendable(Exception):
    """The student's function returned something that cannot cross as plain data."""


# Built-in exceptions a check may catch by type; not those that change how Python runs the check's own loops.
BUILTIN_ERRORS = {name: cls for name, cls in vars(builtins).items()
                  if isinstance(cls, type) and issubclass(cls, Exception)
                  and not issubclass(cls, StopIteration | StopAsyncIteration | GeneratorExit)}


def raised_here(name: str, function: str, exercise="?"):
    """The exception the check sees when the student's ``function`` raised ``name``: the built-in of that
    name (a check may catch TypeError), else StudentRaised; marked as the student's, message not kept."""
    from mllm_utils.checks import NotDone

    if name == "NotDone":
        error = NotDone(exercise, function)
    else:
        cls = BUILTIN_ERRORS.get(name, StudentRaised)
        try:
            error = cls(f"raised by {function}")
        except Exception:  # noqa: BLE001 - a built-in that takes other arguments (UnicodeError ...)
            error = StudentRaised(name)
    error.mllm_student = {"type": name, "function": function}
    return error


class Link:
    """The judge's end of the calls: sends each to the grader and takes the answer in (see :class:`Remote`)."""

    def __init__(self, channel: Channel, classes: dict):
        self.channel = channel
        self.classes = classes
        self.namespace: dict = {}  # the judge's own names (judge_check sets it): what a proxied call runs
        self.count = 0
        self.exercise = "?"

    def call(self, name: str, args: tuple, kwargs: dict, handle: int | None = None):
        from mllm_utils import checks

        # The judge's own work here (copying, rebuilding a returned model) is not the student's: no watch
        # of the judge's sees it; what the student's process observed is added to them instead.
        with checks._paused(), torch._C.DisableTorchFunction():
            tracked = codec.stateful(args, kwargs)
            specs, local = [], []
            for watch in checks.WATCHING:
                spec = self._spec(watch, tracked)
                if spec is not None:
                    specs.append(spec)
                    local.append(watch)
            self.count += 1
            request = {"op": "call", "name": name, "watch": specs, "id": self.count}
            if handle is not None:
                request["handle"] = handle
            self.channel.send(request, [codec.pack_call(args, kwargs)])
            header, blobs = self.channel.recv()
            nested = 0
            while header.get("op") == "nested":  # the student's code calls a function the judge runs and counts
                nested += 1
                self._nested(header, blobs, specs, local, nested)
                header, blobs = self.channel.recv()
            if header.get("stopped"):
                raise StudentStopped(str(header["stopped"])[:300])
            self._take_observations(name, local, header.get("observed"), blobs)
            self._take_state(name, tracked, header.get("state"), blobs, header.get("unreadable"),
                             header.get("changed"))
            if "raised" in header:
                off = [n for spec in specs if spec["kind"] == "switched_off" for n in spec["names"]]
                if header["raised"] == "CheckFailed" and off:  # what the check switched off was called
                    raise self._switched_off_used(name, off)
                raise raised_here(str(header["raised"]), name, self.exercise)
            if "unsendable" in header:
                raise StudentUnsendable(name)
            return self._rebuild(codec.decode(header.get("result"), blobs))

    def _nested(self, header: dict, blobs, specs: list, local: list, count: int) -> None:
        """Run one call of a function the exercise must call, with the judge's own function, count it in the
        check's watch, and send the result (pickled: the student's side reads what the judge made)."""
        name = header.get("name")
        watch = next((w for spec, w in zip(specs, local, strict=True) if spec.get("proxied")
                      and spec.get("name") == name), None)
        function = self.namespace.get(name) if isinstance(name, str) else None
        if watch is None or not callable(function) or count > MAX_NESTED:
            self.channel.send({"op": "nested_result", "raised": "RuntimeError"})
            return
        try:
            args, kwargs = codec.decode(header.get("args"), blobs)
            if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                raise codec.DecodeError("a call's arguments that are not (args, kwargs)")
            watch.calls.append(name)
            result = detached(function(*args, **kwargs))
            self.channel.send({"op": "nested_result"}, [codec.pack_call((result,), {})])
        except Exception as error:  # noqa: BLE001 - the student's code gets the error, by its kind only
            self.channel.send({"op": "nested_result", "raised": type(error).__name__[:80]})

    @staticmethod
    def _take_observations(function: str, local: list, seen, blobs) -> None:
        """What the student's process saw of its own calls, added to the judge's watches; fails closed: a
        missing or malformed observation is a failed check, never "no calls"."""
        from mllm_utils.checks import CheckFailed, torch_calls

        if not local:
            return
        if not isinstance(seen, list) or len(seen) != len(local):
            error = CheckFailed(f"the calls {function} made could not be observed")
            error.parts = {"name": f"how {function} works", "problem": "the calls it made could not be observed",
                           "expected": "an observation of the calls it made", "hint": ""}
            raise error
        for watch, data in zip(local, seen, strict=True):
            value = codec.decode(data, blobs)
            if not isinstance(value, dict):
                raise codec.DecodeError("an observation that is not a dict")
            if isinstance(watch, torch_calls):
                counts = value.get("counts")
                if not isinstance(counts, list) or not all(isinstance(c, list) and len(c) == 2 and
                                                           isinstance(c[0], str) and type(c[1]) is int
                                                           and 0 < c[1] <= codec.MAX_ITEMS for c in counts):
                    raise codec.DecodeError("torch calls that are not (name, count) pairs")
                if sum(c[1] for c in counts) > codec.MAX_ITEMS:
                    raise codec.DecodeError("too many torch calls")
                for call, count in counts:
                    watch.calls.extend([call] * count)
            elif getattr(watch, "mllm_proxied", False):
                continue  # counted by the judge itself (Link._nested): what the student's side says is not read
            elif isinstance(getattr(watch, "calls", None), list):
                calls = value.get("calls")
                if not isinstance(calls, list):
                    raise codec.DecodeError("calls that are not a list")
                watch.calls.extend(calls)

    @staticmethod
    def _take_state(function: str, tracked: list, states, blobs, unreadable=None, containers=None) -> None:
        """The arguments' state after the call: copied back into what the check declared with ``may_change`` and
        into generators (drawing from one is what a sampler does); a change to any other argument fails the
        check (an exercise's inputs are left as they are), and so does a state that cannot be read, a list or
        dict argument changed in place, or an answer without these fields (fail closed)."""
        from mllm_utils.checks import WATCHING, CheckFailed, may_change

        if not isinstance(states, list) or not isinstance(unreadable, list) or not isinstance(containers, list):
            raise codec.DecodeError("an answer without the state of its arguments")
        declared = {id(o) for w in WATCHING if isinstance(w, may_change) for o in w.objects}
        objects = {tuple(p): o for p, o in tracked}
        changed = [describe_path(p) if isinstance(p, list) and len(p) >= 2 else "an argument"
                   for p in [*unreadable, *containers][:3]]
        for entry in states:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list)):
                raise codec.DecodeError("an argument's state without its path")
            path, state = entry
            obj = objects.get(tuple(path))
            if obj is None:
                continue
            if id(obj) in declared or isinstance(obj, torch.Generator):  # a generator is there to be drawn from
                codec.apply_state(obj, codec.decode(state, blobs))
            else:
                changed.append(describe_path(path))
        if changed:
            error = CheckFailed(f"{function} changed its argument {changed[0]}")
            error.parts = {"name": f"{function}'s arguments unchanged", "problem": f"{function} changed "
                           f"{', '.join(changed[:3])}", "expected": "its inputs as they were given",
                           "hint": "work on new tensors (x = x * 2, not x *= 2); never write into an argument"}
            raise error

    @staticmethod
    def _switched_off_used(function: str, names: list[str]):
        from mllm_utils.checks import CheckFailed

        error = CheckFailed(f"{function} called one of {', '.join(names)}, switched off for this check")
        error.parts = {"name": f"without {', '.join(names)}", "problem": f"{function} called what the exercise "
                       "asks you to do without", "expected": f"no call of {', '.join(names)}", "hint": ""}
        return error

    def _spec(self, watch, tracked):
        from mllm_utils import checks

        if isinstance(watch, checks.torch_calls):
            return {"kind": "torch_calls"}
        if isinstance(watch, checks.function_calls):
            if watch.name.isidentifier() and callable(self.namespace.get(watch.name)) \
                    and not isinstance(self.namespace.get(watch.name), Remote | type):
                watch.mllm_proxied = True  # a function of the lesson: the judge runs and counts each call
                return {"kind": "function_calls", "name": watch.name, "proxied": True}
            return {"kind": "function_calls", "name": watch.name}
        if isinstance(watch, checks.switched_off):
            return {"kind": "switched_off", "names": watch.names}
        if isinstance(watch, checks.module_calls):
            for path, obj in tracked:
                if isinstance(obj, torch.nn.Module):
                    for sub, module in obj.named_modules():
                        if module is watch.module:
                            return {"kind": "module_calls", "path": path, "sub": sub, "grad": watch.grad}
        return None

    def _remote_forward(self, name: str, handle: int):
        def forward(*args, **kwargs):
            return self.call(name, args, kwargs, handle=handle)

        return forward

    def _rebuild(self, value):
        if isinstance(value, codec.ModuleData):
            if value.handle is None:  # without it, the judge's own class would run its forward: refused
                raise codec.DecodeError(f"a {value.name} sent back without the handle to run it by")
            module = codec.rebuild_module(value, self.classes)
            # its parameters are here; its forward is the student's, run there
            module.forward = self._remote_forward(f"{value.name}.forward", value.handle)
            return module
        if type(value) is list:
            return [self._rebuild(v) for v in value]
        if type(value) is tuple:
            return tuple(self._rebuild(v) for v in value)
        if type(value) is dict:
            return {k: self._rebuild(v) for k, v in value.items()}
        return value


class Remote:
    """In the judge, a function (or class) of the exercise whose code is the student's: calling it runs it in
    the student's process. ``isinstance(x, proxy)`` asks the judge's own class of that name."""

    def __init__(self, name: str, link: Link, original=None):
        self.__name__ = self.__qualname__ = name
        self._link = link
        self._original = original if isinstance(original, type) else None

    def __call__(self, *args, **kwargs):
        return self._link.call(self.__name__, args, kwargs)

    def __instancecheck__(self, obj) -> bool:
        return self._original is not None and isinstance(obj, self._original)

    def __subclasscheck__(self, cls) -> bool:
        return self._original is not None and issubclass(cls, self._original)

    def __repr__(self) -> str:
        return f"<{self.__name__}, the student's>"


def detached(value, depth=0):
    """``value`` with its tensors cut from the judge's graph (a result crosses as values, not as a graph)."""
    if depth > codec.MAX_DEPTH:
        return value
    if isinstance(value, torch.Tensor):
        return value.detach()
    if type(value) in (list, tuple):
        return type(value)(detached(v, depth + 1) for v in value)
    if type(value) is dict:
        return {k: detached(v, depth + 1) for k, v in value.items()}
    return value


def describe_path(path: list) -> str:
    """``["a", 1, "n", "weight"]`` as "argument 2 (its weight)"."""
    try:
        where = f"argument {path[1] + 1}" if path[0] == "a" else f"argument {str(path[1])[:40]}"
        inner = [str(key)[:40] for key in path[3:9:2]]
    except Exception:  # noqa: BLE001 - a path the student's side made up
        return "an argument"
    return where + (f" (its {'.'.join(inner)})" if inner else "")


def verdict(result: dict, part: str, missing: set) -> dict:
    """What a failed check part says, from the judge's own objects only; every text in it short (a check's
    message may quote what the student's function returned)."""
    found = _verdict(result, part, missing)
    return {k: (v if len(v) <= 300 else v[:288] + " [... cut]") if isinstance(v, str) else v
            for k, v in found.items()}


def _verdict(result: dict, part: str, missing: set) -> dict:
    from mllm_utils.checks import CheckFailed, NotDone

    error = result["error"]
    if isinstance(error, NameError) and getattr(error, "name", None) in missing:
        return {"part": part, "kind": "undefined", "function": error.name}
    student = getattr(error, "mllm_student", None)
    if isinstance(error, NotDone):
        return {"part": part, "kind": "not_done", "function": (student or {}).get("function", "")}
    if student is not None:
        return {"part": part, "kind": "raised", **student}
    if isinstance(error, StudentStopped):
        return {"part": part, "kind": "stopped", "why": str(error)}
    if isinstance(error, JudgeTimeout):
        return {"part": part, "kind": "stopped", "why": "the check ran past its time"}
    if isinstance(error, StudentUnsendable):
        return {"part": part, "kind": "unsendable", "function": str(error)}
    if isinstance(error, CheckFailed) and isinstance(getattr(error, "parts", None), dict):
        return {"part": part, "kind": "check", **error.parts}
    if isinstance(error, AssertionError):  # a plain assert in a check
        return {"part": part, "kind": "check", "name": "check", "problem": str(error)[:300], "expected": "",
                "hint": ""}
    if isinstance(error, codec.DecodeError):
        return {"part": part, "kind": "unusable", "type": "DecodeError", "message": str(error)[:300]}
    return {"part": part, "kind": "unusable", "type": type(error).__name__, "message": str(error)[:300]}


class JudgeTimeout(Exception):
    """The check (the judge's own work, rebuilding what came back included) ran past its time."""


def _judge_timeout(signum, frame):
    raise JudgeTimeout("the check ran past its time")


def judge_check(shell, link: Link, header: dict, blobs: list[bytes]) -> dict:
    namespace = shell.user_ns
    kinds = header["names"]
    values = header.get("values") or {}
    saved = {name: namespace.get(name, MISSING) for name in kinds}
    link.classes = {k: v for k, v in namespace.items() if isinstance(v, type) and issubclass(v, torch.nn.Module)}
    link.namespace = namespace
    try:
        for name, kind in kinds.items():
            if kind == "other" and name in values:
                try:
                    namespace[name] = link._rebuild(codec.decode(values[name], blobs))
                except (codec.DecodeError, ValueError, TypeError):
                    namespace.pop(name, None)
            elif kind in ("missing", "other"):
                namespace.pop(name, None)
            else:
                namespace[name] = Remote(name, link, saved[name] if kind == "class" else None)
        verdicts = []
        seconds = header.get("seconds")
        for part, code in (("visible", header.get("visible", "")), ("hidden", header.get("hidden", ""))):
            if not code.strip():
                continue
            if type(seconds) is int and seconds > 0:  # a bound on the judge's own time, whatever came back
                signal.signal(signal.SIGALRM, _judge_timeout)
                signal.alarm(2 * seconds + 30)
            try:
                result = run_cell(shell, code)
            finally:
                signal.alarm(0)
            if not result["ok"]:
                verdicts.append(verdict(result, part, {n for n, k in kinds.items() if k == "missing"}))
                break
            verdicts.append({"part": part, "kind": "passed"})
        return {"verdicts": verdicts, "calls": link.count}
    finally:
        for name, value in saved.items():
            if value is MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def serve_judge(channel: Channel) -> None:
    shell = make_shell()
    link = Link(channel, {})
    while True:
        header, blobs = channel.recv()
        op = header.get("op")
        if op == "run":
            reply = run_cell(shell, header["code"])
            reply.pop("error", None)
            channel.send(reply)
        elif op == "check":
            link.channel = channel
            link.count = 0
            link.exercise = header.get("exercise", "?")
            channel.send({"op": "checked", **judge_check(shell, link, header, blobs)})
        elif op == "fork":  # the zygote: a judge for one more submission, on the channel it was given
            _, fd = channel.recv_fd()
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                channel.close()
                channel = Channel.from_fd(fd, channel.limit)
                continue
            os.close(fd)
            channel.send({"pid": pid})
        elif op == "exit":
            return


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mllm_classroom.worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--role", choices=("student", "judge"), required=True)
    parser.add_argument("--limit-mib", type=int, default=64)
    args = parser.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")
    channel = Channel.from_fd(args.fd, args.limit_mib * 1024 * 1024)
    # A grader started in the background (nohup, cron, a CI runner) hands SIGINT down as ignored, and Python
    # then keeps it ignored: a cell past its time limit could not be interrupted. Interrupts must work.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.role == "judge":
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked judges are reaped by the kernel
    try:
        (serve_student if args.role == "student" else serve_judge)(channel)
    except ChannelError:
        pass  # the grader went away, or gave up on this process
    sys.stdout.flush()
    os._exit(0)  # a forked judge must not run the zygote's exit handlers


if __name__ == "__main__":
    sys.exit(main())
