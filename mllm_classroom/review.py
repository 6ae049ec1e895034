"""What a submission's own code does that a grader must not trust: read, never run.

A notebook is graded in one Python process, so code a student wrote shares it with the checks that
judge it: it can replace a check, fake an equality, swallow an error or read a later cell. No sandbox
stops that (the sandbox protects the teacher's machine, not the checks); what stops it is reading the
code first. :func:`review` parses every cell the student wrote or changed (the lesson's own cells, and
the check cells nbgrader restores, are trusted) and reports each thing an honest answer never needs:

- modules that reach the interpreter, the kernel or the machine (``sys``, ``os``, ``gc``, ``ctypes``,
  ``inspect``, ``importlib``, ``IPython``, ``torch.overrides`` ...), and the ways around an import
  (``exec``, ``eval``, ``__import__``, a dynamic ``getattr``, ``globals()``, any ``__dunder__`` attribute);
- the kernel itself (``get_ipython``, the cell history ``In`` / ``_ih``; magics but ``%matplotlib``, timing
  magics around code, which is read as a cell, help such as ``nn.RNN?`` and ``!`` commands that only describe
  the machine), files (``open``, paths such as ``/proc`` or ``../``);
- assignments to attributes of a module (``checks.check_close = ...``, ``torch.allclose = ...``) and
  rebinding a module that the lesson imported (a check reads its inputs and helpers from the judge's own
  run of the lesson, so naming ``x`` or ``model`` in the student's process changes no verdict: not flagged);
- private parts of torch or NumPy (``torch._native_multi_head_attention``), ``getattr`` passed as a value,
  ``operator``, and a routine an exercise asks to do without where it can reach the solution;
- answers that decide their own comparisons: a class with ``__eq__``, ``__torch_function__`` and the
  like, or a subclass of a tensor, an array or a built-in type.

Each finding names the cell and what it does; the grader withholds the points of every exercise checked
after that cell and lists the findings for the teacher (``review`` column of grades.csv).
"""

from __future__ import annotations

import ast
import functools
import re
import threading
from dataclasses import dataclass

from mllm_classroom.lessons import HIDDEN, SOLUTION

MODULES = {
    "os", "sys", "subprocess", "ctypes", "gc", "inspect", "importlib", "builtins", "socket", "shutil", "signal",
    "resource", "multiprocessing", "threading", "_thread", "pickle", "marshal", "types", "code", "codeop",
    "IPython", "ipykernel", "jupyter_client", "zmq", "atexit", "pathlib", "io", "tempfile", "glob", "traceback",
    "weakref", "ast", "dis", "runpy", "pty", "fcntl", "mmap", "urllib", "http", "requests", "asyncio",
    "concurrent", "psutil", "posix", "sqlite3", "unittest", "pytest", "nbformat", "nbgrader", "mllm_classroom",
    "platform", "sysconfig", "site", "faulthandler", "tracemalloc", "linecache", "contextvars", "operator",
    "pydoc", "pickletools", "copyreg", "shelve", "dill", "cloudpickle", "joblib", "zipimport", "pkgutil",
}
SUBMODULES = ("torch.overrides", "torch._C", "torch.library", "torch.utils._python_dispatch", "torch._dynamo",
              "numpy.lib.mixins", "mllm_utils._validate")
