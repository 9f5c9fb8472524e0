"""Isolated execution of Qiskit-Python completions (see SECURITY.md).

:func:`run_python` is the only entry point the extraction cascade uses: AST pre-filter
(``guard``), then a pre-started zygote runs the code in a fresh process tree behind the
kernel layers of ``layers`` (namespaces, unprivileged uid, no capabilities, the seccomp
allow-list of ``seccomp``) and returns the circuit as capped JSON, which is rebuilt from
allow-listed gates (``rubriq.extract.serialize``).

Failures of the completion raise :class:`PythonExecutionError` (``error_type="parse"``); a
circuit without a fixed unitary (unbound parameters, classical control flow) raises
:class:`PythonUnsupported` (``unsupported``, with the reason); a
completion that ran out of its time, or a job that waited its whole time for a free job slot,
raises :class:`PythonTimeout` or :class:`SandboxBusy` (``budget``); failures of the sandbox itself
(a worker cannot start or dies, a layer is missing in strict mode) raise
:class:`SandboxUnavailable` (``sandbox``).  Only the sandbox's own code can cause the last: what
a completion writes is at most its own ``parse`` error, with at most 300 characters of its text.
Neither ``budget`` nor ``sandbox`` results are cached by the evaluator.
"""

from __future__ import annotations

import functools

from qiskit import QuantumCircuit

from rubriq.config import ExtractionConfig
from rubriq.extract.sandbox.guard import GuardError, check_code
from rubriq.extract.sandbox.pool import (
    MIN_JOB_S,
    SandboxBusy,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
    get_pool,
    shutdown,
)
from rubriq.extract.serialize import PayloadError, payload_to_circuit

SANDBOX_METADATA = "rubriq_sandbox"
"""Key of ``circuit.metadata`` under which :func:`run_python` records the layers that were missing."""
FOUND_METADATA = "rubriq_found"
"""Key of ``circuit.metadata`` under which :func:`run_python` records which rule found the
circuit and how (harness.py: ``module_circuit: ...``, ``zero_arg_function: ...``, ``last_built: ...``)."""


class PythonExecutionError(RuntimeError):
    """The completion's Python did not produce a usable circuit."""


class PythonUnsupported(PythonExecutionError):
    """The code built a circuit that has no fixed unitary (unbound parameters, classical control
    flow): ``error_type="unsupported"``, with the reason."""


class PythonTimeout(PythonExecutionError):
    """The completion ran until its deadline (``error_type="budget"``: it depends on the
    machine's load as much as on the code, so it is never cached)."""


def run_python(code: str, cfg: ExtractionConfig = ExtractionConfig(), timeout_s: float | None = None) -> QuantumCircuit:
    """Run ``code`` in the sandbox and return the circuit it built.

    Raises :class:`PythonExecutionError` with the reason (rejected by the pre-filter, crash,
    output over the cap, malformed or non-allow-listed circuit), :class:`PythonTimeout` (its
    time ran out), :class:`SandboxBusy` (no job slot in its time) or
    :class:`SandboxUnavailable` (the sandbox could not run it).  The returned circuit's
    ``metadata[SANDBOX_METADATA]`` maps each missing isolation layer to why (empty when all hold).
    """
    if cfg.python_prefilter:
        try:
            check_code(code)
        except GuardError as exc:
            raise PythonExecutionError(f"rejected by the pre-filter: {exc}") from None
    from rubriq.extract.sandbox.protocol import MAX_CODE_BYTES

    if len(code.encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
        raise PythonExecutionError(f"code larger than {MAX_CODE_BYTES} bytes")
    timeout = cfg.python_timeout_s if timeout_s is None else min(cfg.python_timeout_s, timeout_s)
    if timeout < MIN_JOB_S:  # nothing worth starting a job for
        raise PythonTimeout(
            f"no sandbox time left for this completion (its Python blocks share python_timeout_s = "
            f"{cfg.python_timeout_s:g} s, within the evaluation budget)"
        )
    job = {
        "code": code,
        "timeout_s": timeout,
        "memory_mb": cfg.python_memory_mb,
        "max_output_bytes": cfg.max_output_bytes,
        "max_ops": cfg.max_gates,
        "strict": cfg.sandbox_strict,
    }
    reply = get_pool(cfg.sandbox_workers, cfg.sandbox_max_jobs or None).run(job)
    status = reply.get("status")
    if status == "sandbox":
        raise SandboxUnavailable(f"the sandbox could not run the code: {reply.get('error')}")
    if status == "bad_job":
        raise SandboxUnavailable(f"the sandbox refused the job: {reply.get('error')}")
    if status == "timeout":
        raise PythonTimeout(f"timed out after {timeout:g} s")
    if status == "overflow":
        raise PythonExecutionError(f"the code wrote more than {cfg.max_output_bytes} bytes of result")
    if status == "malformed":
        raise PythonExecutionError(f"malformed result from the sandboxed code: {reply.get('error')}")
    if status != "ok":
        raise PythonExecutionError("the Python process ended without a result (exit, crash or memory limit)")
    result = reply.get("result")
    if not isinstance(result, dict):
        raise PythonExecutionError("malformed result from the sandbox")
    if "error" in result:
        raise PythonExecutionError(f"the code failed: {str(result['error'])[:300]}")
    if "unsupported" in result:
        raise PythonUnsupported(str(result["unsupported"])[:300])
    try:
        circuit = payload_to_circuit(result.get("circuit"), max_qubits=cfg.max_qubits, max_ops=cfg.max_gates)
    except PayloadError as exc:
        raise PythonExecutionError(f"rejected circuit description: {exc}") from None
    circuit.metadata = {
        SANDBOX_METADATA: dict(reply.get("missing") or {}),
        FOUND_METADATA: str(result.get("found", ""))[:300],
    }
    return circuit


@functools.lru_cache(maxsize=1)
def environment_problems() -> tuple[str, ...]:
    """Why the sandbox's layers cannot all hold on this machine, found without starting a worker
    (checked once per process; ``rubriq doctor`` runs the full probe)."""
    import os
    import platform

    from rubriq.extract.sandbox import seccomp

    problems = []
    if platform.system() != "Linux":
        return ("the sandbox needs Linux (namespaces, seccomp)",)
    ok, why = seccomp.supported()
    if not ok:
        problems.append(why)

    def sysctl(name: str) -> str | None:
        try:
            with open(f"/proc/sys/{name}") as fh:
                return fh.read().strip()
        except OSError:
            return None

    if sysctl("user/max_user_namespaces") == "0":
        problems.append("user namespaces are disabled (sysctl user.max_user_namespaces = 0)")
    if os.geteuid() != 0:
        if sysctl("kernel/unprivileged_userns_clone") == "0":
            problems.append("unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone = 0)")
        if sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1":
            problems.append(
                "AppArmor restricts unprivileged user namespaces "
                "(sysctl kernel.apparmor_restrict_unprivileged_userns = 1)"
            )
    return tuple(problems)


def doctor(cfg: ExtractionConfig = ExtractionConfig()) -> dict:
    """Start a sandbox worker and report which isolation layers hold here."""
    return get_pool(cfg.sandbox_workers, cfg.sandbox_max_jobs or None).ensure_started()


__all__ = [
    "PythonExecutionError",
    "PythonTimeout",
    "PythonUnsupported",
    "FOUND_METADATA",
    "SANDBOX_METADATA",
    "SandboxBusy",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "doctor",
    "environment_problems",
    "run_python",
    "shutdown",
]
