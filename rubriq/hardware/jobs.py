"""Job bookkeeping for hardware runs: saved as soon as a job exists, never resubmitted, and no
secret ever written.

:class:`JobStore` is a JSON file (``jobs.json`` in the output folder) keyed by backend, circuit
name, a hash of the transpiled circuit and the shot count.  A job id is written the moment the
provider returns it (atomic write: temp file + rename), so a crash after submission cannot
lose it; a rerun polls saved jobs and submits only circuits that have no job yet.

:func:`rubriq.redaction.redact` removes the values of the provider tokens from any text;
every file (:func:`write_text`) and log line of the hardware pipeline goes through it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from rubriq.redaction import redact


def write_text(path: Path, text: str) -> None:
    """Atomic, redacted write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(redact(text), encoding="utf-8")
    os.replace(tmp, path)


def job_key(backend: str, name: str, qasm: str, shots: int) -> str:
    """The key of one (backend, circuit, shots) job: a rerun finds and polls it instead of resubmitting."""
    digest = hashlib.sha256(qasm.encode()).hexdigest()[:16]
    return f"{backend}/{name}/{digest}/{shots}"


class JobStore:
    """Persistent map job key -> {backend, circuit, shots, mode, job_id, status, counts}."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.jobs: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            self.jobs = json.loads(self.path.read_text(encoding="utf-8"))

    def save(self) -> None:
        write_text(self.path, json.dumps(self.jobs, indent=2, sort_keys=True))

    def get(self, key: str) -> dict[str, Any] | None:
        return self.jobs.get(key)

    def record(self, key: str, **fields: Any) -> dict[str, Any]:
        entry = self.jobs.setdefault(key, {})
        entry.update(fields, updated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.save()
        return entry
