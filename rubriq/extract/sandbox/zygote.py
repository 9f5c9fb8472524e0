"""The pre-started worker ("zygote"): imports Qiskit once, then runs each job in a fresh,
isolated process tree (``layers.py``: supervisor S -> init I -> child K).

Protocol with the parent on stdin/stdout: frames of a 4-byte big-endian length and a JSON
object.  The zygote first sends ``{"ready": true, "layers": <probe>}``.  A job is
``{"nonce", "code", "timeout_s", "memory_mb", "max_output_bytes", "max_ops", "strict"}``; the
answer echoes the nonce: ``{"nonce", "status", "result"?, "error"?, "missing", "elapsed_s"}``
with status ``ok`` (``result`` is the child's JSON), ``timeout``, ``overflow`` (more than
``max_output_bytes`` written), ``crash`` (no result: exit, signal, memory limit), ``malformed``
(a result that is not one JSON object), ``sandbox`` (a layer could not be set up: the
completion did not run) or ``bad_job``.

Result pipe: K owns the only write end.  It writes one line of isolation facts before the
completion runs (so the completion cannot retract them) and one result line after.  The
zygote reads at most ``max_output_bytes`` until its deadline, then kills the job's process
group and reaps every descendant (it is a child subreaper); the kernel kills whatever is left
in the job's PID namespace when its init dies.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import sys
import time
from typing import Any

PRELOADED = (
    "numpy",
    "math",
    "cmath",
    "qiskit",
    "qiskit.circuit",
    "qiskit.circuit.library",
    "qiskit.quantum_info",
    "qiskit.synthesis",
    "qiskit.compiler",
    "qiskit.transpiler",
    "qiskit.qasm2",
    "qiskit.qasm3",
)
OPTIONAL_PRELOADED = ("pyseccomp",)
"""Without it the seccomp layer is reported missing (strict mode then refuses Python), but the
worker still starts and says why."""
PREFERRED_NAMES = ("qc", "circuit", "circ", "quantum_circuit", "qft_circuit", "result")
JOB_LIMITS = {
    "timeout_s": (0.001, 600.0),
    "memory_mb": (64, 65536),
    "max_output_bytes": (1024, 64 << 20),
    "max_ops": (1, 10_000_000),
}
MAX_CODE_BYTES = 1 << 20
EXIT_SETUP = 71


# -- framing -------------------------------------------------------------------------------
class FrameError(ValueError):
    """A frame that is too large, truncated, late or not a JSON object."""


def write_frame(fd: int, obj: dict) -> None:
    """Write one length-prefixed JSON frame to ``fd``."""
    body = json.dumps(obj).encode()
    _write_all(fd, struct.pack(">I", len(body)) + body)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_frame(fd: int, deadline: float | None = None, max_bytes: int = 64 << 20) -> dict | None:
    """One frame; None at end of file before a header.  With ``deadline`` (time.monotonic())
    every read waits at most until then; a header announcing more than ``max_bytes`` is refused
    before anything is allocated.  Raises :class:`FrameError`."""
    header = _read_exact(fd, 4, deadline)
    if header is None:
        return None
    (size,) = struct.unpack(">I", header)
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes announced (limit {max_bytes})")
    body = _read_exact(fd, size, deadline)
    if body is None:
        raise FrameError("frame truncated")
    try:
        obj = json.loads(body)
    except ValueError as exc:
        raise FrameError(f"frame is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError("frame is not a JSON object")
    return obj


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise FrameError("no complete frame before the deadline")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0 and not chunks:
                return None
            raise FrameError("frame truncated")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def validate_job(job: dict) -> str | None:
    """Why ``job`` is not a valid job, or None."""
    if not isinstance(job.get("nonce"), str) or not isinstance(job.get("code"), str):
        return "job needs a nonce and code (strings)"
    if len(job["code"].encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
        return f"code larger than {MAX_CODE_BYTES} bytes"
    for key, (low, high) in JOB_LIMITS.items():
        value = job.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            return f"{key} must be a number in [{low}, {high}], got {value!r}"
    return None


# -- the job's processes (forked; never return) ----------------------------------------------
class _Context:
    """What the zygote knows once and the job's processes inherit."""

    def __init__(self, slot: int) -> None:
        from rubriq.extract.sandbox import layers

        self.slot = slot
        self.host_ns = layers.namespace_ids()
        self.root = os.geteuid() == 0
        self.outside_uid, self.outside_gid = layers.outside_ids(slot)
        self.zygote_pid = os.getpid()
        self.needed_paths = layers.needed_paths()  # the zygote's imports do not change between jobs

    def missing(self, facts: dict) -> dict[str, str]:
        from rubriq.extract.sandbox import layers

        return layers.check_isolation(facts, self.host_ns, self.outside_uid, self.root)


def _setup_failure(w: int, where: str, exc: BaseException) -> None:  # pragma: no cover - forked
    try:
        os.write(w, json.dumps({"setup_error": f"{where}: {type(exc).__name__}: {exc}"[:500]}).encode() + b"\n")
    finally:
        os._exit(EXIT_SETUP)


