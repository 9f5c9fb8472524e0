"""What a job's minimal root holds: the interpreter's files and nothing else of the host.

A job sees, read-only, only what running a completion needs (SECURITY.md):

* the standard library and the import path's folders (the virtualenv's site-packages), and the
  package folder of every top-level module the zygote loaded from elsewhere (RubriQ's own
  source folder for an editable install, never the repository around it);
* the shared libraries the extension modules in those folders link against, found by reading
  each ELF file's ``DT_NEEDED`` entries and resolving them as the dynamic loader does
  (``RPATH``/``RUNPATH`` with ``$ORIGIN``, the folder of the object, ``/etc/ld.so.conf``'s
  folders, the default ones), each bound as a single file, so that a module a completion
  imports late can still load its libraries;
* ``/dev/null``, ``zero``, ``full``, ``random``, ``urandom``; a fresh ``/proc`` of the job's PID
  namespace; an empty private ``/tmp``, which is also its working directory.

The symbolic links on the way to those paths (``/lib -> usr/lib`` on a merged-/usr system) are
made again in the new root, so that every path resolves as it does on the host.  The plan is
computed once per zygote (:func:`plan`); ``layers.py`` builds it for every job.

Written by hand because no library in the environment reads ELF dynamic sections
(pyelftools and lief are not dependencies; ``ldd`` would execute the loader once per file).
"""

from __future__ import annotations

import glob
import os
import struct
import sys
import sysconfig
from dataclasses import dataclass

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEV_LINKS: tuple[tuple[str, str], ...] = (
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
)
DEFAULT_LIBRARY_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)
"""Searched after ``/etc/ld.so.conf``'s folders, as glibc's loader does on x86-64 (multiarch first)."""
SKELETON = ("dev", "proc", "tmp")
"""Folders every minimal root has besides those of the exposed paths."""
WORKDIR = "/tmp"
"""The job's working directory: its private, empty /tmp."""


@dataclass(frozen=True)
class RootPlan:
    """The contents of a job's minimal root (absolute host paths), and its skeleton."""

    trees: tuple[str, ...]
    """Folders bound read-only at the same path (outermost only)."""
    files: tuple[tuple[str, str], ...]
    """(path in the job's view, real file) of each shared library bound on its own."""
    links: tuple[tuple[str, str], ...]
    """(path, target) of each symbolic link made again so that the paths above resolve (and
    /dev/fd, /dev/stdin, ...)."""
    folders: tuple[str, ...] = ()
    """Every folder of the skeleton, parents first (mount points of the folder trees included)."""
    mount_files: tuple[str, ...] = ()
    """Empty files of the skeleton that single files (libraries, devices) are bound on."""

    def listing(self, folder: str = "/") -> frozenset[str]:
        """The names the job's ``folder`` may list (``/``, or its working directory, which is
        empty unless the interpreter's paths lie under /tmp)."""
        prefix = folder.rstrip("/") + "/"
        paths = self.folders + self.mount_files + tuple(p for p, _ in self.links)
        return frozenset(p[len(prefix) :].split("/")[0] for p in paths if p.startswith(prefix) and p != prefix)

    def mounts(self) -> list[tuple[str, str, bool]]:
        """(path in the job's view, host path, whether it is a folder) of every bound part."""
        return (
            [(t, t, os.path.isdir(t)) for t in self.trees]
            + [(view, real, False) for view, real in self.files]
            + [(d, d, False) for d in DEVICES if os.path.exists(d)]
        )


def _skeleton(plan: RootPlan) -> RootPlan:
    """``plan`` with the folders and files its mounts and links need."""
    folders: dict[str, None] = {f"/{name}": None for name in SKELETON}
    files: list[str] = []

    def parents(path: str) -> None:
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folders.setdefault("/" + "/".join(parts[:i]), None)

    for view, _, folder in plan.mounts():
        parents(view)
        if folder:
            folders.setdefault(view, None)
        else:
            files.append(view)
    for link, _ in plan.links:
        parents(link)
    links = {link for link, _ in plan.links}
    clash = [p for p in list(folders) + files if any(_under(p, link) for link in links)]
    if clash:
        raise ValueError(f"the minimal root would put {clash[0]} under a symbolic link")
    return RootPlan(plan.trees, plan.files, plan.links, tuple(folders), tuple(files))


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _outermost(paths: set[str]) -> list[str]:
    ordered = sorted(paths)
    return [p for p in ordered if not any(q != p and _under(p, q) for q in ordered)]


