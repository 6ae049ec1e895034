"""The pieces of judging outside the student's process: the channel, what may cross it, and reading a
submission with as little trust as possible (mllm_classroom.channel, codec, judge, worker)."""

import json
import socket
import struct
import types

import pytest
import torch

from mllm_classroom import codec
from mllm_classroom.channel import Channel, ChannelError, Closed, TimedOut, pair
from mllm_classroom.judge import match, read_notebook
from mllm_classroom.lessons import Task
from mllm_classroom.sandbox import Limits, Sandbox


def ends(limit=1024 * 1024):
    a, b = pair()
    return Channel(a, limit), Channel(b, limit)


def test_messages_cross_whole():
    a, b = ends()
    a.send({"op": "x", "n": [1, 2]}, [b"abc", b""])
    assert b.recv(timeout=5) == ({"op": "x", "n": [1, 2]}, [b"abc", b""])


@pytest.mark.parametrize("raw, why", [
    (struct.pack("<Q", 2**40), "over the limit"),
    (struct.pack("<Q", 12) + struct.pack("<I", 100) + b"{}" + b"\0" * 6, "header longer"),
    (struct.pack("<Q", 10) + struct.pack("<I", 2) + b"[]" + struct.pack("<I", 0), "not an object"),
    (struct.pack("<Q", 14) + struct.pack("<I", 2) + b"{}" + struct.pack("<I", 1) + struct.pack("<I", 0),
     "breaks the format"),
])
def test_a_message_that_breaks_the_format_is_refused_before_anything_is_allocated(raw, why):
    a, b = ends()
    a.sock.sendall(raw)
    with pytest.raises(ChannelError, match=why):
        b.recv(timeout=5)


def test_silence_and_a_closed_end_are_told_apart():
    a, b = ends()
    with pytest.raises(TimedOut):
        b.recv(timeout=0.2)
    a.close()
    with pytest.raises(Closed):
        b.recv(timeout=5)


VALUES = [None, True, 3, -2**62, 1.5, float("nan"), float("-inf"), "ünïcode", [1, [2, "a"]], (1, (2.0,)),
          {"a": 1, 2: [3], (1, 2): None}, torch.Size([2, 3]), torch.float16, torch.device("cpu"),
          torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
          torch.tensor(True), torch.zeros(0, 4), __import__("numpy").arange(4.0), __import__("numpy").float32(2.5)]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_plain_values_cross_and_come_back_equal(value):
    blobs = []
    data = json.loads(json.dumps(codec.encode(value, blobs)))
    back = codec.decode(data, blobs)
    assert type(back) is type(value) or (isinstance(value, float) and isinstance(back, float))
    if isinstance(value, torch.Tensor):
        assert back.dtype == value.dtype and torch.equal(back, value)
    elif isinstance(value, float) and value != value:
        assert back != back
    elif hasattr(value, "dtype") and not isinstance(value, torch.dtype):
        assert (back == value).all()
    else:
        assert back == value


def test_a_meta_tensor_crosses_as_its_sizes_and_dtype():
    """A check may ask on which device a learner's function made a tensor (meta works on every machine)."""
    blobs = []
    data = json.loads(json.dumps(codec.encode(torch.zeros(3, 4, dtype=torch.bool, device="meta"), blobs)))
    back = codec.decode(data, blobs)
    assert blobs == [] and back.device.type == "meta" and back.shape == (3, 4) and back.dtype == torch.bool
    with pytest.raises(codec.DecodeError, match="not a list of sizes"):
        codec.decode({"$": "tensor", "meta": True, "dtype": "float32", "shape": [10**6, 10**6]}, [])


@pytest.mark.parametrize("value", [lambda: 1, object(), torch.zeros(2).as_subclass(type("T", (torch.Tensor,), {})),
                                   types.SimpleNamespace(a=1), 10**500, torch.zeros(2, dtype=torch.complex64)])
def test_what_is_not_plain_data_does_not_cross(value):
    with pytest.raises(codec.EncodeError):
        codec.encode(value, [])


