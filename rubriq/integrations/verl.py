"""The RubriQ reward for verl: reward functions with verl's signatures, for every verl reward
manager (docs/integrations.md has each verl generation's config lines).

- :func:`compute_score` ``(data_source, solution_str, ground_truth, extra_info=None, **kwargs)``:
  one response (verl's naive, dapo, gdpo, rate_limited managers; ``main_ppo`` of every release).
- :func:`compute_score_batch` ``(data_sources, solution_strs, ground_truths, extra_infos,
  **kwargs)``: a whole batch in one scoring call (``BatchRewardManager``, verl <= 0.6, which
  registers ``reward_model.reward_manager=batch``).  From verl 0.7 on, the reward loop calls the
  reward per response; :class:`rubriq.integrations.verl_manager.RubriQRewardManager` scores its
  concurrent responses in batches there.
- :func:`compute_score_float` ``(...)``: R alone, for code that averages or casts the answer
  (``main_eval``'s ``np.mean``).

The ground truth is the target spec of ``rubriq data build`` (a dataset row's ``target`` column,
stored as ``reward_model.ground_truth`` by :func:`to_verl_row`).  :func:`compute_score` and
:func:`compute_score_batch` return, per response, a dict (:class:`VerlScores`) with ``score`` (the
rubric reward R) and one key per dimension; verl takes ``score`` as the reward and collects the
other keys into ``reward_extra_info`` (logged next to it).  Every value is a float, in every row,
success or not (verl stacks them into arrays):

``score``, ``clifford``, ``tcount``, ``hardware``, ``fidelity``, ``efficiency`` (the five
scores), ``acc`` (1 if functionally correct, else 0: verl's validation reports ``acc``),
``parsed`` (1 if a circuit was extracted).

A manager that wants a number gets R from the same dict: ``float(scores)``, and ``scores[0]``
(``PrimeRewardManager`` reads ``result[0]`` of whatever is not a number, and sets every reward of
the batch to 0 when that fails).

Scoring is in-process by default; set ``RUBRIQ_URL`` (or ``+reward.custom_reward_function.
reward_kwargs.url=...``) to score through ``rubriq serve``.  A malformed ground truth raises a
ValueError that names ``reward_model.ground_truth``.

>>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
>>> out = compute_score("rubriq", 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];', spec)
>>> round(out["fidelity"], 12), out["acc"], sorted(out)
(1.0, 1.0, ['acc', 'clifford', 'efficiency', 'fidelity', 'hardware', 'parsed', 'score', 'tcount'])
>>> out[0] == float(out) == out["score"], compute_score_float("rubriq", "no circuit", spec)
(True, 0.0)
"""

from __future__ import annotations

import logging
from typing import Any

from rubriq.integrations.backend import backend, target_of
from rubriq.rubric.engine import DIMENSION_NAMES

log = logging.getLogger(__name__)

KEYS = ("score", *DIMENSION_NAMES, "acc", "parsed")
"""The keys of every dict the functions return."""

# keyword arguments verl itself may add (the reward loop's reward-model router); not ours
_VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    config: str | None = None,
    **kwargs: Any,
) -> VerlScores:
    """The rubric's score of one response (``data_source`` and ``extra_info`` are not needed:
    the target is the ground truth); ``url`` / ``api_key`` / ``config`` from verl's
    ``reward_kwargs`` or the environment."""
    _check(kwargs)
    (result,) = backend(url, api_key, config).score([solution_str], [ground_truth_spec(ground_truth)])
    return row(result)


def compute_score_float(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    **kwargs: Any,
) -> float:
    """R of one response, a plain float (the arguments and options of :func:`compute_score`)."""
    return float(compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs))


def compute_score_batch(
    data_sources: Any,
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list | None = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    config: str | None = None,
    **kwargs: Any,
) -> list[VerlScores]:
    """:func:`compute_score` of every response of a batch, in one scoring call (the batch
    reward manager's signature)."""
    _check(kwargs)
    solutions = list(solution_strs)
    targets = [ground_truth_spec(g) for g in ground_truths]
    if len(targets) != len(solutions):
        raise ValueError(f"{len(solutions)} solution_strs but {len(targets)} ground_truths")
    return [row(r) for r in backend(url, api_key, config).score(solutions, targets)]


def to_verl_row(row: dict[str, Any], data_source: str = "rubriq") -> dict[str, Any]:
    """A ``rubriq data build`` row as verl's RL dataset expects it: ``data_source``, ``prompt``
    (chat messages), ``ability``, ``reward_model`` (``style: rule``, the target spec as
    ``ground_truth``) and ``extra_info`` (id, T0, format).

    >>> r = to_verl_row({"id": "qft-2-0-qasm2", "prompt": [{"role": "user", "content": "QFT"}],
    ...                  "target": '{"algorithm": "qft", "num_qubits": 2}', "t0": 3, "format": "qasm2"})
    >>> r["reward_model"], r["extra_info"]["t0"]
    ({'style': 'rule', 'ground_truth': '{"algorithm": "qft", "num_qubits": 2}'}, 3)
    """
    return {
        "data_source": data_source,
        "prompt": row["prompt"],
        "ability": "quantum_circuit_synthesis",
        "reward_model": {"style": "rule", "ground_truth": row["target"]},
        "extra_info": {"id": row.get("id"), "t0": row.get("t0"), "format": row.get("format")},
    }


class VerlScores(dict):
    """verl's dict of one result (the :data:`KEYS`), which gives R to code that wants a number:
    ``float(scores)`` and ``scores[0]`` are ``scores["score"]``."""

    def __getitem__(self, key: Any) -> float:
        return super().__getitem__("score" if key == 0 and not isinstance(key, (str, bool)) else key)

    def __float__(self) -> float:
        return float(super().__getitem__("score"))


def row(result: dict[str, Any]) -> VerlScores:
    """verl's dict of one result: ``score`` = R, the five scores, ``acc``, ``parsed``."""
    out = VerlScores(score=float(result["reward"]))
    out.update({name: float(result["scores"][name]) for name in DIMENSION_NAMES})
    out["acc"] = 1.0 if result.get("correct") else 0.0
    out["parsed"] = 1.0 if result.get("parsed") else 0.0
    return out


def ground_truth_spec(ground_truth: Any) -> str | dict:
    """The target spec of a row's ``reward_model.ground_truth`` (:func:`~rubriq.integrations.backend.target_of`)."""
    try:
        return target_of(ground_truth)
    except ValueError as exc:
        raise ValueError(
            f"reward_model.ground_truth: {exc} (rubriq.integrations.verl.to_verl_row puts it there)"
        ) from None


_WARNED: set[str] = set()


def _check(kwargs: dict) -> None:
    """Keyword arguments RubriQ does not use are ignored (verl adds its own over time), said once."""
    unknown = sorted(set(kwargs) - set(_VERL_KWARGS) - _WARNED)
    if unknown:
        _WARNED.update(unknown)
        log.warning("RubriQ's compute_score ignores reward_kwargs %s (it takes url, api_key, config)", unknown)


__all__ = [
    "KEYS",
    "VerlScores",
    "compute_score",
    "compute_score_batch",
    "compute_score_float",
    "ground_truth_spec",
    "row",
    "to_verl_row",
]

if __name__ != "rubriq.integrations.verl":
    # Loaded from its file path (custom_reward_function.path=/.../rubriq/integrations/verl.py, as
    # verl <= 0.6 requires): verl takes the package's own functions, which pickle by reference
    # (PrimeRewardManager sends compute_score to a process pool; a copy named custom_module_<hash>
    # cannot be unpickled there).
    from rubriq.integrations.verl import *  # noqa: F403
