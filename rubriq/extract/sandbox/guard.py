"""AST pre-filter for Qiskit-Python completions: a fast reject, NOT the security boundary.

Honest circuit code imports qiskit (and qiskit_aer to simulate, IBM's fake backends to transpile
against), numpy and math, and never needs dunder attributes or reflection.  Anything else is
rejected before a process is spent on it.  The real boundary is the sandboxed child process (see
SECURITY.md): this filter is bypassable by design.

>>> check_code("from qiskit import QuantumCircuit\\nqc = QuantumCircuit(2)\\nqc.h(0)")
>>> check_code("import os")
Traceback (most recent call last):
...
rubriq.extract.sandbox.guard.GuardError: import of 'os' is not allowed (allowed: qiskit, qiskit_aer, qiskit_ibm_runtime.fake_provider, numpy, math, cmath)
>>> check_code("g = (x for x in [1])\\nf = g.gi_frame.f_back")
Traceback (most recent call last):
...
rubriq.extract.sandbox.guard.GuardError: access to attribute 'f_back' is not allowed (frame or code introspection)
>>> check_code("from numpy.ctypeslib import ctypes")
Traceback (most recent call last):
...
rubriq.extract.sandbox.guard.GuardError: import from 'numpy.ctypeslib' is not allowed (allowed: qiskit, qiskit_aer, qiskit_ibm_runtime.fake_provider, numpy, math, cmath)
"""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import types
from collections import deque
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

ALLOWED_MODULES = ("qiskit", "qiskit_aer", "numpy", "math", "cmath")
ALLOWED_SUBPACKAGES = ("qiskit_ibm_runtime.fake_provider",)
"""Allowed although their top-level package is not: the fake backends that code transpiles
against (calibration data on disk; no account, no network).  Imported with ``from ... import``
or an ``as`` name, so that the rest of qiskit_ibm_runtime (QiskitRuntimeService, Session, Batch,
its Sampler/Estimator that submit jobs) is never bound."""
RUNTIME_NAMES = frozenset(
    {
        "QiskitRuntimeService",
        "IBMBackend",
        "Session",
        "Batch",
        "RuntimeJob",
        "RuntimeJobV2",
        "save_account",
        "qiskit_ibm_runtime",
    }
)
"""Names of IBM Quantum's service and job submission, refused as attributes and imported names."""
ALLOWED_TEXT = ", ".join(ALLOWED_MODULES[:2] + ALLOWED_SUBPACKAGES + ALLOWED_MODULES[2:])
FORBIDDEN_NAMES = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "open",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "__import__",
        "input",
        "breakpoint",
        "help",
        "memoryview",
        "exit",
        "quit",
        "__builtins__",
        "__loader__",
        "__spec__",
        "dir",
        "type",
        "super",
        "object",
        "classmethod",
        "staticmethod",
    }
)
ALLOWED_DUNDER_STRINGS = frozenset({"__main__"})
# Modules reachable through another module's namespace (``from qiskit import os``,
# ``from numpy.ctypeslib import ctypes``, ``np.ctypeslib``): refused as imported names and as
# attributes.  ``random`` and ``math`` stay allowed (numpy.random, qiskit's use of math).
DANGEROUS_NAMES = frozenset(
    {
        "os",
        "sys",
        "ctypes",
        "ctypeslib",
        "subprocess",
        "importlib",
        "builtins",
        "shutil",
        "socket",
        "signal",
        "pickle",
        "marshal",
        "io",
        "pathlib",
        "posix",
        "multiprocessing",
        "threading",
        "_thread",
        "gc",
        "inspect",
        "types",
        "code",
        "codeop",
        "runpy",
        "pty",
        "fcntl",
        "resource",
        "mmap",
        "select",
        "selectors",
        "asyncio",
        "tempfile",
        "glob",
        "platform",
        "sysconfig",
        "site",
        "atexit",
        "weakref",
        "f2py",
        "distutils",
        "testing",
        "lib",
        "compat",
        "utils",
        "pkgutil",
        "zipimport",
        "linecache",
        "traceback",
        "faulthandler",
        "tracemalloc",
        "urllib",
        "http",
        "ftplib",
        "smtplib",
        "requests",
        "dill",
        "cloudpickle",
        "warnings",
        "logging",
        # modules that read attributes or evaluate text by a run-time string, reachable through
        # qiskit's and numpy's own modules (tests/test_sandbox_host.py walks them): typing
        # (get_type_hints evaluates string annotations), string (Formatter.get_field), operator
        # (attrgetter, methodcaller), six (exec_), enum's alias of builtins, stevedore (imports
        # plugins by name), copyreg (pickle's registry)
        "typing",
        "string",
        "operator",
        "six",
        "bltns",
        "stevedore",
        "copyreg",
    }
)
# Frame, traceback, generator/coroutine and code objects: a running generator's frame leads to
# its caller's frames (``gi_frame.f_back.f_globals``), i.e. to the sandbox worker's own globals
# and unrestricted builtins.  The kernel layers hold without this (the job's process has never
# seen another job), but honest circuit code never walks frames.
INTROSPECTION_ATTRIBUTES = frozenset(
    {
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_lasti",
        "f_lineno",
        "f_locals",
        "f_trace",
        "f_trace_lines",
        "f_trace_opcodes",
        "f_generator",
        "tb_frame",
        "tb_lasti",
        "tb_lineno",
        "tb_next",
        "gi_code",
        "gi_frame",
        "gi_running",
        "gi_suspended",
        "gi_yieldfrom",
        "cr_await",
        "cr_code",
        "cr_frame",
        "cr_origin",
        "cr_running",
        "cr_suspended",
        "ag_await",
        "ag_code",
        "ag_frame",
        "ag_running",
        "co_code",
        "co_consts",
        "co_names",
        "co_varnames",
        "co_cellvars",
        "co_freevars",
        "co_filename",
        "co_lines",
        "co_positions",
        "co_linetable",
        "co_lnotab",
        "co_exceptiontable",
        "co_qualname",
        "func_globals",
        "func_code",
        "func_closure",
        "cell_contents",
        "with_traceback",
    }
)
MAX_CODE_BYTES = 65536


