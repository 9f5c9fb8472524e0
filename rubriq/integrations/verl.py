"""The RubriQ reward for verl: a ``custom_reward_function`` with verl's documented signature.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)``
per response (the default reward loop, ``reward.reward_manager.name=naive``) and, with the batch
reward manager (``reward_model.reward_manager=batch``), ``compute_score_batch(data_sources,
solution_strs, ground_truths, extra_infos, **kwargs)`` once per batch.  The ground truth is the
target spec of ``rubriq data build`` (a dataset row's ``target`` column, stored as
``reward_model.ground_truth``).  Both return, per response, a dict with ``score`` (the rubric
reward R) and one key per dimension; verl takes ``score`` as the reward and collects the other
keys into ``reward_extra_info`` (logged next to it).  Every value is a float, in every row,
success or not (verl stacks them into arrays):

``score``, ``clifford``, ``tcount``, ``hardware``, ``fidelity``, ``efficiency`` (the five
scores), ``acc`` (1 if functionally correct, else 0: verl's validation reports ``acc``),
``parsed`` (1 if a circuit was extracted).

Scoring is in-process by default; set ``RUBRIQ_URL`` (or ``+reward.custom_reward_function.
reward_kwargs.url=...``) to score through ``rubriq serve``.  docs/integrations.md has the config.

>>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
>>> out = compute_score("rubriq", 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];', spec)
>>> round(out["fidelity"], 12), out["acc"], sorted(out)
(1.0, 1.0, ['acc', 'clifford', 'efficiency', 'fidelity', 'hardware', 'parsed', 'score', 'tcount'])
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
) -> dict[str, float]:
    """The rubric's score of one response (``data_source`` and ``extra_info`` are not needed:
    the target is the ground truth); ``url`` / ``api_key`` / ``config`` from verl's
    ``reward_kwargs`` or the environment."""
    _check(kwargs)
    (result,) = backend(url, api_key, config).score([solution_str], [target_of(ground_truth)])
    return row(result)


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
) -> list[dict[str, float]]:
    """:func:`compute_score` of every response of a batch, in one scoring call (the batch
    reward manager's signature)."""
    _check(kwargs)
    solutions = list(solution_strs)
    targets = [target_of(g) for g in ground_truths]
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


def row(result: dict[str, Any]) -> dict[str, float]:
    """verl's dict of one result: ``score`` = R, the five scores, ``acc``, ``parsed``."""
    out = {"score": float(result["reward"])}
    out.update({name: float(result["scores"][name]) for name in DIMENSION_NAMES})
    out["acc"] = 1.0 if result.get("correct") else 0.0
    out["parsed"] = 1.0 if result.get("parsed") else 0.0
    return out


_WARNED: set[str] = set()


def _check(kwargs: dict) -> None:
    """Keyword arguments RubriQ does not use are ignored (verl adds its own over time), said once."""
    unknown = sorted(set(kwargs) - set(_VERL_KWARGS) - _WARNED)
    if unknown:
        _WARNED.update(unknown)
        log.warning("RubriQ's compute_score ignores reward_kwargs %s (it takes url, api_key, config)", unknown)
