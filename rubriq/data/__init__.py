"""Prompt datasets and circuit collections (see prompts.py and suites.py)."""

from __future__ import annotations

import json
from pathlib import Path

from rubriq.data.prompts import PromptSpec, rewrite_rows, save_splits, split_rows, synthesis_rows
from rubriq.data.suites import load_collection, stratify


def build_all(out: Path, small: bool = False, collections: tuple[str, ...] = ("tcount", "mqt", "qiskit-arith"),
              suite_dir: Path | None = None, total: int = 500, seed: int = 42) -> dict:
    """Write ``out/prompts`` (synthesis) and ``out/rewrite-<collection>`` datasets; return a
    report with row counts and the T0-bucket stratification of each collection."""
    out = Path(out)
    report: dict = {}
    spec = PromptSpec.small() if small else PromptSpec()
    splits = split_rows(synthesis_rows(spec), seed=seed)
    save_splits(splits, out / "prompts")
    report["prompts"] = {name: len(rows) for name, rows in splits.items()}
    for name in collections:
        skipped: dict = {}
        circuits = load_collection(name, suite_dir, skipped)
        selected, buckets = stratify(circuits, total=(30 if small else total), seed=seed)
        rows = rewrite_rows(selected)
        rewrite_splits = split_rows(rows, seed=seed, held_out={})
        save_splits(rewrite_splits, out / f"rewrite-{name}")
        report[f"rewrite-{name}"] = {"circuits": len(circuits), "buckets": buckets, "skipped": skipped,
                                     "rows": {k: len(v) for k, v in rewrite_splits.items()}}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report


__all__ = ["PromptSpec", "build_all", "load_collection", "stratify"]
