"""Certified equivalence with mqt.qcec (decision diagrams and ZX-calculus), in a killable worker.

Returns a verdict instead of a number: ``equivalent`` (up to global phase), ``not_equivalent``,
or ``unknown`` (qcec gave no proof, e.g. a timeout).  Used by circuit (rewrite) targets and the
``qcec`` fidelity backend, where a certified verdict replaces simulation for wide circuits, and
by the baselines, which must never count an unverified output as compression.

qcec's own ``timeout`` is advisory: its checkers poll it between decision-diagram operations,
and one operation on a hostile circuit can run far past it (measured: a 5 s timeout returned
after 17.7 s on a 48-qubit, 2000-gate random candidate).  A reward computation needs a budget
that holds, so every check runs in a separate worker process (``python -m
rubriq.sim._qcec_worker``), and a check that overruns its time is ended by killing that
process; the next check starts a fresh one.  Hand-written because neither qcec nor the standard
library offers a preemptible call into native code (``concurrent.futures`` cannot cancel a
running task, ``multiprocessing``'s spawn re-imports the caller's ``__main__``).

>>> from qiskit import QuantumCircuit
>>> a = QuantumCircuit(2); _ = a.h(0); _ = a.cx(0, 1)
>>> b = QuantumCircuit(2); _ = b.h(0); _ = b.cx(0, 1); _ = b.z(0); _ = b.z(0)
>>> certify(a, b).verdict
'equivalent'
>>> _ = b.t(1)
>>> certify(a, b).verdict
'not_equivalent'
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from qiskit import QuantumCircuit

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!Q")
WORKER_COMMAND: tuple[str, ...] = ("-m", "rubriq.sim._qcec_worker")
"""Arguments of ``sys.executable`` that start a worker (tests substitute one that never answers)."""


@dataclass(frozen=True)
class Verdict:
    """qcec's answer for one pair of circuits: equivalent, not_equivalent or unknown, with the reason."""

    verdict: str
    """'equivalent', 'not_equivalent' or 'unknown'."""
    detail: str
    """qcec's equivalence criterion, or why there is none (timeout, worker failure)."""
    seconds: float


def classify(criterion: str) -> str:
    """Map qcec's ``EquivalenceCriterion`` name to a verdict; only proofs count.

    >>> classify("equivalent_up_to_global_phase"), classify("probably_equivalent")
    ('equivalent', 'unknown')
    """
    if criterion in ("equivalent", "equivalent_up_to_global_phase"):
        return "equivalent"
    if criterion == "not_equivalent":
        return "not_equivalent"
    return "unknown"  # probably_equivalent, probably_not_equivalent, no_information, timeout


def _check_installed() -> None:
    import importlib.util

    try:
        found = importlib.util.find_spec("mqt.qcec") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        from rubriq.sim.torch_backend import BackendUnavailable

        raise BackendUnavailable("certified equivalence needs mqt.qcec: pip install mqt.qcec")


class CertifyWorker:
    """One qcec worker process, restarted after it is killed or dies."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._ready = False
        self.starts = 0

    def _start(self, wait_s: float | None) -> subprocess.Popen:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen(
                [sys.executable, *WORKER_COMMAND],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
            self._proc, self.starts = proc, self.starts + 1
            self._ready = False
        if not self._ready and wait_s is not None:
            try:
                self._ready = _read_frame(proc, wait_s) == "ready"
            except EOFError:  # died while importing (mqt.qcec broken?)
                self.stop()
                raise
            if not self._ready:  # still importing: left to finish, the next check uses it
                raise TimeoutError(f"the qcec worker was not ready within {wait_s:.1f} s")
        return proc

    def warm_up(self, wait_s: float = 60.0) -> None:
        """Start the worker now (imports take ~1-2 s) so that no evaluation pays for it."""
        with self._lock:
            try:
                self._start(wait_s)
            except (OSError, TimeoutError, EOFError) as exc:
                log.warning("qcec worker could not start: %s", exc)

    def verify(self, a: QuantumCircuit, b: QuantumCircuit, timeout_s: float) -> Verdict:
        start = time.monotonic()
        with self._lock:
            try:
                proc = self._start(max(timeout_s, 0.0))
            except (OSError, TimeoutError, EOFError) as exc:
                return Verdict("unknown", f"worker failed: {exc}", time.monotonic() - start)
            begin = time.monotonic()
            try:
                return self._ask(proc, a, b, timeout_s, begin)
            except BaseException:  # interrupted mid-request (e.g. a caller's alarm): never reuse it
                self.stop()
                raise

    def _ask(self, proc, a, b, timeout_s: float, begin: float) -> Verdict:
        try:
            # qcec gets most of the time; its timeout is advisory, ours is enforced
            payload = pickle.dumps((a, b, 0.8 * timeout_s))
            proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            proc.stdin.flush()
            reply = _read_frame(proc, timeout_s - (time.monotonic() - begin))
        except (OSError, EOFError, pickle.PickleError) as exc:
            self.stop()
            return Verdict("unknown", f"worker failed: {type(exc).__name__}: {exc}", time.monotonic() - begin)
        if reply is None:  # overran its time: kill it and start the next one now
            self.stop()
            try:
                self._start(None)
            except OSError:
                pass
            return Verdict("unknown", "timeout", time.monotonic() - begin)
        if isinstance(reply, tuple) and reply[0] == "error":
            return Verdict("unknown", f"qcec failed: {reply[1]}", time.monotonic() - begin)
        return Verdict(classify(reply), reply, time.monotonic() - begin)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (getattr(proc, "stdin", None), getattr(proc, "stdout", None)):
            if stream is not None:
                stream.close()


def _read_frame(proc: subprocess.Popen, timeout_s: float):
    """One length-prefixed pickle from the worker, or None if none arrives within ``timeout_s``.
    The worker is our own code over circuits we sent it: unpickling its reply is safe."""
    assert proc.stdout is not None  # started with stdout=PIPE
    fd = proc.stdout.fileno()
    end = time.monotonic() + timeout_s
    data = b""
    need = _HEADER.size
    length = None
    while True:
        while len(data) < need:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, need - len(data))
            if not chunk:
                raise EOFError("the qcec worker exited")
            data += chunk
        if length is not None:
            return pickle.loads(data)
        length = _HEADER.unpack(data)[0]
        data, need = b"", length


_WORKER = CertifyWorker()
atexit.register(_WORKER.stop)


def warm_up() -> None:
    """Start this process's qcec worker ahead of the first check (a no-op without mqt.qcec)."""
    try:
        _check_installed()
    except Exception:
        return
    _WORKER.warm_up()


def certify(a: QuantumCircuit, b: QuantumCircuit, timeout_s: float = 60.0) -> Verdict:
    """Decide whether ``a`` and ``b`` implement the same unitary up to global phase, within
    ``timeout_s`` seconds of the worker's time (then ``unknown``, detail ``timeout``).  A circuit
    narrower than the other is padded with idle qubits."""
    _check_installed()
    from rubriq.circuit.gates import strip_non_unitary

    a, b = strip_non_unitary(a), strip_non_unitary(b)
    if a.num_qubits != b.num_qubits:
        width = max(a.num_qubits, b.num_qubits)
        a, b = _pad(a, width), _pad(b, width)
    return _WORKER.verify(a, b, timeout_s)


def _pad(circuit: QuantumCircuit, width: int) -> QuantumCircuit:
    if circuit.num_qubits == width:
        return circuit
    out = QuantumCircuit(width, global_phase=circuit.global_phase)
    return out.compose(circuit, qubits=range(circuit.num_qubits))
