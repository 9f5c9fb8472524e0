"""Training entry point (the paper's command):

    python rubriq/training/train_rubriq.py --rubriq_config configs/rubriq_grpo.yaml [--resume]
    accelerate launch --num_processes 4 rubriq/training/train_rubriq.py --rubriq_config ...

Reads :class:`rubriq.training.config.TrainSettings` from YAML and runs, top to bottom:

1. data: the prompt rows written by ``rubriq data build`` (built first when ``data.build`` is
   set and the folder does not exist);
2. model: hub id, local folder, ``embedded`` SmolLM2-135M or a tiny random model (tests);
3. SFT warm-start when ``sft.enabled`` (TRL SFTTrainer; saved to ``output_dir/sft``, reused
   by ``--resume``);
4. RL: ``algorithm: grpo`` (TRL GRPOTrainer with the rubric or a sparse reward) or ``ppo``
   (Sparse-PPO with a value head, ``ppo.py``).

Checkpoints every ``save_steps`` steps into ``output_dir``; ``--resume`` continues from the last
one with the same data order.  Every logged step is appended to ``output_dir/metrics.jsonl``
(with its ``phase``: sft, grpo or ppo) and, with ``report_to: [tensorboard]``, to TensorBoard
under ``output_dir/runs``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import sys
from pathlib import Path

log = logging.getLogger("rubriq.training")

# Run as a script (`python rubriq/training/train_rubriq.py`, `accelerate launch ...`): make the
# repository importable when the package is not installed.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def last_checkpoint(output_dir: Path) -> str | None:
    """The newest complete ``checkpoint-N`` folder in ``output_dir``, or None.

    Complete means its ``trainer_state.json`` is there and parses: both trainers (TRL's and ours,
    :mod:`rubriq.training.ppo`) write that file last, so a run killed while saving leaves a newer
    folder without it.  transformers' ``get_last_checkpoint`` would pick that folder and the
    resume would fail; it is skipped here (with a warning, and left on disk) for the newest one
    that is whole.
    """
    if not output_dir.is_dir():
        return None
    numbered = [
        (int(m.group(1)), p)
        for p in output_dir.iterdir()
        if p.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", p.name))
    ]
    for _, folder in sorted(numbered, key=lambda item: item[0], reverse=True):
        try:
            json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("%s is incomplete (no readable trainer_state.json: killed while saving?); skipped", folder)
            continue
        return str(folder)
    return None


def _rank() -> int:
    import os

    return int(os.environ.get("RANK", "0"))


def load_rows(settings, split: str | None = None) -> list[dict]:
    """Rows of ``data.split`` (or ``split``); the dataset is built first when ``data.build`` is
    set and the folder does not exist (by rank 0 only; other ranks wait for it)."""
    import time

    from rubriq.data.prompts import build_splits, load_split, save_splits

    folder = Path(settings.data.dataset)
    if not folder.exists() and settings.data.build:
        if _rank() == 0:
            splits = build_splits(settings.data.build)
            save_splits(splits, folder.with_name(folder.name + ".tmp"))
            folder.with_name(folder.name + ".tmp").rename(folder)  # appears complete or not at all
        else:
            deadline = time.monotonic() + 600
            while not folder.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {_rank()}: {folder} was not built by rank 0 within 10 minutes")
                time.sleep(2)
    rows = load_split(folder, split or settings.data.split)
    return rows[: settings.data.max_rows] if settings.data.max_rows else rows


def lora_kwargs(settings, lora=None) -> dict | None:
    """``peft.LoraConfig`` keywords of the ``lora`` section, or of ``lora`` (a
    :class:`LoraSettings`, e.g. ``settings.sft_lora()``); None when LoRA is off."""
    lora = lora or settings.lora
    if not lora.enabled:
        return None
    out = {
        "r": lora.r,
        "lora_alpha": lora.lora_alpha,
        "lora_dropout": lora.lora_dropout,
        "target_modules": list(lora.target_modules),
    }
    if lora.layers_to_transform:
        out["layers_to_transform"] = list(lora.layers_to_transform)
    return out


def sft_lora_kwargs(settings) -> dict | None:
    """The SFT adapter's ``peft.LoraConfig`` keywords (None for full fine-tuning: ``sft.lora`` false)."""
    return lora_kwargs(settings, settings.sft_lora()) if settings.sft.lora else None


