"""Sample the embedded SmolLM2-135M-Instruct on RubriQ's synthesis prompts and store the raw
completions (committed: benchmarks/llm_outputs/smollm2-135m-instruct.jsonl).

    .venv/bin/python benchmarks/llm_outputs/make_smollm2.py [--per-format 40] [--samples 2]

Real model output, unedited: the texts a small open model writes for our prompts (full prompt
style, OpenQASM 2 and 3 formats), sampled at temperature 0.8, top-p 0.95, 256 new tokens,
seed 0.  One JSON object per line: source, model, format, target, text.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rubriq.data.prompts import PromptSpec, synthesis_targets  # noqa: E402
from rubriq.evaluation.evaluate import load_policy  # noqa: E402
from rubriq.evaluation.sampling import generate  # noqa: E402

OUT = Path(__file__).resolve().parent / "smollm2-135m-instruct.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-format", type=int, default=40, help="prompts per format")
    parser.add_argument("--samples", type=int, default=2, help="completions per prompt")
    args = parser.parse_args()
    targets = synthesis_targets(PromptSpec())[: args.per_format]
    rows = [
        {"id": f"{t.name}-{t.num_qubits}-{i}-{fmt}", "prompt": t.prompt(fmt), "format": fmt, "target": t.spec()}
        for fmt in ("qasm2", "qasm3")
        for i, t in enumerate(targets)
    ]
    tokenizer, model = load_policy("embedded")
    records = generate(
        model,
        tokenizer,
        rows,
        samples=args.samples,
        max_new_tokens=256,
        temperature=0.8,
        top_p=0.95,
        seed=0,
        description="sampling SmolLM2",
    )
    with OUT.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(
                json.dumps(
                    {
                        "source": "smollm2-135m-instruct",
                        "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
                        "format": rec["format"],
                        "target": rec["target"],
                        "text": rec["text"],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    print(f"wrote {len(records)} completions to {OUT}")


if __name__ == "__main__":
    main()
