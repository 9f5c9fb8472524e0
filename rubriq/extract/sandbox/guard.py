"""AST pre-filter for Qiskit-Python completions: a fast reject, NOT the security boundary.

Honest circuit code imports qiskit, numpy and math, and never needs dunder attributes or
reflection.  Anything else is rejected before a process is spent on it.  The real boundary is
the sandboxed child process (see SECURITY.md): this filter is bypassable by design.

>>> check_code("from qiskit import QuantumCircuit\\nqc = QuantumCircuit(2)\\nqc.h(0)")
>>> check_code("import os")
Traceback (most recent call last):
...
rubriq.extract.sandbox.guard.GuardError: import of 'os' is not allowed (allowed: qiskit, numpy, math, cmath)
"""

from __future__ import annotations

import ast

ALLOWED_MODULES = ("qiskit", "numpy", "math", "cmath")
FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "open", "getattr", "setattr", "delattr", "globals", "locals", "vars",
    "__import__", "input", "breakpoint", "help", "memoryview", "exit", "quit", "__builtins__",
    "__loader__", "__spec__", "dir", "type", "super", "object", "classmethod", "staticmethod",
})
ALLOWED_DUNDER_STRINGS = frozenset({"__main__"})
MAX_CODE_BYTES = 65536


class GuardError(ValueError):
    """The code uses a construct honest circuit code never needs."""


def _module_ok(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in ALLOWED_MODULES


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
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _module_ok(alias.name):
                    raise GuardError(f"import of {alias.name!r} is not allowed (allowed: {', '.join(ALLOWED_MODULES)})")
        elif isinstance(node, ast.ImportFrom):
            if node.level or not _module_ok(node.module):
                raise GuardError(f"import from {node.module!r} is not allowed (allowed: {', '.join(ALLOWED_MODULES)})")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                raise GuardError(f"access to private attribute {node.attr!r} is not allowed")
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_NAMES or (node.id.startswith("__") and node.id != "__name__"):
                raise GuardError(f"use of {node.id!r} is not allowed")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "__" in node.value and node.value not in ALLOWED_DUNDER_STRINGS:
                raise GuardError("string literals containing '__' are not allowed")
        elif isinstance(node, (ast.Global, ast.Nonlocal, ast.AsyncFunctionDef, ast.Await)):
            raise GuardError(f"{type(node).__name__} statements are not allowed")