NAMES = {
    "exec": "runs code built from a string", "eval": "runs code built from a string",
    "compile": "builds code from a string", "__import__": "imports by name", "globals": "reads the kernel's names",
    "vars": "reads an object's namespace", "locals": "reads a namespace", "setattr": "sets an attribute by name",
    "delattr": "deletes an attribute by name", "get_ipython": "reaches the kernel (hooks, cell history, magics)",
    "open": "opens a file", "breakpoint": "starts a debugger", "exit": "ends the kernel", "quit": "ends the kernel",
    "In": "reads the cell history", "Out": "reads the output history", "_ih": "reads the cell history",
    "_oh": "reads the output history", "_dh": "reads the folder history", "__builtins__": "reaches the built-ins",
    "memoryview": "reads raw memory",
}
HISTORY = re.compile(r"^_i{1,3}$|^_i\d+$|^_\d+$")
# What a learner's code may take from the course's checks: the stub's exception. Anything else reaches what
# grading watches in the learner's process (the record of the calls a function makes).
CHECKS_ALLOWED = {"NotDone", "check_close", "check_equal", "check_shape", "check_true", "check_not_called"}
# Magics an honest notebook uses whose code review reads (a timed cell's body is reviewed as its own cell), and
# shell commands that only print what the machine is.
TIMING_MAGICS = {"time", "timeit", "capture"}
HELP_MAGICS = {"pinfo", "pinfo2", "pdoc", "psource", "pdef"}
SHELL_COMMANDS = {"nvidia-smi", "nproc", "free", "lscpu", "uname", "ls", "pwd", "whoami", "date", "df", "hostname"}
SHELL_SAFE = re.compile(r"^[A-Za-z0-9_.=/ -]*$")
MAGIC_OPTIONS = re.compile(r"^(\s*-[A-Za-z]+(\s+\d+)?)*\s*")
ATTRIBUTES = {"sys", "os", "modules", "builtins", "_C", "overrides", "subprocess", "ctypes", "gc", "f_back",
              "f_globals", "f_locals", "f_builtins", "gi_frame", "cr_frame", "tb_frame", "tb_next", "user_ns",
              "events", "run_cell", "showtraceback", "set_custom_exc", "_getframe", "settrace", "setprofile"}
SAFE_DUNDERS = {"__init__", "__name__", "__call__", "__repr__", "__str__", "__len__", "__getitem__", "__iter__",
                "__next__", "__post_init__", "__doc__"}
BASES = {"Tensor", "ndarray", "Parameter", "int", "float", "str", "bool", "list", "tuple", "dict", "set",
         "frozenset", "bytes", "complex", "type", "TorchFunctionMode", "TorchDispatchMode", "generic"}
PATH = re.compile(r"^(/[A-Za-z_.]|~|\.\./)|/\.\./|/proc\b")
DUNDER = re.compile(r"^__\w+__$")


# Grading reviews in one thread per shard, and CPython 3.11's parser is not safe to call from two threads at
# once ("SystemError: AST constructor recursion depth mismatch", fixed in 3.12): one parse at a time.
PARSING = threading.Lock()


@functools.cache
def library_functions() -> frozenset[str]:
    """Names of the functions and methods the checks rely on: assigning to ``anything.allclose`` or
    ``m.check_close`` replaces one, whatever the object is called (a function's argument, an alias)."""
    import builtins

    import numpy
    import torch
    import torch.nn.functional

    import mllm_utils.checks

    names = set()
    for space in (mllm_utils.checks, torch, torch.Tensor, torch.nn.functional, numpy, numpy.ndarray, builtins):
        names.update(n for n in dir(space) if callable(getattr(space, n, None)) and not n.startswith("_"))
    return frozenset(names)


@dataclass
class Finding:
    cell: int  # index in the submitted notebook
    label: str  # "ex2-solution" or "cell 14"
    what: str

    def __str__(self) -> str:
        return f"{self.label}: {self.what}"


def python_of(source: str) -> ast.Module | None:
    """The Python a kernel runs for ``source`` (IPython's ``!`` and ``%`` lines turned into calls)."""
    with PARSING:
        try:
            from IPython.core.inputtransformer2 import TransformerManager

            source = TransformerManager().transform_cell(source)
        except Exception:  # noqa: BLE001 - IPython missing or an odd cell: parse it as it is
            pass
        try:
            return ast.parse(source)
        except (SyntaxError, ValueError):
            return None  # it does not run in the kernel either


