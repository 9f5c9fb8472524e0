"""Datasets: the synthesis prompts (``prompts.py``, ``catalog.py``), the rewrite-with-fewer-T
datasets built from the circuit collections of :mod:`rubriq.suites` and the generated small
rewrites (``rewrites.py``), one row format (``rows.py``), and :func:`load_collection`, which
knows every collection."""

from __future__ import annotations

import json
from pathlib import Path

from rubriq.data.prompts import (
    PromptSpec,
    family_summary,
    prompt_reference_circuits,
    rewrite_rows,
    save_splits,
    split_rows,
    split_summary,
    synthesis_rows,
)
from rubriq.suites import SuiteCircuit, load_mqt, load_qiskit_arith, load_tcount_suite, stratify

COLLECTIONS = ("tcount", "mqt", "qiskit-arith")
"""The rewrite collections of ``rubriq data build``; ``rubriq baselines`` also takes ``prompts``."""


def load_collection(name: str, suite_dir: Path | str | None = None, report: dict | None = None) -> list[SuiteCircuit]:
    """The circuits of one collection: ``tcount`` (the fetched suite, or ``suite_dir``), ``mqt``,
    ``qiskit-arith`` or ``prompts`` (the synthesis targets' reference circuits)."""
    if name == "prompts":
        return prompt_reference_circuits()
    if name == "tcount":
        return load_tcount_suite(suite_dir)
    if name == "mqt":
        return load_mqt(report=report)
    if name == "qiskit-arith":
        return load_qiskit_arith(report=report)
    raise ValueError(f"unknown collection {name!r}; use tcount, mqt, qiskit-arith or prompts")


def build_all(
    out: Path,
    small: bool = False,
    collections: tuple[str, ...] = COLLECTIONS,
    suite_dir: Path | None = None,
    total: int = 500,
    seed: int = 42,
    skip_unavailable: bool = True,
) -> dict:
    """Write ``out/prompts`` (synthesis) and ``out/rewrite-<collection>`` datasets; return a
    report with row and distinct-target counts per split (splits are by target and checked
    disjoint) and the T0-bucket stratification of each collection.

    Every collection is loaded before anything is written; a collection that is not on this
    machine (the T-count suite before ``rubriq data fetch tcount-suite``) is left out and listed
    under ``report["unavailable"]`` with the reason and how to get it, never half written; with
    ``skip_unavailable=False`` (collections the user named) its error is raised instead."""
    unknown = [c for c in collections if c not in COLLECTIONS]
    if unknown:
        raise ValueError(f"unknown collection(s) {', '.join(unknown)}; use {', '.join(COLLECTIONS)}")
    out = Path(out)
    report: dict = {}
    spec = PromptSpec.small() if small else PromptSpec.default()
    splits = split_rows(synthesis_rows(spec), seed=seed)
    loaded: dict[str, tuple[list, dict]] = {}
    unavailable: dict[str, str] = {}
    for name in collections:
        skipped: dict = {}
        try:
            loaded[name] = (load_collection(name, suite_dir, skipped), skipped)
        except FileNotFoundError as exc:
            if not skip_unavailable:
                raise
            unavailable[name] = str(exc)  # says how to get it
    save_splits(splits, out / "prompts")
    report["prompts"] = _split_report(splits)
    report["prompts"]["families"] = family_summary(splits)
    for name, (circuits, skipped) in loaded.items():
        selected, buckets = stratify(circuits, total=(30 if small else total), seed=seed)
        rows = rewrite_rows(selected)
        rewrite_splits = split_rows(rows, seed=seed, held_out={})
        save_splits(rewrite_splits, out / f"rewrite-{name}")
        report[f"rewrite-{name}"] = {
            "circuits": len(circuits),
            "buckets": buckets,
            "skipped": skipped,
            **_split_report(rewrite_splits),
        }
    if unavailable:
        report["unavailable"] = unavailable
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report


def _split_report(splits: dict) -> dict:
    """Rows and distinct targets per split (the splits are by target: no target in two)."""
    summary = split_summary(splits)
    return {
        "rows": {k: v["rows"] for k, v in summary.items()},
        "targets": {k: v["targets"] for k, v in summary.items()},
    }


__all__ = ["COLLECTIONS", "PromptSpec", "build_all", "load_collection", "stratify"]
