"""The pre-started worker ("zygote") and its pristine template: Qiskit is imported once, and
every job runs in a fresh, isolated process tree (``layers.py``) made from a process that has
never seen a job.

Processes::

    zygote Z   talks to the parent (stdin/stdout frames); reads jobs, writes uid maps, reads and
     │         checks results; runs several jobs at once (one thread each); never forks a job
     └─ template T   forked from Z right after the imports, before Z reads anything: it never
          │          holds a completion, a result or a nonce.  It keeps SPARES supervisors forked
          │          (and unshared) ahead of time, each handed to Z with its three pipe ends and
          │          a pidfd over a socket pair (SCM_RIGHTS); one byte from Z asks for another
          └─ S supervisor -> I init (pid 1) -> K child (pid 2, runs the completion)

The parent's frames (what a job and its answer hold) are ``protocol.py``'s.

Three pipes per job, created by T for each spare S (Z gets the other ends):

* control (Z -> S, K): ``m`` once Z has written the uid map, then K's job (code and limits; never
  the nonce, which stays in Z);
* status (S, I, K -> Z): JSON lines, ``{"stage": "unshared"}`` from S, then ``{"facts",
  "missing"}`` from K, or ``{"setup_error"}`` from any of them.  K closes it before the completion
  runs: only the sandbox's own code ever writes it, so only it can report a sandbox failure;
* result (K -> Z): the completion's process holds the only write end.  Z reads at most
  ``max_output_bytes`` until the end of file or the deadline and parses it with bounded depth
  and size; anything that is not one result object is that job's ``malformed`` result.

At the deadline (or once the result is in) Z kills S's process group through S's pidfd (S, I
and K at once; before Linux 6.9, S alone: I dies with S by PR_SET_PDEATHSIG and the kernel kills
the job's PID namespace with I).  Z answers once the result pipe is at its end of file (K gone)
and frees the job's lane once S's pidfd is readable and the status pipe (which I keeps open,
unwritten, after forking K) is at its end of file (each wait at most ``KILL_WAIT_S``).  T reaps
(it is a child subreaper).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any

from rubriq.extract.sandbox.layers import LANES_PER_SLOT
from rubriq.extract.sandbox.protocol import (
    JOB_LIMITS,
    MAX_CODE_BYTES,
    MAX_ERROR_CHARS,
    MAX_FRAME_DEPTH,
    MAX_RESULT_DEPTH,
    FrameError,
    clean_text,
    loads_bounded,
    parse_result,
    read_exact,
    read_frame,
    validate_job,
    write_all,
    write_frame,
)

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
OPTIONAL_PRELOADED = ("pyseccomp", "qiskit_aer")
"""Without pyseccomp the seccomp layer is reported missing (strict mode then refuses Python), but
the worker still starts and says why; qiskit_aer (6 MB) is pre-imported where installed, so that
completions that simulate their circuit do not each pay its import.  (qiskit_ibm_runtime, whose
fake backends some completions transpile against, is not: 90 MB of an HTTP client stack in every
job; a completion that imports it pays the import from its own time.)"""
MAX_LANES = LANES_PER_SLOT
"""Jobs one zygote runs at once (each gets its own lane: its own outside uid when root)."""
EXIT_SETUP = 71
KILL_WAIT_S = 5.0
TEMPLATE_REPLY_S = 10.0
SPARES = 2
"""Supervisors the template keeps forked and unshared ahead of time (a job takes one at once)."""
SPARE_NAME = b"rubriq-spare"
"""Process name of a supervisor that has no job yet (:data:`JOB_NAME` once it has one)."""
JOB_NAME = b"rubriq-job"
"""Process name of a supervisor running a job: what ``ps`` shows of a completion being run."""


# -- the job's processes (forked from the template T; never return) ----------------------------
class _Context:
    """What the zygote knows once, before any job; the template and the job's processes inherit it."""

    def __init__(self, slot: int) -> None:
        from rubriq.extract.sandbox import layers, rootfs

        self.slot = slot
        self.host_ns = layers.namespace_ids()
        self.root = os.geteuid() == 0
        self.zygote_pid = os.getpid()
        self.template_pid = 0
        self.root_plan = rootfs.plan()  # the zygote's imports do not change between jobs
        self.root_names = self.root_plan.listing("/")
        self.workdir_names = self.root_plan.listing(rootfs.WORKDIR)

    def ids(self, lane: int) -> tuple[int, int]:
        from rubriq.extract.sandbox import layers

        return layers.outside_ids(self.slot, lane)

    def missing(self, facts: dict, lane: int) -> dict[str, str]:
        from rubriq.extract.sandbox import layers

        found = layers.check_isolation(
            facts, self.host_ns, self.ids(lane)[0], self.root, self.root_names, self.workdir_names
        )
        return {k: clean_text(str(v), 200) for k, v in found.items()}


