"""GRPO step time on the embedded SmolLM2-135M, TRL defaults vs the quickstart setup
(a benchmark, not a test).

    .venv/bin/python benchmarks/bench_grpo_step.py [--steps 3] [--model runs/quickstart/train/sft/model]

Runs ``--steps`` GRPO steps (N = 8 completions of one prompt per step) for each setting, in one
process, and prints the mean step time split into generation / reward / update, side by side:

* ``trl-defaults``: GRPOConfig defaults, the paper's full prompts, LoRA r=16 on every layer,
  256-token completions, plain ``generate``; but bf16 and gradient checkpointing OFF unless
  ``--bf16``: with TRL's bf16 default this AVX2-only CPU did not finish one step in 10 minutes
  (bf16 is emulated), which would make the comparison meaningless;
* ``quickstart``: configs/quickstart_cpu.yaml (bf16 and checkpointing off, compact prompts,
  128-token completions, LoRA on the top 12 layers, shared-prompt pre-fill).

Use the SFT model of a quickstart run (``--model``, default when it exists) so that completions
end with the code block as they do in training.  Writes benchmarks/results/grpo_step.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run(settings_name: str, model_path: str, steps: int, work: Path, bf16: bool = False) -> dict:
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.training.config import TrainSettings
    from rubriq.training.grpo import build_grpo_trainer
    from rubriq.training.models import load_model, load_tokenizer
    from rubriq.training.rewards import RubricRewards
    from rubriq.training.train_rubriq import lora_kwargs

    qs = TrainSettings.from_yaml(ROOT / "configs" / "quickstart_cpu.yaml")
    spec = dict(qs.data.build)
    for k in ("held_out", "fractions", "seed"):
        spec.pop(k, None)
    if settings_name == "trl-defaults":
        spec["prompt_style"] = "full"
        grpo = {
            "per_device_train_batch_size": 8,
            "num_generations": 8,
            "max_completion_length": 256,
            "use_cpu": True,
            "learning_rate": 5e-5,
        }
        if not bf16:
            grpo.update(bf16=False, gradient_checkpointing=False)
        lora = {
            "r": 16,
            "lora_alpha": 32,
            "lora_dropout": 0.05,
            "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        }
        prefill = False
    else:
        grpo = dict(qs.grpo)
        lora = lora_kwargs(qs)
        prefill = qs.shared_prompt_prefill
    from rubriq.config import from_dict

    rows = synthesis_rows(from_dict(PromptSpec, spec))
    grpo.update(
        output_dir=str(work / settings_name),
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=42,
    )
    tokenizer = load_tokenizer()
    trainer = build_grpo_trainer(
        load_model(model_path),
        tokenizer,
        rows,
        RubricRewards(qs.rubric),
        grpo_args=grpo,
        lora=lora,
        shared_prompt_prefill=prefill,
    )
    trainer.train()
    logs = [x for x in trainer.state.log_history if "step_time" in x]
    mean = lambda k: statistics.fmean(x[k] for x in logs if x.get(k) is not None)  # noqa: E731
    return {
        "setting": settings_name,
        "steps": len(logs),
        "step": mean("step_time"),
        "generation": mean("timing/generation_s"),
        "reward": mean("timing/reward_s"),
        "update": mean("timing/update_s"),
        "tokens": mean("completions/mean_length"),
        "tokens_per_s": mean("tokens_per_s"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    default = ROOT / "runs" / "quickstart" / "train" / "sft" / "model"
    parser.add_argument("--model", default=str(default) if default.is_dir() else "embedded")
    parser.add_argument("--bf16", action="store_true", help="keep TRL's bf16 + checkpointing defaults in the baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run(name, args.model, args.steps, Path(tmp), args.bf16) for name in ("trl-defaults", "quickstart")]
    base = results[0]["step"]
    lines = [
        f"GRPO step on the embedded SmolLM2-135M, model {args.model}, N = 8, "
        f"{args.steps} steps each, 2-core CPU; seconds (means); baseline bf16 "
        f"{'on' if args.bf16 else 'off'}",
        "",
        "| setting | step | generation | reward | update | completion tokens | tokens/s | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['setting']} | {r['step']:.1f} | {r['generation']:.1f} | {r['reward']:.2f} | "
            f"{r['update']:.1f} | {r['tokens']:.0f} | {r['tokens_per_s']:.1f} | {base / r['step']:.1f}x |"
        )
    text = "\n".join(lines)
    print(text)
    out = ROOT / "benchmarks" / "results" / "grpo_step.md"
    out.write_text(text + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