def load_base(settings):
    """Tokenizer and the model before any training (hub id, folder, embedded or tiny)."""
    from rubriq.models import load_model, load_tokenizer, tiny_model

    tokenizer = load_tokenizer(settings.model.name_or_path)
    model = tiny_model(tokenizer) if settings.model.tiny else load_model(settings.model.name_or_path)
    return tokenizer, model


def warm_start(settings, tokenizer, model):
    """The SFT warm-start (TRL SFTTrainer); the model is saved to ``output_dir/sft/model``."""
    from rubriq.models import to_policy_precision
    from rubriq.training.callbacks import trainer_callbacks
    from rubriq.training.config import EarlyStoppingSettings
    from rubriq.training.sft import run_sft

    model = to_policy_precision(model, settings.model.precision, trained=not settings.sft.lora)
    sft_dir = Path(settings.output_dir) / "sft"
    lora = sft_lora_kwargs(settings)
    model = run_sft(
        model,
        tokenizer,
        load_rows(settings, settings.sft.split or None),
        sft_dir,
        settings.sft.args,
        lora,
        callbacks=trainer_callbacks(Path(settings.output_dir), EarlyStoppingSettings(), phase="sft"),
    )
    if _rank() == 0:
        model.save_pretrained(sft_dir / "model")
        tokenizer.save_pretrained(sft_dir / "model")
    # the RL adapter records its base by this name: it must be the SFT weights, not the original
    model.name_or_path = model.config._name_or_path = str((sft_dir / "model").resolve())
    return model


def load_policy(settings, resume: bool = False):
    """Tokenizer and model, after the SFT warm-start when it is enabled (or reused on resume)."""
    from rubriq.models import load_model, load_tokenizer

    sft_model = Path(settings.output_dir) / "sft" / "model"
    if settings.sft.enabled and resume and (sft_model / "config.json").is_file():
        return load_tokenizer(settings.model.name_or_path), load_model(str(sft_model))
    tokenizer, model = load_base(settings)
    if settings.sft.enabled:
        model = warm_start(settings, tokenizer, model)
    return tokenizer, model


def build(
    settings,
    max_steps: int | None = None,
    resume: bool = False,
    policy=None,
    rewards=None,
    callbacks: list | None = None,
):
    """The RL trainer (GRPO or PPO) for ``settings``; ``policy`` = (tokenizer, model) if loaded,
    ``rewards`` = the :class:`RubricRewards` to score with (its ``stats`` count the simulations),
    ``callbacks`` = extra transformers callbacks (GRPO)."""
    from rubriq.reward import RubricRewards, sparse_reward
    from rubriq.training.callbacks import EarlyStopper, trainer_callbacks

    rows = load_rows(settings)
    tokenizer, model = policy or load_policy(settings, resume)
    rewards = rewards or RubricRewards(settings.rubric, workers=settings.reward.workers)
    funcs = None
    if settings.reward.kind != "rubric":
        funcs = [sparse_reward(rewards, settings.reward.kind.removeprefix("sparse_"))]
    output_dir = Path(settings.output_dir)
    if settings.algorithm == "ppo":
        from rubriq.training.ppo import PPOTrainer

        ppo = settings.ppo
        if max_steps is not None:
            ppo = dataclasses.replace(ppo, max_steps=max_steps)
        reward = funcs[0] if funcs else rewards.function("total", log=True)
        stopper = EarlyStopper(settings.early_stopping)
        trainer = PPOTrainer(
            model,
            tokenizer,
            rows,
            reward,
            ppo,
            output_dir,
            lora=lora_kwargs(settings),
            callbacks=[lambda log: stopper.update(log.get(settings.early_stopping.metric))],
        )
        trainer.rubriq_rewards = rewards
        return trainer
    from rubriq.models import to_policy_precision
    from rubriq.training.grpo import build_grpo_trainer

    model = to_policy_precision(model, settings.model.precision, trained=not settings.lora.enabled)
    grpo = {"output_dir": str(output_dir), **settings.grpo.to_trl()}
    if max_steps is not None:
        grpo["max_steps"] = max_steps
    trainer = build_grpo_trainer(
        model,
        tokenizer,
        rows,
        rewards,
        grpo_args=grpo,
        lora=lora_kwargs(settings),
        reward_funcs=funcs,
        generation=settings.generation,
        callbacks=trainer_callbacks(output_dir, settings.early_stopping, phase="grpo") + list(callbacks or ()),
    )
    trainer.rubriq_rewards = rewards
    return trainer


