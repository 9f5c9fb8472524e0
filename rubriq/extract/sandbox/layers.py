"""Kernel isolation of the sandbox child (see SECURITY.md), one small function per mechanism.

For each job the zygote forks three processes, each with one role::

    zygote Z (pre-imported Qiskit, never runs untrusted code)
      └─ template T (forked from Z before any job: the pristine state every job starts from)
      └─ S  supervisor (forked by T): drops supplementary groups, unshare(user, pid, mount, net, ipc, uts);
            the zygote writes its uid/gid map (inside uid 0 -> an outside uid that owns nothing:
            61000 + slot as root, the caller's own uid otherwise); S then builds the mount view
            (private propagation; empty tmpfs over /tmp, /dev/shm, /var/tmp, /run, /root, /home;
            the interpreter's paths bound back read-only; credential files covered)
         └─ I  init of the new PID namespace (pid 1): a fresh /proc for that namespace, hostname;
               waits for K.  When I dies the kernel kills every
               process of the namespace; I dies with S, S with the zygote (PR_SET_PDEATHSIG).
            └─ K  the child (pid 2): closes every descriptor but its result pipe, rlimits, drops
                  every capability (bounding set too), no_new_privs, the seccomp allow-list
                  (seccomp.py), then runs the completion.

Before the completion runs, K records what the kernel says about itself (namespace inodes,
capabilities, no_new_privs, seccomp mode, uid map, the pids it can see): :func:`isolation_facts`.
The zygote compares them with its own (:func:`check_isolation`) for every job, so a missing
layer is never silent.

Written with ctypes on libc because Python 3.11's ``os`` has no unshare/mount/capset; each call
checks its return value.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACES = {
    "user": CLONE_NEWUSER,
    "pid": CLONE_NEWPID,
    "mnt": CLONE_NEWNS,
    "net": CLONE_NEWNET,
    "ipc": CLONE_NEWIPC,
    "uts": CLONE_NEWUTS,
}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
PR_SET_CHILD_SUBREAPER = 36
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_LAST = 63
SANDBOX_UID_BASE = 61000
LANES_PER_SLOT = 32
"""Outside uids per zygote slot (one per concurrent job, as root): 61000 + 32 * slot + lane."""
SANDBOX_UID_SPAN = 16 * LANES_PER_SLOT
"""Outside uids reserved for the sandbox as root: [SANDBOX_UID_BASE, SANDBOX_UID_BASE + SPAN)."""
PR_SET_NAME = 15
HOSTNAME = b"rubriq-sandbox"

COVERED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/root", "/home")
"""Replaced by an empty tmpfs in the child's mount namespace (the interpreter's own paths under
them are bound back read-only)."""
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/security/opasswd")
LAYERS = (
    "user_ns",
    "pid_ns",
    "mount_ns",
    "net_ns",
    "ipc_ns",
    "uts_ns",
    "fresh_proc",
    "unprivileged_uid",
    "no_capabilities",
    "no_new_privs",
    "seccomp",
    "rlimits",
    "pdeathsig",
)
"""What :func:`check_isolation` verifies for every job."""


class LayerError(OSError):
    """A layer could not be set up."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise LayerError(err, f"{what}: {os.strerror(err)}")


# -- supervisor S -----------------------------------------------------------------------------
def outside_ids(slot: int, lane: int = 0) -> tuple[int, int]:
    """The host uid/gid a job runs as: when root, one per (zygote slot, concurrent job), so that
    RLIMIT_NPROC and file ownership are per job; else the caller's own.

    >>> outside_ids(1, 2)[0] == (SANDBOX_UID_BASE + LANES_PER_SLOT + 2 if os.geteuid() == 0 else os.geteuid())
    True
    """
    if os.geteuid() == 0:
        uid = SANDBOX_UID_BASE + (slot * LANES_PER_SLOT + lane) % SANDBOX_UID_SPAN
        return uid, uid
    return os.geteuid(), os.getegid()


def unshare_all() -> None:
    """New user, pid, mount, net, ipc and uts namespaces for the caller (pid: for its children)."""
    if os.geteuid() == 0:
        os.setgroups([])  # no supplementary group of root survives into the namespace
    flags = 0
    for value in NAMESPACES.values():
        flags |= value
    _check(_libc().unshare(flags), "unshare(user, pid, mount, net, ipc, uts)")


