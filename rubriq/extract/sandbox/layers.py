"""Kernel isolation of the sandbox child (see SECURITY.md), one small function per mechanism.

For each job the zygote forks three processes, each with one role::

    zygote Z (pre-imported Qiskit, never runs untrusted code)
      └─ template T (forked from Z before any job: the pristine state every job starts from)
      └─ S  supervisor (forked by T): drops supplementary groups, unshare(user, pid, mount, net, ipc, uts);
            clones every part of the job's minimal root read-only (rootfs.py; with the zygote's
            file access, ahead of the job); the zygote writes its uid/gid map (inside uid 0 ->
            an outside uid that owns nothing: 61000 + slot as root, the caller's own uid
            otherwise); S then takes that uid, puts the parts together on an empty tmpfs (with
            an empty private /tmp) and pivot_root()s into it
         └─ I  init of the new PID namespace (pid 1): a fresh /proc for that namespace, then the
               host's tree detached and / read-only, hostname; waits for K.  When I dies the
               kernel kills every process of the namespace; I dies with S, S with the zygote
               (PR_SET_PDEATHSIG).
            └─ K  the child (pid 2): closes every descriptor but its result pipe, rlimits (a task
                  limit among them), drops every capability (bounding set too), no_new_privs, the
                  seccomp allow-list (seccomp.py), then runs the completion.

Before the completion runs, K records what the kernel says about itself (namespace inodes,
capabilities, no_new_privs, seccomp mode, uid map, the pids it can see, its rlimits, what its
root and working directory list): :func:`isolation_facts`.
The zygote compares them with its own (:func:`check_isolation`) for every job, so a missing
layer is never silent.

Written with ctypes on libc because Python 3.11's ``os`` has no unshare/mount/capset; each call
checks its return value.
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import signal

from rubriq.extract.sandbox import rootfs

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
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
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

STAGING = "/tmp"
"""Where the supervisor puts the job's new root together (any host folder would do: the tmpfs
mounted on it becomes ``/`` and the host's tree is detached)."""
OLD_ROOT = "/.host"
"""Where pivot_root(2) leaves the host's tree until init has mounted /proc (then detached)."""
LAYERS = (
    "user_ns",
    "pid_ns",
    "mount_ns",
    "net_ns",
    "ipc_ns",
    "uts_ns",
    "fresh_proc",
    "minimal_root",
    "unprivileged_uid",
    "no_capabilities",
    "no_new_privs",
    "seccomp",
    "rlimits",
    "task_limit",
    "pdeathsig",
)
"""What :func:`check_isolation` verifies for every job."""


class LayerError(OSError):
    """A layer could not be set up."""


@functools.cache
def _libc():
    return ctypes.CDLL(None, use_errno=True)  # loaded once: the zygote's processes inherit it


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


