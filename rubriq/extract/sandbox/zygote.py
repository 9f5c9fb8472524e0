"""The pre-started worker ("zygote"): imports Qiskit once, then forks one child per job.

Protocol with the parent on stdin/stdout: frames of a 4-byte big-endian length and a JSON
object.  The zygote first sends ``{"ready": true, "layers": ...}``; then for each job
``{"code", "timeout_s", "memory_mb", "max_output_bytes", "max_ops", "slot"}`` it answers
``{"status": "ok"|"error"|"timeout"|"crash"|"overflow", "result": ..., "elapsed_s": ...}``.

The zygote never runs untrusted code itself.  Its child does, after the layers of
``layers.py``; the zygote enforces the deadline by killing the child's process group (and,
when the uid was dropped, every process of the slot's uid), and reaps every descendant
(it is a child subreaper), so no process outlives its job.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import sys
import time

RESULT_PREFIX = b"RUBRIQ-RESULT "
PRELOADED = (
    "numpy", "math", "cmath", "qiskit", "qiskit.circuit", "qiskit.circuit.library", "qiskit.quantum_info",
    "qiskit.synthesis", "qiskit.compiler", "qiskit.transpiler", "qiskit.qasm2", "qiskit.qasm3",
)
PREFERRED_NAMES = ("qc", "circuit", "circ", "quantum_circuit", "qft_circuit", "result")


# -- framing -------------------------------------------------------------------------------
def read_frame(fd: int) -> dict | None:
    header = _read_exact(fd, 4)
    if header is None:
        return None
    (size,) = struct.unpack(">I", header)
    body = _read_exact(fd, size)
    return None if body is None else json.loads(body)


def write_frame(fd: int, obj: dict) -> None:
    body = json.dumps(obj).encode()
    _write_all(fd, struct.pack(">I", len(body)) + body)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# -- child ---------------------------------------------------------------------------------
def _find_circuit(namespace: dict):
    from qiskit import QuantumCircuit

    for name in PREFERRED_NAMES:
        if isinstance(namespace.get(name), QuantumCircuit):
            return namespace[name]
    found = [v for v in namespace.values() if isinstance(v, QuantumCircuit)]
    return found[-1] if found else None


def child_main(job: dict, result_fd: int, active: dict) -> None:  # pragma: no cover - forked child
    from rubriq.extract.sandbox import layers
    from rubriq.extract.serialize import circuit_to_payload

    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, result_fd)
    os.closerange(result_fd + 1, 4096)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    cpu = int(job["timeout_s"]) + 1
    failed = layers.apply(active, job["slot"], job["memory_mb"], cpu, 16)
    out = os.fdopen(result_fd, "w")
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(job["code"], "<completion>", "exec"), namespace)
        circuit = _find_circuit(namespace)
        if circuit is None:
            result = {"error": "the code ran but defined no QuantumCircuit"}
        else:
            result = {"circuit": circuit_to_payload(circuit, max_ops=job["max_ops"])}
    except BaseException as exc:  # the completion's own failure is a result
        result = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    result["layers_failed"] = failed
    out.write((RESULT_PREFIX + json.dumps(result).encode()).decode() + "\n")
    out.flush()
    os._exit(0)


# -- zygote --------------------------------------------------------------------------------
def _kill_job(pid: int, slot: int, uid_dropped: bool) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid_dropped:
        # Every process of the slot's uid, including any that left the process group.
        from rubriq.extract.sandbox.layers import sandbox_uid

        helper = os.fork()
        if helper == 0:  # pragma: no cover - forked helper
            try:
                uid = sandbox_uid(slot)
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(helper, 0)


def _reap_all(deadline: float) -> None:
    """Reap every child (the job's orphans were reparented to us: we are a subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)


def run_job(job: dict, active: dict) -> dict:
    start = time.monotonic()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - forked child
        try:
            os.close(r)
            child_main(job, w, active)
        finally:
            os._exit(70)
    os.close(w)
    deadline = start + float(job["timeout_s"])
    cap = int(job["max_output_bytes"])
    chunks, size, status = [], 0, None
    try:
        while status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                status = "timeout"
                break
            ready, _, _ = select.select([r], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > cap:
                status = "overflow"
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        _kill_job(pid, job["slot"], bool(active.get("uid_drop")))
        _reap_all(time.monotonic() + 2.0)
    elapsed = time.monotonic() - start
    if status is not None:
        return {"status": status, "elapsed_s": elapsed}
    data = b"".join(chunks)
    line = next((ln for ln in reversed(data.splitlines()) if ln.startswith(RESULT_PREFIX)), None)
    if line is None:
        return {"status": "crash", "elapsed_s": elapsed}
    try:
        result = json.loads(line[len(RESULT_PREFIX):])
    except ValueError:
        return {"status": "crash", "elapsed_s": elapsed}
    return {"status": "ok", "result": result, "elapsed_s": elapsed}


def main() -> None:
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    from rubriq.extract.sandbox import layers
    from rubriq.extract.serialize import circuit_to_payload

    # Warm the code paths a job uses, so children inherit them instead of redoing them.
    from qiskit import QuantumCircuit

    warm = QuantumCircuit(2)
    warm.h(0)
    warm.cp(0.1, 0, 1)
    circuit_to_payload(warm)
    layers.become_subreaper()
    slot = int(os.environ.get("RUBRIQ_SANDBOX_SLOT", "0"))
    report = layers.probe(slot)
    active = dict(report["active"])
    rfd, wfd = sys.stdin.fileno(), sys.stdout.fileno()
    write_frame(wfd, {"ready": True, "layers": report, "pid": os.getpid()})
    while True:
        job = read_frame(rfd)
        if job is None:
            return
        job["slot"] = slot
        write_frame(wfd, run_job(job, active))


if __name__ == "__main__":
    main()