def _line(fd: int, obj: dict) -> None:  # pragma: no cover - forked
    os.write(fd, json.dumps(obj).encode() + b"\n")


def _setup_failure(status_w: int, where: str, exc: BaseException) -> None:  # pragma: no cover - forked
    try:
        _line(status_w, {"setup_error": clean_text(f"{where}: {type(exc).__name__}: {exc}", 500)})
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


def _supervisor(ctx: _Context, control_r: int, status_w: int, result_w: int) -> None:  # pragma: no cover
    from rubriq.extract.sandbox import layers

    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # T's reaper must not take S's own child
        os.setsid()
        _keep_only(control_r, status_w, result_w)
        layers.set_pdeathsig()
        if os.getppid() != ctx.template_pid:
            os._exit(EXIT_SETUP)
        layers.set_name(SPARE_NAME)
    except BaseException as exc:
        _setup_failure(status_w, "supervisor", exc)
    try:
        layers.unshare_all()
    except BaseException as exc:
        _setup_failure(status_w, "namespaces", exc)
    try:  # ahead of the job: the parts of its root, cloned with the zygote's file access
        parts = layers.clone_root_parts(ctx.root_plan)
    except BaseException as exc:
        _setup_failure(status_w, "mounts", exc)
    _line(status_w, {"stage": "unshared"})  # a spare: Z reads this once it takes S for a job
    if os.read(control_r, 1) != b"m":
        os._exit(EXIT_SETUP)  # the zygote could not write the uid map and says so itself
    layers.set_name(JOB_NAME)
    try:
        layers.enter_minimal_root(ctx.root_plan, parts)
        # Taking the mapped uid changed S's euid (as root), which clears PR_SET_PDEATHSIG: arm it
        # again, then make sure T did not die in between.
        layers.set_pdeathsig()
        if os.getppid() != ctx.template_pid:
            os._exit(EXIT_SETUP)
    except BaseException as exc:
        _setup_failure(status_w, "mounts", exc)
    lifeline_r, lifeline_w = os.pipe()  # I's check that S still lives once its PDEATHSIG is set
    pid = os.fork()
    if pid == 0:
        os.close(lifeline_w)
        _init(ctx, control_r, status_w, result_w, lifeline_r)
    for fd in (control_r, status_w, result_w, lifeline_r):
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _init(ctx: _Context, control_r: int, status_w: int, result_w: int, lifeline_r: int) -> None:  # pragma: no cover
    from rubriq.extract.sandbox import layers

    try:
        layers.set_pdeathsig()
        if select.select([lifeline_r], [], [], 0)[0]:  # S died before PDEATHSIG was armed
            os._exit(EXIT_SETUP)
        os.close(lifeline_r)
        layers.mount_fresh_proc()
        layers.leave_host_root()
        layers.set_hostname()
    except BaseException as exc:
        _setup_failure(status_w, "init", exc)
    pid = os.fork()
    if pid == 0:
        _child(ctx, control_r, status_w, result_w)
    for fd in (control_r, result_w):
        os.close(fd)  # status_w stays open, never written again: its end of file tells Z that I is gone
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


