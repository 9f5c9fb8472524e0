"""Prompt datasets and circuit collections (see prompts.py and suites.py)."""

from __future__ import annotations

import json
from pathlib import Path

from rubriq.data.prompts import (
    PromptSpec,
    family_summary,
    rewrite_rows,
    save_splits,
    split_rows,
    split_summary,
    synthesis_rows,
)
from rubriq.data.suites import load_collection, stratify


COLLECTIONS = ("tcount", "mqt", "qiskit-arith")


def build_all(out: Path, small: bool = False, collections: tuple[str, ...] = COLLECTIONS,
              suite_dir: Path | None = None, total: int = 500, seed: int = 42) -> dict:
    """Write ``out/prompts`` (synthesis) and ``out/rewrite-<collection>`` datasets; return a
    report with row and distinct-target counts per split (splits are by target and checked
    disjoint) and the T0-bucket stratification of each collection.

    Every collection is loaded before anything is written; a collection that is not on this
    machine (the T-count suite before ``rubriq data fetch``) is left out and listed under
    ``report["unavailable"]`` with the reason and how to get it, never half written."""
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
            unavailable[name] = str(exc)  # says how to get it
    save_splits(splits, out / "prompts")
    report["prompts"] = _split_report(splits)
    report["prompts"]["families"] = family_summary(splits)
    for name, (circuits, skipped) in loaded.items():
        selected, buckets = stratify(circuits, total=(30 if small else total), seed=seed)
        rows = rewrite_rows(selected)
        rewrite_splits = split_rows(rows, seed=seed, held_out={})
        save_splits(rewrite_splits, out / f"rewrite-{name}")
        report[f"rewrite-{name}"] = {"circuits": len(circuits), "buckets": buckets, "skipped": skipped,
                                     **_split_report(rewrite_splits)}
    if unavailable:
        report["unavailable"] = unavailable
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report


def _split_report(splits: dict) -> dict:
    """Rows and distinct targets per split (the splits are by target: no target in two)."""
    summary = split_summary(splits)
    return {"rows": {k: v["rows"] for k, v in summary.items()},
            "targets": {k: v["targets"] for k, v in summary.items()}}


__all__ = ["COLLECTIONS", "PromptSpec", "build_all", "load_collection", "stratify"]
