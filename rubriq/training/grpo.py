"""GRPO with the rubric reward: TRL's GRPOTrainer, PEFT LoRA, rows from ``rubriq data build``.

This is the glue the training entry point builds on: dataset rows (``prompt`` chat messages and
the ``target`` JSON spec) become a ``datasets.Dataset`` whose ``target`` column TRL hands to the
reward functions; the rubric enters as one reward function per dimension with the rubric
weights (``rewards.py``), so TRL's logged ``reward`` is R = sum_d w_d S_d and each dimension is
logged as ``rewards/<dim>/mean``.

:class:`RubriQGRPOTrainer` is TRL's trainer plus the step-time breakdown the issue asks for:
``timing/generation_s``, ``timing/reward_s`` (from the reward functions),
``timing/update_s`` (the rest of TRL's ``step_time``: log-probabilities, backward, optimizer)
and ``tokens_per_s`` (completion tokens per second of generation); and, without vLLM, it
pre-fills each prompt once for its N completions (``generation.py``).
"""

from __future__ import annotations

import time
from typing import Any

from rubriq.training.callbacks import quiet_progress
from rubriq.training.generation import install_prefix_generate
from rubriq.training.rewards import RubricRewards


def rows_to_dataset(rows: list[dict]):
    """Keep what GRPO and the reward need: the chat prompt and the target spec."""
    from datasets import Dataset

    missing = [k for k in ("prompt", "target") if rows and k not in rows[0]]
    if missing:
        raise ValueError(f"dataset rows lack {missing}: build them with `rubriq data build`")
    return Dataset.from_list([{"prompt": r["prompt"], "target": r["target"]} for r in rows])


def _trainer_class():
    from trl import GRPOTrainer

    class RubriQGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that also logs the generation time and throughput (see module doc).

        It overrides TRL's ``_generate`` and ``log`` (private in TRL 1.x): if a TRL release
        renames them, only these timing metrics are lost, training is unchanged."""

        def __init__(self, *args, shared_prompt_prefill: bool = True, **kwargs):
            super().__init__(*args, **kwargs)
            if shared_prompt_prefill and not getattr(self.args, "use_vllm", False):
                install_prefix_generate(self.model)

        def _generate(self, prompts: list):
            start = time.perf_counter()
            out = super()._generate(prompts)
            seconds = time.perf_counter() - start
            mode = "train" if self.model is not None and self.model.training else "eval"
            tokens = sum(len(ids) for ids in out[1])
            self._metrics[mode]["timing/generation_s"].append(seconds)
            self._metrics[mode]["tokens_per_s"].append(tokens / seconds if seconds > 0 else float("nan"))
            return out

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            m = self._metrics["train"]
            steps = m.get("step_time") or []
            if steps:
                spent = sum(m.get("timing/generation_s", [])) + sum(m.get("timing/reward_s", []))
                m["timing/update_s"] = [sum(steps) / len(steps) - spent / len(steps)]
            super().log(logs, start_time)

    return RubriQGRPOTrainer


def build_grpo_trainer(
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    rewards: RubricRewards | None = None,
    grpo_args: dict | None = None,
    lora: dict | None = None,
    reward_funcs=None,
    reward_weights=None,
    callbacks: list | None = None,
    shared_prompt_prefill: bool = True,
):
    """A GRPO trainer on ``rows`` with the rubric rewards (or ``reward_funcs``, e.g. a sparse
    reward) and, when ``lora`` is given, a PEFT LoRA adapter (keys of ``peft.LoraConfig``).
    ``shared_prompt_prefill``: pre-fill each prompt once per group (``generation.py``)."""
    from peft import LoraConfig
    from trl import GRPOConfig

    rewards = rewards or RubricRewards()
    funcs = reward_funcs or rewards.functions()
    weights = reward_weights or (rewards.weights() if reward_funcs is None else [1.0] * len(funcs))
    args = GRPOConfig(**{"report_to": [], **(grpo_args or {}), "reward_weights": weights})
    if args.use_vllm:
        _require("vllm", "grpo.use_vllm")
    peft_config = LoraConfig(task_type="CAUSAL_LM", **lora) if lora else None
    trainer = _trainer_class()(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=rows_to_dataset(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
        shared_prompt_prefill=shared_prompt_prefill,
    )
    quiet_progress(trainer)
    return trainer


def _require(module: str, setting: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise RuntimeError(
            f"{setting} needs the package {module!r}, which is not installed: "
            "pip install 'rubriq[gpu]' on a CUDA machine (vLLM and DeepSpeed need GPUs)"
        )