@pytest.mark.parametrize("data, blobs, why", [
    ({"$": "pickle", "v": "..."}, [], "unknown kind"),
    ({"$": "tensor", "b": 0, "dtype": "float32", "shape": [3]}, [b"\0" * 8], "does not match its bytes"),
    ({"$": "tensor", "b": 5, "dtype": "float32", "shape": [1]}, [b"\0" * 4], "not there"),
    ({"$": "tensor", "b": 0, "dtype": "object", "shape": [1]}, [b"\0" * 8], "unknown dtype"),
    ({"$": "tensor", "b": 0, "dtype": "float32", "shape": [-1]}, [b""], "not a list of sizes"),
    ({"$": "tensor", "b": 0, "dtype": "float32", "shape": [10**6, 10**6]}, [b""], "does not match"),
    ({"$": "dict", "k": [1], "v": []}, [], "do not pair up"),
    ({"$": "dict", "k": [[1]], "v": [2]}, [], "not a plain value"),
    ({"$": "float", "v": "1e999"}, [], "not nan or inf"),
    ({"$": "module", "class": "os.system", "module": "x", "init": None, "state": {}}, [], "class name"),
    (10**1000, [], "too large"),
])
def test_decoding_checks_every_field(data, blobs, why):
    with pytest.raises(codec.DecodeError, match=why):
        codec.decode(data, blobs)


def test_nesting_and_size_are_bounded():
    deep = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(codec.DecodeError, match="nested too deeply"):
        codec.decode(deep, [])
    with pytest.raises(codec.DecodeError, match="too large"):
        codec.decode(["x" * 1000] * 5000, [])


class Tiny(torch.nn.Module):
    def __init__(self, n, m):
        super().__init__()
        self.layer = torch.nn.Linear(n, m)

    def forward(self, x):
        return self.layer(x)


def test_a_module_comes_back_as_the_judges_own_class_with_the_students_weights():
    student = Tiny(3, 2)
    blobs = []
    data = codec.decode(json.loads(json.dumps(codec.encode(student, blobs, lambda m: ((3, 2), {})))), blobs)
    with pytest.raises(codec.DecodeError, match="not a model class of this notebook"):
        codec.rebuild_module(data, {"Tiny": Tiny})  # only a class the notebook itself defines (in __main__)
    data.where = "__main__"
    rebuilt = codec.rebuild_module(data, {"Tiny": Tiny})
    assert type(rebuilt) is Tiny and torch.equal(rebuilt.layer.weight, student.layer.weight)
    data.init = [[30, 2], {}]  # sizes that do not fit the weights
    with pytest.raises(codec.DecodeError, match="do not fit"):
        codec.rebuild_module(data, {"Tiny": Tiny})
    data.init = [[3, 2], {}]
    with pytest.raises(codec.DecodeError, match="not a model class of this notebook"):
        codec.rebuild_module(data, {})
    data.init = [[10**9, 10**9], {}]  # sizes past any lesson's are refused before anything is built
    with pytest.raises(codec.DecodeError, match="at most"):
        codec.rebuild_module(data, {"Tiny": Tiny})
    data.init = [[3, 2], {"device": "cuda"}]
    with pytest.raises(codec.DecodeError, match="plain"):
        codec.rebuild_module(data, {"Tiny": Tiny})
    data.init = [[3, 2], {}]
    data.name, data.where = "RNN", "torch.nn.modules.rnn"  # torch's own classes are not rebuilt by name
    with pytest.raises(codec.DecodeError, match="not a model class"):
        codec.rebuild_module(data, {"Tiny": Tiny})


