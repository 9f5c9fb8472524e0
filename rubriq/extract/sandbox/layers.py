"""Isolation layers applied in the sandbox child, each probed at start-up.

Order in the child (after fork, before the untrusted code):

1. ``session``: new session and process group (the deadline kills the whole group);
2. ``namespaces``: new network namespace (no interfaces but a down loopback) and mount
   namespace with a 1 MiB tmpfs over /tmp and /dev/shm, and credentials hidden
   (/etc/shadow, ~/.ssh, ~/.cache/huggingface, ... covered) (as root; unprivileged: a user
   namespace carrying the network namespace, where the kernel allows it);
3. ``rlimits``: address space, CPU seconds, file size 0, no core dumps, open files, processes;
4. ``uid_drop``: when running as root, switch to an unprivileged uid/gid (one per pool slot),
   so RLIMIT_NPROC holds and root-owned files and processes are out of reach;
5. ``pdeathsig``: the child dies with its zygote;
6. ``seccomp``: a deny-list filter (no sockets, exec, new processes, ptrace, mount,
   namespace changes, setsid, file-system writes, signals to other processes ...).

A layer that fails its probe is skipped (graceful fallback) and reported by
``rubriq doctor``; the others still apply.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SANDBOX_UID_BASE = 61000

LAYERS = ("session", "namespaces", "rlimits", "uid_drop", "pdeathsig", "seccomp")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")
SECRET_HOME_ENTRIES = (".ssh", ".aws", ".azure", ".gnupg", ".docker", ".kube", ".qiskit", ".config",
                       ".cache/huggingface", ".huggingface", ".netrc", ".git-credentials", ".pypirc",
                       ".bash_history", ".python_history")
MS_BIND, MS_RDONLY = 4096, 1


def _homes() -> list[str]:
    homes = ["/root"]
    try:
        homes += [os.path.join("/home", d) for d in os.listdir("/home")]
    except OSError:
        pass
    return homes


def hide_secrets(libc) -> None:
    """Cover credential files and folders with /dev/null or an empty read-only tmpfs."""
    targets = list(SECRET_FILES) + [os.path.join(h, e) for h in _homes() for e in SECRET_HOME_ENTRIES]
    for path in targets:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, b"size=4k")
            elif os.path.isfile(path):
                libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None)
        except OSError:
            continue


def enter_namespaces() -> None:
    libc = _libc()
    if os.geteuid() == 0:
        _check(libc.unshare(CLONE_NEWNET | CLONE_NEWNS), "unshare(net, mount)")
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        for path in (b"/tmp", b"/dev/shm"):
            if os.path.isdir(path):
                _check(libc.mount(b"tmpfs", path, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=1777"),
                       f"tmpfs on {path.decode()}")
        hide_secrets(libc)
    else:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(user, net)")


def set_rlimits(memory_mb: int, cpu_s: int, nproc: int) -> None:
    memory = memory_mb * 1024 * 1024
    for limit, value in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_DATA, memory),
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 64),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_MEMLOCK, 0),
    ):
        resource.setrlimit(limit, (value, value))


def sandbox_uid(slot: int) -> int:
    return SANDBOX_UID_BASE + slot


def drop_privileges(slot: int) -> None:
    if os.geteuid() != 0:
        raise OSError("not running as root: nothing to drop")
    uid = sandbox_uid(slot)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def set_pdeathsig() -> None:
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def become_subreaper() -> bool:
    return _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def apply(active: dict[str, bool], slot: int, memory_mb: int, cpu_s: int, nproc: int) -> dict[str, str]:
    """Apply the layers marked active; return {layer: error} for those that failed here."""
    from rubriq.extract.sandbox import seccomp

    failed: dict[str, str] = {}
    steps = (
        ("namespaces", enter_namespaces),
        ("rlimits", lambda: set_rlimits(memory_mb, cpu_s, nproc)),
        ("uid_drop", lambda: drop_privileges(slot)),
        ("pdeathsig", set_pdeathsig),
        ("seccomp", seccomp.install),
    )
    for name, step in steps:
        if not active.get(name, False):
            continue
        try:
            step()
        except Exception as exc:  # fall back gracefully: the other layers still hold
            failed[name] = f"{type(exc).__name__}: {exc}"
    return failed


def interpreter_readable_after_drop() -> bool:
    """Whether an unprivileged uid can still read the interpreter's modules (lazy imports)."""
    paths = [os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(__import__("qiskit").__file__))]
    for path in paths:
        p = path
        while p and p != "/":
            mode = os.stat(p).st_mode
            if not mode & 0o005:  # others need r-x on every directory up the tree
                return False
            p = os.path.dirname(p)
    return True


def probe(slot: int = 0) -> dict[str, object]:
    """Fork a throw-away child, apply every layer, and report which ones hold here."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked child
        try:
            os.close(r)
            os.setsid()
            root = os.geteuid() == 0
            readable = root and interpreter_readable_after_drop()
            want = {name: True for name in LAYERS}
            want["uid_drop"] = readable
            failed = apply(want, slot, 1024, 5, 16)
            result = {name: (want.get(name, True) and name not in failed) for name in LAYERS}
            if not root:
                failed["uid_drop"] = "not running as root: the process already runs unprivileged"
            elif not readable:
                failed["uid_drop"] = "interpreter files are not readable by an unprivileged uid"
            import json

            os.write(w, json.dumps({"active": result, "why": failed}).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    import json

    try:
        report = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        report = {}
    report.setdefault("active", {name: False for name in LAYERS})
    report.setdefault("why", {})
    report["active"]["session"] = True
    report["python"] = sys.version.split()[0]
    report["euid"] = os.geteuid()
    return report
