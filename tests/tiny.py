"""Settings the training tests share: the tiny prompt dataset and the CPU trainer flags."""

from __future__ import annotations

CPU = {"use_cpu": True, "bf16": False, "gradient_checkpointing": False}
"""TRL/transformers flags for a CPU run (TRL defaults to bf16, emulated and slow on CPUs)."""

TINY_LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


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