def module_bindings(tree: ast.Module) -> set[str]:
    """Names a cell binds at module level (not inside a function or class body)."""
    names: set[str] = set()

    def visit(node):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Global):
            names.update(node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def imports(tree: ast.Module) -> dict[str, str]:
    """Name -> what it was imported as (``np`` -> ``numpy``, ``check_close`` -> ``mllm_utils.checks.check_close``)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                found[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                found[a.asname or a.name] = f"{node.module}.{a.name}"
    return found


def reads(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def stored_into(target: ast.AST):
    """The attributes and items an assignment writes through: ``a.b[i].c = ...`` gives ``a.b[i].c``, ``a.b[i]``
    and ``a.b``; an index or a slice (``x[E.norm(dim=1) == 0]``) is only read, so it is not among them."""
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from stored_into(element)
    elif isinstance(target, ast.Starred):
        yield from stored_into(target.value)
    elif isinstance(target, ast.Attribute | ast.Subscript):
        yield target
        yield from stored_into(target.value)


def root_name(node) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def chain(node) -> list[str]:
    """Attribute names along ``a.b[0].c()`` from the outside in."""
    names = []
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.func if isinstance(node, ast.Call) else node.value
    return names


class Lesson:
    """What review needs from a lesson (with its hidden tests): trusted cells, imports, and what checks read."""

    def __init__(self, lesson):
        self.trusted = set()
        self.imported: dict[str, str] = {}
        self.check_reads: dict[str, set[str]] = {}  # check cell id -> names it reads
        self.solution_binds: dict[str, set[str]] = {}  # solution cell id -> names the lesson's solution binds
        self.locked_ids = set()  # cells whose source nbgrader puts back from the lesson before running them
        self.forbidden: dict[str, set[str]] = {}  # solution cell id -> names its exercise asks to do without
        self.tags = {"raises-exception"} | {t for c in lesson.cells for t in c.metadata.get("tags", [])}
        self.nbgrader = {c.metadata["nbgrader"].get("grade_id"): dict(c.metadata["nbgrader"])
                         for c in lesson.cells if "nbgrader" in c.metadata}
        for cell in lesson.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade_id") and not meta.get("solution") and (meta.get("grade") or meta.get("locked")):
                self.locked_ids.add(meta["grade_id"])
            if cell.cell_type != "code":
                continue
            if meta.get("solution"):
                tree = python_of(SOLUTION.sub(lambda m: m.group(1), cell.source))
                self.solution_binds[meta["grade_id"]] = module_bindings(tree) if tree else set()
                continue
            visible = HIDDEN.sub("", cell.source)
            self.trusted.add(normal(visible))
            tree = python_of(HIDDEN.sub(lambda m: m.group(1), cell.source))
            if tree is None:
                continue
            self.imported.update(imports(tree))
            if meta.get("grade"):  # what a check reads that it does not set itself (a loop's `i` is its own)
                self.check_reads[meta["grade_id"]] = reads(tree) - module_bindings(tree)
                self.forbidden[meta["grade_id"].replace("-check", "-solution")] = forbidden_names(tree)
        self.checked_names = set().union(*self.check_reads.values()) if self.check_reads else set()


def forbidden_names(tree: ast.Module) -> set[str]:
    """What a check asks the exercise to do without: the names given to ``switched_off`` (their last part) and
    to ``check_not_called``. Review flags any use of them in the learner's code, an alias included."""
    tuples = {}  # NAME = ("a", "b"): a tuple of names a check gives by its name
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Tuple | ast.List):
            tuples[node.targets[0].id] = strings(node.value.elts)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name == "switched_off":
            for arg in node.args:
                given = strings([arg]) or (tuples.get(arg.value.id, set()) if isinstance(arg, ast.Starred)
                                           and isinstance(arg.value, ast.Name) else set())
                found |= {n.rsplit(".", 1)[-1] for n in given}
        elif name == "check_not_called" and len(node.args) >= 3:
            arg = node.args[2]
            found |= strings(arg.elts) if isinstance(arg, ast.Tuple | ast.List) else tuples.get(
                getattr(arg, "id", ""), set())
    return found