def write_id_maps(proc_dir: int, uid: int, gid: int) -> None:
    """Map uid/gid 0 inside a process's user namespace to ``uid``/``gid`` outside (run by the
    zygote); ``proc_dir``: an open descriptor of that process's /proc directory."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        fd = os.open(name, os.O_WRONLY, dir_fd=proc_dir)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def needed_paths() -> list[str]:
    """Directories the child must still read: the import path and the loaded packages' roots."""
    paths = {p for p in sys.path if p and os.path.isdir(p)}
    paths |= {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        where = getattr(module, "__file__", None)
        if where:
            paths.add(os.path.dirname(os.path.dirname(os.path.abspath(where))))
    return sorted(os.path.realpath(p) for p in paths if os.path.isdir(p))


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


OPEN_TREE_CLONE, AT_RECURSIVE, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, 0x4
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # x86-64; other architectures use the same numbers (asm-generic)


def clone_tree(path: str) -> int:
    """A detached copy of the mount tree at ``path`` (open_tree(2), OPEN_TREE_CLONE): an fd."""
    libc = _libc()
    fd = libc.syscall(SYS_OPEN_TREE, -100, path.encode(), OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise LayerError(err, f"open_tree({path}): {os.strerror(err)}")
    return fd


def attach_tree(fd: int, path: str) -> None:
    """Attach a tree from :func:`clone_tree` at ``path`` (move_mount(2))."""
    _check(
        _libc().syscall(SYS_MOVE_MOUNT, fd, b"", -100, path.encode(), MOVE_MOUNT_F_EMPTY_PATH), f"move_mount to {path}"
    )


def build_mount_view(needed: list[str] | None = None) -> None:
    """Private mounts; empty tmpfs over COVERED_DIRS with the needed paths attached back;
    credential files covered; the caller ends as the mapped (unprivileged) uid.

    The needed trees are cloned first, while the caller still has the zygote's file access (an
    interpreter under a 0700 /root stays importable by the unprivileged child, the rest of /root
    is gone); files in the new tmpfs can only be created once the caller has a mapped uid.
    ``needed``: :func:`needed_paths` computed earlier (the zygote does it once)."""
    libc = _libc()
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    covered = [d for d in COVERED_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    exposed = sorted({p for p in (needed_paths() if needed is None else needed) if any(_under(p, c) for c in covered)})
    exposed = [p for p in exposed if not any(p != q and _under(p, q) for q in exposed)]  # outermost only
    trees = [(path, clone_tree(path)) for path in exposed]
    become_mapped_root()
    for d in covered:
        mode = "1777" if d in ("/tmp", "/var/tmp", "/dev/shm") else "0755"
        _check(
            libc.mount(b"tmpfs", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, f"size=1m,mode={mode}".encode()),
            f"tmpfs on {d}",
        )
    for path, fd in trees:
        os.makedirs(path, exist_ok=True)
        attach_tree(fd, path)
        os.close(fd)
    for path in SECRET_FILES:
        if os.path.isfile(path):
            _check(libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None), f"cover {path}")


# -- init I -----------------------------------------------------------------------------------
def mount_fresh_proc() -> None:
    """/proc of the new PID namespace: only the sandbox's own processes are visible."""
    _check(_libc().mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")


def hide_host_details() -> None:
    """Cover the host's kernel command line and mount a sysfs of the job's own network namespace
    (only its loopback), so that neither names the host's boot options or network devices.
    Best effort: a kernel that refuses either still runs the job (SECURITY.md, residual channels)."""
    libc = _libc()
    if os.path.isfile("/proc/cmdline"):
        libc.mount(b"/dev/null", b"/proc/cmdline", None, MS_BIND, None)
    if os.path.isdir("/sys"):
        libc.mount(b"sysfs", b"/sys", b"sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def set_name(name: bytes) -> None:
    """The calling process's name in ps/top (PR_SET_NAME, 15 bytes)."""
    _libc().prctl(PR_SET_NAME, ctypes.c_char_p(name[:15]), 0, 0, 0)


def set_hostname() -> None:
    """Give the sandbox's UTS namespace its own host name."""
    _check(_libc().sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")


def become_mapped_root() -> None:
    """Take the mapped ids (inside uid/gid 0 = the unprivileged outside ids)."""
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def set_pdeathsig() -> None:
    """Have the kernel kill this process when its parent dies."""
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def become_subreaper() -> bool:
    """Adopt orphaned descendants, so that none outlives the job unseen."""
    return _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


# -- child K ----------------------------------------------------------------------------------
def set_rlimits(memory_mb: int, cpu_s: int, nproc: int | None) -> None:
    """Apply the job's resource limits (memory, CPU time, files, processes, core dumps)."""
    memory = memory_mb * 1024 * 1024
    limits = [
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_DATA, memory),
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_FSIZE, 0),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 64),
        (resource.RLIMIT_MEMLOCK, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
    ]
    if nproc is not None:  # only with a uid of its own (it counts every process of the uid)
        limits.append((resource.RLIMIT_NPROC, nproc))
    for limit, value in limits:
        resource.setrlimit(limit, (value, value))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Empty bounding, ambient, effective, permitted and inheritable sets."""
    libc = _libc()
    for cap in range(CAP_LAST + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            raise LayerError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset (drop all)")


def set_no_new_privs() -> None:
    """``PR_SET_NO_NEW_PRIVS``: no exec can gain privileges (required for the seccomp filter)."""
    _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


# -- verification -----------------------------------------------------------------------------
def namespace_ids() -> dict[str, int]:
    """Inode of each of the caller's namespaces (as /proc shows them)."""
    return {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in NAMESPACES}


def _status() -> dict[str, str]:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def isolation_facts() -> dict[str, object]:
    """What the kernel reports about the calling process (run in K after every layer, seccomp
    included, and before the completion runs)."""
    status = _status()
    with open("/proc/self/uid_map") as fh:
        uid_map = fh.read().split()
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return {
        "ns": namespace_ids(),
        "pid": os.getpid(),
        "visible_pids": pids,
        "uid_map": uid_map,
        "cap_eff": status.get("CapEff"),
        "cap_prm": status.get("CapPrm"),
        "cap_bnd": status.get("CapBnd"),
        "no_new_privs": status.get("NoNewPrivs"),
        "seccomp": status.get("Seccomp"),
        "hostname": os.uname().nodename,
        "rlimit_fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
    }


def check_isolation(
    facts: dict, host_ns: dict[str, int], outside_uid: int, host_root: bool, pdeathsig_on: bool = True
) -> dict[str, str]:
    """{layer: why it is missing} for every layer of LAYERS that the facts do not show.

    ``outside_uid`` and ``host_root`` are the zygote's (:func:`outside_ids`, euid 0): inside its
    namespace the child is uid 0 whatever it is outside."""
    missing: dict[str, str] = {}
    ns = facts.get("ns") or {}
    for name, layer in (
        ("user", "user_ns"),
        ("pid", "pid_ns"),
        ("mnt", "mount_ns"),
        ("net", "net_ns"),
        ("ipc", "ipc_ns"),
        ("uts", "uts_ns"),
    ):
        if not ns.get(name) or ns.get(name) == host_ns.get(name):
            missing[layer] = f"the child shares the host's {name} namespace"
    if facts.get("pid") != 2 or any(p > 2 for p in facts.get("visible_pids") or [99]):
        missing["fresh_proc"] = f"the child sees pids {facts.get('visible_pids')} (expected 1 and 2)"
    uid_map = facts.get("uid_map") or []
    if uid_map[:3] != ["0", str(outside_uid), "1"]:
        missing["unprivileged_uid"] = f"uid map {' '.join(uid_map)!r}, expected '0 {outside_uid} 1'"
    elif host_root and outside_uid < 1000:
        missing["unprivileged_uid"] = f"outside uid {outside_uid} is a system uid"
    for key in ("cap_eff", "cap_prm", "cap_bnd"):
        if facts.get(key) != "0000000000000000":
            missing["no_capabilities"] = f"{key} = {facts.get(key)}"
    if facts.get("no_new_privs") != "1":
        missing["no_new_privs"] = "NoNewPrivs is not set"
    if facts.get("rlimit_fsize") != 0:
        missing["rlimits"] = "RLIMIT_FSIZE is not 0"
    if facts.get("seccomp") != "2":
        missing["seccomp"] = f"seccomp mode {facts.get('seccomp')} (2 = filter)"
    if not pdeathsig_on:
        missing["pdeathsig"] = "PR_SET_PDEATHSIG failed"
    return missing


__all__ = [
    "LAYERS",
    "LayerError",
    "build_mount_view",
    "check_isolation",
    "drop_capabilities",
    "isolation_facts",
    "namespace_ids",
    "outside_ids",
    "set_rlimits",
    "unshare_all",
    "write_id_maps",
]
