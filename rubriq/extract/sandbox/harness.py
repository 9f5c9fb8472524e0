"""What the sandbox child does with a completion's Python: run it, then find the circuit the way
a reader would, and say why when there is none or it has no fixed unitary.

Runs only inside the sandbox (``zygote._child``, after every isolation layer is in place), on
code the pre-filter may or may not have seen: nothing here is a security boundary.

The rules, in order (docs/extraction.md has an example of each):

1. ``module_circuit``: a QuantumCircuit bound at module level: ``qc``, ``circuit``, ``circ``,
   ... (:data:`PREFERRED_NAMES`), else the last one bound;
2. ``zero_arg_function``: the circuit returned by a module-level function of the code that needs
   no arguments: the only one, else the ones named like ``build*``/``create*``/``*circuit*``/
   ``main`` (if any), the last defined of them; one the code already called during its run is
   not called again (its last return value counts);
3. ``last_built``: the last QuantumCircuit the code itself built: the last circuit a call written
   in the code returned (a constructor, ``QuantumCircuit.copy``/``compose``/..., a function of
   the code), leaving out circuits compiled by ``transpile`` or a pass manager's ``run`` (or
   carrying a layout), so that a circuit only printed, drawn or passed to a simulator is found as
   it was built.

The circuit found must have a unitary: ``for_loop`` is unrolled, other classical control flow
(``if_else``, ``while_loop``, ``switch_case``) and unbound parameters are refused as
``unsupported`` with the reason. A circuit that carries a transpiler layout (the code returned
``transpile(...)`` or ``pass_manager.run(...)``) is read with it
(:func:`rubriq.circuit.layout.with_layout_applied`): the routing and placement permutations become
swaps, so the circuit scored is the one whose operator ``Operator.from_circuit`` gives.

Code around the circuit runs as written (simulation with qiskit_aer, Statevector, transpiling
against fake backends, printing, text drawings), within the completion's time and memory; what
would render a figure (``draw("mpl")``, ``draw("latex")``, ``qiskit.visualization.plot_*``) is
made harmless: it returns an object that accepts any attribute, call or iteration and draws
nothing.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
import types
from typing import Any

PREFERRED_NAMES = ("qc", "circuit", "circ", "quantum_circuit", "qft_circuit", "result")
BUILDER_NAME = re.compile(r"^(build|create)|circuit|^main$", re.I)
"""Names of the functions preferred by rule 2 when more than one needs no arguments."""
SEEN, WRAP = "__rubriq_seen__", "__rubriq_function__"
COMPILERS = frozenset({"transpile", "run"})
"""Calls whose circuit is compiled, not built (``transpile(qc, backend)``, ``pass_manager.run(qc)``)."""
MAX_PARAMETERS_SHOWN = 8


class Unsupported(Exception):
    """The circuit was found but has no fixed unitary (reason in the message)."""


class Harmless:
    """Stands in for a figure: every attribute, call, iteration and context does nothing."""

    def __getattr__(self, name: str) -> Harmless:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Harmless:
        return self

    def __iter__(self):
        return iter(())

    def __enter__(self) -> Harmless:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __repr__(self) -> str:
        return "<figure not rendered in the RubriQ sandbox>"


def _harmless(*args: Any, **kwargs: Any) -> Harmless:
    return Harmless()


TEXT_OUTPUTS = (None, "text")


def make_harmless() -> None:
    """Figures are not rendered: draw("mpl"/"latex"...) and the plot_* functions return
    :class:`Harmless`; text drawings (and ``print``) work as usual, without writing a file."""
    from qiskit import QuantumCircuit

    original = QuantumCircuit.draw

    def draw(self, output=None, *args, **kwargs):
        if output not in TEXT_OUTPUTS:
            return Harmless()
        kwargs.pop("filename", None)
        return original(self, "text", *args, **kwargs)

    draw.__doc__ = original.__doc__
    QuantumCircuit.draw = draw
    try:
        import qiskit.visualization as viz
    except ImportError:  # pragma: no cover - part of qiskit
        return
    drawer = getattr(viz, "circuit_drawer", None)
    if drawer is not None:

        def circuit_drawer(circuit, *args, output=None, **kwargs):
            if output not in TEXT_OUTPUTS:
                return Harmless()
            kwargs.pop("filename", None)
            return drawer(circuit, *args, output="text", **kwargs)

        viz.circuit_drawer = circuit_drawer
    for name in dir(viz):
        if name.startswith("plot_") or name in (
            "dag_drawer",
            "timeline_drawer",
            "pass_manager_drawer",
            "visualize_transition",
        ):
            setattr(viz, name, _harmless)
    try:
        from qiskit.quantum_info import DensityMatrix, Operator, Statevector
    except ImportError:  # pragma: no cover
        return
    for cls in (Statevector, DensityMatrix, Operator):
        _keep_text_draw(cls)


def _keep_text_draw(cls: Any) -> None:
    original = cls.draw

    def draw(self, output=None, *args, **kwargs):
        if output not in (None, "text", "repr"):
            return Harmless()
        return original(self, output, *args, **kwargs)

    cls.draw = draw


class Recorder:
    """The circuits the code's own calls returned, and what its module-level functions returned."""

    def __init__(self) -> None:
        from qiskit import QuantumCircuit

        self._circuit_type = QuantumCircuit
        self.last: Any = None
        self.line = 0
        self.returned: dict[Any, Any] = {}

    def seen(self, value: Any, callee: str = "") -> Any:
        """Wraps every call of the code (``f(x)`` becomes ``seen(f(x), "f")``).  A circuit that a
        compiler returned (``transpile``, a pass manager's ``run``, or one with a layout) was
        compiled, not built: it is not recorded."""
        if isinstance(value, self._circuit_type) and callee not in COMPILERS and value.layout is None:
            self.last = value
            self.line = sys._getframe(1).f_lineno
        return value

    def function(self, f: Any) -> Any:
        """Decorates each module-level function of the code: remembers its last return value."""
        if not isinstance(f, types.FunctionType):
            return f
        returned = self.returned

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = f(*args, **kwargs)
            returned[wrapper] = value
            return value

        return wrapper


