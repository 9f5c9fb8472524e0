"""Parent side of the sandbox: a small pool of pre-started zygotes.

``SandboxPool.run(job)`` takes an idle zygote (waiting at most the job's time), sends it the job
with a fresh random nonce and reads the answer with a deadline and a size cap; an answer with
another nonce, a malformed frame or no answer in time kills and replaces that zygote.  Every
wait is bounded: a pool whose zygotes cannot start answers :class:`SandboxUnavailable` with the
reason at once (and tries again after ``RETRY_AFTER_S``), never a hang.  The pool is created
lazily (first Python completion), per process (a forked parent gets a fresh pool), and shut
down at exit.
"""

from __future__ import annotations

import atexit
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

from rubriq.extract.sandbox import zygote as proto

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0
REPLY_MARGIN_S = 10.0
RETRY_AFTER_S = 30.0
FRAME_OVERHEAD = 64 * 1024


class SandboxError(RuntimeError):
    """The sandboxed execution of one job failed."""


class SandboxUnavailable(SandboxError):
    """Infrastructure failure: no worker could run the job (cannot start, died, protocol error,
    a required isolation layer missing).  Reported as ``error_type="sandbox"``."""


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


ZYGOTE_COMMAND = (sys.executable, "-I", "-B", "-m", "rubriq.extract.sandbox.zygote")


class _Zygote:
    def __init__(
        self, slot: int, command: tuple[str, ...] = ZYGOTE_COMMAND, startup_timeout: float = STARTUP_TIMEOUT_S
    ) -> None:
        self.slot = slot
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
            hello = proto.read_frame(self._stdout.fileno(), time.monotonic() + startup_timeout, 1 << 20)
        except proto.FrameError as exc:
            hello = {"error": str(exc)}
        if not hello or not hello.get("ready"):
            self.kill()
            raise SandboxUnavailable(f"the sandbox worker failed to start: {self.stderr_tail() or hello}")
        self.layers = hello["layers"]

    def stderr_tail(self, size: int = 1500) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, self._stderr.tell() - size))
            return self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def run(self, job: dict) -> dict:
        """The zygote's answer to ``job`` (nonce added here); raises SandboxUnavailable."""
        nonce = secrets.token_hex(16)
        try:
            proto.write_frame(self._stdin.fileno(), {**job, "nonce": nonce})
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox worker is gone ({exc})") from None
        deadline = time.monotonic() + float(job["timeout_s"]) + REPLY_MARGIN_S
        try:
            reply = proto.read_frame(self._stdout.fileno(), deadline, int(job["max_output_bytes"]) + FRAME_OVERHEAD)
        except proto.FrameError as exc:
            raise SandboxUnavailable(f"the sandbox worker did not answer properly: {exc}") from None
        if reply is None:
            raise SandboxUnavailable(f"the sandbox worker died: {self.stderr_tail() or 'no message'}")
        if reply.get("nonce") != nonce:
            raise SandboxUnavailable("the sandbox worker answered another job (nonce mismatch)")
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
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
    """``size`` zygotes; ``run`` is thread-safe and every wait in it is bounded."""

    def __init__(
        self, size: int = 2, command: tuple[str, ...] = ZYGOTE_COMMAND, startup_timeout: float = STARTUP_TIMEOUT_S
    ) -> None:
        self.size = max(1, size)
        self.command, self.startup_timeout = command, startup_timeout
        self._idle: queue.Queue[_Zygote] = queue.Queue()
        self._lock = threading.Lock()
        self._live = 0
        self._slots: set[int] = set()
        self._all: list[_Zygote] = []
        self.layers: dict | None = None
        self._broken: tuple[float, str] | None = None

    def _spawn(self, slot: int) -> _Zygote:
        try:
            z = _Zygote(slot, self.command, self.startup_timeout)
        except SandboxUnavailable as exc:
            with self._lock:
                self._live -= 1
                self._slots.discard(slot)
                self._broken = (time.monotonic(), str(exc))
            log.error("%s", exc)
            raise
        with self._lock:
            self._all.append(z)
            self.layers = z.layers
            self._broken = None
        return z

    def _acquire(self, timeout: float) -> _Zygote:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._broken and time.monotonic() - self._broken[0] < RETRY_AFTER_S and self._live == 0:
                    raise SandboxUnavailable(self._broken[1])
                slot = None
                if self._idle.empty() and self._live < self.size:
                    slot = min(set(range(self.size)) - self._slots)  # the slot picks the child's host uid
                    self._slots.add(slot)
                    self._live += 1
            if slot is not None:
                return self._spawn(slot)
            try:
                return self._idle.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise SandboxUnavailable(f"no sandbox worker became free within {timeout:g} s") from None

    def _retire(self, z: _Zygote) -> None:
        z.kill()
        with self._lock:
            if z in self._all:
                self._all.remove(z)
                self._live -= 1
                self._slots.discard(z.slot)

    def run(self, job: dict) -> dict:
        z = self._acquire(float(job["timeout_s"]))
        try:
            reply = z.run(job)
        except BaseException:
            self._retire(z)
            raise
        if z.alive():
            self._idle.put(z)
        else:
            self._retire(z)
        return reply

    def ensure_started(self) -> dict:
        """Start one zygote now (if none is running) and return its layer report."""
        z = self._acquire(self.startup_timeout)
        self._idle.put(z)
        return self.layers or {}

    def close(self) -> None:
        with self._lock:
            zygotes, self._all = self._all, []
            self._live = 0
            self._slots.clear()
        for z in zygotes:
            z.kill()
        while not self._idle.empty():
            self._idle.get_nowait()


_POOL: SandboxPool | None = None
_POOL_PID: int | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int = 2) -> SandboxPool:
    """This process's sandbox pool (started on first use; a forked child gets its own)."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL, _POOL_PID = SandboxPool(size), os.getpid()
        return _POOL


def shutdown() -> None:
    """Stop this process's sandbox pool, if it has one."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None and _POOL_PID == os.getpid():
            _POOL.close()
        _POOL = None


atexit.register(shutdown)