def _keep_only(*fds: int) -> None:  # pragma: no cover - forked
    keep = sorted(set(fds))
    low = 0
    for fd in keep:
        if low < fd:  # os.closerange(0, 0) would close everything (close_range(0, -1))
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 65536)


def _supervisor(job: dict, ctx: _Context, w: int, ready_w: int, maps_r: int) -> None:  # pragma: no cover
    from rubriq.extract.sandbox import layers

    try:
        os.setsid()
        _keep_only(w, ready_w, maps_r)
        layers.set_pdeathsig()
        if os.getppid() != ctx.zygote_pid:
            os._exit(EXIT_SETUP)
    except BaseException as exc:
        _setup_failure(w, "supervisor", exc)
    try:
        layers.unshare_all()
    except BaseException as exc:
        os.write(ready_w, b"x")
        _setup_failure(w, "namespaces", exc)
    os.write(ready_w, b"u")
    os.close(ready_w)
    if os.read(maps_r, 1) != b"m":
        _setup_failure(w, "uid map", OSError("the zygote did not write the uid map"))
    os.close(maps_r)
    try:
        layers.build_mount_view(ctx.needed_paths)
    except BaseException as exc:
        _setup_failure(w, "mounts", exc)
    pid = os.fork()
    if pid == 0:
        _init(job, ctx, w)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _init(job: dict, ctx: _Context, w: int) -> None:  # pragma: no cover - pid 1 of the job
    from rubriq.extract.sandbox import layers

    try:
        layers.set_pdeathsig()
        layers.mount_fresh_proc()
        layers.set_hostname()
    except BaseException as exc:
        _setup_failure(w, "init", exc)
    pid = os.fork()
    if pid == 0:
        _child(job, ctx, w)
    os.close(w)
    code = EXIT_SETUP
    while True:  # pid 1 reaps everything; it ends when K does
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if done == pid:
            code = os.waitstatus_to_exitcode(status) & 0xFF
            break
    os._exit(code)


def _find_circuit(namespace: dict):
    from qiskit import QuantumCircuit

    for name in PREFERRED_NAMES:
        if isinstance(namespace.get(name), QuantumCircuit):
            return namespace[name]
    found = [v for v in namespace.values() if isinstance(v, QuantumCircuit)]
    return found[-1] if found else None


def _child(job: dict, ctx: _Context, w: int) -> None:  # pragma: no cover - pid 2: runs the completion
    from rubriq.extract.sandbox import layers, seccomp
    from rubriq.extract.serialize import circuit_to_payload

    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _keep_only(0, 1, 2, w)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        layers.set_rlimits(int(job["memory_mb"]), int(job["timeout_s"]) + 1, 64 if ctx.root else None)
        layers.drop_capabilities()
        layers.set_no_new_privs()
        try:
            seccomp.install(os.getpid())
        except OSError:
            if job.get("strict", True):
                raise  # non-strict: run without it; the facts below report it missing
        facts = layers.isolation_facts()
        missing = ctx.missing(facts)
    except BaseException as exc:
        _setup_failure(w, "child", exc)
    out = os.fdopen(w, "w")
    out.write(json.dumps({"facts": facts, "missing": missing}) + "\n")
    out.flush()
    if missing and job.get("strict", True):
        os._exit(EXIT_SETUP)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    code, max_ops = job.pop("code"), int(job["max_ops"])
    job.clear()  # the nonce is not left in a place the completion finds by name
    try:
        exec(compile(code, "<completion>", "exec"), namespace)
        circuit = _find_circuit(namespace)
        result: dict[str, Any]
        if circuit is None:
            result = {"error": "the code ran but defined no QuantumCircuit"}
        else:
            result = {"circuit": circuit_to_payload(circuit, max_ops=max_ops)}
    except BaseException as exc:  # the completion's own failure is a result
        result = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    out.write(json.dumps(result) + "\n")
    out.flush()
    os._exit(0)


# -- zygote --------------------------------------------------------------------------------
def _reap_all(deadline: float) -> None:
    """Reap every child (orphans of a job are reparented to us: we are a subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)


def _parse_output(data: bytes) -> tuple[dict | None, dict | None, str | None]:
    """(facts line, result line, why malformed) of the child's output."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    try:
        parsed = [json.loads(line) for line in lines]
    except ValueError:
        return None, None, "a line of the result is not JSON"
    if any(not isinstance(p, dict) for p in parsed):
        return None, None, "a line of the result is not a JSON object"
    if parsed and "setup_error" in parsed[-1]:
        return parsed[0] if "facts" in parsed[0] else None, parsed[-1], None
    if not parsed or "facts" not in parsed[0]:
        return None, None, "no isolation facts before the result"
    if len(parsed) == 1:
        return parsed[0], None, None
    if len(parsed) != 2:
        return parsed[0], None, f"{len(parsed)} result lines (expected 1)"
    return parsed[0], parsed[1], None