OPEN_TREE_CLONE, AT_EMPTY_PATH, AT_RECURSIVE, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x1000, 0x8000, 0x4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC = 1, 2, 4, 8
# x86-64 numbers (other architectures use the same ones for these, asm-generic)
SYS_PIVOT_ROOT, SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 155, 428, 429, 442


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def clone_tree(path: str, attrs: int = 0) -> int:
    """A detached copy of the mount tree at ``path`` (open_tree(2), OPEN_TREE_CLONE), with the
    mount attributes ``attrs`` set on all of it (mount_setattr(2)): an fd."""
    libc = _libc()
    fd = libc.syscall(SYS_OPEN_TREE, -100, path.encode(), OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC)
    if fd < 0:
        err = ctypes.get_errno()
        raise LayerError(err, f"open_tree({path}): {os.strerror(err)}")
    if attrs:
        attr = _MountAttr(attrs, 0, 0, 0)
        flags = AT_EMPTY_PATH | AT_RECURSIVE
        if libc.syscall(SYS_MOUNT_SETATTR, fd, b"", flags, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
            err = ctypes.get_errno()
            os.close(fd)
            raise LayerError(err, f"mount_setattr({path}): {os.strerror(err)}")
    return fd


def attach_tree(fd: int, path: str) -> None:
    """Attach a tree from :func:`clone_tree` at ``path`` (move_mount(2))."""
    _check(
        _libc().syscall(SYS_MOVE_MOUNT, fd, b"", -100, path.encode(), MOVE_MOUNT_F_EMPTY_PATH), f"move_mount to {path}"
    )


READ_ONLY = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
DEVICE = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC
"""Device nodes stay writable on a read-only mount (/dev/null); only a nodev mount refuses them."""


def clone_root_parts(plan: rootfs.RootPlan) -> list[tuple[str, int, bool]]:
    """(path in the job's view, detached read-only tree, whether it is a folder) for every part of
    the minimal root (``rootfs.plan``), cloned with the zygote's file access: an interpreter
    under a 0700 /root is readable by the unprivileged job, the rest of /root is not there.
    Run by S in its new namespaces before the uid map exists (a spare does it ahead of its job)."""
    _check(_libc().mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    parts: list[tuple[str, int, bool]] = []
    try:
        for view, real, folder in plan.mounts():
            parts.append((view, clone_tree(real, DEVICE if real in rootfs.DEVICES else READ_ONLY), folder))
    except BaseException:
        for _, fd, _ in parts:
            os.close(fd)
        raise
    return parts


def enter_minimal_root(plan: rootfs.RootPlan, parts: list[tuple[str, int, bool]]) -> None:
    """Take the mapped (unprivileged) ids and make a new root of only ``parts``: an empty tmpfs
    with the skeleton of the plan (its folders, the files the libraries are bound on, its
    symbolic links, /dev, /proc, an empty private /tmp), each part attached read-only at its
    path, then pivot_root(2) into it.  The host's tree stays at OLD_ROOT until
    :func:`leave_host_root` (init needs it visible to mount its /proc)."""
    libc = _libc()
    become_mapped_root()
    root = STAGING
    _check(
        libc.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,nr_inodes=4096,mode=0755"),
        f"tmpfs on {root}",
    )
    for folder in plan.folders + (OLD_ROOT,):
        os.mkdir(root + folder)
        if folder == rootfs.WORKDIR:  # first, so that a part of the plan under /tmp stays visible
            _check(
                libc.mount(b"tmpfs", (root + folder).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=1777"),
                f"tmpfs on {folder}",
            )
    for path in plan.mount_files:
        os.close(os.open(root + path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444))
    for link, target in plan.links:
        os.symlink(target, root + link)
    for view, fd, _ in parts:
        attach_tree(fd, root + view)
        os.close(fd)
    os.chdir(root)
    _check(libc.syscall(SYS_PIVOT_ROOT, b".", OLD_ROOT.lstrip("/").encode()), "pivot_root")
    os.chdir("/")


# -- init I -----------------------------------------------------------------------------------
def mount_fresh_proc() -> None:
    """/proc of the new PID namespace: only the sandbox's own processes are visible (the host's
    /proc must still be visible somewhere in the mount namespace for the kernel to allow it)."""
    _check(_libc().mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")


def leave_host_root() -> None:
    """Cover the host's kernel command line, detach the host's tree (OLD_ROOT), make ``/``
    read-only and enter the job's working directory."""
    libc = _libc()
    _check(libc.mount(b"/dev/null", b"/proc/cmdline", None, MS_BIND, None), "cover /proc/cmdline")
    _check(libc.umount2(OLD_ROOT.encode(), MNT_DETACH), f"detach the host's tree ({OLD_ROOT})")
    os.rmdir(OLD_ROOT)
    _check(
        libc.mount(b"none", b"/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None), "/ read-only"
    )
    os.chdir(rootfs.WORKDIR)


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
TASKS_PER_JOB = 64
"""Tasks (processes and threads, the job's supervisor and init included) one job may hold."""
SIGNALS_PER_JOB = 64
"""Signals one job may have queued at once (``RLIMIT_SIGPENDING``; without it a job inherited the
host's limit and queued 96,369 signals to itself, kernel memory outside its own limits)."""


def tasks_counted_per_job(root: bool) -> tuple[bool, str]:
    """Whether RLIMIT_NPROC bounds one job's tasks alone, and why not.

    The kernel counts RLIMIT_NPROC per user and user namespace since Linux 5.14 (ucounts): a job
    is uid 0 of a user namespace of its own, so its limit counts its own tasks only, threads
    included (clone(CLONE_THREAD) is checked like fork), whatever the outside uid.  Before 5.14
    it counted every task of the outside uid: a bound for the job only as root (one uid per job).
    """
    if root:
        return True, ""
    release = os.uname().release
    try:
        version = tuple(int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return False, f"kernel release {release!r} not understood"
    if version >= (5, 14):
        return True, ""
    return False, (
        f"Linux {release} counts RLIMIT_NPROC per outside uid, not per user namespace (5.14+): "
        "a non-root job's tasks are not bounded (run as root, or on Linux >= 5.14)"
    )


def set_rlimits(memory_mb: int, cpu_s: int, nproc: int | None) -> None:
    """Apply the job's resource limits (memory, CPU time, files, tasks, queued signals, core dumps)."""
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
        (resource.RLIMIT_SIGPENDING, SIGNALS_PER_JOB),
    ]
    if nproc is not None:  # only where it counts this job's tasks alone (tasks_counted_per_job)
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
        "root_entries": sorted(os.listdir("/")),
        "cwd": os.getcwd(),
        "cwd_entries": sorted(os.listdir(".")),
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
        "rlimit_nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
        "rlimit_sigpending": resource.getrlimit(resource.RLIMIT_SIGPENDING)[0],
    }


def check_isolation(
    facts: dict,
    host_ns: dict[str, int],
    outside_uid: int,
    host_root: bool,
    root_names: frozenset[str],
    workdir_names: frozenset[str] = frozenset(),
    pdeathsig_on: bool = True,
) -> dict[str, str]:
    """{layer: why it is missing} for every layer of LAYERS that the facts do not show.

    ``outside_uid`` and ``host_root`` are the zygote's (:func:`outside_ids`, euid 0): inside its
    namespace the child is uid 0 whatever it is outside; ``root_names`` and ``workdir_names``:
    what the job's ``/`` and its working directory may list (``rootfs.RootPlan.listing``)."""
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
    entries = facts.get("root_entries")
    if not isinstance(entries, list) or not set(entries) <= root_names:
        missing["minimal_root"] = f"the job's / lists {entries} (expected only {sorted(root_names)})"
    elif facts.get("cwd") != rootfs.WORKDIR or not set(facts.get("cwd_entries") or []) <= workdir_names:
        missing["minimal_root"] = f"the job's working directory is {facts.get('cwd')!r} ({facts.get('cwd_entries')})"
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
    elif facts.get("rlimit_sigpending") != SIGNALS_PER_JOB:
        missing["rlimits"] = f"RLIMIT_SIGPENDING is {facts.get('rlimit_sigpending')}, not {SIGNALS_PER_JOB}"
    per_job, why = tasks_counted_per_job(host_root)
    if not per_job:
        missing["task_limit"] = why
    elif facts.get("rlimit_nproc") != TASKS_PER_JOB:
        missing["task_limit"] = f"RLIMIT_NPROC is {facts.get('rlimit_nproc')}, not {TASKS_PER_JOB}"
    if facts.get("seccomp") != "2":
        missing["seccomp"] = f"seccomp mode {facts.get('seccomp')} (2 = filter)"
    if not pdeathsig_on:
        missing["pdeathsig"] = "PR_SET_PDEATHSIG failed"
    return missing


__all__ = [
    "LAYERS",
    "LayerError",
    "TASKS_PER_JOB",
    "clone_root_parts",
    "enter_minimal_root",
    "leave_host_root",
    "check_isolation",
    "drop_capabilities",
    "isolation_facts",
    "namespace_ids",
    "outside_ids",
    "set_rlimits",
    "tasks_counted_per_job",
    "unshare_all",
    "write_id_maps",
]