def _read_job(control_r: int) -> dict:  # pragma: no cover - forked
    """K's own job from the control pipe: a JSON header, then the code as UTF-8 bytes."""
    deadline = time.monotonic() + JOB_LIMITS["timeout_s"][1]  # Z kills the job at its own deadline anyway
    header = read_frame(control_r, deadline, 1 << 16)
    if header is None:
        raise OSError("the zygote sent no job")
    code = read_exact(control_r, int(header.pop("code_bytes")), deadline) or b""
    header["code"] = code.decode("utf-8", "surrogatepass")
    return header


def _child(ctx: _Context, control_r: int, status_w: int, result_w: int) -> None:  # pragma: no cover - pid 2
    from rubriq.extract.sandbox import harness, layers, seccomp

    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _keep_only(0, 1, 2, control_r, status_w, result_w)
        job = _read_job(control_r)
        os.close(control_r)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        per_job = layers.tasks_counted_per_job(ctx.root)[0]
        layers.set_rlimits(int(job["memory_mb"]), int(job["timeout_s"]) + 1, layers.TASKS_PER_JOB if per_job else None)
        layers.drop_capabilities()
        layers.set_no_new_privs()
        try:
            seccomp.install(os.getpid())
        except OSError:
            if job.get("strict", True):
                raise  # non-strict: run without it; the facts below report it missing
        facts = layers.isolation_facts()
        missing = layers.check_isolation(
            facts, ctx.host_ns, int(job["outside_uid"]), ctx.root, ctx.root_names, ctx.workdir_names
        )
    except BaseException as exc:
        _setup_failure(status_w, "child", exc)
    _line(status_w, {"facts": facts, "missing": missing})
    os.close(status_w)  # from here on only the completion's own result pipe is left
    if missing and job.get("strict", True):
        os._exit(EXIT_SETUP)
    code, max_ops = job.pop("code"), int(job["max_ops"])
    out = os.fdopen(result_w, "w")
    try:
        result = harness.run(code, max_ops)  # run it, find the circuit (rules in harness.py)
        line = json.dumps(result)
    except BaseException as exc:  # the completion's own failure is a result (e.g. a circuit json cannot encode)
        line = json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:MAX_ERROR_CHARS]}"})
    out.write(line + "\n")
    out.flush()
    os._exit(0)


# -- the template T --------------------------------------------------------------------------
def _reap_children(signum: int, frame: Any) -> None:  # pragma: no cover - in T
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _offer_spare(ctx: _Context, sock: socket.socket) -> None:  # pragma: no cover - in T
    """Fork a spare S with its three pipes and hand Z the other ends and a pidfd of S."""
    control_r, control_w = os.pipe()
    status_r, status_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            _supervisor(ctx, control_r, status_w, result_w)
        finally:
            os._exit(EXIT_SETUP)
    for fd in (control_r, status_w, result_w):
        os.close(fd)
    theirs = [control_w, status_r, result_r]
    try:
        pidfd = os.pidfd_open(pid)  # before any reaping: it names this very process
        theirs.insert(0, pidfd)
        socket.send_fds(sock, [b"ok" + struct.pack(">i", pid)], theirs)
    except OSError:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        for fd in theirs:
            os.close(fd)


def _template(ctx: _Context, sock: socket.socket) -> None:  # pragma: no cover - forked, never returns
    """T: keep SPARES supervisors ready for Z (one more for each byte Z sends), reap, never
    receive anything else."""
    from rubriq.extract.sandbox import layers

    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _keep_only(0, 1, 2, sock.fileno())
        layers.set_pdeathsig()
        if os.getppid() != ctx.zygote_pid:
            os._exit(EXIT_SETUP)
        layers.set_name(b"rubriq-template")
        layers.become_subreaper()  # orphans of a job (I once S is gone) are reaped here
        signal.signal(signal.SIGCHLD, _reap_children)
        ctx.template_pid = os.getpid()
        for _ in range(SPARES):
            _offer_spare(ctx, sock)
        while True:
            request = sock.recv(16)
            if not request:
                os._exit(0)  # the zygote is gone
            for _ in request:
                _offer_spare(ctx, sock)
    except BaseException:
        os._exit(EXIT_SETUP)


class TemplateGone(RuntimeError):
    """The template process died: the zygote cannot make pristine job processes any more."""


class _TemplateClient:
    """Z's side of the socket to T: takes ready supervisors, asks for replacements."""

    def __init__(self, ctx: _Context) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - T
            ours.close()
            _template(ctx, theirs)
            os._exit(EXIT_SETUP)
        theirs.close()
        self.pid, self.sock = pid, ours
        ctx.template_pid = pid
        self._lock = threading.Lock()

    def spawn(self) -> tuple[int, list[int]]:
        """(pid of a ready supervisor S, [its pidfd, control_w, status_r, result_r]); T makes the
        next one meanwhile.  Raises TemplateGone."""
        with self._lock:
            try:
                self.sock.settimeout(TEMPLATE_REPLY_S)
                msg, got, _, _ = socket.recv_fds(self.sock, 16, 4)
                self.sock.send(b"s")
            except OSError as exc:
                raise TemplateGone(f"the template process does not answer ({exc})") from None
        if len(msg) != 6 or not msg.startswith(b"ok") or len(got) != 4:
            for fd in got:
                os.close(fd)
            raise TemplateGone(f"the template process could not fork a job ({msg[:20]!r})")
        return struct.unpack(">i", msg[2:])[0], got


# -- zygote Z ------------------------------------------------------------------------------
PIDFD_SIGNAL_PROCESS_GROUP = 1 << 2
"""pidfd_send_signal(2) flag (Linux >= 6.9): signal the target's whole process group."""


def _kill(pidfd: int) -> None:
    """SIGKILL S's process group (S, I, K) at once through S's pidfd (race-free: the pidfd names
    this S, never a recycled pid); on kernels before 6.9, S alone (I follows by PDEATHSIG, K with
    I's namespace: the same end, one scheduling round later)."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL, None, PIDFD_SIGNAL_PROCESS_GROUP)
        return
    except ProcessLookupError:
        return
    except OSError:  # EINVAL: the flag is unknown to this kernel
        pass
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Job:
    """One job's descriptors in Z (from a ready supervisor); every read is bounded by the job's
    deadline."""

    def __init__(self, template: _TemplateClient) -> None:
        self.pid, (self.pidfd, self.control_w, self.status_r, self.result_r) = template.spawn()
        self._status_buf = b""

    def status_line(self, deadline: float) -> dict | None:
        """The next line of the status pipe (None at end of file); TimeoutError at the deadline."""
        while b"\n" not in self._status_buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.status_r], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(self.status_r, 65536)
            if not chunk:
                return None
            self._status_buf += chunk
            if len(self._status_buf) > 1 << 20:
                return {"setup_error": "status line longer than 1 MB"}
        line, self._status_buf = self._status_buf.split(b"\n", 1)
        try:
            obj = loads_bounded(line, MAX_FRAME_DEPTH)
        except ValueError as exc:
            return {"setup_error": f"status line is {exc}"}
        return obj if isinstance(obj, dict) else {"setup_error": "status line is not an object"}

    def send_job(self, data: bytes, deadline: float) -> None:
        os.set_blocking(self.control_w, False)
        write_all(self.control_w, data, deadline)

    def read_result(self, deadline: float, cap: int) -> tuple[bytes, str | None]:
        chunks: list[bytes] = []
        size = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.result_r], [], [], remaining)[0]:
                return b"", "timeout"
            chunk = os.read(self.result_r, 65536)
            if not chunk:
                return b"".join(chunks), None
            size += len(chunk)
            if size > cap:
                return b"", "overflow"
            chunks.append(chunk)

    def _wait_eof(self, fds: list[int], seconds: float) -> None:
        waiting = {fd for fd in fds if fd >= 0}
        end = time.monotonic() + seconds
        while waiting and (remaining := end - time.monotonic()) > 0:
            for fd in select.select(list(waiting), [], [], remaining)[0]:
                if fd == self.pidfd or not os.read(fd, 1 << 20):
                    waiting.discard(fd)

    def finish(self) -> None:
        """Kill the job's tree (S, I and K at once) and wait (bounded) until nothing holds the
        result pipe: K is gone, its memory freed."""
        if self.pidfd >= 0:
            _kill(self.pidfd)
        self._wait_eof([self.result_r], KILL_WAIT_S)

    def wait_gone(self) -> None:
        """After the answer: wait (bounded) until S (its pidfd) and I (the status pipe, which I
        holds) are gone too, so that the job's lane (its uid) is free when reused; close all."""
        self._wait_eof([self.status_r, self.pidfd], KILL_WAIT_S)
        for name in ("control_w", "status_r", "result_r", "pidfd"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)


def _answer(status: str, start: float, missing: dict | None = None, **extra: Any) -> dict:
    return {"status": status, "elapsed_s": time.monotonic() - start, "missing": missing or {}, **extra}


def run_job(job: dict, ctx: _Context, template: _TemplateClient, lane: int = 0, gone: list[_Job] | None = None) -> dict:
    """Run one validated job in a fresh process tree from the template; the answer (no nonce).
    The job's tree is killed and its child K gone when this returns; with ``gone``, the job is
    appended for the caller to :meth:`_Job.wait_gone` after answering (else it is waited for here)."""

    start = time.monotonic()
    deadline = start + float(job["timeout_s"])
    cap = int(job["max_output_bytes"])
    uid, gid = ctx.ids(lane)
    strict = bool(job.get("strict", True))
    j = _Job(template)
    try:
        try:
            first = j.status_line(deadline + 5.0)  # set-up is the sandbox's time, within reason
        except TimeoutError:
            return _answer("timeout", start, error="the sandbox's set-up did not finish in time")
        if first is None or "setup_error" in first or first.get("stage") != "unshared":
            return _answer("sandbox", start, error=str((first or {}).get("setup_error") or "supervisor ended"))
        try:
            _write_maps(j.pid, j.pidfd, uid, gid)
        except OSError as exc:
            return _answer("sandbox", start, error=f"uid map: {exc}")
        code = job["code"].encode("utf-8", "surrogatepass")
        header = {
            "timeout_s": job["timeout_s"],
            "memory_mb": job["memory_mb"],
            "max_ops": job["max_ops"],
            "strict": strict,
            "outside_uid": uid,
            "code_bytes": len(code),
        }
        body = json.dumps(header).encode()
        try:
            j.send_job(b"m" + struct.pack(">I", len(body)) + body + code, deadline)
        except (TimeoutError, BrokenPipeError):
            pass  # K is gone or late: its status line (or the deadline) says which
        try:
            report = j.status_line(deadline + 5.0)
        except TimeoutError:
            return _answer("timeout", start, error="the sandbox's set-up did not finish in time")
        if report is None or "setup_error" in report or not isinstance(report.get("facts"), dict):
            return _answer("sandbox", start, error=str((report or {}).get("setup_error") or "child ended in set-up"))
        missing = ctx.missing(report["facts"], lane)
        if missing and strict:
            incomplete = "isolation incomplete: " + "; ".join(f"{k}: {v}" for k, v in missing.items())
            return _answer("sandbox", start, missing, error=incomplete)
        data, why = j.read_result(deadline, cap)
    finally:
        j.finish()
        if gone is None:
            j.wait_gone()
        else:
            gone.append(j)
    if why is not None:
        return _answer(why, start, missing)
    result, malformed = parse_result(data)
    if malformed:
        return _answer("malformed", start, missing, error=malformed)
    if result is None:
        return _answer("crash", start, missing)
    if len(json.dumps(result)) > cap:  # escapes can grow what the child wrote: keep the parent's frame cap
        return _answer("overflow", start, missing)
    return _answer("ok", start, missing, result=result)


