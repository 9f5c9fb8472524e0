"""Extraction on real model output: RubriQ's cascade beside plain Qiskit, per corpus source.

    .venv/bin/python benchmarks/bench_extraction.py [--corpus benchmarks/llm_outputs] [--out ...]

Reads every ``*.jsonl`` under the corpus folder (and its git-ignored ``local/`` folder, where
``llm_outputs/fetch_yucong.py`` puts texts that may not be redistributed); each line has
``source`` and ``text``.  Per source: texts, RubriQ parse rate (the cascade with Python off),
plain-Qiskit parse rate (``rubriq.extract.qasm.plain_qiskit_load``: the raw text or the first
fenced block, at least one qubit, as in tests/test_extraction_property.py), texts only
one of them parses, and the classes of RubriQ's failures.  Prints a markdown table and writes it
to benchmarks/results/extraction.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubriq.config import ExtractionConfig  # noqa: E402
from rubriq.extract.cascade import extract  # noqa: E402
from rubriq.extract.qasm import plain_qiskit_load  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CLASSES = (  # (class, pattern in RubriQ's error), first match wins
    ("no circuit in the text", r"no OPENQASM header; fenced_block: no code block"),
    ("index out of range", r"out.of.range"),
    ("undefined gate or name", r"is not defined|not defined in this scope|undefined"),
    ("non-ASCII in code", r"non-ASCII"),
    ("size or qubit cap", r"larger than|qubits declared|cap \d+"),
    ("classical control flow", r"classical control|control flow"),
    ("syntax error", r"ParseError|ParsingError|syntax|token|expected|mismatched"),
)


def failure_class(error: str) -> str:
    for name, pattern in CLASSES:
        if re.search(pattern, error or ""):
            return name
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "benchmarks" / "llm_outputs")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "extraction.md")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    files = sorted(args.corpus.glob("*.jsonl")) + sorted((args.corpus / "local").glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no *.jsonl under {args.corpus}")
    config = ExtractionConfig(allow_python=False)
    stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    classes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    local = set()
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            source, text = item["source"], item["text"]
            if path.parent.name == "local":
                local.add(source)
            ours = extract(text, config)
            theirs = plain_qiskit_load(text) is not None
            s = stats[source]
            s["texts"] += 1
            s["rubriq"] += ours.circuit is not None
            s["qiskit"] += theirs
            s["only_rubriq"] += ours.circuit is not None and not theirs
            s["only_qiskit"] += ours.circuit is None and theirs
            if ours.circuit is None:
                classes[source][failure_class(ours.error)] += 1
    header = (
        "| source | texts | RubriQ parses | Qiskit parses | only RubriQ | only Qiskit | RubriQ failures |\n"
        "|---|---:|---:|---:|---:|---:|---|"
    )
    rows = [header]
    for source, s in stats.items():
        n = s["texts"]
        fails = ", ".join(f"{k} {v}" for k, v in classes[source].most_common()) or "-"
        name = source + (" (local copy, not committed)" if source in local else "")
        rows.append(
            f"| {name} | {n} | {s['rubriq']} ({s['rubriq'] / n:.1%}) | {s['qiskit']} ({s['qiskit'] / n:.1%}) | "
            f"{s['only_rubriq']} | {s['only_qiskit']} | {fails} |"
        )
    table = "\n".join(rows)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
