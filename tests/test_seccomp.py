"""The seccomp filter, checked system call by system call in a forked child."""

import json
import os
import socket
import threading

import pytest

from rubriq.extract.sandbox import seccomp

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="seccomp filter is x86-64 Linux only")


def _in_filtered_child(probe) -> dict:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            seccomp.install()
            result = probe()
            os.write(w, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def _outcome(fn) -> str:
    try:
        fn()
        return "allowed"
    except OSError as exc:
        return f"errno {exc.errno}"


def test_filter_denies_and_allows_what_it_says(tmp_path):
    parent = os.getpid()
    readable = tmp_path / "r.txt"
    readable.write_text("x")

    def probe():
        def thread():
            t = threading.Thread(target=lambda: None)
            t.start()
            t.join()

        return {
            "socket": _outcome(lambda: socket.socket()),
            "kill_parent": _outcome(lambda: os.kill(parent, 0)),
            "kill_self": _outcome(lambda: os.kill(os.getpid(), 0)),
            "fork": _outcome(lambda: os.fork()),
            "thread": _outcome(thread),
            "open_write": _outcome(lambda: open(tmp_path / "new.txt", "w")),
            "open_read": _outcome(lambda: open(readable).read()),
            "unlink": _outcome(lambda: os.unlink(readable)),
            "setsid": _outcome(os.setsid),
            "execv": _outcome(lambda: os.execv("/bin/true", ["true"])),
        }

    got = _in_filtered_child(probe)
    eperm = f"errno {1}"
    assert got == {
        "socket": eperm, "kill_parent": eperm, "kill_self": "allowed", "fork": eperm, "thread": "allowed",
        "open_write": eperm, "open_read": "allowed", "unlink": eperm, "setsid": eperm, "execv": eperm,
    }
    assert readable.exists() and not (tmp_path / "new.txt").exists()
