"""Isolated execution of Qiskit-Python completions (see SECURITY.md).

:func:`run_python` is the only entry point the extraction cascade uses: AST pre-filter
(``guard``), then a pre-started zygote forks a child that runs the code behind the layers of
``layers`` and returns the circuit as capped JSON, which is rebuilt from allow-listed gates
(``rubriq.extract.serialize``).
"""

from __future__ import annotations


from qiskit import QuantumCircuit

from rubriq.config import ExtractionConfig
from rubriq.extract.sandbox.guard import GuardError, check_code
from rubriq.extract.sandbox.pool import SandboxError, SandboxPool, get_pool, shutdown
from rubriq.extract.serialize import PayloadError, payload_to_circuit


class PythonExecutionError(RuntimeError):
    """The completion's Python did not produce a usable circuit."""


def run_python(code: str, cfg: ExtractionConfig = ExtractionConfig(), timeout_s: float | None = None) -> QuantumCircuit:
    """Run ``code`` in the sandbox and return the circuit it built.

    Raises :class:`PythonExecutionError` with the reason (rejected by the pre-filter, timeout,
    crash, output over the cap, malformed or non-allow-listed circuit).
    """
    if cfg.python_prefilter:
        try:
            check_code(code)
        except GuardError as exc:
            raise PythonExecutionError(f"rejected by the pre-filter: {exc}") from None
    timeout = cfg.python_timeout_s if timeout_s is None else min(cfg.python_timeout_s, timeout_s)
    if timeout <= 0:
        raise PythonExecutionError("no time left in the evaluation budget")
    job = {"code": code, "timeout_s": timeout, "memory_mb": cfg.python_memory_mb,
           "max_output_bytes": cfg.max_output_bytes, "max_ops": cfg.max_gates}
    try:
        reply = get_pool(cfg.sandbox_workers).run(job)
    except SandboxError as exc:
        raise PythonExecutionError(str(exc)) from None
    status = reply.get("status")
    if status == "timeout":
        raise PythonExecutionError(f"timed out after {timeout:g} s")
    if status == "overflow":
        raise PythonExecutionError(f"the code wrote more than {cfg.max_output_bytes} bytes of result")
    if status != "ok":
        raise PythonExecutionError("the Python process ended without a result (exit, crash or memory limit)")
    result = reply.get("result")
    if not isinstance(result, dict):
        raise PythonExecutionError("malformed result from the sandbox")
    if "error" in result:
        raise PythonExecutionError(f"the code failed: {str(result['error'])[:300]}")
    try:
        return payload_to_circuit(result.get("circuit"), max_qubits=cfg.max_qubits, max_ops=cfg.max_gates)
    except PayloadError as exc:
        raise PythonExecutionError(f"rejected circuit description: {exc}") from None


def doctor(cfg: ExtractionConfig = ExtractionConfig()) -> dict:
    """Start a sandbox worker and report which isolation layers are active here."""
    return get_pool(cfg.sandbox_workers).ensure_started()


__all__ = ["PythonExecutionError", "SandboxPool", "doctor", "run_python", "shutdown"]