def run_job(job: dict, ctx: _Context) -> dict:
    """Run one validated job; the answer (without the nonce)."""
    from rubriq.extract.sandbox import layers

    start = time.monotonic()
    deadline = start + float(job["timeout_s"])
    cap = int(job["max_output_bytes"])
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    maps_r, maps_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - forked supervisor
        try:
            os.close(r)
            os.close(ready_r)
            os.close(maps_w)
            _supervisor(job, ctx, w, ready_w, maps_r)
        finally:
            os._exit(EXIT_SETUP)
    for fd in (w, ready_w, maps_r):
        os.close(fd)
    chunks, size, status, why = [], 0, None, None
    try:
        if (
            select.select([ready_r], [], [], max(0.0, deadline - time.monotonic()) + 5.0)[0]
            and os.read(ready_r, 1) == b"u"
        ):
            try:
                layers.write_id_maps(pid, ctx.outside_uid, ctx.outside_gid)
                os.write(maps_w, b"m")
            except OSError as exc:
                status, why = "sandbox", f"uid map: {exc}"
        os.close(maps_w)
        maps_w = -1
        while status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                status = "timeout"
                break
            if not select.select([r], [], [], remaining)[0]:
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
        for fd in (r, ready_r, maps_w):
            if fd >= 0:
                os.close(fd)
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _reap_all(time.monotonic() + 2.0)
    elapsed = time.monotonic() - start
    if status is not None:
        return {"status": status, "error": why, "elapsed_s": elapsed, "missing": {}}
    facts, result, malformed = _parse_output(b"".join(chunks))
    missing = ctx.missing(facts["facts"]) if facts and "facts" in facts else {}
    if malformed:
        return {"status": "malformed", "error": malformed, "elapsed_s": elapsed, "missing": missing}
    if result is not None and "setup_error" in result:
        return {"status": "sandbox", "error": result["setup_error"], "elapsed_s": elapsed, "missing": missing}
    if missing and job.get("strict", True):
        return {
            "status": "sandbox",
            "error": "isolation incomplete: " + "; ".join(f"{k}: {v}" for k, v in missing.items()),
            "elapsed_s": elapsed,
            "missing": missing,
        }
    if result is None:
        return {"status": "crash", "elapsed_s": elapsed, "missing": missing}
    if len(json.dumps(result)) > cap:  # escapes can grow what the child wrote: keep the parent's frame cap
        return {"status": "overflow", "elapsed_s": elapsed, "missing": missing}
    return {"status": "ok", "result": result, "elapsed_s": elapsed, "missing": missing}


PROBE_CODE = "from qiskit import QuantumCircuit\nqc = QuantumCircuit(1)\nqc.x(0)\n"


def probe(ctx: _Context) -> dict:
    """Run a trivial job through every layer; report what holds (``rubriq doctor``)."""
    from rubriq.extract.sandbox import layers, seccomp

    job = {
        "nonce": "probe",
        "code": PROBE_CODE,
        "timeout_s": 60.0,
        "memory_mb": 2048,
        "max_output_bytes": 1 << 20,
        "max_ops": 10,
        "strict": False,
    }
    reply = run_job(job, ctx)
    missing = dict(reply.get("missing") or {})
    if reply["status"] != "ok":  # no facts: nothing is known to hold
        missing = {name: f"{reply['status']}: {reply.get('error') or 'no result'}" for name in layers.LAYERS}
    ok, why = seccomp.supported()
    if not ok:
        missing.setdefault("seccomp", why)
    return {
        "active": {name: name not in missing for name in layers.LAYERS},
        "why": missing,
        "euid": os.geteuid(),
        "outside_uid": layers.outside_ids(ctx.slot)[0],
        "python": sys.version.split()[0],
        "seccomp": seccomp.describe(),
        "probe_status": reply["status"],
    }


def main() -> None:
    """The zygote's loop: report ready, then fork one isolated child per job and return its result."""
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    for name in OPTIONAL_PRELOADED:
        try:
            importlib.import_module(name)
        except (ImportError, OSError):
            pass
    # Warm the code paths a job uses, so children inherit them instead of redoing them.
    from qiskit import QuantumCircuit

    from rubriq.extract.sandbox import layers
    from rubriq.extract.serialize import circuit_to_payload

    warm = QuantumCircuit(2)
    warm.h(0)
    warm.cp(0.1, 0, 1)
    circuit_to_payload(warm)
    layers.become_subreaper()
    ctx = _Context(int(os.environ.get("RUBRIQ_SANDBOX_SLOT", "0")))
    rfd, wfd = sys.stdin.fileno(), sys.stdout.fileno()
    write_frame(wfd, {"ready": True, "layers": probe(ctx), "pid": os.getpid()})
    while True:
        try:
            job = read_frame(rfd, max_bytes=8 * MAX_CODE_BYTES)  # JSON escapes can grow the code
        except FrameError:
            return
        if job is None:
            return
        bad = validate_job(job)
        nonce = job.get("nonce") if isinstance(job.get("nonce"), str) else ""
        reply = {"status": "bad_job", "error": bad, "missing": {}} if bad else run_job(job, ctx)
        write_frame(wfd, {**reply, "nonce": nonce})


if __name__ == "__main__":
    main()
