"""The seccomp allow-list of the sandbox child, built with libseccomp.

Default action: the call fails with EPERM.  Allowed are only the system calls a forked Python +
numpy + qiskit child needs to run a completion, build a circuit and write its result (found
by tracing honest completions, ``strace -f``), some of them only with safe arguments:

* files: read-only opens (``open``/``openat`` whose flags request no write access, creation,
  truncation or append; ``openat2``, whose flags sit in a struct, answers ENOSYS so libc falls
  back to ``openat``), reads, stats, directory listings, seeks, closes;
* memory: ``mmap``/``mprotect``/``munmap``/``mremap``/``brk``/``madvise``/``mbind``;
* threads, not processes: ``clone`` only with CLONE_THREAD (``clone3`` passes its flags in a
  struct seccomp cannot read: it answers ENOSYS and glibc falls back to ``clone``), futexes;
* signals only to itself: ``kill``, ``tkill``, ``tgkill`` with the caller's own pid;
* ``fcntl`` only to read or set descriptor/status flags and duplicate (no F_SETOWN, F_SETSIG,
  leases, notifications, locks); ``ioctl`` only TCGETS (isatty) and FIOCLEX/FIONCLEX;
* ``prlimit64`` only to read its own limits; ``prctl`` only to name a thread.

Everything else (sockets, exec, fork, ptrace, pidfd_*, process_vm_*, mount and the new mount
API, namespaces, setuid family, SysV/POSIX IPC, xattrs, scheduling of other processes,
clock/hostname changes, keyrings, bpf, io_uring, ...) fails with EPERM.  Other architectures
(and the x32 ABI, which libseccomp checks on x86-64) kill the process.

libseccomp (the system library, through the ctypes binding ``pyseccomp``) builds the BPF
program; RubriQ only states the rules.  PR_SET_NO_NEW_PRIVS is set first (libseccomp's
default), so the filter cannot be escaped through a set-uid program.
"""

from __future__ import annotations

import errno
import os
import platform
from dataclasses import dataclass

# open(2) flags that ask for more than reading: O_WRONLY O_RDWR O_CREAT O_TRUNC O_APPEND __O_TMPFILE
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000
CLONE_THREAD = 0x00010000
FCNTL_ALLOWED = {"F_DUPFD": 0, "F_GETFD": 1, "F_SETFD": 2, "F_GETFL": 3, "F_SETFL": 4, "F_DUPFD_CLOEXEC": 1030}
IOCTL_ALLOWED = {"TCGETS": 0x5401, "FIONCLEX": 0x5450, "FIOCLEX": 0x5451}
PR_SET_NAME, PR_GET_NAME = 15, 16

ALLOWED = (
    # reading files the interpreter and libraries need (opens are filtered below)
    "read",
    "pread64",
    "readv",
    "write",
    "writev",
    "close",
    "lseek",
    "fstat",
    "stat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "getdents64",
    "readlink",
    "readlinkat",
    "getcwd",
    "dup",
    "dup2",
    "dup3",
    # memory
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "mbind",
    "get_mempolicy",
    "membarrier",
    # threads, time, identity, randomness, exit
    "futex",
    "set_robust_list",
    "get_robust_list",
    "rseq",
    "set_tid_address",
    "sched_yield",
    "sched_getaffinity",
    "gettid",
    "getpid",
    "getppid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getgroups",
    "getresuid",
    "getresgid",
    "uname",
    "sysinfo",
    "getrusage",
    "getrlimit",
    "getrandom",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "nanosleep",
    "clock_nanosleep",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "exit",
    "exit_group",
)
"""Allowed with any arguments."""


@dataclass(frozen=True)
class Rule:
    """An allowed system call with a condition on its arguments (for ``rubriq doctor``)."""

    name: str
    condition: str


