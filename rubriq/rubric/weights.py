"""The weights of R = sum_d w_d S_d, with the optional complexity-aware T weight.

Appendix C of the paper scales the T weight with the task's reference T-count T0:

    w_T(T0) = w_T0 * (1 + kappa * log(T0 / T_ref))      (clipped at 0)

after which all weights are renormalized to sum to 1.  Off by default.

>>> from rubriq.config import RubricConfig
>>> effective_weights(RubricConfig(), t0=200)["tcount"]
0.15
>>> cfg = RubricConfig.from_dict({"complexity": {"enabled": True, "kappa": 0.5, "t_ref": 50}})
>>> w = effective_weights(cfg, t0=200)
>>> round(w["tcount"], 4), round(sum(w.values()), 12)
(0.2301, 1.0)
"""

from __future__ import annotations

import math

from rubriq.config import RubricConfig


def effective_weights(cfg: RubricConfig, t0: int | None = None) -> dict[str, float]:
    """The weights used for a target of reference T-count ``t0``: the configured ones, with the
    complexity-aware w_T when enabled (renormalized to sum to 1)."""
    weights = cfg.weights.as_dict()
    c = cfg.complexity
    if c.enabled and t0 is not None and t0 > 0:
        weights["tcount"] = max(0.0, weights["tcount"] * (1.0 + c.kappa * math.log(t0 / c.t_ref)))
        total = sum(weights.values())
        weights = {k: v / total for k, v in weights.items()}
    return weights