def warn_cpu_precision(settings) -> None:
    """TRL defaults to bf16 autocast and gradient checkpointing; on a CPU without bf16 units (no
    AMX / AVX512-BF16) that makes a step ~20x slower.  Say so instead of silently crawling.
    (Where the CPU has them, ``model.precision: auto`` already runs the policy in bfloat16.)"""
    import torch

    from rubriq.models import cpu_bf16_units

    if torch.cuda.is_available() or cpu_bf16_units():
        return
    sections = [("grpo", settings.grpo.to_trl())] if settings.algorithm == "grpo" else []
    if settings.sft.enabled:
        sections.append(("sft.args", settings.sft.args))
    for section, args in sections:
        if args.get("bf16", True):
            log.warning(
                "%s.bf16 is on (TRL's default), there is no GPU and this CPU has no bf16 units: set bf16: false "
                "for CPU training (bf16 is emulated and very slow here)",
                section,
            )


def write_run_info(settings) -> None:
    """``output_dir/run_info.json``: devices and config, for compute cost (``rubriq report``)."""
    import os
    import time

    import torch

    if _rank() != 0:
        return
    out = Path(settings.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    info = {
        "devices": int(os.environ.get("WORLD_SIZE", "1")),
        "device_type": "cuda" if cuda else "cpu",
        "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "algorithm": settings.algorithm,
        "reward": settings.reward.kind,
        "model": settings.model.name_or_path,
    }
    (out / "run_info.json").write_text(json.dumps(info, indent=2))


def train(settings, max_steps: int | None = None, resume: bool = False) -> Path:
    """Run the whole entry point; return the folder of the final model."""
    warn_cpu_precision(settings)
    write_run_info(settings)
    output_dir = Path(settings.output_dir)
    checkpoint = last_checkpoint(output_dir) if resume else None
    if resume and checkpoint is None:
        log.warning("no checkpoint in %s: starting from scratch", output_dir)
    trainer = build(settings, max_steps, resume=resume)
    trainer.train(resume_from_checkpoint=checkpoint)
    final = save_final(trainer, settings, output_dir / "final")
    write_reward_stats(output_dir, trainer.rubriq_rewards)
    return final


def save_final(trainer, settings, folder: Path) -> Path:
    """Save the trained policy to ``folder`` so that the folder can be moved and says what it is:

    - the adapter's base (the SFT warm-start, ``output_dir/sft/model``) is recorded relative to
      the folder (``../sft/model``; ``rubriq.models.adapter_base`` resolves it);
    - ``rubriq_policy.json``: the prompt style and formats it was trained on (read by
      ``synthesize``, ``evaluate`` and the app, which prompt the way the policy was trained), the
      real base model and the training algorithm and reward;
    - ``README.md``: a model card naming the base model (PEFT's card would say ``None``)."""
    import os

    from rubriq.data.prompts import prompt_style_of_rows
    from rubriq.models import EMBEDDED, EMBEDDED_HUB_ID, POLICY_INFO

    folder = Path(folder)
    trainer.save_model(str(folder))
    if _rank() != 0:
        return folder
    config_path = folder / "adapter_config.json"
    adapter_base = None
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        base = config.get("base_model_name_or_path")
        if base and Path(base).is_absolute() and Path(base).exists():
            adapter_base = os.path.relpath(base, folder.resolve())
            config["base_model_name_or_path"] = adapter_base
            config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    rows = load_rows(settings)
    name = settings.model.name_or_path
    base_model = (
        "a tiny random Llama (tests)"
        if settings.model.tiny
        else f"{EMBEDDED_HUB_ID} (embedded)"
        if name == EMBEDDED
        else name
    )
    info = {
        "prompt_style": prompt_style_of_rows(rows),  # rubriq.data.prompts
        "formats": sorted({r.get("format", "qasm2") for r in rows}),
        "base_model": base_model,
        "tiny": settings.model.tiny,
        "adapter_base": adapter_base,
        "sft_warm_start": settings.sft.enabled,
        "algorithm": settings.algorithm,
        "reward": settings.reward.kind,
    }
    (folder / POLICY_INFO).write_text(json.dumps(info, indent=2), encoding="utf-8")
    card = [
        "---",
        "library_name: peft",
        "pipeline_tag: text-generation",
        "tags: [rubriq, quantum-circuit-synthesis, trl, " + settings.algorithm + "]",
        "---",
        "",
        "# RubriQ policy",
        "",
        f"Fine-tuned from **{base_model}** with RubriQ: "
        + ("SFT warm-start on reference circuits, then " if settings.sft.enabled else "")
        + f"{settings.algorithm.upper()} with the `{settings.reward.kind}` reward.",
        "",
        f"- prompt style: `{info['prompt_style']}`; formats: {', '.join(info['formats'])}",
        f"- adapter base: `{adapter_base or name}`" + (" (relative to this folder)" if adapter_base else ""),
        "",
        "Use it with `rubriq synthesize ... --model <this folder>` or `rubriq evaluate --model <this "
        "folder>`; both prompt the way it was trained (rubriq_policy.json).",
        "",
    ]
    (folder / "README.md").write_text("\n".join(card), encoding="utf-8")
    return folder


def write_reward_stats(output_dir: Path, rewards) -> Path:
    """``output_dir/reward_stats/rank<R>.json``: completions this process scored (``requests``),
    distinct ones simulated (``evaluated``) and seconds, one file per process (every rank
    scores its own completions under accelerate)."""
    folder = Path(output_dir) / "reward_stats"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank{_rank()}.json"
    path.write_text(json.dumps(dict(rewards.stats), indent=2))
    return path


def main(argv: list[str] | None = None) -> int:
    """The paper's entry point: parse arguments, read the YAML, train; return the exit code."""
    from rubriq.options import add_arguments, from_namespace
    from rubriq.training.launch import RunOptions

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # the paper's spelling (--max_steps) and the usual CLI one (--max-steps) both work
    parser.add_argument(
        "--rubriq_config", "--rubriq-config", required=True, metavar="YAML", help="training YAML (see configs/)"
    )
    add_arguments(parser, RunOptions, underscore_aliases=True)  # --resume, --max-steps / --max_steps
    parser.add_argument("--output_dir", "--output-dir", default=None, metavar="DIR", help="override output_dir")
    parser.add_argument(
        "--print_config", "--print-config", action="store_true", help="print the resolved settings and exit"
    )
    args = parser.parse_args(argv)
    run = from_namespace(RunOptions, args)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if run.max_steps is not None and run.max_steps < 1:
        parser.error(f"--max_steps must be >= 1, got {run.max_steps}")
    from rubriq.config import ConfigError
    from rubriq.training.config import TrainSettings

    try:
        settings = TrainSettings.from_yaml(args.rubriq_config)
    except (ConfigError, OSError) as exc:
        print(f"error: {args.rubriq_config}: {exc}", file=sys.stderr)
        return 2
    if args.output_dir:
        settings = dataclasses.replace(settings, output_dir=args.output_dir)
    if args.print_config:
        print(json.dumps(settings.to_dict(), indent=2, default=str))
        return 0
    train(settings, run.max_steps, run.resume)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
