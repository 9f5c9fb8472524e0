"""The rubric as TRL reward functions: R as the engine computes it (one definition), each
dimension beside it, zero for parse failures, one evaluation per completion across all the
functions, targets from the dataset column."""

import json
import math

import pytest

from rubriq.config import RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.reward import RubricRewards, completion_text, sparse_reward

QFT1 = json.dumps({"algorithm": "qft", "num_qubits": 1, "inverse": False, "do_swaps": True}, sort_keys=True)
QFT2 = json.dumps({"algorithm": "qft", "num_qubits": 2, "inverse": False, "do_swaps": True}, sort_keys=True)
BASIS = json.dumps({"algorithm": "basis_encoding", "num_qubits": 2, "value": 3}, sort_keys=True)
H1 = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];'
GOOD_QFT2 = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; h q[1]; cp(pi/2) q[1],q[0]; h q[0]; swap q[0],q[1];'
GOOD_BASIS = '```qasm\nOPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nx q[0];\nx q[1];\n```'


def test_trl_gets_the_engines_reward_and_the_dimensions_beside_it():
    rewards = RubricRewards()
    completions = [GOOD_QFT2, "garbage", GOOD_BASIS, GOOD_QFT2]
    targets = [QFT2, QFT2, BASIS, QFT2]
    values = {f.__name__: f(prompts=["p"] * 4, completions=completions, target=targets) for f in rewards.functions()}
    assert list(values) == ["total", "clifford", "tcount", "hardware", "fidelity", "efficiency"]
    assert rewards.weights() == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # TRL's reward is R itself
    assert rewards.stats["evaluated"] == 3  # 3 distinct (target, text) pairs, 6 functions
    direct = RubriQEvaluator(target_algorithm="qft", num_qubits=2).evaluate(GOOD_QFT2)
    assert values["total"][0] == direct.reward and values["total"][3] == direct.reward  # the engine's R, exactly
    for name, vals in values.items():
        assert vals[1] == 0.0  # parse failure: zero on every dimension and R
        if name != "total":
            assert vals[0] == direct.scores[name] and vals[3] == vals[0]
    # by hand: the paper's weights (0.2, 0.15, 0.15, 0.4, 0.1) on |11> = X X: every gate Clifford,
    # no T, S_H = 1, F = 1, S_E = exp(-1/8) for its two gates of depth 1
    assert values["fidelity"][2] == pytest.approx(1.0)
    assert values["efficiency"][2] == pytest.approx(math.exp(-1 / 8))
    assert values["total"][2] == pytest.approx(0.2 + 0.15 + 0.15 + 0.4 + 0.1 * math.exp(-1 / 8), abs=1e-12)


def test_reward_of_one_hadamard_by_hand():
    """R of H for QFT-1 = 0.2 S_C + 0.15 S_T + 0.15 S_H + 0.4 S_F + 0.1 S_E with S_C = S_T = 1
    (one Clifford gate, no T), S_H = 0.8, F = 1, S_E = exp(-1/2)."""
    rewards = RubricRewards()
    (r,) = rewards.function("total")(completions=[H1], target=[QFT1])
    assert r == pytest.approx(0.2 + 0.15 + 0.15 * 0.8 + 0.4 + 0.1 * math.exp(-1 / 2), abs=1e-12)
    assert r == RubriQEvaluator(target_algorithm="qft", num_qubits=1).evaluate(H1).reward


def test_conversational_completions_and_missing_target_column():
    rewards = RubricRewards()
    msg = [{"role": "assistant", "content": GOOD_BASIS}]
    assert completion_text(msg) == GOOD_BASIS
    assert rewards.function("fidelity")(completions=[msg], target=[BASIS]) == [pytest.approx(1.0)]
    with pytest.raises(ValueError, match="target"):
        rewards.function("fidelity")(completions=[msg])
    with pytest.raises(ValueError, match="dimension"):
        rewards.function("beauty")


