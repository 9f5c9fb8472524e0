"""Prompt datasets and circuit collections (see prompts.py and suites.py)."""

from __future__ import annotations

import json
from pathlib import Path

from rubriq.data.prompts import PromptSpec, rewrite_rows, save_splits, split_rows, split_summary, synthesis_rows
from rubriq.data.suites import load_collection, stratify


def build_all(out: Path, small: bool = False, collections: tuple[str, ...] = ("tcount", "mqt", "qiskit-arith"),
              suite_dir: Path | None = None, total: int = 500, seed: int = 42) -> dict:
    """Write ``out/prompts`` (synthesis) and ``out/rewrite-<collection>`` datasets; return a
    report with row and distinct-target counts per split (splits are by target and checked
    disjoint) and the T0-bucket stratification of each collection."""
    out = Path(out)
    report: dict = {}
    spec = PromptSpec.small() if small else PromptSpec()
    splits = split_rows(synthesis_rows(spec), seed=seed)
    save_splits(splits, out / "prompts")
    report["prompts"] = _split_report(splits)
    for name in collections:
        skipped: dict = {}
        circuits = load_collection(name, suite_dir, skipped)
        selected, buckets = stratify(circuits, total=(30 if small else total), seed=seed)
        rows = rewrite_rows(selected)
        rewrite_splits = split_rows(rows, seed=seed, held_out={})
        save_splits(rewrite_splits, out / f"rewrite-{name}")
        report[f"rewrite-{name}"] = {"circuits": len(circuits), "buckets": buckets, "skipped": skipped,
                                     **_split_report(rewrite_splits)}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report


def _split_report(splits: dict) -> dict:
    """Rows and distinct targets per split (the splits are by target: no target in two)."""
    summary = split_summary(splits)
    return {"rows": {k: v["rows"] for k, v in summary.items()},
            "targets": {k: v["targets"] for k, v in summary.items()}}


__all__ = ["PromptSpec", "build_all", "load_collection", "stratify"]
