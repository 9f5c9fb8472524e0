"""GRPO with the rubric reward: TRL's GRPOTrainer, PEFT LoRA, rows from ``rubriq data build``.

This is the glue the training entry point builds on: dataset rows (``prompt`` chat messages and
the ``target`` JSON spec) become a ``datasets.Dataset`` whose ``target`` column TRL hands to the
reward functions; the rubric enters as one reward function per dimension with the rubric
weights (``rewards.py``), so TRL's logged ``reward`` is R = sum_d w_d S_d and each dimension is
logged as ``rewards/<dim>/mean``.
"""

from __future__ import annotations

from typing import Any

from rubriq.training.rewards import RubricRewards


def rows_to_dataset(rows: list[dict]):
    """Keep what GRPO and the reward need: the chat prompt and the target spec."""
    from datasets import Dataset

    missing = [k for k in ("prompt", "target") if rows and k not in rows[0]]
    if missing:
        raise ValueError(f"dataset rows lack {missing}: build them with `rubriq data build`")
    return Dataset.from_list([{"prompt": r["prompt"], "target": r["target"]} for r in rows])


def build_grpo_trainer(model: Any, tokenizer: Any, rows: list[dict], rewards: RubricRewards | None = None,
                       grpo_args: dict | None = None, lora: dict | None = None, reward_funcs=None,
                       reward_weights=None):
    """A TRL GRPOTrainer on ``rows`` with the rubric rewards (or ``reward_funcs``, e.g. a sparse
    reward) and, when ``lora`` is given, a PEFT LoRA adapter (keys of ``peft.LoraConfig``)."""
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    rewards = rewards or RubricRewards()
    funcs = reward_funcs or rewards.functions()
    weights = reward_weights or (rewards.weights() if reward_funcs is None else [1.0] * len(funcs))
    args = GRPOConfig(**{"report_to": [], **(grpo_args or {}), "reward_weights": weights})
    peft_config = LoraConfig(task_type="CAUSAL_LM", **lora) if lora else None
    return GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=rows_to_dataset(rows),
                       processing_class=tokenizer, peft_config=peft_config)
