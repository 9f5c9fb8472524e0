"""The sandbox's frame protocol: what the parent (``pool.py``) and a zygote (``zygote.py``) say
to each other, and what a job's result pipe may carry, parsed with bounded depth and size.

Protocol with the parent: frames of a 4-byte big-endian length and a JSON object.  The zygote
first sends ``{"ready": true, "layers": <probe>, "pid", "template_pid"}``.  A job is ``{"nonce",
"code", "timeout_s", "memory_mb", "max_output_bytes", "max_ops", "strict", "lane"?}``; answers
come in any order (several jobs run at once), each echoing its nonce: ``{"nonce", "status",
"result"?, "error"?, "missing", "elapsed_s"}`` with status ``ok`` (``result`` is ``{"circuit":
...}`` or ``{"error": <at most 300 characters>}``), ``timeout``, ``overflow`` (more than
``max_output_bytes``), ``crash`` (no result: exit, signal, memory limit), ``malformed`` (not one
result object), ``sandbox`` (the sandbox could not run it: the completion did not run or its
isolation could not be verified) or ``bad_job``.

Frames are read with a deadline and a size limit announced before anything is allocated
(:func:`read_frame`); JSON is parsed only after a linear-time depth check (:func:`loads_bounded`,
also the scoring server's request bodies: :func:`check_depth`); a job is checked field by field
(:func:`validate_job`), a result against the result objects a child may send
(:func:`parse_result`).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from collections.abc import Callable
from typing import Any

JOB_LIMITS = {
    "timeout_s": (0.001, 600.0),
    "memory_mb": (64, 65536),
    "max_output_bytes": (1024, 64 << 20),
    "max_ops": (1, 10_000_000),
}
"""The numeric fields of a job and their ranges (:func:`validate_job`)."""
MAX_CODE_BYTES = 1 << 20
MAX_ERROR_CHARS = 300
"""Characters of a completion's own error text that are kept (SECURITY.md)."""
MAX_RESULT_DEPTH = 8
"""Nesting rounds accepted in a result line (a circuit needs 5: {circuit: {ops: [[name, [q], [p]]]}})."""
MAX_FRAME_DEPTH = 16


class FrameError(ValueError):
    """A frame that is too large, truncated, late or not a JSON object."""


_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def loads_bounded(data: bytes, max_depth: int) -> Any:
    r"""``json.loads`` that cannot recurse: text nested more than ``max_depth`` levels (or with
    unbalanced brackets) is refused before the parser sees it, in time linear in ``data``; every
    parser failure, RecursionError and MemoryError included, is a ValueError.

    >>> loads_bounded(b'{"a": [1, {"b": "]]]"}]}', 4)
    {'a': [1, {'b': ']]]'}]}
    >>> loads_bounded(b'["\\\\", "\\"[[["]', 1)  # an escaped backslash, an escaped quote
    ['\\', '"[[[']
    >>> loads_bounded(b"[" * 50 + b"]" * 50, 8)
    Traceback (most recent call last):
    ...
    ValueError: nested deeper than 8 levels (or unbalanced)
    """
    check_depth(data, max_depth)
    try:
        return json.loads(data)
    except (ValueError, RecursionError, MemoryError, TypeError) as exc:
        raise ValueError(f"not JSON ({type(exc).__name__})") from None


def check_depth(data: bytes, max_depth: int) -> None:
    """Raise ValueError when the JSON text ``data`` (UTF-8) nests more than ``max_depth`` levels
    of brackets outside its strings, or its brackets do not balance: in linear time, before any
    recursive parser sees it (:func:`loads_bounded`, the scoring server's request bodies).

    >>> check_depth(b'{"a": "[[[[", "b": [[]]}', 3)
    >>> check_depth(b"[" * 200000, 32)
    Traceback (most recent call last):
    ...
    ValueError: nested deeper than 32 levels (or unbalanced)
    """
    # Every step is one scan in C, none can backtrack (a regex that stripped strings was
    # quadratic on an unterminated string of escaped quotes: 80 KB took 78 s, holding the
    # interpreter lock of every job of the zygote).  In valid JSON a backslash escapes the next
    # byte: dropping the pairs "\\" (left to right, as the parser reads them) and then the
    # escaped quotes leaves only the quotes that open and close strings, so the text between
    # every other quote is outside strings.  What is not valid JSON is refused by the parser.
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(_BRACKETS, _NOT_BRACKETS)  # {} as []
    # each round deletes the innermost pairs (one scan of the old text): depth d is gone after d rounds
    for _ in range(max_depth):
        if not brackets:
            break
        brackets = brackets.replace(b"[]", b"")
    if brackets:
        raise ValueError(f"nested deeper than {max_depth} levels (or unbalanced)")