def test_sparse_reward_is_inverse_t_for_correct_circuits_only():
    rewards = RubricRewards()
    sparse = sparse_reward(rewards)
    # QFT-2 textbook: T = 3 (cp(pi/2) -> three pi/4 phases); correct -> 1/3. Garbage -> 0.
    # Basis encoding with X gates: T = 0 -> 1.0.
    assert sparse(completions=[GOOD_QFT2, "garbage", GOOD_BASIS], target=[QFT2, QFT2, BASIS]) == [
        pytest.approx(1 / 3),
        0.0,
        1.0,
    ]
    wrong = GOOD_QFT2.replace("swap q[0],q[1];", "")
    assert sparse_reward(rewards, "correct")(completions=[wrong], target=[QFT2]) == [0.0]


def test_complexity_aware_and_gated_rubrics_hand_trl_the_same_functions():
    for config in ({"complexity": {"enabled": True}}, {"fidelity_gating": "multiplicative"}, {}):
        rewards = RubricRewards(RubricConfig.from_dict(config))
        assert [f.__name__ for f in rewards.functions()][0] == "total"
        assert rewards.weights() == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_total_reports_batch_metrics_through_trl_log_metric():
    rewards = RubricRewards()
    logged: dict[str, list[float]] = {}
    log = lambda name, value: logged.setdefault(name, []).append(value)  # noqa: E731
    completions = [GOOD_QFT2, "garbage", GOOD_BASIS, GOOD_QFT2]
    targets = [QFT2, QFT2, BASIS, QFT2]
    for f in rewards.functions():
        f(prompts=["p"] * 4, completions=completions, target=targets, log_metric=log)
    assert all(len(v) == 1 for v in logged.values())  # one report per batch, not one per dimension
    assert logged["parse_rate"] == [0.75] and logged["correct_rate"] == [0.75]
    assert logged["mean_t_count"] == [pytest.approx(2.0)]  # T = 3, 0, 3 over the parsed circuits
    # compression over correct circuits with T0 > 0: the two QFT-2 copies, T0 = 3 = T -> 1.0;
    # the basis encoding has T0 = 0 and is not counted
    assert logged["compression"] == [pytest.approx(1.0)]
    assert logged["violation_rate"] == [0.0]
    # the seconds the batch's scoring took (it was the scorer's first: not 0); the five dimension
    # functions read the cache afterwards, which the scorer counts too
    assert 0 < logged["timing/reward_s"][0] <= rewards.stats["seconds"]


def test_a_batch_larger_than_the_cache_is_scored_whole():
    """The scorer's cache is bounded; a batch with more distinct completions than it holds still
    gets every result (before: the cache was read back after the batch, a KeyError)."""
    from rubriq.evaluator.batch import BatchScorer

    spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
    texts = [f'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0]; rz({k / 10}) q[0];' for k in range(5)]
    with BatchScorer(cache_size=2) as scorer:
        results = scorer.results(texts, [spec] * 5)
    assert len(results) == 5 and [r.parsed for r in results] == [True] * 5
    assert results[0].process_fidelity == pytest.approx(1.0)


def test_one_worker_pool_for_every_target_and_close_stops_it():
    """With workers = 2, scoring four targets uses one pool of two processes (before: one pool
    per target, never closed: 4 targets x 2 workers left 8 workers behind), and close() ends it."""

    import psutil

    from rubriq.evaluator.batch import BatchScorer

    def pool_workers() -> set[int]:
        out = set()
        for child in psutil.Process().children(recursive=True):
            try:
                if "spawn_main" in " ".join(child.cmdline()):
                    out.add(child.pid)
            except psutil.Error:
                continue
        return out

    before = pool_workers()
    specs = [f'{{"algorithm": "qft", "num_qubits": {n}, "inverse": false, "do_swaps": true}}' for n in (1, 2, 3, 4)]
    texts = [
        f'OPENQASM 2.0; include "qelib1.inc"; qreg q[{n}]; h q[0]; rz({k / 7}) q[0];'
        for n in (1, 2, 3, 4)
        for k in range(2)
    ]
    scorer = BatchScorer(workers=2)
    results = scorer.results(texts, [s for s in specs for _ in range(2)])
    assert len(results) == 8 and all(r.parsed for r in results)
    assert len(pool_workers() - before) == 2
    scorer.close()  # shuts the pool down and waits for its processes
    assert not pool_workers() - before
