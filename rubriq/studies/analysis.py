"""What a study computes from scored completions beyond ``evaluation.metrics``: the rewrite gap
to PyZX, the correlation of the rubric's five dimensions with the effective number of dimensions
it implies, and the smallest effect a design can detect.

* **Gap to PyZX** (small rewrite prompts, ``data/rewrites.py``, which record ``t_pyzx``): for a
  correct completion, ``t_gap = T(c) - T_pyzx`` and ``closed = (T0 - T(c)) / (T0 - T_pyzx)``
  clipped to [0, 1] (1: as few T as PyZX, 0: no T saved); a completion that is not correct
  closes 0 of the gap.  ``gap_closed`` is the mean of ``closed`` over every sample (correctness
  and compression in one number), ``reached_pyzx`` the fraction of correct samples with
  T(c) <= T_pyzx.
* **Effective number of dimensions**: the participation ratio of the eigenvalues of the five
  scores' correlation matrix, PR = (sum lambda)^2 / sum lambda^2, from 1 (one direction) to 5
  (uncorrelated).  Dimensions that do not vary in a sample are left out (a constant score has no
  correlation) and named.  For five equicorrelated dimensions with rho = 0.31 (the paper's mean
  pairwise correlation) PR = 25 / ((1 + 4 rho)^2 + 4 (1 - rho)^2) = 3.6; the paper's
  "D_eff ~ 3.2" equals 1 / rho.
* **Minimum detectable effect** of a paired design: with n paired differences of standard
  deviation s, a two-sided 5% test has 80% power against |delta| >= (t_{0.975, n-1} +
  t_{0.8, n-1}) s / sqrt(n).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rubriq.evaluation.metrics import DEFAULT_EPS, _res
from rubriq.evaluation.records import RecordLike
from rubriq.evaluator.result import is_correct
from rubriq.rubric.engine import DIMENSION_NAMES


def rewrite_gap(records: Sequence[RecordLike], t_pyzx: Mapping[str, int], eps: float = DEFAULT_EPS) -> dict:
    """``gap_closed``, ``reached_pyzx``, ``t_gap_pyzx`` (mean T(c) - T_pyzx over correct samples)
    and ``samples`` over the records whose ``prompt_id`` has a recorded ``t_pyzx``.

    >>> ok = {"parsed": True, "average_fidelity": 1.0, "t_count": 3}
    >>> recs = [{"prompt_id": "a", "t0": 7, "result": ok}, {"prompt_id": "a", "t0": 7,
    ...         "result": dict(ok, average_fidelity=0.2, t_count=1)}]
    >>> rewrite_gap(recs, {"a": 1})
    {'gap_closed': 0.3333333333333333, 'reached_pyzx': 0.0, 't_gap_pyzx': 2.0, 'samples': 2}
    """
    closed, gaps, reached = [], [], []
    for r in records:
        pid = str(r.get("prompt_id"))
        if pid not in t_pyzx or r.get("t0") is None:
            continue
        res, t0, best = _res(r), int(r["t0"]), int(t_pyzx[pid])
        if not is_correct(res, 1 - eps) or res.get("t_count") is None:
            closed.append(0.0)
            continue
        t = int(res["t_count"])
        gaps.append(t - best)
        reached.append(1.0 if t <= best else 0.0)
        closed.append(1.0 if t0 <= best else min(1.0, max(0.0, (t0 - t) / (t0 - best))))
    return {
        "gap_closed": statistics.fmean(closed) if closed else None,
        "reached_pyzx": statistics.fmean(reached) if reached else None,
        "t_gap_pyzx": statistics.fmean(gaps) if gaps else None,
        "samples": len(closed),
    }


def dimension_correlation(scores: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """Pearson correlation matrix of the five rubric dimensions over ``scores`` (one mapping of
    dimension -> score per completion), its mean off-diagonal entry, the participation ratio
    (module docstring) and which dimensions were constant (left out).

    >>> import random
    >>> rng = random.Random(0)
    >>> rows = [{d: rng.random() for d in DIMENSION_NAMES} for _ in range(400)]
    >>> out = dimension_correlation(rows)
    >>> out["effective_dimensions"] > 4.8, abs(out["mean_correlation"]) < 0.1   # independent: PR near 5
    (True, True)
    >>> same = [{d: x for d in DIMENSION_NAMES} for x in (0.1, 0.5, 0.9)]
    >>> dimension_correlation(same)["effective_dimensions"]
    1.0
    """
    import numpy as np

    def no_correlation(constant: list[str]) -> dict[str, Any]:
        """Too few scores, or no dimension that varies: no matrix to report."""
        return {
            "n": len(scores),
            "dimensions": [],
            "matrix": [],
            "mean_correlation": None,
            "effective_dimensions": None,
            "constant": constant,
        }

    if len(scores) < 3:
        return no_correlation([])
    data = np.array([[float(s.get(d, 0.0)) for d in DIMENSION_NAMES] for s in scores])
    varying = [i for i in range(len(DIMENSION_NAMES)) if float(np.std(data[:, i])) > 1e-12]
    constant = [DIMENSION_NAMES[i] for i in range(len(DIMENSION_NAMES)) if i not in varying]
    if not varying:
        return no_correlation(constant)
    corr = np.atleast_2d(np.corrcoef(data[:, varying], rowvar=False))
    eig = np.clip(np.linalg.eigvalsh(corr), 0.0, None)
    k = len(varying)
    off = [corr[i, j] for i in range(k) for j in range(k) if i < j]
    return {
        "n": len(scores),
        "dimensions": [DIMENSION_NAMES[i] for i in varying],
        "matrix": [[round(float(x), 4) for x in row] for row in corr],
        "mean_correlation": float(np.mean(off)) if off else None,
        "effective_dimensions": float(eig.sum() ** 2 / (eig**2).sum()),
        "constant": constant,
    }


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile (scipy).

    >>> round(t_quantile(0.975, 2), 3)
    4.303
    """
    from scipy.stats import t

    return float(t.ppf(p, df))


