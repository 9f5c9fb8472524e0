"""The T-count suite: the classic arithmetic / Toffoli benchmark circuits (Amy, Maslov & Mosca
2014; Nam, Ross, Su, Childs & Maslov 2018), 35 OpenQASM 2.0 files from the PyZX repository at a
pinned commit, checked file by file against SHA-256 hashes committed here.

- ``tcount_suite.json`` (the *manifest*, beside this module): the repository, the pinned commit
  (``ref``), the folder, and each file's SHA-256 and size.  The published T-counts
  (``published_tcounts.csv``, sources in ``published_tcounts.md``) are valid for exactly these
  files.
- :func:`fetch_tcount_suite`: ``rubriq data fetch tcount-suite``.  Each missing file comes from a
  local copy (``source``: a folder holding the suite's files, e.g. one downloaded behind a
  firewall) or from ``{base_url}/{repository}/{ref}/{path}/{file}`` (raw.githubusercontent.com),
  is checked against its hash before it is written (temp file + rename: no half-written file),
  and lands in ``dest`` (default :func:`default_tcount_dir`).  A second run finds every file in
  place and verified, and does nothing.
- :func:`tcount_suite_dir` and :func:`load_tcount_suite`: every command that needs the suite
  reads the fetched copy by default (or a folder it is given, checked the same way); without one
  it raises :class:`SuiteNotFound`, one line naming the fetch command.

The circuit files are never part of the RubriQ repository (a user fetches them from PyZX's);
only their hashes are.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rubriq.cache import cache_root
from rubriq.extract.qasm import load_qasm
from rubriq.suites.circuits import SUITE_LIMITS, SuiteCircuit, make_entry

log = logging.getLogger(__name__)

MANIFEST_PATH = Path(__file__).with_name("tcount_suite.json")
PUBLISHED_TCOUNTS = Path(__file__).with_name("published_tcounts.csv")
"""Best published T-counts per circuit of the suite (sources: ``published_tcounts.md``)."""
BASE_URL = "https://raw.githubusercontent.com"
FETCH_COMMAND = "rubriq data fetch tcount-suite"


class SuiteNotFound(FileNotFoundError):
    """The suite is not where a command looks for it (not fetched, or an empty folder)."""


class SuiteMismatch(ValueError):
    """Files that should be the suite's are missing or differ from the manifest's hashes."""


@dataclass(frozen=True)
class Manifest:
    """What is pinned: the repository, the commit, the folder and each file's SHA-256 and size."""

    repository: str
    ref: str
    path: str
    files: dict[str, tuple[str, int]]
    """file name -> (SHA-256 hex digest, size in bytes)"""

    def url(self, name: str, base_url: str = BASE_URL) -> str:
        """Where ``name`` lies at the pinned commit under ``base_url`` (a mirror may stand in)."""
        return f"{base_url.rstrip('/')}/{self.repository}/{self.ref}/{self.path}/{urllib.parse.quote(name)}"

    def describe(self) -> str:
        return f"{self.repository}@{self.ref[:12]}, {self.path}"


@functools.cache
def manifest() -> Manifest:
    """The committed manifest (``tcount_suite.json``).

    >>> m = manifest()
    >>> len(m.files), m.repository, len(m.ref), m.url("tof_3.qasm").split("/")[3:5]
    (35, 'zxcalc/pyzx', 40, ['zxcalc', 'pyzx'])
    """
    data = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    files = {name: (entry["sha256"], int(entry["bytes"])) for name, entry in data["files"].items()}
    return Manifest(data["repository"], data["ref"], data["path"], files)


def default_tcount_dir() -> Path:
    """Where ``rubriq data fetch tcount-suite`` puts the suite: ``$RUBRIQ_CACHE/tcount_suite``
    (default ``~/.cache/rubriq/tcount_suite``), and where every command looks for it."""
    return cache_root() / "tcount_suite"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_suite_dir(directory: Path, spec: Manifest | None = None) -> tuple[list[str], list[str]]:
    """(missing files, files whose content differs from the manifest) of ``directory``; files
    that are not the suite's are ignored."""
    spec = spec or manifest()
    missing, differ = [], []
    for name, (digest, _) in spec.files.items():
        path = directory / name
        if not path.is_file():
            missing.append(name)
        elif sha256(path.read_bytes()) != digest:
            differ.append(name)
    return missing, differ


