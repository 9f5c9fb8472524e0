"""The paper's metrics on hand-made outputs with known answers."""

import pytest

from rubriq.evaluation.metrics import pass_at_k, summarize, summarize_by, violates
from rubriq.evaluator.result import is_correct


def res(f=1.0, t=2, reward=0.8, parsed=True, fits=True, scores=None):
    return {
        "parsed": parsed,
        "average_fidelity": f if parsed else None,
        "t_count": t if parsed else None,
        "reward": reward if parsed else 0.0,
        "strategy": "direct_qasm" if parsed else None,
        "error_type": None if parsed else "parse",
        "best_backend": "b" if parsed else None,
        "hardware": {"b": {"fits_qubits": True, "fits_depth": fits}} if parsed else {},
        "scores": scores
        or (
            {"clifford": 0.5, "tcount": 0.5, "hardware": 1.0, "fidelity": f, "efficiency": 0.5}
            if parsed
            else dict.fromkeys(("clifford", "tcount", "hardware", "fidelity", "efficiency"), 0.0)
        ),
    }


def test_a_wrong_circuit_with_low_t_count_does_not_raise_compression():
    good = {"result": res(f=1.0, t=4), "t0": 8}
    wrong = {"result": res(f=0.5, t=1), "t0": 8}  # 1 T gate but not the target
    alone = summarize([good])
    both = summarize([good, wrong])
    assert alone["compression"] == both["compression"] == 2.0
    assert both["correct_rate"] == 0.5 and both["mntc"] == 0.5


def test_t_zero_and_t0_zero_conventions():
    zero = {"result": res(t=0), "t0": 8}  # correct with no T: unbounded C, counted apart
    no_t0 = {"result": res(t=3), "t0": 0}  # T0 = 0: compression undefined
    s = summarize([zero, no_t0, {"result": res(t=8), "t0": 8}])
    assert s["compression"] == 1.0 and s["compression_circuits"] == 1 and s["t_zero"] == 1
    assert s["mntc"] == pytest.approx((0 / 8 + 8 / 8) / 2)


def test_parse_rate_violations_strategy_mix_and_dimension_means():
    recs = [{"result": res()}, {"result": res(fits=False)}, {"result": res(parsed=False)}, {"result": res()}]
    s = summarize(recs)
    assert s["parse_rate"] == 0.75 and s["violation_rate"] == pytest.approx(1 / 3)
    assert s["strategies"] == {"direct_qasm": 3, "none": 1} and s["errors"] == {"parse": 1}
    assert s["dimensions"]["hardware"] == 0.75  # failures count 0
    assert s["mean_reward"] == pytest.approx(0.6)
    assert violates(res(parsed=False)) is None and is_correct(res(f=0.989)) is False
    assert is_correct(res(f=0.989), threshold=0.98) is True


def test_pass_at_k_per_prompt():
    recs = [{"prompt_id": "a", "result": res(f=f)} for f in (1.0, 0.2, 0.2, 0.2)] + [
        {"prompt_id": "b", "result": res(f=0.1)} for _ in range(4)
    ]
    s = summarize(recs, ks=(1, 2))
    assert s["pass@1"] == pytest.approx((0.25 + 0.0) / 2)
    assert s["pass@2"] == pytest.approx((1 - 3 / 6 + 0.0) / 2)  # 1 - C(3,2)/C(4,2) = 0.5
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_grouping_by_family():
    recs = [{"family": "qft", "result": res(), "t0": 4}, {"family": "qpe", "result": res(f=0.1), "t0": 4}]
    by = summarize_by(recs, "family")
    assert by["qft"]["correct_rate"] == 1.0 and by["qpe"]["correct_rate"] == 0.0
