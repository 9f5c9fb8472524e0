"""Reading a user's file as text, and opening a record file that only its owner can read.

The CLI (``score``, ``hardware run``) and the app read completions and circuits through
:func:`read_text_file`, so that a folder, a missing file, binary data or an empty file is
reported with the file's name (and the flag that named it) instead of a codec traceback.

Records of completions and their scores (training's ``metrics.jsonl`` and ``train_scores.jsonl``,
evaluation's ``records.jsonl``, the endpoint's completion cache, study logs) are opened with
:func:`open_record`: created 0600, so that no other user of the machine (a sandbox job's uid
included) can read a stored completion and the reward it got.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

RECORD_MODE = 0o600


class InputError(ValueError):
    """A user's input that cannot be used; the message names the file (and the flag)."""


def read_text_file(path: str | Path, allow_empty: bool = False) -> str:
    """The text of ``path``, or :class:`InputError` naming the file when it is a folder,
    missing, binary (not UTF-8, or NUL bytes) or empty."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a folder, not a file")
    if not path.is_file():
        raise InputError(f"{path} does not exist")
    data = path.read_bytes()
    if not allow_empty and not data.strip():
        raise InputError(f"{path} is empty: no circuit in it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not a text file (byte {exc.start} is not UTF-8)") from None
    if "\x00" in text:
        raise InputError(f"{path} is not a text file (it contains NUL bytes)")
    return text


def open_record(path: str | Path, mode: str = "a") -> IO[str]:
    """``open(path, mode, encoding="utf-8")`` for ``mode`` "w" or "a", creating the file 0600
    (an existing file keeps its mode).

    >>> import tempfile, stat
    >>> path = Path(tempfile.mkdtemp()) / "records.jsonl"
    >>> with open_record(path) as fh:
    ...     _ = fh.write("{}\\n")
    >>> oct(stat.S_IMODE(path.stat().st_mode))
    '0o600'
    """
    flags = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}[mode]
    fd = os.open(path, flags | os.O_CLOEXEC, RECORD_MODE)
    return os.fdopen(fd, mode, encoding="utf-8")
