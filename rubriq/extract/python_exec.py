"""Execute a Qiskit-Python completion outside the evaluating process.

The completion runs in a child process (``rubriq.extract._worker``) that is

* started in a new session (its own process group), with ``python -I -B`` (no user site,
  no environment-driven imports, no bytecode writes) and a minimal environment (no tokens or
  credentials; single-threaded BLAS);
* resource-limited with rlimits: address space, CPU seconds, file size 0, no core dumps,
  open files;
* killed with its whole process group at the wall-clock deadline.

The parent reads at most ``max_output_bytes`` from a dedicated result pipe and rebuilds the
circuit from allow-listed gates (``serialize.payload_to_circuit``).  This is the basic
isolation; SECURITY.md describes the threat model and what it does not cover yet.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time

from qiskit import QuantumCircuit

from rubriq.config import ExtractionConfig
from rubriq.extract.serialize import PayloadError, payload_to_circuit

RESULT_PREFIX = b"RUBRIQ-RESULT "


class PythonExecutionError(RuntimeError):
    """The completion's Python did not produce a usable circuit."""


def _child_env(result_fd: int, home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "RUBRIQ_RESULT_FD": str(result_fd),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "RAYON_NUM_THREADS": "1",
        "QISKIT_PARALLEL": "FALSE",
    }


def _limit_resources(cfg: ExtractionConfig):
    memory = cfg.python_memory_mb * 1024 * 1024
    cpu = int(cfg.python_timeout_s) + 1

    def apply() -> None:  # runs in the child between fork and exec
        for limit, value in (
            (resource.RLIMIT_AS, memory),
            (resource.RLIMIT_CPU, cpu),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NOFILE, 256),
        ):
            resource.setrlimit(limit, (value, value))

    return apply


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


def run_python(code: str, cfg: ExtractionConfig = ExtractionConfig()) -> QuantumCircuit:
    """Run ``code`` in an isolated child and return the circuit it built.

    Raises :class:`PythonExecutionError` (timeout, crash, no circuit, malformed result).
    """
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryDirectory(prefix="rubriq-py-") as home:
        code_path = os.path.join(home, "completion.py")
        with open(code_path, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(code)
        try:
            with open(code_path, "rb") as stdin:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-B", "-m", "rubriq.extract._worker"],
                    stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    pass_fds=(write_fd,), env=_child_env(write_fd, home), cwd=home,
                    start_new_session=True, preexec_fn=_limit_resources(cfg), close_fds=True,
                )
        finally:
            os.close(write_fd)
        try:
            data, timed_out = _read_capped(read_fd, cfg.python_timeout_s, cfg.max_output_bytes)
        finally:
            os.close(read_fd)
            _kill_group(proc)
    if timed_out:
        raise PythonExecutionError(f"timed out after {cfg.python_timeout_s:g} s")
    line = next((ln for ln in reversed(data.splitlines()) if ln.startswith(RESULT_PREFIX)), None)
    if line is None:
        raise PythonExecutionError(f"the Python process ended without a result (exit code {proc.returncode})")
    try:
        result = json.loads(line[len(RESULT_PREFIX):])
    except ValueError as exc:
        raise PythonExecutionError(f"malformed result from the Python process: {exc}") from None
    if not isinstance(result, dict):
        raise PythonExecutionError("malformed result from the Python process")
    if "error" in result:
        raise PythonExecutionError(f"the code failed: {str(result['error'])[:300]}")
    try:
        return payload_to_circuit(result.get("circuit"), max_qubits=cfg.max_qubits, max_ops=cfg.max_gates)
    except PayloadError as exc:
        raise PythonExecutionError(f"rejected circuit description: {exc}") from None


def _read_capped(fd: int, timeout: float, cap: int) -> tuple[bytes, bool]:
    """Read from ``fd`` until EOF, ``cap`` bytes, or the deadline; return (data, timed_out)."""
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), True
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), False
        size += len(chunk)
        if size > cap:
            raise PythonExecutionError(f"the Python process wrote more than {cap} bytes of result")
        chunks.append(chunk)
