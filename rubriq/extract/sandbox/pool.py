"""Parent side of the sandbox: a few pre-started zygotes that run up to ``max_jobs`` jobs at once.

``SandboxPool.run(job)`` waits (first come, first served) for one of ``max_jobs`` job slots,
at most for the job's own time: that wait counts against the job (it runs with what is left),
and a job that gets no slot in its time raises :class:`SandboxBusy` (``error_type="budget"``,
never cached), never a sandbox failure.  The job then goes to the least loaded zygote, which
runs it beside its other jobs (each in its own process tree), so a caller whose completions spin
until their deadline holds at most the slots they occupy while other jobs keep running.

Each zygote has a reader thread that hands every answer to the job with its nonce; an answer
with an unknown nonce, a malformed frame, a zygote that dies or one that misses a job's
deadline by ``REPLY_MARGIN_S`` retires that zygote (its jobs get :class:`SandboxUnavailable`)
and a fresh one replaces it.  Every wait is bounded: a pool whose zygotes cannot start answers
:class:`SandboxUnavailable` with the reason at once (and tries again after ``RETRY_AFTER_S``).
The pool is created lazily (first Python completion), per process (a forked parent gets a
fresh pool), and shut down at exit.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time

from rubriq.extract.sandbox import protocol
from rubriq.extract.sandbox.zygote import MAX_LANES

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0
REPLY_MARGIN_S = 30.0
"""How long after a job's deadline its answer may come before the zygote is taken for broken
(the zygote itself allows 5 s for set-up and 5 s for the job's tree to die)."""
RETRY_AFTER_S = 30.0
FRAME_OVERHEAD = 64 * 1024
JOBS_PER_ZYGOTE = MAX_LANES // 2
"""Jobs sent to one zygote at once: half its lanes, since a lane stays taken for a moment after
its answer (until the job's supervisor and init are gone)."""
MIN_JOB_S = 0.05
"""A job left with less time than this after waiting for a slot is not started (``SandboxBusy``)."""


class SandboxError(RuntimeError):
    """The sandboxed execution of one job failed."""


class SandboxUnavailable(SandboxError):
    """Infrastructure failure: no worker could run the job (cannot start, died, protocol error,
    a required isolation layer missing).  Reported as ``error_type="sandbox"``."""


class SandboxBusy(SandboxError):
    """Every job slot stayed taken for the job's whole time: the machine was busy, not broken.
    Reported as ``error_type="budget"`` (and never cached)."""


def default_max_jobs(workers: int, memory_mb: int = 2048) -> int:
    """Jobs run at once by default: 4 per zygote, at most as many as physical memory holds at
    ``memory_mb`` each, at least one per zygote.

    >>> 2 <= default_max_jobs(2) <= 8
    True
    """
    try:
        total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError):
        total_mb = 4 * workers * memory_mb
    return max(workers, min(4 * workers, total_mb // max(1, memory_mb)))


def _zygote_env(slot: int) -> dict[str, str]:
    """A clean environment: no tokens or credentials; single-threaded numeric libraries."""
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/nonexistent",
        "RUBRIQ_SANDBOX_SLOT": str(slot),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "RAYON_NUM_THREADS": "1",
        "QISKIT_PARALLEL": "FALSE",
        "QISKIT_SETTINGS": "/nonexistent",
        "PYTHONHASHSEED": "0",
    }
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # needed on some CPUs (see env docs)
        if key in os.environ:
            env[key] = os.environ[key]
    return env


ZYGOTE_COMMAND = (sys.executable, "-I", "-B", "-c", "from rubriq.extract.sandbox.zygote import main; main()")
"""Not ``-m``: the package would import the module first and runpy would run a second copy."""


class _Zygote:
    """One zygote process and the jobs in flight on it."""

    def __init__(
        self, slot: int, command: tuple[str, ...] = ZYGOTE_COMMAND, startup_timeout: float = STARTUP_TIMEOUT_S
    ) -> None:
        self.slot = slot
        self.jobs = 0
        """Jobs in flight (changed under the pool's lock)."""
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                list(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=_zygote_env(slot),
                cwd="/",
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox worker could not be started: {exc}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        try:
            hello = protocol.read_frame(self._stdout.fileno(), time.monotonic() + startup_timeout, 1 << 20)
        except protocol.FrameError as exc:
            hello = {"error": str(exc)}
        if not hello or not hello.get("ready"):
            self.kill()
            raise SandboxUnavailable(f"the sandbox worker failed to start: {self.stderr_tail() or hello}")
        self.layers = hello["layers"]
        self.template_pid = hello.get("template_pid")
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending: dict[str, queue.Queue] = {}
        self._max_frame = FRAME_OVERHEAD
        self.dead: str | None = None
        self._reader = threading.Thread(target=self._read_answers, name=f"rubriq-sandbox-{slot}", daemon=True)
        self._reader.start()

    def stderr_tail(self, size: int = 1500) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, self._stderr.tell() - size))
            return self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def _read_answers(self) -> None:
        why = "stopped"
        while True:
            try:
                frame = protocol.read_frame(self._stdout.fileno(), None, lambda: self._max_frame)
            except (protocol.FrameError, OSError, ValueError) as exc:
                why = f"the sandbox worker did not answer properly: {exc}"
                break
            if frame is None:
                why = f"the sandbox worker died: {self.stderr_tail() or 'no message'}"
                break
            with self._lock:
                waiter = self._pending.pop(frame.get("nonce"), None)  # type: ignore[arg-type]
            if waiter is None:
                why = "the sandbox worker answered a job it was not given (nonce mismatch)"
                break
            waiter.put(frame)
        self.retire(why)

    def retire(self, why: str) -> None:
        """Kill the zygote; every job still waiting on it gets SandboxUnavailable(why)."""
        with self._lock:
            if self.dead is None:
                self.dead = why
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.put(SandboxUnavailable(why))
        self.kill()

    def run(self, job: dict) -> dict:
        """The zygote's answer to ``job`` (nonce added here); raises SandboxUnavailable."""
        nonce = secrets.token_hex(16)
        waiter: queue.Queue = queue.Queue(1)
        with self._lock:
            if self.dead is not None:
                raise SandboxUnavailable(self.dead)
            self._max_frame = max(self._max_frame, int(job["max_output_bytes"]) + FRAME_OVERHEAD)
            self._pending[nonce] = waiter
        try:
            with self._write_lock:  # not self._lock: the reader must never wait for a writer
                protocol.write_frame(self._stdin.fileno(), {**job, "nonce": nonce})
        except (OSError, ValueError) as exc:
            with self._lock:
                self._pending.pop(nonce, None)
            raise SandboxUnavailable(f"the sandbox worker is gone ({exc})") from None
        wait = float(job["timeout_s"]) + REPLY_MARGIN_S
        try:
            answer = waiter.get(timeout=wait)
        except queue.Empty:
            why = f"the sandbox worker did not answer within {wait:g} s"
            self.retire(why)
            raise SandboxUnavailable(why) from None
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def alive(self) -> bool:
        return self.dead is None and self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the zygote and its template
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except (OSError, ValueError):
                pass