class GuardError(ValueError):
    """The code uses a construct honest circuit code never needs."""


ALLOWED_DUNDER_NAMES = frozenset({"__name__"})
"""The only dunder name code may read (``if __name__ == "__main__":``)."""
ALLOWED_DUNDER_DEFINITIONS = frozenset(
    {"__init__", "__repr__", "__str__", "__len__", "__iter__", "__next__", "__call__", "__eq__", "__hash__"}
)
"""Dunder names code may define (methods of its own classes); defining a name reads nothing."""

# -- every identifier of the grammar --------------------------------------------------------------
# What an identifier does decides how strictly it is checked: reading an attribute of an object
# ("attribute": no private, dunder, module, IBM service or introspection name), naming a module
# ("module": a dotted path, each part after the first an attribute read; the first, a package,
# must not be private and is checked against the allowed imports by _check_import), reading or
# assigning a variable ("name": no dangerous builtin, no dunder), binding a new name that reads
# nothing ("binding": a function, class, parameter, keyword argument, alias or capture name; no
# dunder but a few method names).  Every identifier field of Python's grammar has one role below;
# ``identifier_fields`` finds those fields from the ``ast`` module itself, so that a field this
# table does not know (a node added by a new Python version) is refused, never skipped.
IDENTIFIER_ROLES: dict[tuple[str, str], str] = {
    ("Attribute", "attr"): "attribute",
    ("MatchClass", "kwd_attrs"): "attribute",  # case C(attr=p): reads subject.attr
    ("ImportFrom", "module"): "module",  # a dotted module path (and the rules of _check_import)
    ("alias", "name"): "module",  # an imported module path, or a name read from a module
    ("Name", "id"): "name",
    ("Global", "names"): "name",
    ("Nonlocal", "names"): "name",
    ("alias", "asname"): "binding",
    ("FunctionDef", "name"): "binding",
    ("AsyncFunctionDef", "name"): "binding",
    ("ClassDef", "name"): "binding",
    ("arg", "arg"): "binding",
    ("keyword", "arg"): "binding",
    ("ExceptHandler", "name"): "binding",
    ("MatchAs", "name"): "binding",
    ("MatchStar", "name"): "binding",
    ("MatchMapping", "rest"): "binding",
    ("TypeVar", "name"): "binding",  # Python >= 3.12 (PEP 695)
    ("ParamSpec", "name"): "binding",
    ("TypeVarTuple", "name"): "binding",
}
_SIGNATURE = re.compile(r"^(\w+)\((.*)\)$")