def minimum_detectable_effect(differences: Sequence[float | None], power: float = 0.8) -> float | None:
    """Smallest |mean difference| a two-sided 5% paired t-test detects with ``power`` (module
    docstring), from the observed paired differences; None for fewer than 2.

    By hand: s = 0.1, n = 3, t_{0.975, 2} = 4.303, t_{0.8, 2} = 1.061: 5.364 * 0.1 / sqrt(3) = 0.3097.

    >>> round(minimum_detectable_effect([0.1, 0.0, 0.2]), 4)
    0.3097
    """
    values = [float(v) for v in differences if v is not None and math.isfinite(v)]
    if len(values) < 2:
        return None
    n = len(values)
    return (t_quantile(0.975, n - 1) + t_quantile(power, n - 1)) * statistics.stdev(values) / math.sqrt(n)


def family_of_spec(spec: str) -> str:
    """``rewrite`` for a circuit target, else the target's algorithm name (from the JSON spec)."""
    import json

    try:
        name = json.loads(spec).get("algorithm", "?")
    except (ValueError, AttributeError):
        return "?"
    return "rewrite" if name == "circuit" else str(name)


def paired_change(
    before: Sequence[RecordLike], after: Sequence[RecordLike], t_pyzx: Mapping[str, int], eps: float = DEFAULT_EPS
) -> dict[str, tuple[float | None, float | None, float | None]]:
    """One policy against another on the same prompts (e.g. an arm-seed's final step against its
    step 0): the mean over shared prompts of (per-prompt mean after - before) of ``correct``,
    ``reward`` and ``gap_closed`` (over the prompts with a recorded ``t_pyzx``), each with its 95%
    t-interval over prompts (samples of one prompt are not independent, prompts are). This is
    what one seed can say; intervals over seeds are ``aggregate``'s.

    >>> ok = {"parsed": True, "average_fidelity": 1.0, "t_count": 1, "reward": 0.9}
    >>> bad = {"parsed": True, "average_fidelity": 0.2, "t_count": 1, "reward": 0.3}
    >>> rec = lambda p, r: {"prompt_id": p, "t0": 3, "result": r}
    >>> out = paired_change([rec("a", bad), rec("b", ok)], [rec("a", ok), rec("b", ok)], {"a": 1, "b": 1})
    >>> [round(v, 3) for v in out["correct"]], [round(v, 3) for v in out["gap_closed"]]
    ([0.5, -5.853, 6.853], [0.5, -5.853, 6.853])
    """
    from rubriq.evaluation.metrics import mean_ci, paired_prompt_difference

    def gap_by_prompt(records: Sequence[RecordLike]) -> dict[str, float]:
        groups: dict[str, list[RecordLike]] = {}
        for r in records:
            if str(r.get("prompt_id")) in t_pyzx:
                groups.setdefault(str(r.get("prompt_id")), []).append(r)
        return {p: rewrite_gap(g, t_pyzx, eps)["gap_closed"] for p, g in groups.items()}

    b, a = gap_by_prompt(before), gap_by_prompt(after)
    return {
        "correct": paired_prompt_difference(before, after, "correct", eps),
        "reward": paired_prompt_difference(before, after, "reward", eps),
        "gap_closed": mean_ci([a[p] - b[p] for p in a if p in b and a[p] is not None and b[p] is not None]),
    }


def _statements(qasm: str) -> list[str]:
    skip = ("OPENQASM", "include", "qreg", "creg", "//", "```")
    return ["".join(line.split()) for line in qasm.splitlines() if line.strip() and not line.strip().startswith(skip)]


