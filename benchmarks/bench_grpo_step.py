"""GRPO step cost on the rewriting study's settings: the step as it sampled before the static
sampler vs after, side by side in ONE run (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_grpo_step.py [--steps 3] [--model DIR] [--data DIR]

Every setting is configs/studies/rewriting_train.yaml (the GRPO LoRA, bf16 policy, N = 8
completions per prompt, at most 192 new tokens, T = 0.8, 16 completions per step, one prompt pass
in the update, zero-variance groups dropped), on the rewriting warm-start (``--model``: the
committed SFT adapter, merged into its base as the study merges it) and the study's training
prompts (``--data``: a `rubriq data build` folder of the study); only the generation differs:

* ``before``: the sampler as it was (``sampler: generate``: transformers' ``generate`` with the
  shared-prompt pre-fill, completions ended after their code block, fast sampling);
* ``after``: ``sampler: static`` (the default now: RubriQ's decoding loop over the static decoder,
  the GRPO adapter merged into copies every step, shared prompts read once per group, finished
  groups dropped);
* ``after, 32 / 64 per step``: the same with 4 / 8 prompts' completions in one decoding batch.

``--settings NAME [NAME ...]`` runs only those (``before`` always runs first: the baseline).
Each runs ``--steps`` GRPO steps; the table gives the mean step time split into generation /
reward / update, the completion tokens, and the cost **per completion** end to end, with the
speed-up over ``before``. Writes benchmarks/results/grpo_step.md (``--out``; the runs before it
are kept below the new table).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS = {
    "before": {"sampler": "generate", "batch": 16},
    "after": {"sampler": "static", "batch": 16},
    "after, 32 per step": {"sampler": "static", "batch": 32},
    "after, 64 per step": {"sampler": "static", "batch": 64},
}
STUDY = ROOT / "configs" / "studies" / "rewriting_train.yaml"


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _rows(data: str) -> list[dict]:
    from rubriq.data.prompts import load_split

    return load_split(data, "train")


def _merged(adapter: str, folder: Path) -> str:
    """The warm-start adapter merged into its base (as the study merges it), saved in ``folder``."""
    from peft import PeftModel

    from rubriq.models import adapter_base, load_model, load_tokenizer

    if not (Path(adapter) / "adapter_config.json").is_file():
        return adapter
    base = adapter_base(adapter)
    PeftModel.from_pretrained(load_model(base), adapter).merge_and_unload().save_pretrained(folder)
    load_tokenizer(base).save_pretrained(folder)
    return str(folder)


def run(name: str, model_path: str, rows: list[dict], steps: int, work: Path) -> dict:
    from rubriq.models import load_model, load_tokenizer, to_policy_precision
    from rubriq.reward import RubricRewards
    from rubriq.training.config import TrainSettings
    from rubriq.training.grpo import build_grpo_trainer
    from rubriq.training.train_rubriq import lora_kwargs

    s = SETTINGS[name]
    study = TrainSettings.from_yaml(STUDY)
    grpo = study.grpo.to_trl() if hasattr(study.grpo, "to_trl") else dict(study.grpo)
    grpo.update(
        per_device_train_batch_size=s["batch"],
        output_dir=str(work / name.replace(" ", "_").replace(",", "")),
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=42,
    )
    tokenizer = load_tokenizer(model_path)
    trainer = build_grpo_trainer(
        to_policy_precision(load_model(model_path), study.model.precision, trained=not study.lora.enabled),
        tokenizer,
        rows,
        RubricRewards(study.rubric),
        grpo_args=grpo,
        lora=lora_kwargs(study),
        generation=dataclasses.replace(study.generation, sampler=s["sampler"]),
    )
    load, cpu = _load_average(), time.process_time()
    trainer.train()
    cpu = time.process_time() - cpu
    logs = [x for x in trainer.state.log_history if "step_time" in x]

    def mean(k: str) -> float:
        values = [x[k] for x in logs if x.get(k) is not None]
        return statistics.fmean(values) if values else float("nan")

    per_step = s["batch"]
    step = mean("step_time")
    tokens = mean("completions/mean_length")
    return {
        "setting": name,
        "steps": len(logs),
        "completions": per_step,
        "step": step,
        "generation": mean("timing/generation_s"),
        "reward": mean("timing/reward_s"),
        "update": mean("timing/update_s"),
        "tokens": tokens,
        "skipped": mean("dynamic_sampling/skipped_groups"),
        "per_completion": step / per_step,
        "per_token_ms": 1000 * step / (per_step * tokens),
        "cpu_per_completion": cpu / max(1, len(logs)) / per_step,
        "load": f"{load} / {_load_average()}",
    }


def _load_average() -> str:
    """The 1-minute load average (other work on the machine)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "?"
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--model", default=str(ROOT / "results" / "studies" / "rewriting" / "warm_start"))
    parser.add_argument("--data", required=True, help="the rewriting study's `rubriq data build` folder")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), metavar="NAME", help="run only these")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "grpo_step.md"), help="the table's file")
    args = parser.parse_args()
    from rubriq.models import cpu_bf16_units

    names = ["before", *(n for n in (args.settings or SETTINGS) if n != "before")]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    rows = _rows(args.data)
    loads = [_load_average()]
    with tempfile.TemporaryDirectory() as tmp:
        model = _merged(args.model, Path(tmp) / "warm_start")
        results = []
        for name in names:
            results.append(run(name, model, rows, args.steps, Path(tmp)))
            print(f"{name}: {results[-1]}", flush=True)  # progress: a long run shows each setting as it ends
    base = results[0]["per_completion"]
    lines = [
        f"GRPO step on the rewriting study's settings (`{STUDY.relative_to(ROOT)}`), model `{args.model}` "
        f"(merged into its base), data `{args.data}` (train split), {args.steps} steps per setting in one run, "
        f"{torch_threads()} torch threads on {os.cpu_count()} cores ({cpu_model()}; bf16 units: "
        f"{cpu_bf16_units() or 'none'}); load average (1/5/15 min) at the start: {loads[0]}; seconds are means over steps; CPU s: this process's CPU "
        "time over the run of a setting per step and completion (on a shared machine it moves less than the "
        "wall time); load: the 1-minute load average before and after each setting.",
        "",
        "| setting | completions / step | step | generation | reward | update | completion tokens | "
        "skipped groups | s per completion | ms per completion token | speed-up per completion | "
        "CPU s per completion | speed-up (CPU) | load before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    cpu_base = results[0]["cpu_per_completion"]
    for r in results:
        lines.append(
            f"| {r['setting']} | {r['completions']} | {r['step']:.1f} | {r['generation']:.1f} | {r['reward']:.2f} | "
            f"{r['update']:.1f} | {r['tokens']:.0f} | {r['skipped']:.2f} | {r['per_completion']:.2f} | "
            f"{r['per_token_ms']:.1f} | {base / r['per_completion']:.1f}x | {r['cpu_per_completion']:.2f} | "
            f"{cpu_base / r['cpu_per_completion']:.1f}x | {r['load']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    earlier = out.read_text() if out.is_file() else ""
    if earlier:
        text += "\n## Earlier runs (the quickstart's and the learning study's settings)\n\n" + earlier
    out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