def identifier_fields(node_type: type[ast.AST]) -> tuple[str, ...] | None:
    """The fields of ``node_type`` that hold identifiers (``identifier``, ``identifier?`` or
    ``identifier*`` in Python's ASDL grammar), read from the node class's own signature (the
    ``ast`` module documents every node as ``Name(type field, ...)``); None when the class has
    fields but no readable signature (refused: nothing about it is known).

    >>> identifier_fields(ast.MatchClass), identifier_fields(ast.BinOp)
    (('kwd_attrs',), ())
    """
    if node_type in _FIELDS:
        return _FIELDS[node_type]
    _FIELDS[node_type] = found = _identifier_fields(node_type)
    return found


_FIELDS: dict[type[ast.AST], tuple[str, ...] | None] = {}


def _identifier_fields(node_type: type[ast.AST]) -> tuple[str, ...] | None:
    if not node_type._fields:
        return ()
    match = _SIGNATURE.match((node_type.__doc__ or "").strip().split("\n")[0])
    if match is None or match.group(1) != node_type.__name__:
        return None
    found = []
    for part in match.group(2).split(","):
        kind, _, name = part.strip().rpartition(" ")
        if kind.rstrip("?*") == "identifier":
            found.append(name)
    return tuple(found)


# -- deserialization entry points, derived ------------------------------------------------------------
# Unpickling runs any code a byte string names (``cbuiltins\nexec\n...``): round 5 reached it
# through ``np.load(F(b"..."), allow_pickle=True)`` with F a file-like class of the completion's
# own.  Which names of the allowed modules lead to a deserializer is not typed by hand: a walk
# (:func:`derive_deserialization_names`) follows every attribute name the pre-filter admits from
# the allowed imports and reads the bytecode of every function it meets (and of the implicit
# methods of every class: ``__init__``, ``__getitem__``, ...), through the globals, imports and
# attribute chains it calls, to the interpreter's own deserializers below; every attribute name
# under which such an entry point was found is refused (numpy's ``load``, ``NpzFile`` ...,
# dill's or joblib's ``load`` where the walk reaches them).
DESERIALIZER_MODULES = ("pickle", "_pickle", "marshal")
"""The interpreter's deserializers of objects and code: every other one (numpy's load with
pickles, dill, joblib, cloudpickle, shelve, qiskit's own) is built on one of these; their
``load*`` functions and every ``Unpickler`` subclass are the roots the walk looks for."""
WALK_DEPTH = 4
"""Attribute names followed from each allowed import (as deep as the round-4 module walk)."""
CALL_DEPTH = 6
"""Calls followed from a function reached by the walk to a deserializer."""
WALK_MODULES = ("qiskit_aer", "qiskit_ibm_runtime.fake_provider")
"""Imported by the derivation (a subprocess) besides the zygote's own pre-imports."""


def _deserializer_roots() -> tuple[set[int], tuple[type, ...]]:
    import marshal
    import pickle

    modules = [sys.modules.get(name) for name in DESERIALIZER_MODULES]
    roots = {
        id(obj)
        for module in (m for m in modules if m is not None)
        for name, obj in vars(module).items()
        if callable(obj) and "load" in name.lower()
    }
    unpicklers = tuple(
        {pickle.Unpickler, pickle._Unpickler} | {getattr(sys.modules.get("_pickle"), "Unpickler", pickle.Unpickler)}
    )
    roots |= {id(marshal.load), id(marshal.loads)}
    return roots, unpicklers


class _EntryPoints:
    """Whether an object reaches a deserializer (see above); memoized per code object."""

    def __init__(self) -> None:
        self.roots, self.unpicklers = _deserializer_roots()
        self._code: dict[int, bool] = {}

    def reaches(self, obj: Any, depth: int = CALL_DEPTH) -> bool:
        if id(obj) in self.roots:
            return True
        if isinstance(obj, type):
            try:
                if issubclass(obj, self.unpicklers):
                    return True
            except TypeError:
                return False
            return depth > 0 and any(self.reaches(method, depth - 1) for method in _implicit_methods(obj))
        if isinstance(obj, functools.partial):
            return self.reaches(obj.func, depth)
        func = getattr(obj, "__func__", obj)  # a bound method
        func = getattr(func, "__wrapped__", func) if not isinstance(func, types.FunctionType) else func
        if not isinstance(func, types.FunctionType) or depth <= 0:
            return False
        key = id(func.__code__)
        if key not in self._code:
            self._code[key] = False  # a recursive call is not a new route
            self._code[key] = any(self.reaches(ref, depth - 1) for ref in _references(func))
        return self._code[key]