def _listing(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the suite from the machine's other users
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _download(url: str, timeout: float) -> bytes:
    if not url.startswith(("https://", "http://", "file://")):
        raise ValueError(f"--base-url: {url} is not an http(s):// or file:// URL")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (scheme checked above)
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise RuntimeError(
            f"could not download {url}: {reason}. Without network access, get the folder "
            f"{manifest().path} of github.com/{manifest().repository} at commit {manifest().ref} "
            f"another way and run `{FETCH_COMMAND} --from DIR`"
        ) from None


@dataclass(frozen=True)
class FetchReport:
    """Where the suite is, and how many of its files this run wrote (0: verified, nothing to do)."""

    directory: Path
    written: int
    verified: int


def fetch_tcount_suite(
    dest: Path | str | None = None,
    source: Path | str | None = None,
    base_url: str = BASE_URL,
    timeout: float = 30.0,
) -> FetchReport:
    """Put the pinned suite in ``dest`` (default :func:`default_tcount_dir`), every file checked
    against the manifest: from the folder ``source`` when given, else downloaded from
    ``base_url``.  Files already in ``dest`` with the right hash are kept; a file there with
    other content is never overwritten (:class:`SuiteMismatch`: it is not ours to replace).

    Raises :class:`SuiteMismatch` when ``source`` lacks a file or a file (from either source)
    differs from its hash, ``RuntimeError`` when a download fails; files verified before the
    failure stay, so a rerun fetches only the rest."""
    spec = manifest()
    dest = Path(dest) if dest is not None else default_tcount_dir()
    if dest.exists() and not dest.is_dir():
        raise NotADirectoryError(f"--out: {dest} is a file, not a folder")
    missing, differ = check_suite_dir(dest, spec) if dest.is_dir() else (list(spec.files), [])
    if differ:
        raise SuiteMismatch(
            f"{dest} holds {_listing(differ)} with content other than the pinned suite's "
            f"({spec.describe()}); move them away or fetch into another folder with --out"
        )
    if not missing:
        return FetchReport(dest, written=0, verified=len(spec.files))
    src = Path(source) if source is not None else None
    if src is not None:
        if not src.is_dir():
            raise NotADirectoryError(f"--from: {src} is not a folder")
        absent = [name for name in missing if not (src / name).is_file()]
        if absent:
            raise SuiteMismatch(
                f"--from: {src} lacks {len(absent)} of the suite's {len(spec.files)} files "
                f"({_listing(absent)}); it needs the .qasm files of {spec.describe()}"
            )
    dest.mkdir(parents=True, exist_ok=True)
    written = 0
    for name in missing:
        digest, size = spec.files[name]
        where = str(src / name) if src is not None else spec.url(name, base_url)
        data = (src / name).read_bytes() if src is not None else _download(where, timeout)
        if sha256(data) != digest:
            raise SuiteMismatch(
                f"{where} is not the pinned file ({len(data)} bytes, SHA-256 {sha256(data)[:16]}...; "
                f"expected {size} bytes, {digest[:16]}...): nothing of it was written"
            )
        _write_atomic(dest / name, data)
        written += 1
        log.debug("fetched %s", where)
    return FetchReport(dest, written=written, verified=len(spec.files))


def tcount_suite_dir(directory: Path | str | None = None) -> Path:
    """The folder holding the complete, verified suite: ``directory`` when given (a folder the
    user names), else the fetched copy.  :class:`SuiteNotFound` (one line that names the fetch
    command) when none of the suite is there, :class:`SuiteMismatch` when it is incomplete or
    changed."""
    spec = manifest()
    given = directory is not None
    folder = Path(directory) if directory is not None else default_tcount_dir()
    missing, differ = check_suite_dir(folder, spec) if folder.is_dir() else (list(spec.files), [])
    how = f"run `{FETCH_COMMAND}` (or `{FETCH_COMMAND} --from DIR` with a copy of its .qasm files)"
    if len(missing) == len(spec.files):
        where = f"in {folder}" if given else f"fetched (looked in {folder})"
        raise SuiteNotFound(f"the T-count suite is not {where}: {how}")
    if missing or differ:
        problems = ([f"{len(missing)} files missing ({_listing(missing)})"] if missing else []) + (
            [f"{len(differ)} differ from the pinned hashes ({_listing(differ)})"] if differ else []
        )
        raise SuiteMismatch(f"the T-count suite in {folder} is not the pinned one: {'; '.join(problems)}; {how}")
    return folder


def load_tcount_suite(directory: Path | str | None = None) -> list[SuiteCircuit]:
    """The suite's 35 circuits, in file-name order, from :func:`tcount_suite_dir` ``(directory)``."""
    folder = tcount_suite_dir(directory)
    spec = manifest()
    return [
        make_entry(
            "tcount",
            Path(name).stem,
            load_qasm((folder / name).read_text(encoding="utf-8"), SUITE_LIMITS),
            f"PyZX {spec.path}/{name} @ {spec.ref[:12]}",
        )
        for name in sorted(spec.files)
    ]