def strings(nodes) -> set[str]:
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def normal(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def review(cells: list[dict], lesson: Lesson, solutions: dict, check_cells: set) -> list[Finding]:
    """Findings for every cell of a submission (cells as :func:`mllm_classroom.judge.read_notebook` gives
    them) that the student's process will run and the student wrote or changed, and for metadata a
    submission added. Fails closed: a cell that cannot be read is a finding, never skipped."""
    findings, solution_trees, built = [], [], {}
    solution_at = {index: f"{name}-solution" for name, index in solutions.items()}
    for index, cell in enumerate(cells):
        findings += metadata_findings(index, cell, lesson)
        gid = cell_grade_id(cell)
        if gid in lesson.solution_binds and cell["type"] != "code":
            findings.append(Finding(index, gid, f"a {cell['type']} cell in the place of the solution (not run)"))
        if cell["type"] != "code" or index in check_cells or normal(cell["source"]) in lesson.trusted:
            continue
        label = solution_at.get(index) or f"cell {index}"
        allowed = lesson.solution_binds.get(solution_at.get(index, ""), set())
        if index in solution_at:
            forbidden = lesson.forbidden.get(solution_at[index], set())
        else:  # a cell the student added or changed: what any exercise asks to do without
            forbidden = set().union(*lesson.forbidden.values()) if lesson.forbidden else set()
        try:
            tree = python_of(cell["source"])
            if tree is None:
                findings.append(Finding(index, label, "code that does not parse: not read, held for review"))
                continue
            for what in sorted(set(cell_findings(tree, lesson, allowed, forbidden, solution=index in solution_at))):
                findings.append(Finding(index, label, what))
            if index in solution_at:
                solution_trees.append((index, label, tree, forbidden))
            else:
                for name, used in built_with(tree, forbidden).items():
                    built.setdefault(name, (index, used))
        except (RecursionError, MemoryError):
            findings.append(Finding(index, label, "code nested too deeply to be read: held for review"))
    # A value made in another cell with what an exercise asks to do without (a layer built there), read by the
    # solution: the shortcut taken through a name.
    for index, label, tree, forbidden in solution_trees:
        try:
            free = reads(tree) - bound_names(tree)
        except RecursionError:
            continue
        for name in sorted(free):
            if name in built and built[name][1] & forbidden:
                where, used = built[name]
                findings.append(Finding(index, label, f"reads {name}, made in cell {where} with "
                                                      f"{', '.join(sorted(used & forbidden))}, which this exercise "
                                                      "asks you to do without"))
    return findings


def bound_names(tree: ast.Module) -> set[str]:
    """Every name a cell binds anywhere (parameters, assignments, loops, imports, definitions)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def built_with(tree: ast.Module, forbidden: set[str]) -> dict[str, set[str]]:
    """Names a cell binds at its top level to a value made with forbidden names: name -> the names used."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
            used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} | \
                   {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)}
            if used & forbidden:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            found[n.id] = used & forbidden
    return found


def cell_grade_id(cell: dict) -> str:
    meta = cell["meta"].get("nbgrader")
    return meta.get("grade_id", "") if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str) else ""


def metadata_findings(index: int, cell: dict, lesson: Lesson) -> list[Finding]:
    """Tags and nbgrader fields the student version does not have: the grader ignores them, review names them."""
    found = []  # tags (JupyterLab's tag editor) are not read by the grader, which runs every cell itself
    if "nbgrader" in cell["meta"]:
        meta = cell["meta"]["nbgrader"]
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or lesson.nbgrader.get(gid) != meta:
            found.append(Finding(index, f"cell {index}", "nbgrader metadata that differs from the student version's"))
    return found


