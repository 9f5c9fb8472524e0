"""The qcec worker process of :mod:`rubriq.sim.certify`: reads (a, b, timeout) requests as
length-prefixed pickles on stdin, answers qcec's equivalence criterion by name on stdout.

Run as ``python -m rubriq.sim._qcec_worker`` by the parent only; it is killed when a check
overruns its time.  Requests come from the parent process (circuits it already parsed), never
from a model's text, so unpickling them is safe.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys

_HEADER = struct.Struct("!Q")


def _send(out, value) -> None:
    payload = pickle.dumps(value)
    out.write(_HEADER.pack(len(payload)) + payload)
    out.flush()


def _read_exact(stream, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def main() -> None:
    """Answer length-prefixed qcec requests on stdin until it closes."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing but frames on the channel
    from mqt import qcec

    _send(out, "ready")
    stream = sys.stdin.buffer
    while True:
        try:
            (length,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
            a, b, timeout_s = pickle.loads(_read_exact(stream, length))
        except EOFError:
            return
        try:
            result = qcec.verify(a, b, timeout=max(float(timeout_s), 0.001))
            _send(out, str(result.equivalence).rsplit(".", 1)[-1])
        except Exception as exc:  # reported, never fatal to the worker
            _send(out, ("error", f"{type(exc).__name__}: {exc}"))


if __name__ == "__main__":
    main()