def _write_maps(pid: int, pidfd: int, uid: int, gid: int) -> None:
    """Write S's uid/gid map through a /proc directory opened while S is known to live (its pidfd
    still signals): a recycled pid can never receive the map."""
    from rubriq.extract.sandbox import layers

    proc_dir = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
    try:
        signal.pidfd_send_signal(pidfd, 0)  # ProcessLookupError if S is gone
        layers.write_id_maps(proc_dir, uid, gid)
    finally:
        os.close(proc_dir)


PROBE_CODE = "from qiskit import QuantumCircuit\nqc = QuantumCircuit(1)\nqc.x(0)\n"


def probe(ctx: _Context, template: _TemplateClient) -> dict:
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
    reply = run_job(job, ctx, template)
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
        "outside_uid": ctx.ids(0)[0],
        "python": sys.version.split()[0],
        "seccomp": seccomp.describe(),
        "probe_status": reply["status"],
    }


class _Lanes:
    def __init__(self, n: int) -> None:
        self._free = list(range(n))
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            return self._free.pop(0) if self._free else None

    def give(self, lane: int) -> None:
        with self._lock:
            self._free.append(lane)
            self._free.sort()


def main() -> None:
    """The zygote: import, fork the pristine template, report ready, then run every job in its
    own thread (several at once) and answer each when it is done."""
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

    from rubriq.circuit import layout as _layout  # noqa: F401  (a compiled answer is read with its layout)
    from rubriq.extract.sandbox import harness, layers  # noqa: F401  (imported before the template forks)
    from rubriq.extract.serialize import circuit_to_payload

    warm = QuantumCircuit(2)
    warm.h(0)
    warm.cp(0.1, 0, 1)
    circuit_to_payload(warm)
    loads_bounded(json.dumps({"circuit": circuit_to_payload(warm)}).encode(), MAX_RESULT_DEPTH)
    harness.compile_instrumented(PROBE_CODE)
    ctx = _Context(int(os.environ.get("RUBRIQ_SANDBOX_SLOT", "0")))
    template = _TemplateClient(ctx)  # from here on Z holds job data; T never will
    rfd, wfd = sys.stdin.fileno(), sys.stdout.fileno()
    write_frame(wfd, {"ready": True, "layers": probe(ctx, template), "pid": os.getpid(), "template_pid": template.pid})
    write_lock, lanes = threading.Lock(), _Lanes(MAX_LANES)

    def reply(answer: dict, nonce: str) -> None:
        with write_lock:
            write_frame(wfd, {**answer, "nonce": nonce})

    def serve(job: dict, nonce: str, lane: int) -> None:
        broken, jobs = False, list[_Job]()
        try:
            answer = run_job(job, ctx, template, lane, jobs)
        except TemplateGone as exc:
            answer, broken = {"status": "sandbox", "error": str(exc), "missing": {}}, True
        except BaseException as exc:  # a bug in the zygote: this job's sandbox failure, not the completion's
            answer = {
                "status": "sandbox",
                "error": clean_text(f"worker error: {type(exc).__name__}: {exc}"),
                "missing": {},
            }
        try:
            reply(answer, nonce)
            for j in jobs:
                j.wait_gone()  # after answering: the lane (its uid) is reused only once S and I are gone
        finally:
            lanes.give(lane)
        if broken:
            os._exit(1)  # the parent sees the end of file and starts a fresh zygote

    while True:
        try:
            job = read_frame(rfd, max_bytes=8 * MAX_CODE_BYTES)  # JSON escapes can grow the code
        except FrameError:
            return
        if job is None:
            return
        nonce = job["nonce"] if isinstance(job.get("nonce"), str) else ""
        bad = validate_job(job)
        lane = None if bad else lanes.take()
        if bad or lane is None:
            reply({"status": "bad_job", "error": bad or f"more than {MAX_LANES} jobs at once", "missing": {}}, nonce)
            continue
        threading.Thread(target=serve, args=(job, nonce, lane), daemon=True).start()


if __name__ == "__main__":
    main()