CONDITIONAL = (
    Rule("open", "flags (arg 1) request no write, create, truncate or append"),
    Rule("openat", "flags (arg 2) request no write, create, truncate or append"),
    Rule("clone", "flags (arg 0) include CLONE_THREAD: threads only, no new process"),
    Rule("kill", "pid (arg 0) is the caller's own"),
    Rule("tkill", "tid (arg 0) is the caller's own pid"),
    Rule("tgkill", "tgid (arg 0) is the caller's own"),
    Rule("fcntl", "cmd (arg 1) in " + ", ".join(FCNTL_ALLOWED)),
    Rule("ioctl", "request (arg 1) in " + ", ".join(IOCTL_ALLOWED)),
    Rule("prlimit64", "pid (arg 0) = 0 and new limit (arg 2) = NULL: read its own limits"),
    Rule("prctl", "option (arg 0) is PR_SET_NAME or PR_GET_NAME"),
)
ENOSYS_CALLS = ("clone3", "openat2")
"""Answered with ENOSYS, so that libc falls back to a call whose arguments the filter can read."""
MAX_SYSCALL_X86_64 = 470
"""Above the highest x86-64 system call number of current kernels (the table test scans 0..this)."""
KERNEL_EXEMPT_X86_64 = {335: "uretprobe", 336: "uprobe"}
"""Passed through seccomp by the kernel itself (Linux >= 6.11 / 6.16: they serve uprobe
trampolines); called from anywhere else the kernel kills the caller with SIGILL."""


def supported() -> tuple[bool, str]:
    """Whether the allow-list can be installed here, and why not."""
    if platform.system() != "Linux":
        return False, "seccomp needs Linux"
    if platform.machine() not in ("x86_64", "AMD64"):
        return False, f"the allow-list is written for x86-64 system calls, this machine is {platform.machine()}"
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as exc:
        return False, f"libseccomp is not usable ({exc}): install the system library libseccomp2 and pyseccomp"
    return True, ""


def build_filter(pid: int):
    """The libseccomp filter for a process whose pid (as it sees it) is ``pid``."""
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    for name in ALLOWED:
        f.add_rule(sc.ALLOW, name)
    f.add_rule(sc.ALLOW, "open", sc.Arg(1, sc.MASKED_EQ, WRITE_FLAGS, 0))
    f.add_rule(sc.ALLOW, "openat", sc.Arg(2, sc.MASKED_EQ, WRITE_FLAGS, 0))
    f.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, CLONE_THREAD))
    for name in ("kill", "tkill", "tgkill"):
        f.add_rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, pid))
    for cmd in FCNTL_ALLOWED.values():
        f.add_rule(sc.ALLOW, "fcntl", sc.Arg(1, sc.EQ, cmd))
    for request in IOCTL_ALLOWED.values():
        f.add_rule(sc.ALLOW, "ioctl", sc.Arg(1, sc.EQ, request))
    f.add_rule(sc.ALLOW, "prlimit64", sc.Arg(0, sc.EQ, 0), sc.Arg(2, sc.EQ, 0))
    for option in (PR_SET_NAME, PR_GET_NAME):
        f.add_rule(sc.ALLOW, "prctl", sc.Arg(0, sc.EQ, option))
    for name in ENOSYS_CALLS:
        f.add_rule(sc.ERRNO(errno.ENOSYS), name)
    return f


def install(pid: int | None = None) -> None:
    """Load the filter on the calling process (irreversible; sets no_new_privs). Raises OSError."""
    ok, why = supported()
    if not ok:
        raise OSError(why)
    build_filter(os.getpid() if pid is None else pid).load()


def allowed_names() -> tuple[str, ...]:
    """Every system call the filter lets through in some form (unconditionally or with a condition)."""
    return tuple(sorted(set(ALLOWED) | {r.name for r in CONDITIONAL}))


def allowed_numbers() -> set[int]:
    """x86-64 numbers of :func:`allowed_names` (and the ENOSYS ones), resolved by libseccomp."""
    import pyseccomp as sc

    names = set(allowed_names()) | set(ENOSYS_CALLS)
    return {sc.resolve_syscall(sc.Arch.X86_64, name) for name in names}


def describe() -> dict[str, object]:
    """The allow-list as ``rubriq doctor`` prints it."""
    return {
        "default": "EPERM",
        "other architectures and x32": "process killed",
        "allowed": list(ALLOWED),
        "allowed with conditions": {r.name: r.condition for r in CONDITIONAL},
        "ENOSYS": list(ENOSYS_CALLS),
    }


__all__ = [
    "ALLOWED",
    "CONDITIONAL",
    "ENOSYS_CALLS",
    "KERNEL_EXEMPT_X86_64",
    "allowed_names",
    "allowed_numbers",
    "build_filter",
    "describe",
    "install",
    "supported",
]