def rewrite_copies(records: Sequence[RecordLike], eps: float = DEFAULT_EPS) -> dict[str, int]:
    r"""Of the correct completions of rewrite prompts (a ``circuit`` target): how many are the input
    circuit verbatim (the same gate statements in the same order, whitespace and header aside: a
    textual test, so a copy with commuting gates reordered does not count) and how many have
    fewer T than the input. Copying is always correct and never compresses.

    >>> spec = '{"algorithm": "circuit", "qasm": "OPENQASM 2.0;\\nqreg q[1];\\nt q[0];\\nt q[0];\\n"}'
    >>> ok = lambda t: {"parsed": True, "average_fidelity": 1.0, "t_count": t}
    >>> recs = [{"target": spec, "t0": 2, "text": "```qasm\nqreg q[1];\nt q[0];\nt  q[0];\n```", "result": ok(2)},
    ...         {"target": spec, "t0": 2, "text": "qreg q[1];\ns q[0];", "result": ok(0)}]
    >>> rewrite_copies(recs)
    {'correct': 2, 'copies': 1, 'fewer_t': 1}
    """
    import json

    out = {"correct": 0, "copies": 0, "fewer_t": 0}
    for r in records:
        try:
            target = json.loads(str(r.get("target")))
        except ValueError:
            continue
        res = _res(r)
        if not isinstance(target, dict) or target.get("algorithm") != "circuit" or not is_correct(res, 1 - eps):
            continue
        out["correct"] += 1
        out["copies"] += _statements(str(r.get("text") or "")) == _statements(str(target.get("qasm") or ""))
        t, t0 = res.get("t_count"), r.get("t0")
        out["fewer_t"] += t is not None and t0 is not None and int(t) < int(t0)
    return out


def rewrite_outcome(record: RecordLike, eps: float = DEFAULT_EPS) -> str | None:
    r"""What one sample of a rewrite prompt (a ``circuit`` target) did: ``reduction`` (correct with
    T < T0), ``copy`` (correct and the input verbatim, as :func:`rewrite_copies` reads it),
    ``other_correct`` (correct, neither), ``wrong`` (not correct, unparsed included); None for a
    sample of another target.

    >>> spec = '{"algorithm": "circuit", "qasm": "qreg q[1];\\nt q[0];\\nt q[0];\\n"}'
    >>> ok = lambda f, t: {"parsed": True, "average_fidelity": f, "t_count": t}
    >>> [rewrite_outcome({"target": spec, "t0": 2, "text": text, "result": res}) for text, res in
    ...  [("qreg q[1];\nt q[0];\nt q[0];", ok(1.0, 2)), ("qreg q[1];\ns q[0];", ok(1.0, 0)),
    ...   ("qreg q[1];", ok(0.5, 0)), ("qreg q[1];\nt q[0];\nz q[0];\ntdg q[0];", ok(1.0, 2))]]
    ['copy', 'reduction', 'wrong', 'other_correct']
    """
    if family_of_spec(str(record.get("target") or "")) != "rewrite":
        return None
    counts = rewrite_copies([record], eps)
    if not counts["correct"]:
        return "wrong"
    return "reduction" if counts["fewer_t"] else "copy" if counts["copies"] else "other_correct"


def rewrite_outcomes(records: Sequence[RecordLike], eps: float = DEFAULT_EPS) -> dict[str, Any]:
    r"""What the samples of rewrite prompts (a ``circuit`` target) did, as fractions of those
    samples: ``correct_reduction_rate`` (correct with T < T0), ``copy_rate`` (correct and the
    input verbatim, :func:`rewrite_copies`), ``wrong_rate`` (not correct, unparseable included)
    and ``other_correct_rate`` (correct, neither: the input reordered, or T >= T0); ``samples``
    counts them (rates are None without any).

    >>> spec = '{"algorithm": "circuit", "qasm": "OPENQASM 2.0;\\nqreg q[1];\\nt q[0];\\nt q[0];\\n"}'
    >>> res = lambda f, t: {"parsed": True, "average_fidelity": f, "t_count": t}
    >>> recs = [{"target": spec, "t0": 2, "text": "qreg q[1];\nt q[0];\nt q[0];", "result": res(1.0, 2)},
    ...         {"target": spec, "t0": 2, "text": "qreg q[1];\ns q[0];", "result": res(1.0, 0)},
    ...         {"target": spec, "t0": 2, "text": "qreg q[1];", "result": res(0.5, 0)},
    ...         {"target": spec, "t0": 2, "text": "", "result": {"parsed": False}},
    ...         {"target": '{"algorithm": "qft"}', "t0": 0, "text": "", "result": {"parsed": False}}]
    >>> rewrite_outcomes(recs)
    {'samples': 4, 'correct_reduction_rate': 0.25, 'copy_rate': 0.25, 'wrong_rate': 0.5, 'other_correct_rate': 0.0}
    """
    rewrites = [r for r in records if family_of_spec(str(r.get("target") or "")) == "rewrite"]
    n = len(rewrites)
    counts = rewrite_copies(rewrites, eps)
    if not n:
        return {
            "samples": 0,
            "correct_reduction_rate": None,
            "copy_rate": None,
            "wrong_rate": None,
            "other_correct_rate": None,
        }
    return {
        "samples": n,
        "correct_reduction_rate": counts["fewer_t"] / n,
        "copy_rate": counts["copies"] / n,
        "wrong_rate": (n - counts["correct"]) / n,
        "other_correct_rate": (counts["correct"] - counts["copies"] - counts["fewer_t"]) / n,
    }


__all__ = [
    "dimension_correlation",
    "family_of_spec",
    "minimum_detectable_effect",
    "paired_change",
    "rewrite_copies",
    "rewrite_gap",
    "rewrite_outcome",
    "rewrite_outcomes",
    "t_quantile",
]
