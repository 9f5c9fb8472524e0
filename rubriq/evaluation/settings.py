"""How a policy is sampled for evaluation: the ``evaluation:`` section of a training YAML and the
base of ``rubriq evaluate``'s request (evaluation settings live with evaluation, not training)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvalSettings:
    """How a policy is sampled for evaluation (the quickstart's before/after tables)."""

    split: str = "test"
    """Held-out split of the dataset."""
    samples: int = 1
    """Completions per prompt (pass@k needs k of them)."""
    max_new_tokens: int = 256
    temperature: float = 0.0
    """0: greedy decoding (one sample per prompt)."""
    top_p: float = 1.0
    batch_size: int = 8
