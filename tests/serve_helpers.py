"""What the server tests and benchmarks/bench_serve.py share: a real ``rubriq serve`` process on
127.0.0.1 (started, killed and restarted by the caller), the mixed batch, and the in-process
reference every served result must equal."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

QFT2 = '{"algorithm": "qft", "do_swaps": true, "inverse": false, "num_qubits": 2}'
QFT3 = '{"algorithm": "qft", "do_swaps": true, "inverse": false, "num_qubits": 3}'
REWRITE = json.dumps(
    {
        "algorithm": "circuit",
        "qasm": 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nt q[0];\nt q[0];\ncx q[0],q[1];\n',
    }
)
QFT2_QASM = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; h q[1]; cu1(pi/2) q[0],q[1]; h q[0]; swap q[0],q[1];'
QFT3_QASM = (
    'OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; h q[2]; cu1(pi/2) q[1],q[2]; cu1(pi/4) q[0],q[2]; h q[1];'
    " cu1(pi/2) q[0],q[1]; h q[0]; swap q[0],q[2];"
)
PYTHON_QFT1 = (
    "Here is the circuit:\n```python\nfrom qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nqc.h(1)\n"
    "qc.cp(3.141592653589793 / 2, 0, 1)\nqc.h(0)\nqc.swap(0, 1)\n```"
)
HOSTILE = (
    "```python\nfrom qiskit import QuantumCircuit\nimport os\nos.system('touch /tmp/rubriq-pwned')\n"
    "print(open('/etc/shadow').read())\nqc = QuantumCircuit(1)\nqc.h(0)\n```"
)

MIXED: list[tuple[str, str, str]] = [
    ("correct", QFT2_QASM, QFT2),
    ("correct, 3 qubits", QFT3_QASM, QFT3),
    ("wrong", 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; h q[0]; cx q[0],q[1];', QFT2),
    ("unparseable", "I am sorry, I cannot write that circuit.", QFT2),
    ("hostile Python", HOSTILE, QFT2),
    ("Python (sandboxed)", PYTHON_QFT1, QFT2),
    ("rewrite, fewer T", 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; s q[0]; cx q[0],q[1];', REWRITE),
    ("rewrite, wrong", 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; t q[0]; cx q[0],q[1];', REWRITE),
]
"""(what it is, completion, target spec): correct, wrong, unparseable, hostile Python, sandboxed
Python, rewrite targets."""

SLOW_PYTHON = (
    "```python\nfrom qiskit import QuantumCircuit\nqc = QuantumCircuit(1)\nk = 0\nfor i in range({n}):\n"
    "    k += i\nqc.h(0)\n```"
)
"""A legitimate Python completion that runs for a while in the sandbox (``n`` loop turns)."""


def slow_item(n: int = 3_000_000, tag: str = "") -> str:
    return SLOW_PYTHON.format(n=n) + (f"\n<!-- {tag} -->" if tag else "")


def reference(completion: str, spec: str) -> dict[str, Any]:
    """What the server must answer: a fresh in-process evaluator's ``to_dict()`` + correct + t0."""
    from rubriq.evaluator import RubriQEvaluator
    from rubriq.serve.protocol import result_dict
    from rubriq.targets import target_from_spec

    evaluator = RubriQEvaluator(target=target_from_spec(json.loads(spec)))
    result = evaluator.evaluate(completion)
    return result_dict(result, evaluator.config.fidelity.correct_threshold, evaluator.target.t0)


def differences(a: Any, b: Any, tol: float = 1e-12, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ (floats by more than ``tol``); empty when they agree.

    ``fidelity_note`` is not compared: it tells how the verdict came about ("certified by
    mqt.qcec (equivalent) in 0.02 s", "disproved by simulation (qcec: no_information)"), and
    qcec's first, time-limited try can run out under CPU load; the verdict, F and every score
    that follow from it are compared."""
    if where.endswith(".fidelity_note"):
        return [] if (a is None) == (b is None) else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only on one side" for k in set(a) ^ set(b)]
        for k in set(a) & set(b):
            out += differences(a[k], b[k], tol, f"{where}.{k}")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{where}: lengths {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, tol, f"{where}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            return [] if math.isclose(a, b, rel_tol=0, abs_tol=tol) else [f"{where}: {a!r} != {b!r}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def running_a_job(pid: int) -> bool:
    """Whether the process ``pid`` has a sandbox supervisor running a job among its descendants (a
    finished job's supervisor not yet reaped, a zombie, does not count)."""
    import psutil

    from rubriq.extract.sandbox.zygote import JOB_NAME

    def running(child: psutil.Process) -> bool:
        try:
            return child.name() == JOB_NAME.decode() and child.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    try:
        return any(running(c) for c in psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return False


class VirtualClock:
    """A stand-in for the ``time`` module of :mod:`rubriq.serve.client` (``monkeypatch.setattr(
    client_module, "time", VirtualClock())``): ``monotonic()`` reads a clock that only ``sleep()``
    moves, so a test of the client's patience checks how long it waited, in its own seconds,
    without waiting (nor asserting on the machine's clock)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A ``rubriq serve`` process on 127.0.0.1 (its output in ``log``)."""

    def __init__(self, *args: str, port: int | None = None, env: dict | None = None, log: Path | None = None) -> None:
        self.port = port or free_port()
        self.args = ["--port", str(self.port), *args]
        self.env = {**os.environ, **(env or {})}
        self.log_path = log
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> Server:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rubriq.cli", "serve", *self.args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=ROOT,
            start_new_session=True,
        )
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()  # never leave a half-started server (and its workers) behind
            raise
        return self

    def wait_ready(self, timeout: float = 180.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"rubriq serve exited with {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)  # paces the poll for the server to answer /health (the deadline bounds it)
        raise TimeoutError(f"rubriq serve not up in {timeout} s: {self.log()[-2000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def _descendants(self) -> list:
        import psutil

        try:
            return psutil.Process(self.proc.pid).children(recursive=True) if self.proc else []
        except psutil.Error:
            return []

    def kill(self) -> None:
        """kill -9 the server and everything it started (its process group; the sandbox zygotes,
        which have sessions of their own, also exit when their parent is gone)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server (SIGINT, then kill -9) and whatever it left running."""
        leftovers = self._descendants()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # leftover workers
            except (ProcessLookupError, PermissionError):
                pass
            for child in leftovers:
                try:
                    child.kill()
                except Exception:  # noqa: BLE001 - already gone
                    pass

    def children(self, marker: str) -> list[int]:
        """Pids of the server's descendants whose command line holds ``marker``."""
        import psutil

        assert self.proc is not None
        found = []
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                if marker in " ".join(child.cmdline()):
                    found.append(child.pid)
            except psutil.Error:
                continue
        return found

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
