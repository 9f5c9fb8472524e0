"""A pytest plugin: a test run leaves the git work tree as it found it.

Tests and the commands they run write under ``runs/`` (git-ignored), their temp folders or an
output folder they name; anything else (a stray file, a committed result rewritten) fails the
run.  At session start the plugin takes a snapshot of ``git status --porcelain`` (ignored files
excluded) with the content hash of every path listed there; at the end it takes another and, if
they differ, prints what changed and sets the exit status to "tests failed".  A tree that was
already dirty is compared with itself, so uncommitted work does not fail a run; only what the
run changed does.  Outside a git work tree (an installed copy) it does nothing.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

_KEY = pytest.StashKey[dict]()


def snapshot(root: Path) -> dict[str, str] | None:
    """{path: status and content hash} of every path ``git status`` lists, or None outside git."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    entries = out.split(b"\0")
    state: dict[str, str] = {}
    i = 0
    while i < len(entries):
        entry = entries[i].decode("utf-8", "surrogateescape")
        i += 1
        if not entry:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":  # a rename's source follows
            i += 1
        file = root / path
        digest = hashlib.sha256(file.read_bytes()).hexdigest()[:16] if file.is_file() else "-"
        state[path] = f"{code} {digest}"
    return state


def pytest_sessionstart(session: pytest.Session) -> None:
    root = Path(session.config.rootpath)
    before = snapshot(root)
    if before is not None:
        session.stash[_KEY] = before


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.stash.get(_KEY, None)
    if before is None:
        return
    after = snapshot(Path(session.config.rootpath)) or {}
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    if not changed:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"  {after.get(p, 'gone').split()[0]:>4} {p}" for p in changed]
    message = "the test run changed the git work tree (write under runs/ or a temp folder):\n" + "\n".join(lines)
    if reporter is not None:
        reporter.write_sep("=", "git work tree changed", red=True)
        reporter.write_line(message)
    else:
        print(message)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