def test_an_arguments_state_must_fit_the_judges_object():
    mine = torch.zeros(3)
    codec.apply_state(mine, {"value": torch.ones(3), "grad": None})
    assert torch.equal(mine, torch.ones(3))
    with pytest.raises(codec.DecodeError, match="expected shape"):
        codec.apply_state(mine, {"value": torch.ones(4), "grad": None})
    model = Tiny(2, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model.layer.weight.sum().backward()
    optimizer.step()
    state = optimizer.state_dict()
    state["param_groups"][0]["params"] = [0, 7]
    with pytest.raises(codec.DecodeError, match="differs"):
        codec.load_optimizer(torch.optim.Adam(Tiny(2, 2).parameters()), state)


def test_arguments_go_as_a_pickle_without_the_judges_hooks_but_with_gradients():
    model = Tiny(2, 2)
    calls = []
    model.register_forward_hook(lambda *a: calls.append(1))
    model.layer.weight.grad = torch.ones(2, 2)
    generator = torch.Generator().manual_seed(3)
    (copy, gen), _ = codec.unpack_call(codec.pack_call((model, generator), {}))
    copy(torch.zeros(1, 2))
    assert calls == [] and torch.equal(copy.layer.weight.grad, torch.ones(2, 2))
    assert torch.equal(gen.get_state(), generator.get_state())
    assert model._forward_hooks, "the judge's own module keeps its hook"


def cells(*specs):
    out = []
    for kind, source, gid, cid in specs:
        meta = {"nbgrader": {"grade_id": gid}} if gid else {}
        out.append({"type": kind, "source": source, "meta": meta, "id": cid})
    return out


def test_a_submission_is_matched_by_grade_id_then_cell_id():
    plan = [Task(1, "ex1", 1, 1, 2, "ex1-solution", "ex1-check", "", "", ["f"], "s1", "c1"),
            Task(2, "ex2", 1, 3, 4, "ex2-solution", "ex2-check", "", "", ["g"], "s2", "c2")]
    found = cells(("code", "x = 1", "", "a"), ("code", "def f(): ...", "", "s1"), ("code", "check", "ex1-check", "z"),
                  ("markdown", "def g(): ...", "ex2-solution", "q"), ("code", "extra", "", "w"),
                  ("code", "check", "", "c2"))
    solutions, anchors, checks, notes = match(found, plan)
    assert solutions == {"ex1": 1} and checks == {2, 5} and anchors == {"ex1": 1, "ex2": 4}
    assert notes == ["ex2: its solution cell is a markdown cell, not code: not run"]


@pytest.mark.parametrize("data, status", [
    (b"\xff\xfe", "not a notebook (not UTF-8 text)"),
    (b'{"cells": [', "not a notebook (invalid JSON, line 1; cut off or edited by hand?)"),
    (b"[" * 5000 + b"]" * 5000, "not a notebook (JSON nested too deeply)"),
    (b'{"cells": 3}', "not a notebook (no list of cells)"),
])
def test_what_is_not_a_notebook_says_why(data, status):
    assert read_notebook(data) == (None, status)


def test_odd_cells_are_read_without_trusting_them():
    text = json.dumps({"cells": [3, {"cell_type": "code", "source": ["a", "b"], "metadata": "x"},
                                 {"cell_type": "evil", "source": 5}, {"cell_type": "code", "source": "c", "id": 7}]})
    found, problem = read_notebook(text.encode())
    assert problem is None
    assert [(c["type"], c["source"], c["meta"], c["id"]) for c in found] == [
        ("unreadable", "", {}, ""), ("code", "ab", {}, ""), ("unreadable", "", {}, ""), ("code", "c", {}, "")]


def test_a_worker_runs_calls_and_answers_in_plain_data():
    box = Sandbox("student", Limits(memory_mib=2048), use_sandbox=False)
    channel = box.start()
    try:
        channel.send({"op": "run", "code": "def f(x, out):\n    out.add_(1)\n    return {'twice': 2 * x}\n"
                                           "def boom(x):\n    raise KeyError('secret text')"})
        assert channel.recv(timeout=60)[0] == {"ok": True}
        channel.send({"op": "names", "names": ["f", "boom", "nope"]})
        assert channel.recv(timeout=10)[0]["kinds"] == {"f": "function", "boom": "function", "nope": "missing"}
        out = torch.zeros(2)
        channel.send({"op": "call", "name": "f", "watch": [{"kind": "torch_calls"}], "id": 1},
                     [codec.pack_call((torch.tensor([1.0]), out), {})])
        header, blobs = channel.recv(timeout=30)
        assert codec.decode(header["result"], blobs)["twice"].tolist() == [2.0]
        [(path, state)] = header["state"]
        assert path == ["a", 1] and codec.decode(state, blobs)["value"].tolist() == [1.0, 1.0]
        assert ["add_", 1] in codec.decode(header["observed"][0], blobs)["counts"]
        channel.send({"op": "call", "name": "boom", "watch": [], "id": 2}, [codec.pack_call((1,), {})])
        header, _ = channel.recv(timeout=30)
        assert header["raised"] == "KeyError"
    finally:
        box.kill()


def test_a_worker_that_floods_its_channel_is_cut_off():
    box = Sandbox("student", Limits(memory_mib=2048), use_sandbox=False)
    channel = box.start()
    try:
        code = ("import os, socket, struct\nfor fd in range(3, 1024):\n    try:\n"
                "        s = socket.socket(fileno=os.dup(fd))\n        s.sendall(struct.pack('<Q', 2 ** 40))\n"
                "    except OSError:\n        pass")
        channel.send({"op": "run", "code": code})
        with pytest.raises(ChannelError, match="over the limit"):
            channel.recv(timeout=60)
    finally:
        box.kill()


def test_pair_gives_an_inheritable_end_for_the_child_only():
    a, b = pair()
    assert not a.get_inheritable() and b.get_inheritable()
    assert a.family == socket.AF_UNIX


def test_a_view_with_gaps_arrives_as_one_and_without_the_rest_of_its_storage():
    """A check that hands over a slice (02's `contexts[:5, :2]`) tests code that needs `reshape`, not `view`:
    the student's function gets a tensor laid out the same way, and nothing of what the slice leaves out."""
    whole = torch.arange(1, 41).reshape(10, 4)
    for view in (whole[:5, :2], whole[::2], whole.t()[:2], whole[2:5, 1:3]):
        (got,), _ = codec.unpack_call(codec.pack_call((view,), {}))
        assert torch.equal(got, view) and got.stride() == view.stride() and not got.is_contiguous()
        with pytest.raises(RuntimeError):
            got.view(-1)
        shown = set(view.flatten().tolist())
        stored = torch.tensor([], dtype=got.dtype).set_(got.untyped_storage()).tolist()
        assert set(stored) <= shown | {0}, "the student's copy holds values the slice does not show"


class Masked(torch.nn.Module):  # a lesson's head: a buffer of context_len squared, not among the weights sent back
    def __init__(self, dim, context_len):
        super().__init__()
        self.query = torch.nn.Linear(dim, dim, bias=False)
        self.register_buffer("blocked", torch.ones(context_len, context_len, dtype=torch.bool).triu(1),
                             persistent=False)


Masked.__module__ = "__main__"


def test_a_module_too_large_to_rebuild_is_refused_before_it_is_built():
    """MaskedHead(context_len=50000) would allocate 2.5 GB of mask while the judge rebuilt it: its sizes are
    measured on the meta device first, and it is refused without allocating anything."""
    student = Masked(4, 8)
    blobs = []
    data = codec.decode(json.loads(json.dumps(codec.encode(student, blobs, lambda m: ((4, 8), {})))), blobs)
    data.where = "__main__"
    assert type(codec.rebuild_module(data, {"Masked": Masked})) is Masked
    data.init = [[4, 50_000], {}]
    with pytest.raises(codec.DecodeError, match="would take 2,384 MiB to rebuild"):
        codec.rebuild_module(data, {"Masked": Masked})
    assert codec.module_bytes(Masked(4, 8)) == 4 * 4 * 4 + 8 * 8


def test_an_argument_changed_in_place_is_seen_whatever_its_kind():
    """A list rewritten in place, an item swapped, a dict changed, and a tensor changed and then made complex
    (whose state cannot be encoded): each is reported; an untouched argument is not (fail closed)."""
    from mllm_classroom import worker

    box = Sandbox("student", Limits(memory_mib=2048), use_sandbox=False)
    channel = box.start()
    try:
        channel.send({"op": "run", "code": (
            "import torch\n"
            "def drop(words, table):\n    words[:] = [w for w in words if len(w) > 1]\n    table['x'] = 1\n"
            "    return len(words)\n"
            "def swap(items):\n    items[0] = torch.zeros(1)\n    return 0\n"
            "def hide(x):\n    x.zero_()\n    x.data = x.data.to(torch.complex64)\n    return 0\n"
            "def keep(words, x):\n    return len(words) + x.numel()")})
        assert channel.recv(timeout=60)[0] == {"ok": True}
        cases = [("drop", (["a", "bc"], {"y": 2})), ("swap", ([torch.ones(1)],)), ("hide", (torch.ones(2),)),
                 ("keep", (["a"], torch.ones(2)))]
        replies = {}
        for n, (name, args) in enumerate(cases):
            channel.send({"op": "call", "name": name, "watch": [], "id": n}, [codec.pack_call(args, {})])
            replies[name] = channel.recv(timeout=30)
    finally:
        box.kill()
    assert replies["drop"][0]["changed"] == [["a", 0], ["a", 1]]
    assert replies["swap"][0]["changed"] == [["a", 0]]
    assert replies["hide"][0]["unreadable"] == [["a", 0]]
    keep = replies["keep"][0]
    assert (keep["changed"], keep["unreadable"], keep["state"]) == ([], [], [])
    from mllm_utils.checks import CheckFailed

    for name in ("drop", "swap", "hide"):
        header, blobs = replies[name]
        with pytest.raises(CheckFailed, match="changed"):
            worker.Link._take_state(name, [], header["state"], blobs, header["unreadable"], header["changed"])
    with pytest.raises(codec.DecodeError, match="without the state"):  # an answer that leaves them out
        worker.Link._take_state("keep", [], [], [], None, None)


def test_a_model_sent_back_without_its_handle_is_refused():
    """Without the handle the judge would run its own class's forward (the solution's) in the student's place."""
    from mllm_classroom import worker

    data = codec.ModuleData("Tiny", "__main__", [[3, 2], {}], Tiny(3, 2).state_dict(), False, None)
    with pytest.raises(codec.DecodeError, match="without the handle"):
        worker.Link(None, {"Tiny": Tiny})._rebuild(data)
    data.handle = 7
    rebuilt = worker.Link(None, {"Tiny": Tiny})._rebuild(data)
    assert type(rebuilt) is Tiny and rebuilt.forward.__name__ == "forward" and "Tiny" not in repr(rebuilt.forward)


class Base(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.head = torch.nn.Linear(n, n)


class Built(Base):  # the exercise: a subclass of the lesson's Base
    pass


class Alone(torch.nn.Module):  # the same weights, not built on Base
    def __init__(self, n):
        super().__init__()
        self.head = torch.nn.Linear(n, n)


for _cls in (Base, Built, Alone):
    _cls.__module__ = "__main__"


def test_a_model_not_built_on_the_lessons_class_is_refused():
    """05's GRUModel must be a SequenceModel: the judge rebuilds its own class, so the student's class's own
    bases (the notebook's classes it is built on) must be the same."""
    for student, ok in ((Built(2), True), (Alone(2), False)):
        blobs = []
        encoded = codec.encode(student, blobs, lambda m: ((2,), {}), handles={})
        assert encoded["bases"] == (["Base"] if ok else [])
        data = codec.decode(json.loads(json.dumps(encoded)), blobs)
        data.name = "Built"
        if ok:
            assert type(codec.rebuild_module(data, {"Built": Built})) is Built
        else:
            with pytest.raises(codec.DecodeError, match="built on no class of the notebook, not on Base"):
                codec.rebuild_module(data, {"Built": Built})


def test_a_meta_tensor_argument_left_alone_is_unchanged():
    """Notebook 10's check passes ids on the meta device (shapes without values): reading its state after the call
    must not fail the check (it has no values to compare; only a change of its layout counts)."""
    ids = torch.ones(2, 3, dtype=torch.long).to("meta")
    assert codec.state_after(ids, codec.snapshot(ids)) is None
    resized = torch.ones(2, 3).to("meta")
    before = codec.snapshot(resized)
    resized.resize_(6)
    assert codec.state_after(resized, before) is not None
