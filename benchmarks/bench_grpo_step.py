"""GRPO step cost on the embedded SmolLM2-135M: the quickstart step as it was vs the faster step,
side by side in ONE run (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_grpo_step.py [--steps 4] [--model DIR] [--data DIR]

Settings (same model, same prompts, same seed, same sampling):

* ``before``: the quickstart's GRPO settings as they were (configs/quickstart_cpu.yaml: 2 prompts x
  N = 4 = 8 completions per step, LoRA on the top 12 layers, shared-prompt pre-fill), policy in
  float32, completions not ended after their code block, zero-variance groups in the update,
  log-probabilities by TRL's fused LM-head kernel;
* ``after``: the same with ``model.precision: auto`` (bfloat16 on a CPU with AVX512-BF16 / AMX),
  completions ended after their code block, zero-variance groups dropped from the update and the
  log-probabilities from one float32 LM-head product (``grpo.completion_logps_and_entropy``);
* ``after, 16 per step``: the same with 4 prompts x N = 4 in one generation batch;
* ``after, 16 per step, sampling without dropout``: the same, sampling in eval mode
  (``sample_without_dropout``: the LoRA dropout off while generating, on in the update);
* ``after, 32 per step, sampling without dropout``: the same with 8 prompts x N = 4;
* ``..., one prompt pass in the update``: the same, with each distinct prompt run through the
  decoder once in the update and its N completions from its key/value cache
  (``shared_prompt_update``, the default since 2026-12-03; every other setting runs the whole
  rows, as the step did before);
* ``..., fast sampling``: the same, each token drawn from the top-p nucleus found among the top
  256 (``fast_sampling``, also the default since 2026-12-03; ``generation.SampleFromNucleus``);
* ``..., decoding loop``: the same, sampled by RubriQ's decoding loop (``fast_decoding``) with the
  completions that ended dropped from its batch (``drop_finished_rows``; ``, all rows to the end``:
  without); off by default (measured no faster: benchmarks/results/generation.md).

``--settings NAME [NAME ...]`` runs only those (``before`` always runs first: the baseline).

Each runs ``--steps`` GRPO steps; the table gives the mean step time split into generation /
reward / update, the completion tokens, and the cost **per completion** and per completion
token, with the speed-up over ``before``.  It also reports how far bfloat16 log-probabilities
are from float32 ones on one batch of completions (the policy's own sampled completions).
Writes benchmarks/results/grpo_step.md.  The model: an SFT warm-start folder (``--model``; by
default the learning study's, else the quickstart's), so that completions look like training's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_AFTER = {"precision": "auto", "end_after_code_block": True, "skip": True, "batch": 8, "cpu_logprobs": True}
_QUIET = {**_AFTER, "sample_without_dropout": True}  # sampling without dropout
_SHARED = {**_QUIET, "shared_update": True}  # one prompt pass in the update
_FAST = {**_SHARED, "fast_sampling": True}
_LOOP = {**_FAST, "fast_decoding": True, "drop_finished_rows": True}
_DECODE = "after, {} per step, sampling without dropout, one prompt pass in the update, fast sampling, decoding loop"
SETTINGS = {
    "before": {"precision": "float32", "end_after_code_block": False, "skip": False, "batch": 8, "cpu_logprobs": False},
    "after": _AFTER,
    "after, 16 per step": {**_AFTER, "batch": 16},
    "after, 16 per step, sampling without dropout": {**_QUIET, "batch": 16},
    "after, 32 per step, sampling without dropout": {**_QUIET, "batch": 32},
    "after, 16 per step, sampling without dropout, one prompt pass in the update": {**_SHARED, "batch": 16},
    "after, 32 per step, sampling without dropout, one prompt pass in the update": {**_SHARED, "batch": 32},
    "after, 16 per step, sampling without dropout, one prompt pass in the update, fast sampling": {
        **_FAST,
        "batch": 16,
    },
    "after, 32 per step, sampling without dropout, one prompt pass in the update, fast sampling": {
        **_FAST,
        "batch": 32,
    },
    _DECODE.format(16) + ", all rows to the end": {**_LOOP, "drop_finished_rows": False, "batch": 16},
    _DECODE.format(16): {**_LOOP, "batch": 16},
    _DECODE.format(32): {**_LOOP, "batch": 32},
}


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _rows(data: str | None) -> list[dict]:
    from rubriq.config import from_dict
    from rubriq.data.prompts import PromptSpec, load_split, synthesis_rows
    from rubriq.training.config import TrainSettings

    if data:
        return load_split(data, "train")
    qs = TrainSettings.from_yaml(ROOT / "configs" / "quickstart_cpu.yaml")
    spec = {k: v for k, v in qs.data.build.items() if k not in ("held_out", "fractions", "seed")}
    return synthesis_rows(from_dict(PromptSpec, spec))


def run(name: str, model_path: str, rows: list[dict], steps: int, work: Path) -> dict:
    from rubriq.models import load_model, load_tokenizer, to_policy_precision
    from rubriq.reward import RubricRewards
    from rubriq.training.config import TrainSettings
    from rubriq.training.grpo import build_grpo_trainer
    from rubriq.training.train_rubriq import lora_kwargs

    s = SETTINGS[name]
    qs = TrainSettings.from_yaml(ROOT / "configs" / "quickstart_cpu.yaml")
    grpo = dict(qs.grpo)
    grpo.update(
        per_device_train_batch_size=s["batch"],
        num_generations=4,
        output_dir=str(work / name.replace(" ", "_").replace(",", "")),
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=42,
    )
    tokenizer = load_tokenizer()
    trainer = build_grpo_trainer(
        to_policy_precision(load_model(model_path), s["precision"]),
        tokenizer,
        rows,
        RubricRewards(qs.rubric),
        grpo_args=grpo,
        lora=lora_kwargs(qs),
        shared_prompt_prefill=True,
        end_after_code_block=s["end_after_code_block"],
        skip_zero_variance_groups=s["skip"],
        cpu_logprobs=s.get("cpu_logprobs", True),
        sample_without_dropout=s.get("sample_without_dropout", False),
        shared_prompt_update=s.get("shared_update", False),
        fast_sampling=s.get("fast_sampling", False),
        fast_decoding=s.get("fast_decoding", False),
        drop_finished_rows=s.get("drop_finished_rows", False),
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
        "skipped": mean("dynamic_sampling/skipped_groups") if s["skip"] else 0.0,
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


def logprob_difference(model_path: str, rows: list[dict], n: int = 8) -> dict:
    """Max and mean |log p_bf16 - log p_fp32| per completion token on ``n`` sampled completions."""
    import torch

    from rubriq.evaluation.sampling import generate
    from rubriq.models import load_model, load_tokenizer

    tokenizer = load_tokenizer()
    fp32 = load_model(model_path, dtype=torch.float32)  # (without a dtype the checkpoint's own, bf16, is kept)
    records = generate(
        fp32, tokenizer, rows[:n], samples=1, max_new_tokens=160, temperature=1.0, seed=3, progress=False
    )
    texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows[:n]]
    tokenizer.padding_side = "right"
    full = tokenizer([t + rec.text for t, rec in zip(texts, records, strict=True)], return_tensors="pt", padding=True)
    starts = [len(tokenizer(t)["input_ids"]) for t in texts]

    def logps(model) -> torch.Tensor:
        with torch.no_grad():
            logits = model(**full).logits.float()
        lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, full["input_ids"][:, 1:, None])[..., 0]
        return lp

    a, b = logps(fp32), logps(load_model(model_path, dtype=torch.bfloat16))
    mask = full["attention_mask"][:, 1:].clone()
    for i, start in enumerate(starts):
        mask[i, : start - 1] = 0  # completion tokens only
    diff = (a - b).abs()[mask.bool()]
    return {"tokens": int(mask.sum()), "max": float(diff.max()), "mean": float(diff.mean())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    learning = ROOT / "runs" / "studies" / "learning"
    quick = ROOT / "runs" / "quickstart" / "train" / "sft" / "model"
    default_model = learning / "sft" / "model" if (learning / "sft" / "model").is_dir() else quick
    parser.add_argument("--model", default=str(default_model))
    parser.add_argument("--data", default=str(learning / "data") if (learning / "data").is_dir() else None)
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
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for name in names:
            results.append(run(name, args.model, rows, args.steps, Path(tmp)))
            print(f"{name}: {results[-1]}", flush=True)  # progress: a long run shows each setting as it ends
    lp = logprob_difference(args.model, rows)
    base = results[0]["per_completion"]
    lines = [
        f"GRPO step on the embedded SmolLM2-135M, model `{args.model}`, data `{args.data or 'quickstart prompts'}`, "
        f"{args.steps} steps per setting in one run, {torch_threads()} torch threads on {os.cpu_count()} cores "
        f"(bf16 units: {cpu_bf16_units() or 'none'}); seconds are means over steps; CPU s: this process's CPU "
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
    lines += [
        "",
        f"bfloat16 vs float32 log-probabilities of {lp['tokens']} sampled completion tokens: max |difference| "
        f"{lp['max']:.3f}, mean {lp['mean']:.4f} nats (the bf16 policy samples and trains with its own "
        "log-probabilities, so they are consistent with each other; LoRA weights and optimizer state stay float32).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
