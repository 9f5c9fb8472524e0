"""GRPO training entry point (the paper's command):

    python rubriq/training/train_rubriq.py --rubriq_config configs/rubriq_grpo.yaml [--resume]
    accelerate launch --num_processes 4 rubriq/training/train_rubriq.py --rubriq_config ...

Reads :class:`rubriq.training.config.TrainSettings` from YAML, loads the prompt rows written
by ``rubriq data build``, the model (hub id, local folder or the embedded SmolLM2), and runs
TRL's GRPOTrainer with the rubric rewards (``grpo.py``).  Checkpoints every
``grpo.save_steps`` steps into ``output_dir``; ``--resume`` continues from the last one with
the same data order (the trainer's RNG and sampler state are in the checkpoint).  Every logged
step is appended to ``output_dir/metrics.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _jsonl_callback(path: Path):
    from transformers import TrainerCallback

    class JsonlLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"step": state.global_step, **logs}) + "\n")

    return JsonlLogger()


def last_checkpoint(output_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None


def build(settings, max_steps: int | None = None):
    """Model, tokenizer, rows and the GRPO trainer for ``settings``."""
    from rubriq.data.prompts import load_split
    from rubriq.training.grpo import build_grpo_trainer
    from rubriq.training.models import load_model, load_tokenizer, tiny_model
    from rubriq.training.rewards import RubricRewards, sparse_reward

    rows = load_split(settings.data.dataset, settings.data.split)
    if settings.data.max_rows:
        rows = rows[: settings.data.max_rows]
    tokenizer = load_tokenizer(settings.model.name_or_path)
    model = tiny_model(tokenizer) if settings.model.tiny else load_model(settings.model.name_or_path)
    rewards = RubricRewards(settings.rubric, workers=settings.reward.workers)
    funcs = None
    if settings.reward.kind != "rubric":
        funcs = [sparse_reward(rewards, settings.reward.kind.removeprefix("sparse_"))]
    grpo = {"output_dir": settings.output_dir, **settings.grpo}
    if max_steps is not None:
        grpo["max_steps"] = max_steps
    lora = None
    if settings.lora.enabled:
        lora = {"r": settings.lora.r, "lora_alpha": settings.lora.lora_alpha, "lora_dropout": settings.lora.lora_dropout,
                "target_modules": list(settings.lora.target_modules)}
    trainer = build_grpo_trainer(model, tokenizer, rows, rewards, grpo_args=grpo, lora=lora, reward_funcs=funcs)
    trainer.add_callback(_jsonl_callback(Path(settings.output_dir) / "metrics.jsonl"))
    return trainer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rubriq_config", required=True, help="training YAML (see configs/)")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in output_dir")
    parser.add_argument("--max_steps", type=int, default=None, help="override grpo.max_steps")
    parser.add_argument("--print_config", action="store_true", help="print the resolved settings and exit")
    args = parser.parse_args(argv)
    from rubriq.training.config import TrainSettings

    settings = TrainSettings.from_yaml(args.rubriq_config)
    if args.print_config:
        import dataclasses

        print(json.dumps(dataclasses.asdict(settings), indent=2, default=str))
        return 0
    output_dir = Path(settings.output_dir)
    resume = last_checkpoint(output_dir) if args.resume else None
    if args.resume and resume is None:
        print(f"no checkpoint in {output_dir}: starting from scratch", file=sys.stderr)
    trainer = build(settings, args.max_steps)
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(output_dir / "final"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
