"""Job bookkeeping for hardware runs: saved as soon as a job exists, never resubmitted, and no
secret ever written.

:class:`JobStore` is a JSON file (``jobs.json`` in the output folder) keyed by backend, circuit
name, a hash of the transpiled circuit and the shot count.  A job id is written the moment the
provider returns it (atomic write: temp file + rename), so a crash after submission cannot
lose it; a rerun polls saved jobs and submits only circuits that have no job yet.

:func:`redact` removes the values of the provider tokens (``IBM_QUANTUM_TOKEN``,
``QISKIT_IBM_TOKEN``, ``IONQ_API_KEY``) from any text; every file and log line of the hardware
pipeline goes through it.

>>> import os
>>> os.environ["IONQ_API_KEY"] = "s3cr3t-key"
>>> redact("Authorization: apiKey s3cr3t-key")
'Authorization: apiKey ***'
>>> del os.environ["IONQ_API_KEY"]
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOKEN_VARIABLES = ("IBM_QUANTUM_TOKEN", "QISKIT_IBM_TOKEN", "IONQ_API_KEY")


def secrets(names: Sequence[str] = TOKEN_VARIABLES) -> list[str]:
    """The values of the token variables ``names`` set in the environment (never written
    anywhere; the endpoint client adds its ``--api-key-env`` to the provider tokens)."""
    return [v for v in (os.environ.get(k) for k in names) if v and len(v) >= 4]


def contains_secret(text: str, names: Sequence[str] = TOKEN_VARIABLES) -> bool:
    """Whether ``text`` holds the value of a token variable."""
    return any(secret in text for secret in secrets(names))


def redact(text: str, names: Sequence[str] = TOKEN_VARIABLES) -> str:
    """``text`` with the value of every token variable of ``names`` replaced by a placeholder."""
    for secret in secrets(names):
        text = text.replace(secret, "***")
    return text


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
