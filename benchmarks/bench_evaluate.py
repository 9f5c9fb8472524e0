"""Wall time of `rubriq evaluate` on the rewriting study's held-out prompts, before and after the
static sampler, side by side in ONE run (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_evaluate.py --data DIR [--model DIR] [--prompts 48] [--samples 8]

Does what ``rubriq evaluate --model MODEL --dataset DIR --split test`` does
(``rubriq.evaluation.evaluate.run_evaluation``: ``load_policy``, sample every prompt ``--samples``
times, score every completion with the rubric) with the rewriting study's sampling (T = 0.8, top-p
1, at most 192 new tokens, the study's evaluation batch of 32), twice: ``before`` samples with
transformers' ``generate`` (``sampler="generate"``, what `rubriq evaluate` did), ``after`` with the
static sampler (``sampler="static"``, its default now). ``--prompts`` takes the split's first N
prompts (all 48 by default); ``--records DIR`` keeps each half's scored samples
(``DIR/generate.jsonl``, ``DIR/static.jsonl``). Prints a markdown table with the load average
and each half's correct reductions (correct, T < T0), and writes it above the earlier runs in ``--out``
(benchmarks/results/evaluate.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / "results" / "studies" / "rewriting" / "warm_start"))
    parser.add_argument("--data", required=True, help="the rewriting study's `rubriq data build` folder")
    parser.add_argument("--split", default="test")
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "evaluate.md"))
    parser.add_argument("--records", default="", help="a folder to write each half's scored samples to (JSONL)")
    args = parser.parse_args()
    import torch

    from rubriq.data.prompts import load_split
    from rubriq.evaluation.evaluate import load_policy
    from rubriq.evaluation.sampling import LocalPolicy, save_records, score
    from rubriq.evaluator.result import is_correct
    from rubriq.models.sampling import SamplingSpec
    from rubriq.studies.analysis import rewrite_outcome

    rows = load_split(args.data, args.split)[: args.prompts]
    tokenizer, model = load_policy(args.model)
    spec = SamplingSpec(
        temperature=args.temperature, top_p=1.0, samples=args.samples, max_new_tokens=args.max_new_tokens, seed=0
    )
    results = []
    loads = [load_average()]
    for name, sampler in (("before (transformers generate)", "generate"), ("after (static sampler)", "static")):
        policy = LocalPolicy(tokenizer, model, batch_size=args.batch_size, options={"sampler": sampler})
        start = time.perf_counter()
        records = policy.generate(rows, spec, progress=False)
        sampled = time.perf_counter() - start
        scored = score(records, progress=False)
        wall = time.perf_counter() - start
        tokens = sum(len(tokenizer(r.text, add_special_tokens=False)["input_ids"]) for r in records)
        correct = sum(bool(is_correct(r.result)) for r in scored)
        reductions = sum(rewrite_outcome(r) == "reduction" for r in scored)
        if args.records:
            save_records(scored, Path(args.records) / f"{sampler}.jsonl")
        results.append((name, len(records), tokens, sampled, wall, correct, reductions))
        loads.append(load_average())
        print(
            f"{name}: {len(records)} completions, {tokens} tokens, sampled in {sampled:.1f} s, {wall:.1f} s", flush=True
        )
    dtype = next(model.parameters()).dtype
    base = results[0][4]
    lines = [
        f"`rubriq evaluate` as run_evaluation does it: model `{args.model}` ({dtype}), `{args.data}` split "
        f"{args.split}, the first {len(rows)} prompts x {args.samples} samples, T = {args.temperature}, top-p 1, "
        f"at most {args.max_new_tokens} new tokens, batches of {args.batch_size}; {torch.get_num_threads()} torch "
        f"threads on {os.cpu_count()} cores; load average (1/5/15) at the start and after each: {' | '.join(loads)}.",
        "",
        "| sampling | completions | completion tokens | sampling s | wall s (sampling + scoring) | correct | correct reductions | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, n, tokens, sampled, wall, correct, reductions in results:
        lines.append(
            f"| {name} | {n} | {tokens} | {sampled:.1f} | {wall:.1f} | {correct} | {reductions} | {base / wall:.2f}x |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.write_text(text + ("\n" + out.read_text() if out.is_file() else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
