"""The paper's metrics over scored completions (definitions: docs/metrics.md).

A *record* is one scored completion: a mapping with ``result`` (``EvaluationResult.to_dict()``
or the result itself), ``t0`` (the target's reference T-count, None if unknown) and optionally
``prompt_id``, ``family``, ``bucket``.  Every function here is pure and works on lists of
records, so a report can be recomputed from saved JSONL without sampling again.

* correct: F_avg >= 1 - eps (eps = 0.01 by default, the paper's F_avg >= 0.99);
* C (T-gate compression) = T0 / T(c), averaged ONLY over correct circuits with T0 > 0 and
  T(c) > 0; a correct circuit with T(c) = 0 < T0 has unbounded compression: it is counted in
  ``t_zero`` and never averaged in; the fraction of correct circuits is always reported next
  to C;
* MNTC = mean T(c) / T0 over correct circuits with T0 > 0 (T(c) = 0 counts as 0);
* V (violation rate): fraction of parsed circuits that break the qubit or depth limit of the
  best backend of the hardware dimension (connectivity is repaired by inserted SWAPs, which
  the routing term scores; a circuit wider than every backend is a violation);
* pass@k: the unbiased estimator 1 - C(n - c, k) / C(n, k) per prompt (n samples, c correct),
  averaged over prompts;
* wrong_rewarded_rate: fraction of completions that are not correct yet score at least the
  lowest reward of a correct completion of the same prompt (prompts without a correct
  completion contribute no such case): how often the reward pays a wrong circuit like a right one;
* trivial_rate: fraction of completions that are parsed, not correct, and empty or
  Clifford-only (S_C = 1: identity, Paulis, H/S/CX...), the cheap outputs an exploiting policy
  drifts to.

>>> ok = {"parsed": True, "average_fidelity": 1.0, "t_count": 2, "reward": 0.9,
...       "best_backend": "b", "hardware": {"b": {"fits_qubits": True, "fits_depth": True}}}
>>> wrong = dict(ok, average_fidelity=0.3, t_count=1)
>>> s = summarize([{"result": ok, "t0": 8}, {"result": wrong, "t0": 8}])
>>> s["correct_rate"], s["compression"], s["mntc"], s["violation_rate"]
(0.5, 4.0, 0.25, 0.0)
>>> cheap = dict(ok, average_fidelity=0.1, t_count=0, reward=0.95, num_gates=0)
>>> s = summarize([{"result": ok, "prompt_id": "a"}, {"result": cheap, "prompt_id": "a"},
...                {"result": cheap, "prompt_id": "b"}])
>>> s["wrong_rewarded_rate"], s["trivial_rate"]   # "b" has no correct completion to compare with
(0.3333333333333333, 0.6666666666666666)
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from rubriq.evaluation.records import RecordLike
from rubriq.evaluator.result import is_correct
from rubriq.rubric.engine import DIMENSION_NAMES
from rubriq.rubric.tcount import compression
from rubriq.sim.measures import CORRECT_EPS as DEFAULT_EPS  # 0.01: correct = F_avg >= 1 - eps


def _res(record: RecordLike) -> Mapping[str, Any]:
    r = record.get("result", record)
    return r.to_dict() if hasattr(r, "to_dict") else r


def is_trivial(result: Mapping[str, Any], eps: float = DEFAULT_EPS) -> bool:
    """Parsed, not correct, and empty or Clifford-only (S_C = 1)."""
    if not result.get("parsed") or result.get("error_type") is not None or is_correct(result, 1 - eps):
        return False
    return not result.get("num_gates") or float((result.get("scores") or {}).get("clifford", 0.0)) >= 1.0


def wrong_rewarded(results: list[Mapping[str, Any]], groups: list[Any], eps: float = DEFAULT_EPS) -> int:
    """How many of ``results`` are not correct yet score at least the lowest reward of a correct
    result in the same group (a group = the completions of one prompt)."""
    if len(results) != len(groups):
        raise ValueError(f"{len(results)} results but {len(groups)} group keys")
    by_group: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r, g in zip(results, groups, strict=True):
        by_group[g].append(r)
    count = 0
    for members in by_group.values():
        floor = min((float(r.get("reward") or 0.0) for r in members if is_correct(r, 1 - eps)), default=None)
        if floor is not None:
            count += sum(1 for r in members if not is_correct(r, 1 - eps) and float(r.get("reward") or 0.0) >= floor)
    return count


def violates(result: Mapping[str, Any]) -> bool | None:
    """True if the parsed circuit breaks the qubit or depth limit of its best backend; None if
    the completion has no scored circuit."""
    best = result.get("best_backend")
    fit = (result.get("hardware") or {}).get(best) if best else None
    if not result.get("parsed") or fit is None:
        return None
    return not (fit.get("fits_qubits") and fit.get("fits_depth"))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with n samples of which c are correct.

    >>> pass_at_k(4, 0, 1), pass_at_k(4, 4, 1), pass_at_k(4, 1, 1), round(pass_at_k(4, 1, 2), 6)
    (0.0, 1.0, 0.25, 0.5)
    """
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per prompt, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize(records: Iterable[RecordLike], eps: float = DEFAULT_EPS, ks: tuple[int, ...] = (1,)) -> dict[str, Any]:
    """All metrics of docs/metrics.md over ``records`` (see the module docstring)."""
    records = list(records)
    results = [_res(r) for r in records]
    n = len(results)
    if n == 0:
        return {"completions": 0}
    parsed = [r for r in results if r.get("parsed")]
    correct = [is_correct(r, 1 - eps) for r in results]
    comp, mntc, t_zero = [], [], 0
    for rec, res, ok in zip(records, results, correct, strict=True):
        t0, t = rec.get("t0"), res.get("t_count")
        if not ok or t0 is None or t is None or t0 <= 0:
            continue
        mntc.append(t / t0)
        c = compression(t0, t)
        if c is not None and math.isinf(c):
            t_zero += 1
        elif c is not None:
            comp.append(c)
    viol = [v for v in (violates(r) for r in results) if v is not None]
    fid = [r["average_fidelity"] for r in parsed if r.get("average_fidelity") is not None]
    tcounts = [r["t_count"] for r in parsed if r.get("t_count") is not None]
    out: dict[str, Any] = {
        "completions": n,
        "parse_rate": len(parsed) / n,
        "strategies": dict(Counter(r.get("strategy") or "none" for r in results)),
        "errors": dict(Counter(r["error_type"] for r in results if r.get("error_type"))),
        "mean_fidelity": _mean(fid),
        "correct_rate": sum(correct) / n,
        "compression": _mean(comp),
        "compression_circuits": len(comp),
        "t_zero": t_zero,
        "mntc": _mean(mntc),
        "mean_t_count": _mean(tcounts),
        "violation_rate": _mean([float(v) for v in viol]),
        "mean_reward": statistics.fmean(float(r.get("reward") or 0.0) for r in results),
        "wrong_rewarded_rate": wrong_rewarded(results, [rec.get("prompt_id", i) for i, rec in enumerate(records)], eps)
        / n,
        "trivial_rate": sum(is_trivial(r, eps) for r in results) / n,
        "dimensions": {
            d: statistics.fmean(float((r.get("scores") or {}).get(d, 0.0)) for r in results) for d in DIMENSION_NAMES
        },
    }
    by_prompt: dict[Any, list[bool]] = defaultdict(list)
    for i, (rec, ok) in enumerate(zip(records, correct, strict=True)):
        by_prompt[rec.get("prompt_id", i)].append(ok)
    for k in ks:
        if all(len(v) >= k for v in by_prompt.values()):
            out[f"pass@{k}"] = statistics.fmean(pass_at_k(len(v), sum(v), k) for v in by_prompt.values())
    return out


