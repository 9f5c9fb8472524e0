"""A rewrite dataset from a user's folder of OpenQASM files (``rubriq data build --from-qasm DIR``).

Each ``*.qasm`` file becomes one rewrite-with-fewer-T prompt in the project's row format
(:func:`rubriq.data.rows.target_row`, the ``circuit`` target), in the prompt style of the policy
that will be evaluated, with

* ``t0``: the file's T-count under the rubric's gate table;
* ``t_pyzx``: PyZX's verified T-count of the file (the ``pyzx`` baseline of
  :mod:`rubriq.baselines`: the better of full reduction and phase teleportation, verified exactly
  or by mqt.qcec), also put into the target as ``t_best`` (the relative T score's full-credit
  point; capped at T0), so that ``rubriq evaluate`` measures the gap to PyZX closed;
  ``None`` (said in the report, with why) when no PyZX route gave a verified circuit in time.

Every row goes to the ``test`` split (the folder is an evaluation set).  Files are checked
first (:func:`rubriq.suites.user.load_qasm_folder`): one bad file is an error naming it and its
line, and nothing is written.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

COLLECTION = "user"


def qasm_folder_rows(
    folder: str | Path, style: str = "full", route_timeout_s: float | None = 300.0
) -> tuple[list[dict], dict]:
    """(rows, report) for every ``*.qasm`` file of ``folder`` (see the module docstring)."""
    from rubriq.baselines.runner import run_method
    from rubriq.data.rows import target_row
    from rubriq.progress import progress
    from rubriq.suites import SuiteCircuit
    from rubriq.suites.user import load_qasm_folder
    from rubriq.targets.circuit import CircuitTarget

    circuits = load_qasm_folder(folder)
    rows: list[dict] = []
    report: dict[str, Any] = {}
    with progress(f"PyZX on {len(circuits)} circuits", len(circuits)) as bar:
        for c in circuits:
            t0 = c.t0
            pyzx = run_method(SuiteCircuit(COLLECTION, c.name, c.circuit, t0, str(folder)), "pyzx", route_timeout_s)
            t_pyzx = pyzx.t if pyzx.verified else None
            t_best = None if t_pyzx is None else min(t_pyzx, t0)
            target = CircuitTarget(qasm=c.qasm, **({"t_best": t_best} if t_best is not None else {}))
            row = target_row(
                target,
                "qasm2",
                f"rewrite-{COLLECTION}-{c.name}",
                {"collection": COLLECTION, "name": c.name, "file": f"{c.name}.qasm", "t_pyzx": t_pyzx},
                style=style,
            )
            rows.append(row)
            report[c.name] = {
                "qubits": c.circuit.num_qubits,
                "gates": c.circuit.size(),
                "t0": t0,
                "t_pyzx": t_pyzx,
                "pyzx_verdict": pyzx.verdict,
                "pyzx_detail": "" if pyzx.verified else pyzx.detail,
                "dropped": c.dropped,
            }
            bar.advance(1)
    return rows, report


def build_from_qasm(
    folder: str | Path, out: str | Path, style: str = "full", route_timeout_s: float | None = 300.0
) -> dict:
    """Write the dataset of :func:`qasm_folder_rows` to ``out`` (``test`` split: HF datasets +
    JSONL, ``report.json``); return the report."""
    from rubriq.data.prompts import save_splits

    rows, circuits = qasm_folder_rows(folder, style, route_timeout_s)
    out = Path(out)
    save_splits({"test": rows}, out)
    report = {"from_qasm": str(folder), "prompt_style": style, "rows": {"test": len(rows)}, "circuits": circuits}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


__all__ = ["COLLECTION", "build_from_qasm", "qasm_folder_rows"]
