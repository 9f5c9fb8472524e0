"""How much GRPO signal does a policy give? Sample groups of N completions per prompt and count
the groups whose rubric rewards are all equal (TRL's frac_reward_zero_std: such a group has
zero advantage and contributes no gradient), at several sampling settings.

    python benchmarks/bench_group_signal.py --model runs/studies/convergence/sft/model \
        --data runs/studies/convergence/data --split train --n 4 --setting 0.8,0.95 --setting 1.0,1.0

Prints one row per setting: parse rate, correct rate, mean reward, fraction of zero-std groups,
mean distinct completions per group and seconds; with --out, also writes the table as markdown.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def measure(
    model, tokenizer, rows: list[dict], n: int, temperature: float, top_p: float, max_new_tokens: int, seed: int = 0
) -> dict:
    from rubriq.evaluation.metrics import summarize
    from rubriq.evaluation.sampling import generate, score

    start = time.perf_counter()
    records = score(
        generate(
            model,
            tokenizer,
            rows,
            samples=n,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            batch_size=16,
            seed=seed,
            progress=False,
        )
    )
    rewards: dict[str, list[float]] = {}
    texts: dict[str, set[str]] = {}
    for r in records:
        rewards.setdefault(r["prompt_id"], []).append(round(float(r["result"]["reward"]), 9))
        texts.setdefault(r["prompt_id"], set()).add(r["text"])
    s = summarize(records)
    return {
        "temperature": temperature,
        "top_p": top_p,
        "parse_rate": s["parse_rate"],
        "correct_rate": s["correct_rate"],
        "mean_reward": s["mean_reward"],
        "zero_std_groups": sum(len(set(v)) == 1 for v in rewards.values()) / len(rewards),
        "distinct_per_group": statistics.fmean(len(v) for v in texts.values()),
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    from rubriq.data.prompts import load_split
    from rubriq.models import load_model, load_tokenizer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="model folder (e.g. a study's sft/model)")
    parser.add_argument("--data", required=True, help="dataset folder written by rubriq data build")
    parser.add_argument("--split", default="train")
    parser.add_argument("--max-prompts", type=int, default=12)
    parser.add_argument("--n", type=int, default=4, help="group size N")
    parser.add_argument("--setting", action="append", default=None, help="temperature,top_p (repeatable)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--label", default="", help="what the model is, for the table")
    parser.add_argument("--out", default=None, help="append the rows to this markdown file")
    args = parser.parse_args()
    settings = [tuple(float(x) for x in s.split(",")) for s in (args.setting or ["0.8,0.95", "1.0,1.0"])]
    tokenizer, model = load_tokenizer("embedded"), load_model(args.model)
    rows = load_split(args.data, args.split)[: args.max_prompts]
    lines = []
    for t, p in settings:
        m = measure(model, tokenizer, rows, args.n, t, p, args.max_new_tokens)
        line = (
            f"| {args.label} | {args.split} ({len(rows)} prompts) | {t:g} | {p:g} | {m['parse_rate']:.2f} | "
            f"{m['correct_rate']:.2f} | {m['mean_reward']:.3f} | {m['zero_std_groups']:.2f} | "
            f"{m['distinct_per_group']:.2f} | {m['seconds']:.0f} |"
        )
        print(line, flush=True)
        lines.append(line)
    if args.out:
        path = Path(args.out)
        if not path.exists():
            path.write_text(
                f"| model | prompts | temperature | top_p | parse | correct | reward | zero-std groups (N={args.n}) "
                "| distinct per group | seconds |\n|---|---|---|---|---|---|---|---|---|---|\n"
            )
        with open(path, "a") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