def write_frame(fd: int, obj: dict) -> None:
    """Write one length-prefixed JSON frame to ``fd``."""
    body = json.dumps(obj).encode()
    write_all(fd, struct.pack(">I", len(body)) + body)


def write_all(fd: int, data: bytes, deadline: float | None = None) -> None:
    """Write all of ``data`` to ``fd``; with ``deadline`` (time.monotonic()) each write waits at
    most until then for the reader (TimeoutError)."""
    view = memoryview(data)
    while view:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [fd], [], remaining)[1]:
                raise TimeoutError("the reader did not take the data before the deadline")
        n = os.write(fd, view)
        view = view[n:]


def read_frame(fd: int, deadline: float | None = None, max_bytes: int | Callable[[], int] = 64 << 20) -> dict | None:
    """One frame; None at end of file before a header.  With ``deadline`` (time.monotonic())
    every read waits at most until then; a header announcing more than ``max_bytes`` (or what
    ``max_bytes()`` says once the header is in) is refused before anything is allocated; the
    body is parsed with bounded depth.  Raises only :class:`FrameError` (and OSError from the
    descriptor itself)."""
    header = read_exact(fd, 4, deadline)
    if header is None:
        return None
    (size,) = struct.unpack(">I", header)
    if callable(max_bytes):
        max_bytes = max_bytes()
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes announced (limit {max_bytes})")
    body = read_exact(fd, size, deadline)
    if body is None:
        raise FrameError("frame truncated")
    try:
        obj = loads_bounded(body, MAX_FRAME_DEPTH)
    except ValueError as exc:
        raise FrameError(f"frame is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError("frame is not a JSON object")
    return obj


def read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """Exactly ``n`` bytes from ``fd``; None at end of file before the first byte; FrameError when
    the data ends early or the deadline passes first."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise FrameError("no complete frame before the deadline")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0 and not chunks:
                return None
            raise FrameError("frame truncated")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def validate_job(job: dict) -> str | None:
    """Why ``job`` is not a valid job, or None."""
    if not isinstance(job.get("nonce"), str) or not isinstance(job.get("code"), str):
        return "job needs a nonce and code (strings)"
    if len(job["code"].encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
        return f"code larger than {MAX_CODE_BYTES} bytes"
    for key, (low, high) in JOB_LIMITS.items():
        value = job.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            return f"{key} must be a number in [{low}, {high}], got {value!r}"
    return None


def clean_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """At most ``limit`` characters of ``text``, lone surrogates replaced (valid UTF-8 anywhere).

    >>> clean_text("x" * 500) == "x" * 300, clean_text("a\\ud800b")
    (True, 'a?b')
    """
    return text[:limit].encode("utf-8", "replace").decode("utf-8")


RESULT_SHAPES: dict[frozenset[str], dict[str, type]] = {
    frozenset({"circuit"}): {"circuit": dict},
    frozenset({"circuit", "found"}): {"circuit": dict, "found": str},
    frozenset({"error"}): {"error": str},
    frozenset({"unsupported"}): {"unsupported": str},
}
"""The result objects a child may send (``harness.run``): each key with the type of its value."""


def parse_result(data: bytes) -> tuple[dict | None, str | None]:
    """(result, why malformed) of what the result pipe carried: exactly one line holding one
    object of :data:`RESULT_SHAPES` (a circuit, with how it was found; an error; why the circuit
    cannot be scored); its texts are cut to :data:`MAX_ERROR_CHARS`.  ``(None, None)``: nothing
    was written.  Never raises; the reasons are fixed texts (nothing of the completion's bytes).

    >>> parse_result(b'{"error": "boom"}\\n')
    ({'error': 'boom'}, None)
    >>> parse_result(b'{"setup_error": "isolation incomplete"}\\n')
    (None, 'the result is not one of the result objects')
    """
    if not data:
        return None, None
    if data.count(b"\n") != 1 or not data.endswith(b"\n"):
        return None, "the result is not exactly one line"
    try:
        obj = loads_bounded(data, MAX_RESULT_DEPTH)
    except ValueError as exc:
        return None, f"the result line is {exc}"
    shape = RESULT_SHAPES.get(frozenset(obj)) if isinstance(obj, dict) else None
    if shape is None or not all(isinstance(obj[key], kind) for key, kind in shape.items()):
        return None, "the result is not one of the result objects"
    return {key: clean_text(value) if isinstance(value, str) else value for key, value in obj.items()}, None


__all__ = [
    "JOB_LIMITS",
    "MAX_CODE_BYTES",
    "MAX_ERROR_CHARS",
    "MAX_FRAME_DEPTH",
    "MAX_RESULT_DEPTH",
    "RESULT_SHAPES",
    "FrameError",
    "check_depth",
    "clean_text",
    "loads_bounded",
    "parse_result",
    "read_exact",
    "read_frame",
    "validate_job",
    "write_all",
    "write_frame",
]