class SandboxPool:
    """``size`` zygotes running at most ``max_jobs`` jobs at once; ``run`` is thread-safe, serves
    waiting jobs first come first served, and every wait in it is bounded."""

    def __init__(
        self,
        size: int = 2,
        command: tuple[str, ...] = ZYGOTE_COMMAND,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        max_jobs: int | None = None,
    ) -> None:
        self.size = max(1, size)
        self.max_jobs = max(1, min(max_jobs or default_max_jobs(self.size), self.size * JOBS_PER_ZYGOTE))
        self.command, self.startup_timeout = command, startup_timeout
        self._cond = threading.Condition()
        self._running = 0
        self._line: collections.deque[object] = collections.deque()
        self._zygotes: list[_Zygote] = []
        self._starting: set[int] = set()
        self.layers: dict | None = None
        self._broken: tuple[float, str] | None = None
        self._closed = False

    # -- job slots (first come, first served) ---------------------------------------------------
    def _take_slot(self, deadline: float, timeout: float) -> None:
        ticket = object()
        with self._cond:
            self._line.append(ticket)
            try:
                while self._running >= self.max_jobs or self._line[0] is not ticket:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SandboxBusy(
                            f"waiting for a sandbox job slot took the whole {timeout:g} s of the job "
                            f"({self.max_jobs} jobs were running)"
                        )
                    self._cond.wait(remaining)
                self._running += 1
            finally:
                self._line.remove(ticket)
                self._cond.notify_all()

    def _free_slot(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    # -- zygotes --------------------------------------------------------------------------------
    def _spawn(self, slot: int) -> _Zygote:
        try:
            z = _Zygote(slot, self.command, self.startup_timeout)
        except SandboxUnavailable as exc:
            with self._cond:
                self._starting.discard(slot)
                self._broken = (time.monotonic(), str(exc))
                self._cond.notify_all()
            log.error("%s", exc)
            raise
        with self._cond:
            self._starting.discard(slot)
            closed = self._closed
            if not closed:
                self._zygotes.append(z)
                self.layers = z.layers
                self._broken = None
            self._cond.notify_all()
        if closed:  # closed while this one started
            z.retire("the sandbox pool was closed")
            raise SandboxUnavailable("the sandbox pool was closed")
        return z

    def _free_slot_number(self) -> int | None:
        used = {z.slot for z in self._zygotes} | self._starting
        free = sorted(set(range(self.size)) - used)
        return free[0] if free else None

    def _zygote(self) -> _Zygote:
        """The least loaded live zygote (one more is started in the background while every live
        one is busy and the pool is below its size); starts the first one in the caller."""
        while True:
            with self._cond:
                for dead in [z for z in self._zygotes if not z.alive()]:
                    self._zygotes.remove(dead)
                live = sorted((z for z in self._zygotes if z.jobs < JOBS_PER_ZYGOTE), key=lambda z: z.jobs)
                slot = self._free_slot_number()
                if not live and self._zygotes and slot is None:  # every zygote full: one finishes soon
                    self._cond.wait(1.0)
                    continue
                if live:
                    if live[0].jobs > 0 and slot is not None:
                        self._starting.add(slot)
                        threading.Thread(target=self._spawn_quietly, args=(slot,), daemon=True).start()
                    live[0].jobs += 1
                    return live[0]
                if self._broken and time.monotonic() - self._broken[0] < RETRY_AFTER_S:
                    raise SandboxUnavailable(self._broken[1])
                if slot is None:  # every slot is starting: wait for one of them
                    self._cond.wait(1.0)
                    continue
                self._starting.add(slot)
            self._spawn(slot)

    def _spawn_quietly(self, slot: int) -> None:
        try:
            self._spawn(slot)
        except SandboxUnavailable:
            pass  # logged; the next job that finds no live zygote reports it

    def _release(self, z: _Zygote) -> None:
        with self._cond:
            z.jobs -= 1
            if not z.alive() and z in self._zygotes:
                self._zygotes.remove(z)
            self._cond.notify_all()

    def run(self, job: dict) -> dict:
        """The answer of a zygote to ``job``.  The time spent waiting for a job slot is taken
        from the job's ``timeout_s`` (starting the pool's first zygote is not).  Raises
        SandboxBusy (no job slot within the job's time) or SandboxUnavailable (the sandbox failed)."""
        timeout = float(job["timeout_s"])
        start = time.monotonic()
        self._take_slot(start + timeout, timeout)
        remaining = timeout - (time.monotonic() - start)
        try:
            if remaining < MIN_JOB_S:
                raise SandboxBusy(f"waiting for a sandbox job slot took the whole {timeout:g} s of the job")
            z = self._zygote()
            try:
                return z.run({**job, "timeout_s": remaining})
            finally:
                self._release(z)
        finally:
            self._free_slot()

    def ensure_started(self) -> dict:
        """Start one zygote now (if none is running) and return its layer report."""
        z = self._zygote()
        self._release(z)
        return self.layers or {}

    def zygote_pids(self) -> dict[int, int | None]:
        """{zygote pid: its template's pid} of the live zygotes (for tests and ``doctor``)."""
        with self._cond:
            return {z.proc.pid: z.template_pid for z in self._zygotes if z.alive()}

    def close(self) -> None:
        """Kill every zygote (jobs still running get SandboxUnavailable); the pool is done."""
        with self._cond:
            self._closed = True
            zygotes, self._zygotes = self._zygotes, []
        for z in zygotes:
            z.retire("the sandbox pool was closed")


_POOL: SandboxPool | None = None
_POOL_PID: int | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int = 2, max_jobs: int | None = None) -> SandboxPool:
    """This process's sandbox pool (started on first use, with that call's sizes; a forked
    child gets its own)."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL, _POOL_PID = SandboxPool(size, max_jobs=max_jobs), os.getpid()
        return _POOL


def shutdown() -> None:
    """Stop this process's sandbox pool, if it has one."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None and _POOL_PID == os.getpid():
            _POOL.close()
        _POOL = None


atexit.register(shutdown)