def _implicit_methods(cls: type) -> Iterator[Any]:
    """The dunder methods a class defines (called without naming them: construction, indexing,
    iteration, context managers ...), from its own MRO but ``object``'s."""
    for klass in cls.__mro__[:-1]:
        for name, value in list(vars(klass).items()):
            if name.startswith("__") and name.endswith("__"):
                yield value


def _references(func: types.FunctionType) -> Iterator[Any]:
    """What ``func``'s bytecode calls or hands on (nested functions' too): a global or builtin, a
    closure cell, an imported module's attribute, or the end of an attribute chain from one of
    them (``pickle.load(...)``, ``format.read_array(...)``, ``NpzFile(...)``; a public function
    passed as a value too: qpy hands ``np.load`` to the helper that calls it).  A private
    function passed as a value is not followed: that is how a task goes to a process pool
    (qiskit's PassManager.run hands ``_run_workflow_in_new_process``, which unpickles with dill,
    to parallel_map), a route the job cannot take (seccomp refuses new processes), and ``run``
    is a name honest code needs."""
    cells = dict(zip(func.__code__.co_freevars, func.__closure__ or (), strict=False))
    codes = [func.__code__]
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        current: Any = None
        calling = null_pushed = False
        for ins in dis.get_instructions(code):
            op = ins.opname
            if op in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM") and current is not None:
                try:
                    current = (
                        getattr(current, str(ins.argval), None)
                        if isinstance(current, (types.ModuleType, type))
                        else None
                    )
                except Exception:  # noqa: BLE001 - a lazy attribute that fails to load
                    current = None
                calling = calling or op != "LOAD_ATTR"
                continue
            if current is not None and (calling or not str(getattr(current, "__name__", "_")).startswith("_")):
                yield current  # the chain ended: called, or a public function handed on
            current, calling = None, False
            if op == "LOAD_GLOBAL":
                name = str(ins.argval)
                current = func.__globals__.get(name, getattr(builtins, name, None))
                calling = ins.argrepr.startswith("NULL") or null_pushed
            elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in cells:
                try:
                    current = cells[ins.argval].cell_contents
                except ValueError:
                    current = None
                calling = null_pushed
            elif op == "IMPORT_NAME":
                current = sys.modules.get(str(ins.argval))
            null_pushed = op == "PUSH_NULL"
        if current is not None and (calling or not str(getattr(current, "__name__", "_")).startswith("_")):
            yield current


def derive_deserialization_names(depth: int = WALK_DEPTH) -> dict[str, str]:
    """{attribute name: one path to a deserialization entry point under it}, found by walking
    every attribute name the pre-filter admits from the allowed imports (in this process: the
    zygote's pre-imports and :data:`WALK_MODULES` are imported first)."""
    import importlib

    from rubriq.extract.sandbox import zygote

    for name in (*zygote.PRELOADED, *zygote.OPTIONAL_PRELOADED, *WALK_MODULES):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    entry = _EntryPoints()
    found: dict[str, str] = {}
    seen: set[int] = set()
    starts = [*ALLOWED_MODULES, *ALLOWED_SUBPACKAGES]
    queue = deque((sys.modules[m], m, 0) for m in starts if m in sys.modules)
    while queue:
        obj, path, level = queue.popleft()
        if id(obj) in seen or level >= depth:
            continue
        seen.add(id(obj))
        try:
            names = dir(obj)
        except Exception:  # noqa: BLE001 - an object whose dir() fails is not walked
            continue
        for name in names:
            if name in found:
                continue
            try:
                _check_admitted(name)
                value = getattr(obj, name)
            except Exception:  # noqa: BLE001 - refused names and attributes that fail to load
                continue
            if entry.reaches(value):
                found[name] = f"{path}.{name}"
            elif id(value) not in seen:
                queue.append((value, f"{path}.{name}", level + 1))
    return found