def summarize_by(
    records: Iterable[RecordLike], key: str, eps: float = DEFAULT_EPS, ks: tuple[int, ...] = (1,)
) -> dict[str, dict[str, Any]]:
    """:func:`summarize` per value of ``record[key]`` (family, dataset, bucket ...)."""
    groups: dict[str, list] = defaultdict(list)
    for r in records:
        groups[str(r.get(key))].append(r)
    return {g: summarize(rs, eps, ks) for g, rs in sorted(groups.items())}


def mean_ci(values: Iterable[float | None], level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """Mean and two-sided Student-t interval (over seeds, or over prompts); None values are
    dropped; for one value the interval is that value.

    >>> m, lo, hi = mean_ci([0.2, 0.4, 0.6])
    >>> round(m, 3), round(lo, 3), round(hi, 3)      # t(0.975, 2) = 4.303, s/sqrt(3) = 0.115
    (0.4, -0.097, 0.897)
    """
    from scipy import stats

    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None, None, None
    m = statistics.fmean(finite)
    if len(finite) == 1:
        return m, m, m
    half = float(stats.t.ppf(0.5 + level / 2, len(finite) - 1)) * statistics.stdev(finite) / math.sqrt(len(finite))
    return m, m - half, m + half


def per_prompt_ci(
    records: Iterable[RecordLike], metric: str = "correct", eps: float = DEFAULT_EPS, level: float = 0.95
) -> tuple[float | None, float | None, float | None]:
    """Mean over prompts of the per-prompt mean of ``metric`` (``correct`` or ``reward``) with a
    t-interval over prompts: samples of one prompt are not independent, prompts are.

    >>> ok = {"parsed": True, "average_fidelity": 1.0, "reward": 0.9}
    >>> bad = {"parsed": True, "average_fidelity": 0.2, "reward": 0.5}
    >>> recs = [{"prompt_id": p, "result": r} for p, r in [("a", ok), ("a", bad), ("b", ok), ("b", ok)]]
    >>> per_prompt_ci(recs)[0], per_prompt_ci(recs, "reward")[0]
    (0.75, 0.8)
    """
    return mean_ci(list(_prompt_means(records, metric, eps).values()), level)


def _prompt_means(records: Iterable[RecordLike], metric: str, eps: float) -> dict[Any, float]:
    """Per-prompt mean of ``correct`` (0/1) or of a numeric result field such as ``reward``."""
    if metric not in ("correct", "reward"):
        raise ValueError(f"metric must be 'correct' or 'reward', got {metric!r}")
    groups: dict[Any, list[float]] = defaultdict(list)
    for i, rec in enumerate(records):
        res = _res(rec)
        groups[rec.get("prompt_id", i)].append(
            float(is_correct(res, 1 - eps)) if metric == "correct" else float(res.get(metric) or 0.0)
        )
    return {k: statistics.fmean(v) for k, v in groups.items()}


def paired_prompt_difference(
    before: Iterable[RecordLike],
    after: Iterable[RecordLike],
    metric: str = "correct",
    eps: float = DEFAULT_EPS,
    level: float = 0.95,
) -> tuple[float | None, float | None, float | None]:
    """Mean over the prompts both phases share of (per-prompt mean after - before) of ``metric``
    (``correct`` or ``reward``), with its t-interval over prompts.

    >>> ok = {"parsed": True, "average_fidelity": 1.0, "reward": 0.9}
    >>> bad = {"parsed": True, "average_fidelity": 0.2, "reward": 0.5}
    >>> b = [{"prompt_id": "a", "result": bad}, {"prompt_id": "b", "result": ok}]
    >>> a = [{"prompt_id": "a", "result": ok}, {"prompt_id": "b", "result": ok}]
    >>> [round(v, 3) for v in paired_prompt_difference(b, a)]   # t(0.975, 1) = 12.706, s/sqrt(2) = 0.5
    [0.5, -5.853, 6.853]
    """
    b, a = _prompt_means(before, metric, eps), _prompt_means(after, metric, eps)
    return mean_ci([a[k] - b[k] for k in a if k in b], level)


def batch_metrics(
    results: list, t0s: list[int | None], eps: float = DEFAULT_EPS, groups: list[Any] | None = None
) -> dict[str, float]:
    """The per-step training metrics (flat floats; NaN where undefined, which TRL skips).

    ``groups``: one key per result naming its prompt (GRPO's group), for ``wrong_rewarded_rate``;
    without it every result is its own group and the rate is 0.  ``errors/<type>`` is the
    fraction of results with that error type (``parse``, ``budget``, ...)."""
    groups = list(range(len(results))) if groups is None else list(groups)
    s = summarize(
        [{"result": r, "t0": t0, "prompt_id": g} for r, t0, g in zip(results, t0s, groups, strict=True)], eps, ks=()
    )
    nan = float("nan")
    pick = lambda v: nan if v is None else float(v)  # noqa: E731
    return {
        "parse_rate": s["parse_rate"],
        "correct_rate": s["correct_rate"],
        "mean_fidelity": pick(s["mean_fidelity"]),
        "mean_t_count": pick(s["mean_t_count"]),
        "compression": pick(s["compression"]),
        "violation_rate": pick(s["violation_rate"]),
        "wrong_rewarded_rate": s["wrong_rewarded_rate"],
        "trivial_rate": s["trivial_rate"],
        **{f"errors/{k}": v / s["completions"] for k, v in s["errors"].items()},
    }


__all__ = [
    "DEFAULT_EPS",
    "batch_metrics",
    "is_trivial",
    "mean_ci",
    "paired_prompt_difference",
    "pass_at_k",
    "per_prompt_ci",
    "summarize",
    "summarize_by",
    "violates",
    "wrong_rewarded",
]
