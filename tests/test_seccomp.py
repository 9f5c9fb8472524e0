"""The seccomp allow-list, checked inside the real sandbox (a job run by a zygote, pre-filter
off): EVERY x86-64 system call number that is not on the allow-list fails with EPERM, the
conditional rules refuse the dangerous arguments, and the x32 ABI kills the process."""

import errno

import pytest

from rubriq.config import ExtractionConfig
from rubriq.extract.sandbox import PythonExecutionError, run_python, seccomp

ok, why = seccomp.supported()
pytestmark = pytest.mark.skipif(not ok, reason=why)
CFG = ExtractionConfig(python_prefilter=False, python_timeout_s=30.0)
PRELUDE = """
import ctypes, os
from qiskit import QuantumCircuit
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args] + [ctypes.c_long(0)] * (6 - len(args))
    r = libc.syscall(ctypes.c_long(nr), *args)
    return r, ctypes.get_errno()
"""


def _run(body: str):
    return run_python(PRELUDE + body, CFG)


def test_every_syscall_not_on_the_allow_list_gets_eperm():
    # uretprobe/uprobe bypass seccomp in the kernel and kill a direct caller: checked below
    allowed = sorted(seccomp.allowed_numbers() | set(seccomp.KERNEL_EXEMPT_X86_64))
    code = f"""
allowed = set({allowed})
bad = []
for nr in range({seccomp.MAX_SYSCALL_X86_64 + 1}):
    if nr in allowed:
        continue
    r, e = call(nr)
    if r != -1 or e != {errno.EPERM}:
        bad.append((nr, r, e))
if bad:
    raise RuntimeError(f"not refused: {{bad[:20]}}")
qc = QuantumCircuit(1)
qc.x(0)
"""
    circuit = _run(code)
    assert circuit.count_ops() == {"x": 1}
    assert len(allowed) < 100  # an allow-list, not a deny-list


CONDITIONAL = {
    # name: (python expression returning (r, errno), expected errno or 0 for success)
    "openat for writing": ("call(257, -100, ctypes.c_char_p(b'/etc/hostname'), os.O_WRONLY)", errno.EPERM),
    "openat creating": ("call(257, -100, ctypes.c_char_p(b'/tmp/x'), os.O_RDONLY | os.O_CREAT, 0o644)", errno.EPERM),
    "openat read-only": ("call(257, -100, ctypes.c_char_p(b'/proc/self/status'), os.O_RDONLY)", 0),
    "clone a process": ("call(56, 17, 0, 0, 0, 0)", errno.EPERM),  # SIGCHLD, no CLONE_THREAD
    "clone3": ("call(435, 0, 0)", errno.ENOSYS),
    "openat2": ("call(437, -100, 0, 0, 0)", errno.ENOSYS),
    "kill init": ("call(62, 1, 0)", errno.EPERM),
    "kill everyone": ("call(62, -1, 9)", errno.EPERM),
    "kill itself, signal 0": ("call(62, os.getpid(), 0)", 0),
    "tgkill another": ("call(234, 1, 1, 0)", errno.EPERM),
    "fcntl F_SETOWN": ("call(72, 1, 8, os.getpid())", errno.EPERM),
    "fcntl F_SETSIG": ("call(72, 1, 10, 9)", errno.EPERM),
    "fcntl F_GETFD": ("call(72, 1, 1)", 0),
    "ioctl TIOCSTI": ("call(16, 0, 0x5412, 0)", errno.EPERM),
    "prlimit64 another pid": ("call(302, 1, 7, 0, 0)", errno.EPERM),
    "prlimit64 setting own": ("call(302, 0, 7, 1, 0)", errno.EPERM),
    "prctl clear PDEATHSIG": ("call(157, 1, 0)", errno.EPERM),
    "prctl set name": ("call(157, 15, ctypes.c_char_p(b'x'))", 0),
}


@pytest.mark.parametrize("name", list(CONDITIONAL))
def test_conditional_rules(name):
    expr, expected = CONDITIONAL[name]
    code = f"""
r, e = {expr}
ok = (r >= 0) if {expected} == 0 else (r == -1 and e == {expected})
if not ok:
    raise RuntimeError(f"{{r}} errno {{e}}")
qc = QuantumCircuit(1)
"""
    assert _run(code).num_qubits == 1


@pytest.mark.parametrize("nr", sorted(seccomp.KERNEL_EXEMPT_X86_64))
def test_kernel_exempt_calls_only_kill_the_caller(nr):
    """On kernels that know them, uretprobe/uprobe called outside a trampoline fail or raise
    SIGILL in the caller; on older kernels they are ordinary unknown numbers (EPERM)."""
    try:
        circuit = _run(f"r, e = call({nr})\nassert r == -1, (r, e)\nqc = QuantumCircuit(1)")
    except PythonExecutionError as exc:
        assert "ended without a result" in str(exc)
    else:
        assert circuit.num_qubits == 1


def test_x32_abi_kills_the_process():
    with pytest.raises(PythonExecutionError, match="ended without a result"):
        _run("call(0x40000000 | 39)\nqc = QuantumCircuit(1)")


def test_doctor_prints_the_allow_list():
    from typer.testing import CliRunner

    from rubriq.cli import app

    out = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    for name in seccomp.allowed_names():
        assert name in out.output, name
