"""A qcec worker that says it is ready, reads a whole request and never answers, like a check
that runs forever (tests/test_rewrite.py): whatever the machine's speed, only the caller's time
limit can end a check sent to it."""

import os
import pickle
import struct
import sys
import time


def main() -> None:
    """Say ready, read one request, never answer."""
    payload = pickle.dumps("ready")
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    out.write(struct.pack("!Q", len(payload)) + payload)
    out.flush()
    (length,) = struct.unpack("!Q", sys.stdin.buffer.read(8))
    sys.stdin.buffer.read(length)
    time.sleep(600)  # paces nothing: the stuck worker never answers (the test kills it; nothing waits for it)


if __name__ == "__main__":  # pytest --doctest-modules imports this file; only run as a script
    main()
