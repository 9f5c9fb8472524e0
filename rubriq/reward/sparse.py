"""The paper's sparse baselines: one terminal scalar per completion, over a rubric scorer.

``inverse_t``: 1/T(c) for a functionally correct circuit (:func:`rubriq.evaluator.result.
is_correct` with the rubric's ``fidelity.correct_threshold``), 1 when T(c) = 0, else 0
(Sparse-PPO's terminal reward).  ``correct``: 1 if correct else 0.
"""

from __future__ import annotations

from typing import Any

from rubriq.evaluator.result import is_correct
from rubriq.reward.rubric import RubricRewards

SPARSE_KINDS = ("inverse_t", "correct")


class SparseReward:
    """One terminal scalar of ``kind`` (:data:`SPARSE_KINDS`) with TRL's uniform signature,
    sharing ``rewards``' scorer; it reports the batch metrics like the rubric's ``total``.
    Returns one value per completion: 1/T(c) (``inverse_t``) or 1 (``correct``) for a correct
    circuit, 0 otherwise.

    >>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
    >>> h = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];'
    >>> SparseReward(RubricRewards(), "inverse_t")(completions=[h, "no circuit"], target=[spec, spec])
    [1.0, 0.0]
    """

    def __init__(self, rewards: RubricRewards, kind: str = "inverse_t") -> None:
        if kind not in SPARSE_KINDS:
            raise ValueError("kind must be 'inverse_t' or 'correct'")
        self.rewards, self.kind = rewards, kind
        self.__name__ = f"sparse_{kind}"

    def __call__(self, prompts=None, completions=None, target=None, log_metric=None, **_: Any) -> list[float]:
        threshold = self.rewards.config.fidelity.correct_threshold
        out = []
        for r in self.rewards.timed_results(
            list(completions or ()), list(target or ()), log_metric, None if prompts is None else list(prompts)
        ):
            ok = is_correct(r, threshold)
            if self.kind == "correct":
                out.append(1.0 if ok else 0.0)
            else:
                out.append(0.0 if not ok or r.t_count is None else (1.0 if r.t_count == 0 else 1.0 / r.t_count))
        return out


def sparse_reward(rewards: RubricRewards, kind: str = "inverse_t") -> SparseReward:
    """:class:`SparseReward` of ``kind`` over ``rewards``' scorer."""
    return SparseReward(rewards, kind)


__all__ = ["SPARSE_KINDS", "SparseReward", "sparse_reward"]
