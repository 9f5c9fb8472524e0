"""A seccomp-BPF deny-list for the sandbox child, installed with prctl through ctypes.

Hand-written because the maintained binding (libseccomp's Python module) is not on PyPI and
the PyPI wrappers are unmaintained; the filter is small: check the architecture, deny a list
of system calls with EPERM (sockets, exec, ptrace, mounts, namespaces, setsid, file-system
changes), deny opening files for writing, deny process creation (fork, vfork, clone without CLONE_THREAD;
clone3 answers ENOSYS so that glibc falls back to clone for threads), allow
``kill``/``tgkill`` only towards the process itself, and allow everything else (threads,
memory, reading files).  x86-64 only; on other architectures
the layer reports itself inactive.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_KILL_PROCESS = 0x80000000
AUDIT_ARCH_X86_64 = 0xC000003E
EPERM = 1

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
CLONE_THREAD = 0x00010000
ENOSYS = 38
_RET_K = 0x06

# x86-64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl)
DENIED_X86_64 = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "accept4": 288, "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "unshare": 272, "setns": 308, "setsid": 112, "setpgid": 109, "reboot": 169, "kexec_load": 246,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "bpf": 321,
    "perf_event_open": 298, "keyctl": 250, "add_key": 248, "request_key": 249,
    "personality": 135, "userfaultfd": 323, "io_uring_setup": 425, "swapon": 167, "swapoff": 168,
    "setuid": 105, "setgid": 106, "setreuid": 113, "setregid": 114, "setresuid": 117,
    "setresgid": 119, "setgroups": 116, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "fanotify_init": 300, "mknod": 133, "mknodat": 259, "iopl": 172, "ioperm": 173,
    # no changes to the file system, even where the process could write (e.g. as root)
    "creat": 85, "unlink": 87, "unlinkat": 263, "rename": 82, "renameat": 264, "renameat2": 316,
    "rmdir": 84, "mkdir": 83, "mkdirat": 258, "truncate": 76, "ftruncate": 77, "link": 86,
    "linkat": 265, "symlink": 88, "symlinkat": 266, "chmod": 90, "fchmod": 91, "fchmodat": 268,
    "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260, "utime": 132, "utimes": 235,
    "utimensat": 280, "futimesat": 261, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
    "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "fallocate": 285,
}
# open(2) flags arg index and number: opening for writing/creating is denied
OPEN_X86_64 = {2: 1, 257: 2}  # open: flags in args[1]; openat: flags in args[2]
OPENAT2_X86_64 = 437
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000  # O_WRONLY O_RDWR O_CREAT O_TRUNC O_APPEND
SELF_ONLY_X86_64 = {"kill": 62, "tgkill": 234, "tkill": 200}
NO_PROCESS_X86_64 = {"fork": 57, "vfork": 58}
CLONE_X86_64 = 56
CLONE3_X86_64 = 435
X32_SYSCALL_BIT = 0x40000000


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_filter(pid: int) -> bytes:
    """The BPF program (as bytes of sock_filter) for a process whose pid is ``pid``."""
    prog = [
        _insn(_LD_W_ABS, 0, 0, 4),                     # A = arch
        _insn(_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        _insn(_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, 0),                     # A = syscall number
        _insn(_JGE_K, 0, 1, X32_SYSCALL_BIT),          # x32 ABI: deny
        _insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
    ]
    for nr in sorted(DENIED_X86_64.values()):
        prog.append(_insn(_JEQ_K, 0, 1, nr))
        prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    for nr, arg in sorted(OPEN_X86_64.items()):
        prog.append(_insn(_JEQ_K, 0, 4, nr))
        prog.append(_insn(_LD_W_ABS, 0, 0, 16 + 8 * arg))
        prog.append(_insn(_JSET_K, 0, 1, WRITE_FLAGS))
        prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
        prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    prog.append(_insn(_JEQ_K, 0, 1, OPENAT2_X86_64))  # flags in a struct: let libc fall back
    prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS))
    for nr in sorted(NO_PROCESS_X86_64.values()):
        prog.append(_insn(_JEQ_K, 0, 1, nr))
        prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    # clone3 passes its flags in a struct seccomp cannot read: ENOSYS makes glibc fall back
    # to clone, whose flags we can read: threads (CLONE_THREAD) yes, new processes no.
    prog.append(_insn(_JEQ_K, 0, 1, CLONE3_X86_64))
    prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS))
    prog.append(_insn(_JEQ_K, 0, 4, CLONE_X86_64))
    prog.append(_insn(_LD_W_ABS, 0, 0, 16))
    prog.append(_insn(_JSET_K, 1, 0, CLONE_THREAD))
    prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    for nr in sorted(SELF_ONLY_X86_64.values()):
        # if nr matches: load args[0] (low word) and allow only our own pid
        prog.append(_insn(_JEQ_K, 0, 4, nr))
        prog.append(_insn(_LD_W_ABS, 0, 0, 16))
        prog.append(_insn(_JEQ_K, 1, 0, pid))
        prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
        prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    prog.append(_insn(_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    return b"".join(prog)


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def install() -> None:
    """Install the filter on the calling thread's process (irreversible). Raises OSError."""
    if not supported():
        raise OSError("seccomp filter only implemented for Linux x86-64")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    code = build_filter(os.getpid())
    count = len(code) // 8
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(count, ctypes.cast(buf, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
