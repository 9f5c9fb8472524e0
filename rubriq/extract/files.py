"""Reading a user's file as text: the one place that turns a path into text or a clear error.

The CLI (``score``, ``hardware run``) and the app read completions and circuits through
:func:`read_text_file`, so that a folder, a missing file, binary data or an empty file is
reported with the file's name (and the flag that named it) instead of a codec traceback.
"""

from __future__ import annotations

from pathlib import Path


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
