"""One dataset row: what every dataset (synthesis prompts, rewrite collections, the generated
small rewrites) writes per target and format."""

from __future__ import annotations

import json

from qiskit import qasm2

from rubriq.suites import bucket_of
from rubriq.targets import Target


def target_row(target: Target, fmt: str, row_id: str, extra: dict | None = None, style: str = "full") -> dict:
    """One dataset row for a target in one format: prompt, spec, reference circuit, T0 and bucket."""
    reference = target.reference_circuit()
    return {
        "id": row_id,
        "family": target.family,
        "algorithm": target.name,
        "num_qubits": target.num_qubits,
        "format": fmt,
        "prompt": target.prompt(fmt, style),
        "target": json.dumps(target.spec(), sort_keys=True),
        "reference": qasm2.dumps(reference),
        "t0": int(target.t0),
        "bucket": bucket_of(int(target.t0)),
        **(extra or {}),
    }