def cell_findings(tree: ast.Module, lesson: Lesson, allowed: set[str], forbidden: set[str] = frozenset(),
                  depth: int = 0, solution: bool = True):
    """What one cell does that is not trusted. In a cell the student added (``solution`` False), a name an
    exercise asks to do without counts only where it can reach a solution: inside a function or class, or bound
    to another name as it is (an alias); trying a function beside the library's own routine is honest."""
    own_imports = imports(tree)
    harmless, bodies = harmless_magics(tree)
    for body in bodies:  # a timed cell's code, reviewed as the cell it is
        inner = python_of(body) if depth < 3 else None
        if inner is None:
            yield "a magic whose code does not parse: not read"
        else:
            yield from cell_findings(inner, lesson, allowed, forbidden, depth + 1, solution)
    reaching = None if solution else reaching_nodes(tree)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom):
                names += [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] in MODULES or name.startswith(SUBMODULES) or node_is_relative(node):
                    yield f"imports {name} (reaches the interpreter, the kernel or the machine)"
            if isinstance(node, ast.ImportFrom) and node.module == "mllm_utils.checks":
                for alias in node.names:
                    if alias.name not in CHECKS_ALLOWED:
                        yield f"imports {alias.name} from the course's checks (what grading watches)"
            elif isinstance(node, ast.Import) and any(a.name == "mllm_utils.checks" for a in node.names) or \
                    isinstance(node, ast.ImportFrom) and node.module == "mllm_utils" and any(
                        a.name == "checks" for a in node.names):
                yield "imports the course's checks (what grading watches)"
            for alias in node.names:
                for part in {alias.name.rsplit(".", 1)[-1], alias.asname or ""} & forbidden:
                    yield f"uses {part}, which this exercise asks you to do without"
        elif isinstance(node, ast.keyword) and node.arg == "allow_pickle":
            yield "loads a pickle (allow_pickle): runs code that cannot be read first"
        if (isinstance(node, ast.Name) and node.id in forbidden or isinstance(node, ast.Attribute) and
                node.attr in forbidden) and (reaching is None or id(node) in reaching):
            yield f"uses {getattr(node, 'id', None) or node.attr}, which this exercise asks you to do without"
        if isinstance(node, ast.Name) and node.id == "WATCHING" or isinstance(node, ast.Attribute) and \
                node.attr in ("WATCHING", "_paused"):
            yield "reaches what grading watches in the learner's process (WATCHING)"
        if isinstance(node, ast.Import | ast.ImportFrom | ast.keyword):
            continue
        elif isinstance(node, ast.Name):
            if node.id == "get_ipython" and id(node) in harmless:
                continue
            if node.id in NAMES and isinstance(node.ctx, ast.Load):
                yield f"uses {node.id} ({NAMES[node.id]})"
            elif HISTORY.match(node.id):
                yield f"uses {node.id} (reads the kernel's history)"
            elif node.id == "getattr" and isinstance(node.ctx, ast.Load) and id(node) not in called:
                yield "uses getattr as a value (attributes by computed names)"
        elif isinstance(node, ast.Attribute):
            if DUNDER.match(node.attr) and node.attr not in SAFE_DUNDERS:
                yield f"uses the attribute {node.attr}"
            elif node.attr in ATTRIBUTES:
                yield f"uses the attribute .{node.attr}"
            elif node.attr.startswith("_") and library_root(node, lesson, own_imports):
                yield (f"uses {node.attr[:60]}, a private part of a library (a way around what an exercise "
                       "asks you to do without)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            name = node.args[1] if len(node.args) > 1 else None
            if not isinstance(name, ast.Constant) or DUNDER.match(str(name.value)):
                yield "uses getattr with a computed or special name"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if DUNDER.match(node.value) and node.value not in SAFE_DUNDERS:
                yield f"names {node.value} in a string"
            elif PATH.search(node.value):
                yield f"names the path {node.value[:40]!r}"
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                names = [root_name(base), *chain(base)]
                if BASES & {n for n in names if n}:
                    yield f"class {node.name} subclasses {ast.unparse(base)} (a value that decides its own checks)"
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and DUNDER.match(item.name) \
                        and item.name not in SAFE_DUNDERS:
                    yield f"class {node.name} defines {item.name} (an answer that decides its own comparisons)"
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                for part in stored_into(target):
                    if isinstance(part, ast.Attribute | ast.Subscript):
                        root = root_name(part)
                        replaced = isinstance(part, ast.Attribute) and part.attr in library_functions()
                        if root in lesson.imported or root in own_imports or replaced:
                            yield f"assigns to {ast.unparse(part)[:60]} (changes a module the checks use)"
                            break
        if isinstance(node, ast.Global):
            for name in node.names:
                if name in lesson.imported:
                    yield f"declares global {name} (a module the lesson imported)"
    # A check reads its inputs, reference values and helpers from the judge's own run of the lesson, never from
    # the student's process: naming `x`, `rnn` or `model` there changes no verdict. A module of the lesson's
    # bound to something else is named (what the exercise's functions reach through it is no longer the module).
    for name in sorted(module_bindings(tree)):
        if name in lesson.imported and own_imports.get(name) != lesson.imported[name] and \
                lesson.imported[name].split(".")[0] in MODULE_ROOTS:
            yield f"rebinds {name} (imported by the lesson as {lesson.imported[name]})"


def library_root(node: ast.Attribute, lesson: Lesson, own_imports: dict) -> bool:
    """Whether ``a.b._c`` starts at a name bound to a module of torch, NumPy or the course's package."""
    root = root_name(node)
    module = own_imports.get(root) or lesson.imported.get(root) or ""
    return module.split(".")[0] in {"torch", "numpy", "mllm_utils"}


def reaching_nodes(tree: ast.Module) -> set[int]:
    """Ids of the nodes of an added cell through which a name can reach a solution: everything inside a function,
    lambda or class, and a value bound to a name as it is (``Lin = nn.Linear``, not ``layer = nn.Linear(2, 3)``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            found.update(id(n) for n in ast.walk(node))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            value = node.value
            while isinstance(value, ast.Tuple | ast.List) and value.elts:
                found.update(id(n) for e in value.elts if isinstance(e, ast.Name | ast.Attribute)
                             for n in ast.walk(e))
                break
            if isinstance(value, ast.Name | ast.Attribute):
                found.update(id(n) for n in ast.walk(value))
    return found


MODULE_ROOTS = {"torch", "numpy", "mllm_utils", "math", "random", "matplotlib", "ipywidgets"}


def harmless_magics(tree: ast.Module) -> tuple[set[int], list[str]]:
    """The ``get_ipython()`` calls an honest notebook makes (``%matplotlib inline``, ``%%time`` and ``%timeit``
    around code, ``nn.RNN?``, ``!nvidia-smi -L``), by the id of their ``get_ipython`` name, and the code the timing
    magics run (reviewed as a cell of its own). Every other magic and ``!`` line stays a finding."""
    found, bodies = set(matplotlib_magics(tree)), []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
                and node.func.value.func.id == "get_ipython" and not node.func.value.args
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
                and not node.keywords):
            continue
        method, args = node.func.attr, [a.value for a in node.args]
        ok = False
        if method == "run_cell_magic" and len(args) == 3 and args[0] in TIMING_MAGICS \
                and SHELL_SAFE.match(args[1]):
            bodies.append(args[2])
            ok = True
        elif method == "run_line_magic" and len(args) == 2 and args[0] in TIMING_MAGICS:
            bodies.append(MAGIC_OPTIONS.sub("", args[1]))  # %timeit -n 3 -r 1 f(x): the code is f(x)
            ok = True
        elif method == "run_line_magic" and len(args) == 2 and args[0] in HELP_MAGICS:
            ok = all(part.isidentifier() for part in args[1].strip().split("."))
        elif method in ("system", "getoutput") and len(args) == 1:
            words = args[0].split()
            ok = bool(words) and words[0] in SHELL_COMMANDS and bool(SHELL_SAFE.match(args[0])) \
                and ".." not in args[0]
        if ok:
            found.add(id(node.func.value.func))
    return found, bodies


def matplotlib_magics(tree: ast.Module) -> set[int]:
    """``%matplotlib inline`` (a backend's name, nothing else) is the one magic let through: every other
    magic and every ``!`` line hands the kernel code that review cannot read (``%time f()``, a shell that
    writes a module the next cell imports)."""
    found = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run_line_magic"
                and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
                and node.func.value.func.id == "get_ipython" and len(node.args) == 2
                and all(isinstance(a, ast.Constant) for a in node.args) and node.args[0].value == "matplotlib"
                and str(node.args[1].value).isidentifier()):
            found.add(id(node.func.value.func))
    return found


def node_is_relative(node) -> bool:
    return isinstance(node, ast.ImportFrom) and bool(node.level)