def _check_admitted(name: str) -> None:
    """:func:`check_identifier` for an attribute, without the derived names themselves."""
    _check_attribute(name)


def _walk_key() -> str:
    """What the derived names depend on: this interpreter, the allowed packages' versions, the
    pre-filter's own source."""
    from importlib import metadata

    versions = []
    for dist in ("numpy", "qiskit", "qiskit-aer", "qiskit-ibm-runtime", "dill", "joblib", "cloudpickle"):
        try:
            versions.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist}=-")
    with open(__file__, "rb") as fh:
        source = hashlib.sha256(fh.read()).hexdigest()
    blob = f"{sys.executable}|{sys.version}|{'|'.join(versions)}|{source}"
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


DERIVE_TIMEOUT_S = 600.0
DERIVE_COMMAND = (
    "import json; from rubriq.extract.sandbox.guard import derive_deserialization_names as d; "
    "print(json.dumps(d(), sort_keys=True))"
)


@functools.lru_cache(maxsize=1)
def deserialization_names() -> frozenset[str]:
    """The attribute names the pre-filter refuses because a deserializer lies under them
    (:func:`derive_deserialization_names`), derived once per machine and package versions in a
    subprocess (it imports what the jobs may import) and kept in RubriQ's cache folder.  Raises
    :class:`GuardError` if they cannot be derived (the pre-filter then refuses Python: it cannot
    know what it would let through)."""
    from rubriq.cache import cache_root

    path = cache_root() / "prefilter" / f"deserializers-{_walk_key()}.json"
    try:
        with open(path) as fh:
            return frozenset(json.load(fh))
    except (OSError, ValueError):
        pass
    try:
        proc = subprocess.run(
            [sys.executable, "-c", DERIVE_COMMAND],
            capture_output=True,
            text=True,
            timeout=DERIVE_TIMEOUT_S,
        )
        found = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (OSError, ValueError, IndexError, subprocess.SubprocessError) as exc:
        found, proc = None, None
        log.error("pre-filter: deriving the deserialization entry points failed: %s", exc)
    if not isinstance(found, dict):
        detail = proc.stderr[-500:] if proc is not None else ""
        raise GuardError(f"the pre-filter could not derive the deserialization entry points {detail}".strip())
    log.info("pre-filter: %d deserialization entry points derived (%s)", len(found), ", ".join(sorted(found)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w") as fh:
            json.dump(found, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home: derived again by the next process
        log.warning("pre-filter: could not keep the derived names in %s: %s", path, exc)
    return frozenset(found)


def check_identifier(name: str, role: str) -> None:
    """Raise :class:`GuardError` when the identifier ``name``, in a field of ``role`` (see
    :data:`IDENTIFIER_ROLES`), is outside what honest circuit code needs.

    >>> check_identifier("h", "attribute"), check_identifier("_", "name"), check_identifier("__init__", "binding")
    (None, None, None)
    >>> check_identifier("__globals__", "attribute")
    Traceback (most recent call last):
    ...
    rubriq.extract.sandbox.guard.GuardError: access to private attribute '__globals__' is not allowed
    """
    if role == "attribute":
        _check_attribute(name)
        if name in deserialization_names():
            raise GuardError(f"access to attribute {name!r} is not allowed (a deserialization entry point)")
    elif role == "name":
        if name in FORBIDDEN_NAMES or (name.startswith("__") and name not in ALLOWED_DUNDER_NAMES):
            raise GuardError(f"use of {name!r} is not allowed")
        if name in deserialization_names():  # bound by a star import
            raise GuardError(f"use of {name!r} is not allowed (a deserialization entry point)")
    elif role == "module":
        first, *rest = name.split(".")
        if first.startswith("_"):
            raise GuardError(f"the module name {first!r} is not allowed")
        for part in rest:
            check_identifier(part, "attribute")
    elif role == "binding":
        if name.startswith("__") and name not in ALLOWED_DUNDER_DEFINITIONS:
            raise GuardError(f"the name {name!r} is not allowed")
    else:
        raise GuardError(f"identifier role {role!r} is unknown to the pre-filter")


def _check_attribute(name: str) -> None:
    if name.startswith("_"):
        raise GuardError(f"access to private attribute {name!r} is not allowed")
    if name in DANGEROUS_NAMES:
        raise GuardError(f"access to attribute {name!r} is not allowed (a module reachable through another one)")
    if name in RUNTIME_NAMES:
        raise GuardError(f"access to attribute {name!r} is not allowed (IBM Quantum's service)")
    if name in INTROSPECTION_ATTRIBUTES:
        raise GuardError(f"access to attribute {name!r} is not allowed (frame or code introspection)")


def _check_identifiers(node: ast.AST) -> None:
    """Every identifier ``node`` holds, through :func:`check_identifier`."""
    node_type = type(node)
    fields = identifier_fields(node_type)
    if fields is None:
        raise GuardError(f"{node_type.__name__} nodes are unknown to the pre-filter")
    for field in fields:
        role = IDENTIFIER_ROLES.get((node_type.__name__, field))
        if role is None:
            raise GuardError(f"the identifier field {node_type.__name__}.{field} is unknown to the pre-filter")
        value = getattr(node, field, None)
        for name in value if isinstance(value, list) else [value]:
            if name is None:
                continue
            if not isinstance(name, str):
                raise GuardError(f"{node_type.__name__}.{field} holds a {type(name).__name__}, not an identifier")
            check_identifier(name, role)


# -- imports and the rest ---------------------------------------------------------------------------
def _module_ok(name: str | None) -> bool:
    """An allowed top-level package (or allowed subpackage), and no private or dangerous
    submodule on the way."""
    if not name:
        return False
    if name.split(".")[0] not in ALLOWED_MODULES and not any(
        name == sub or name.startswith(sub + ".") for sub in ALLOWED_SUBPACKAGES
    ):
        return False
    return not any(part.startswith("_") or part in DANGEROUS_NAMES for part in name.split(".")[1:])


def _binds_a_refused_package(alias: ast.alias) -> bool:
    """``import qiskit_ibm_runtime.fake_provider`` binds ``qiskit_ibm_runtime`` itself."""
    return alias.asname is None and "." in alias.name and alias.name.split(".")[0] not in ALLOWED_MODULES


def _check_import(node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if not _module_ok(alias.name):
                raise GuardError(f"import of {alias.name!r} is not allowed (allowed: {ALLOWED_TEXT})")
            if _binds_a_refused_package(alias):
                raise GuardError(
                    f"'import {alias.name}' binds {alias.name.split('.')[0]!r}: use 'from {alias.name} import ...'"
                )
        return
    if node.level or not _module_ok(node.module):
        raise GuardError(f"import from {node.module!r} is not allowed (allowed: {ALLOWED_TEXT})")
    for alias in node.names:
        if alias.name.startswith("_") or alias.name in DANGEROUS_NAMES or alias.name in RUNTIME_NAMES:
            raise GuardError(f"importing {alias.name!r} from {node.module!r} is not allowed")
        if alias.name in deserialization_names():
            raise GuardError(
                f"importing {alias.name!r} from {node.module!r} is not allowed (a deserialization entry point)"
            )


def check_code(code: str) -> None:
    """Raise :class:`GuardError` for code outside the allowed subset."""
    if len(code.encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
        raise GuardError(f"code larger than {MAX_CODE_BYTES} bytes")
    if "\x00" in code:
        raise GuardError("code contains NUL bytes")
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise GuardError(f"not valid Python: {type(exc).__name__}: {str(exc)[:200]}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            _check_import(node)  # first: its messages name the module rules
        _check_identifiers(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            # bytes get the checks strings get (a pickle names its callables in a bytes literal)
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            if "__" in text and text not in ALLOWED_DUNDER_STRINGS:
                raise GuardError(f"{type(node.value).__name__} literals containing '__' are not allowed")
        elif isinstance(node, ast.MatchClass) and node.patterns:
            # case C(p): reads the attribute that C.__match_args__ names, i.e. a name chosen at
            # run time that no check of the source can see
            raise GuardError("class patterns with positional sub-patterns are not allowed (use keyword patterns)")
        elif isinstance(node, (ast.Global, ast.Nonlocal, ast.AsyncFunctionDef, ast.Await)):
            raise GuardError(f"{type(node).__name__} statements are not allowed")