def import_trees() -> list[str]:
    """Folders the job may import from: the standard library, the import path, and the package
    folder (or module file) of every loaded top-level module that lives elsewhere."""
    found = {sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")}
    found |= {p for p in sys.path if p and os.path.isabs(p)}
    trees = {os.path.realpath(p) for p in found if os.path.isdir(p)}
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if "." in name or not where:
            continue
        where = os.path.realpath(where)
        if any(_under(where, t) for t in trees):
            continue
        is_package = os.path.basename(where).startswith("__init__.")
        trees.add(os.path.dirname(where) if is_package else where)
    return _outermost(trees)


# -- ELF dynamic sections ---------------------------------------------------------------------
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 15, 29


def elf_needs(path: str) -> tuple[list[str], list[str], bool] | None:
    """(DT_NEEDED names, RPATH/RUNPATH folders with $ORIGIN expanded, whether they are RUNPATH)
    of a 64-bit little-endian ELF file; None for anything else."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            (phoff,) = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            loads, dynamic = [], None
            for i in range(phnum):
                kind, _, offset, vaddr, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", table, i * phentsize)
                if kind == PT_LOAD:
                    loads.append((vaddr, offset, filesz))
                elif kind == PT_DYNAMIC:
                    dynamic = (offset, filesz)
            if dynamic is None:
                return [], [], False
            fh.seek(dynamic[0])
            raw = fh.read(dynamic[1])
            entries = []
            for pos in range(0, len(raw) - 15, 16):
                tag, value = struct.unpack_from("<qQ", raw, pos)
                if tag == DT_NULL:
                    break
                entries.append((tag, value))
            tags = dict(entries)
            strtab = next(
                (tags[DT_STRTAB] - v + o for v, o, size in loads if v <= tags.get(DT_STRTAB, -1) < v + size), None
            )
            if strtab is None:
                return [], [], False
            fh.seek(strtab)
            strings = fh.read(tags.get(DT_STRSZ, 0))
    except (OSError, struct.error, ValueError):
        return None

    def text(offset: int) -> str:
        end = strings.find(b"\0", offset)
        return strings[offset : end if end >= 0 else len(strings)].decode("utf-8", "replace")

    origin = os.path.dirname(path)
    needed = [text(v) for t, v in entries if t == DT_NEEDED]
    runpath = [t == DT_RUNPATH for t, _ in entries if t in (DT_RPATH, DT_RUNPATH)]
    folders = []
    for t, v in entries:
        if t in (DT_RPATH, DT_RUNPATH):
            folders += [d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for d in text(v).split(":") if d]
    return needed, folders, any(runpath)


def system_library_dirs() -> list[str]:
    """``/etc/ld.so.conf``'s folders (with its ``include`` files), then the loader's defaults."""
    dirs: list[str] = []

    def read(conf: str, depth: int = 0) -> None:
        try:
            with open(conf, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line.startswith("include") and depth < 4:
                pattern = line.split(None, 1)[1] if " " in line or "\t" in line else ""
                if pattern and not os.path.isabs(pattern):
                    pattern = os.path.join(os.path.dirname(conf), pattern)
                for included in sorted(glob.glob(pattern)):
                    read(included, depth + 1)
            elif line.startswith("/"):
                dirs.append(line)

    read("/etc/ld.so.conf")
    return list(dict.fromkeys(dirs + list(DEFAULT_LIBRARY_DIRS)))


def _shared_objects(trees: list[str]) -> list[str]:
    found = []
    for tree in trees:
        if os.path.isfile(tree):
            continue
        for folder, _, names in os.walk(tree):
            found += [os.path.join(folder, n) for n in names if ".so" in n]
    return found


def _mapped_objects() -> list[str]:
    """Shared objects this process has loaded (their dependencies are loaded too, but a library
    dlopen()ed later may name them)."""
    found = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
                    found.add(parts[5].strip())
    except OSError:
        pass
    return sorted(p for p in found if os.path.isfile(p))


def library_files(trees: list[str]) -> list[tuple[str, str]]:
    """(path the loader opens, real file) of every shared library outside ``trees`` that an ELF
    file inside them needs, transitively, except those this process has loaded already (the
    loader finds a loaded library by its name without opening a file)."""
    system = system_library_dirs()
    real_trees = [os.path.realpath(t) for t in trees]
    loaded = set(_mapped_objects())
    in_system: dict[str, str | None] = {}
    out: dict[str, str] = {}
    queue = _shared_objects(trees)
    seen: set[str] = set()
    while queue:
        obj = queue.pop()
        if obj in seen:
            continue
        seen.add(obj)
        info = elf_needs(obj)
        if info is None:
            continue
        needed, folders, runpath = info
        for name in needed:
            if "/" in name:
                candidates = [name]
            else:  # RPATH or RUNPATH first (LD_LIBRARY_PATH is not set in the zygote)
                candidates = [os.path.join(d, name) for d in folders]
            path = next((c for c in candidates if os.path.isfile(c)), None)
            if path is None and "/" not in name:
                if name not in in_system:
                    in_system[name] = next(
                        (os.path.join(d, name) for d in system if os.path.isfile(os.path.join(d, name))), None
                    )
                path = in_system[name]
            if path is None:
                continue
            real = os.path.realpath(path)
            if real in loaded or any(_under(real, t) for t in real_trees) or path in out:
                continue
            out[path] = real
            queue.append(real)
    return sorted(out.items())


def links_on_the_way(path: str, last: bool = True) -> list[tuple[str, str]]:
    """(link, target) of every symbolic link met while resolving ``path`` from ``/`` (with
    ``last=False``, not the final component: a library is bound under its own name).

    >>> links_on_the_way("/") == []
    True
    """
    links: list[tuple[str, str]] = []
    current = "/"
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        if not last and i == len(parts) - 1:
            break
        step = os.path.join(current, part)
        hops = 0
        while os.path.islink(step) and hops < 40:
            target = os.readlink(step)
            links.append((step, target))
            step = os.path.normpath(os.path.join(os.path.dirname(step), target))
            hops += 1
        current = step
    return links


def plan() -> RootPlan:
    """The minimal root for jobs of this interpreter (computed once per zygote)."""
    trees = import_trees()
    libraries = library_files(trees)
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    named = [p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)]
    for path, last in [*((p, True) for p in [*trees, *named, *DEVICES]), *((p, False) for p, _ in libraries)]:
        for link, target in links_on_the_way(path, last):
            links.setdefault(link, target)
    for path, real in libraries:
        view = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if not any(_under(view, t) for t in trees):
            files.setdefault(view, real)
    return _skeleton(RootPlan(tuple(trees), tuple(sorted(files.items())), tuple(sorted(links.items())) + DEV_LINKS))


__all__ = ["DEVICES", "RootPlan", "WORKDIR", "elf_needs", "import_trees", "library_files", "plan"]