class _Instrument(ast.NodeTransformer):
    """``f(x)`` -> ``__rubriq_seen__(f(x))`` everywhere; module-level ``def`` gets the recording
    decorator (innermost).  Line numbers are kept (tracebacks point at the code as written)."""

    def __init__(self) -> None:
        self.depth = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        wrapped = ast.Call(func=ast.Name(id=SEEN, ctx=ast.Load()), args=[node, ast.Constant(callee)], keywords=[])
        return ast.copy_location(wrapped, node)

    def _scope(self, node: ast.AST) -> ast.AST:
        self.depth += 1
        try:
            self.generic_visit(node)
        finally:
            self.depth -= 1
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if self.depth == 0:
            node.decorator_list.append(ast.copy_location(ast.Name(id=WRAP, ctx=ast.Load()), node))
        return self._scope(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self._scope(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return self._scope(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return self._scope(node)


def compile_instrumented(code: str) -> types.CodeType:
    """The completion compiled with the recording calls (SyntaxError as for ``compile``)."""
    tree = _Instrument().visit(ast.parse(code, "<completion>"))
    return compile(ast.fix_missing_locations(tree), "<completion>", "exec")


def _needs_no_arguments(f: Any) -> bool:
    try:
        inspect.signature(f).bind()
    except (TypeError, ValueError):
        return False
    return True


def _own_functions(namespace: dict) -> list[tuple[int, str, Any]]:
    """(line, name, function) of the module-level functions the code defined, in line order."""
    found = []
    for name, value in namespace.items():
        raw = getattr(value, "__wrapped__", value)
        code = getattr(raw, "__code__", None)
        if isinstance(raw, types.FunctionType) and code is not None and code.co_filename == "<completion>":
            found.append((code.co_firstlineno, name, value))
    return sorted(found, key=lambda item: item[0])


def _module_circuit(namespace: dict, circuit_type: type) -> tuple[Any, str] | None:
    for name in PREFERRED_NAMES:
        if isinstance(namespace.get(name), circuit_type):
            return namespace[name], f"module_circuit: the module-level variable {name!r}"
    bound = [(name, v) for name, v in namespace.items() if isinstance(v, circuit_type)]
    if bound:
        return bound[-1][1], f"module_circuit: the module-level variable {bound[-1][0]!r} (the last circuit bound)"
    return None


def choose_function(namespace: dict) -> tuple[str, Any, str] | None:
    """Rule 2's candidate: (name, function, why it was chosen), or None."""
    candidates = [(line, name, f) for line, name, f in _own_functions(namespace) if _needs_no_arguments(f)]
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0][1], candidates[0][2], "the only module-level function that needs no arguments"
    named = [c for c in candidates if BUILDER_NAME.search(c[1])]
    pool = named or candidates
    line, name, f = pool[-1]
    if len(pool) == 1:
        return name, f, "the one named like a builder (build*, create*, *circuit*, main)"
    others = ", ".join(c[1] for c in pool[:-1])
    kind = "named like a builder" if named else "that need no arguments"
    return name, f, f"the last defined of the functions {kind} (also: {others})"


def find_circuit(namespace: dict, recorder: Recorder) -> tuple[Any, str] | tuple[None, str]:
    """(circuit, which rule found it and how) or (None, why not) after the code has run."""
    circuit_type = recorder._circuit_type
    found = _module_circuit(namespace, circuit_type)
    if found is not None:
        return found
    notes = []
    chosen = choose_function(namespace)
    if chosen is not None:
        name, f, why = chosen
        if f in recorder.returned:  # the code called it already: not twice
            value, how = recorder.returned[f], f"returned by {name}() when the code called it"
        else:
            how = f"returned by calling {name}()"
            try:
                value = f()
            except Exception as exc:
                value = None
                notes.append(f"{name}() raised {type(exc).__name__}: {str(exc)[:150]}")
        if isinstance(value, circuit_type):
            return value, f"zero_arg_function: {how} ({why})"
        if value is not None or not notes:
            notes.append(f"{name}() returned {type(value).__name__}, not a QuantumCircuit")
    if recorder.last is not None:
        return recorder.last, f"last_built: the last QuantumCircuit the code built (line {recorder.line})"
    return None, "the code ran but defined no QuantumCircuit" + (f" ({'; '.join(notes)})" if notes else "")


def scorable(circuit: Any) -> Any:
    """The circuit with its for-loops unrolled; Unsupported for other classical control flow and
    for unbound parameters."""
    from qiskit.circuit import ControlFlowOp, ForLoopOp

    if any(isinstance(inst.operation, ForLoopOp) for inst in circuit.data):
        from qiskit.transpiler import PassManager
        from qiskit.transpiler.passes import UnrollForLoops

        circuit = PassManager([UnrollForLoops()]).run(circuit)
    flow = sorted({inst.operation.name for inst in circuit.data if isinstance(inst.operation, ControlFlowOp)})
    if flow:
        raise Unsupported(
            f"dynamic circuits are not scored: the circuit uses {', '.join(flow)} (classical control flow)"
        )
    if circuit.parameters:
        names = [p.name for p in circuit.parameters]
        shown = ", ".join(names[:MAX_PARAMETERS_SHOWN]) + (", ..." if len(names) > MAX_PARAMETERS_SHOWN else "")
        raise Unsupported(f"circuit has unbound parameters: {shown} (no fixed unitary to score)")
    return circuit


def run(code: str, max_ops: int) -> dict[str, Any]:
    """Run the completion and return the child's result object: ``{"circuit": payload, "found":
    how}``, ``{"unsupported": why}`` or ``{"error": why}``."""
    from rubriq.extract.serialize import circuit_to_payload

    recorder = Recorder()
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    namespace[SEEN], namespace[WRAP] = recorder.seen, recorder.function
    try:
        make_harmless()
        exec(compile_instrumented(code), namespace)
        circuit, how = find_circuit(namespace, recorder)
        if circuit is None:
            return {"error": how}
        circuit = scorable(circuit)
        if circuit.layout is not None:  # a compiled circuit (e.g. ``pass_manager.run(qc)``): read with its layout
            from rubriq.circuit.layout import with_layout_applied

            circuit = with_layout_applied(circuit)
            how += "; its transpiler layout applied as swaps"
        return {"circuit": circuit_to_payload(circuit, max_ops=max_ops), "found": how}
    except Unsupported as exc:
        return {"unsupported": str(exc)}
    except BaseException as exc:  # the completion's own failure is a result
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
