"""Settings the training tests share: the tiny prompt dataset, the CPU trainer flags and the
tiny training configs built from them (a test states only what it changes)."""

from __future__ import annotations

import copy
from typing import Any

CPU = {"use_cpu": True, "bf16": False, "gradient_checkpointing": False}
"""TRL/transformers flags for a CPU run (TRL defaults to bf16, emulated and slow on CPUs)."""

TINY_LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}

TINY_MODEL = {"name_or_path": "embedded", "tiny": True}
"""The tiny random model on the embedded tokenizer."""

TINY_SFT = {"enabled": True, "args": {"max_steps": 1, "per_device_train_batch_size": 2, **CPU}}
"""One SFT step on the CPU."""

TINY_GRPO = {"per_device_train_batch_size": 4, "num_generations": 2, "max_completion_length": 6, **CPU}
"""GRPO on the CPU: 4 completions of at most 6 tokens a step, in groups of 2."""

TINY_EVALUATION = {"samples": 2, "temperature": 1.0, "max_new_tokens": 6, "batch_size": 8}
"""Sampled evaluation: 2 completions of at most 6 tokens per prompt."""


def tiny_build(**changes) -> dict:
    """A ``data.build`` section with a few rows: QFT-2 and 2-qubit basis encodings, compact
    OpenQASM 2.0 prompts, a quarter of the targets held out; ``changes`` override keys."""
    build = {
        "qft_sizes": [2],
        "qpe_sizes": [],
        "hamiltonian_sizes": [],
        "encoding_sizes": [2],
        "encoding_seeds": [0, 1],
        "encodings": ["basis_encoding"],
        "formats": ["qasm2"],
        "prompt_style": "compact",
        "held_out": {},
        "fractions": [0.0, 0.25],
    }
    return {**build, **changes}


def tiny_training(build: dict | None = None, **sections: Any) -> dict:
    """A training config (the YAML as a dict) on :data:`TINY_MODEL` with :data:`TINY_LORA` and
    the prompts of ``build`` (default :func:`tiny_build`); ``sections`` add or replace top-level
    keys (``sft=TINY_SFT``, ``grpo={**TINY_GRPO, "max_steps": 2}``, ``output_dir=...``).

    >>> sorted(tiny_training(grpo=TINY_GRPO))
    ['data', 'grpo', 'lora', 'model']
    """
    config = {"model": TINY_MODEL, "lora": TINY_LORA, "data": {"build": tiny_build() if build is None else build}}
    return copy.deepcopy({**config, **sections})


def tiny_quickstart(build: dict) -> dict:
    """The quickstart's config on the tiny model: one SFT step, sampled evaluation
    (:data:`TINY_EVALUATION`), 2 GRPO steps logged each step, no checkpoints."""
    grpo = {**TINY_GRPO, "max_steps": 2, "logging_steps": 1, "save_strategy": "no"}
    return tiny_training(build, sft=TINY_SFT, evaluation=TINY_EVALUATION, grpo=grpo)


def tiny_adapter(folder):
    """A LoRA adapter (r 2 on q_proj and v_proj) on a tiny random model saved beside it in
    ``folder/../base`` (the base named relative to the adapter, as RubriQ writes it), with
    non-zero B so that merging changes the weights; returns ``folder``."""
    import json

    import torch
    from peft import LoraConfig, get_peft_model

    from rubriq.models import load_tokenizer, tiny_model

    tokenizer = load_tokenizer()
    base = folder.parent / "base"
    tiny_model(tokenizer, seed=3).save_pretrained(base)
    tokenizer.save_pretrained(base)
    model = get_peft_model(
        tiny_model(tokenizer, seed=3), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    model.save_pretrained(folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "../base"
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder
