"""Parent side of the sandbox: a small pool of pre-started zygotes.

``SandboxPool.run(code, cfg)`` takes an idle zygote, sends it the job and waits (with its own
deadline) for the verdict.  A zygote that does not answer in time, or dies, is killed and
replaced; the caller gets a typed :class:`SandboxError`, never a hang.  The pool is created
lazily (first Python completion), per process (a forked parent gets a fresh pool), and shut
down at exit.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import subprocess
import sys
import threading

from rubriq.extract.sandbox import zygote as proto

_STARTUP_TIMEOUT_S = 120.0
_REPLY_MARGIN_S = 10.0


class SandboxError(RuntimeError):
    """The sandboxed execution failed (timeout, crash, output cap, infrastructure)."""


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


class _Zygote:
    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", "-m", "rubriq.extract.sandbox.zygote"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=_zygote_env(slot), cwd="/", start_new_session=True, close_fds=True,
        )
        hello = self._read(_STARTUP_TIMEOUT_S)
        if not hello or not hello.get("ready"):
            self.kill()
            raise SandboxError("the sandbox worker failed to start")
        self.layers = hello["layers"]

    def _read(self, timeout: float) -> dict | None:
        import select

        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        try:
            return proto.read_frame(fd)
        except (OSError, ValueError):
            return None

    def run(self, job: dict) -> dict | None:
        try:
            proto.write_frame(self.proc.stdin.fileno(), job)
        except OSError:
            return None
        return self._read(float(job["timeout_s"]) + _REPLY_MARGIN_S)

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


class SandboxPool:
    """``size`` zygotes; ``run`` is thread-safe."""

    def __init__(self, size: int = 2) -> None:
        self.size = max(1, size)
        self._idle: queue.Queue[_Zygote] = queue.Queue()
        self._lock = threading.Lock()
        self._started = 0
        self._all: list[_Zygote] = []
        self.layers: dict | None = None

    def _spawn(self, slot: int) -> _Zygote:
        z = _Zygote(slot)
        with self._lock:
            self._all.append(z)
            self.layers = z.layers
        return z

    def _acquire(self) -> _Zygote:
        with self._lock:
            spawn_slot = self._started if (self._idle.empty() and self._started < self.size) else None
            if spawn_slot is not None:
                self._started += 1
        if spawn_slot is not None:
            return self._spawn(spawn_slot)
        return self._idle.get()

    def _release(self, z: _Zygote, healthy: bool) -> None:
        if healthy and z.alive():
            self._idle.put(z)
            return
        z.kill()
        with self._lock:
            if z in self._all:
                self._all.remove(z)
        self._idle.put(self._spawn(z.slot))

    def run(self, job: dict) -> dict:
        z = self._acquire()
        reply = None
        try:
            reply = z.run(job)
        finally:
            self._release(z, reply is not None)
        if reply is None:
            raise SandboxError("the sandbox worker stopped answering (killed and replaced)")
        return reply

    def ensure_started(self) -> dict:
        """Start one zygote now (if none is running) and return the active layers."""
        z = self._acquire()
        self._release(z, True)
        return self.layers or {}

    def close(self) -> None:
        with self._lock:
            zygotes, self._all = self._all, []
        for z in zygotes:
            z.kill()


_POOL: SandboxPool | None = None
_POOL_PID: int | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int = 2) -> SandboxPool:
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL, _POOL_PID = SandboxPool(size), os.getpid()
        return _POOL


def shutdown() -> None:
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None and _POOL_PID == os.getpid():
            _POOL.close()
        _POOL = None


atexit.register(shutdown)
