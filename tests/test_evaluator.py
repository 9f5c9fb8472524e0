"""The public API, the weights, the config and the CLI."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rubriq.cli import app
from rubriq.config import ConfigError, RubricConfig, RubricWeights
from rubriq.evaluator import RubriQEvaluator
from rubriq.targets import TargetError, make_target

REPO = Path(__file__).resolve().parents[1]
QFT4 = (REPO / "rubriq/examples/qft4_textbook.qasm").read_text()


@pytest.fixture(scope="module")
def qft4():
    return RubriQEvaluator(target_algorithm="qft", num_qubits=4)


def test_reward_is_the_weighted_sum_of_the_five_scores(qft4):
    r = qft4.evaluate(QFT4)
    assert set(r.scores) == {"clifford", "tcount", "hardware", "fidelity", "efficiency"}
    w = RubricWeights()
    expected = (
        w.clifford * r.scores["clifford"]
        + w.tcount * r.scores["tcount"]
        + w.hardware * r.scores["hardware"]
        + w.fidelity * r.scores["fidelity"]
        + w.efficiency * r.scores["efficiency"]
    )
    assert r.reward == pytest.approx(expected, abs=1e-15)
    # hand-derived pieces: 3 cp(pi/2) -> 3 T each, 2 cp(pi/4) and 1 cp(pi/8) -> 3*102 each
    assert r.t_count == 9 + 3 * 306
    assert r.depth == 8 and r.num_qubits == 4
    assert r.scores["efficiency"] == pytest.approx(math.exp(-0.5 * 8 / 16))
    # canonical gates: 4 h + 2 swap + 6 cp * (3 p + 2 cx) = 36; Clifford: h, swap, cx -> 18
    assert r.scores["clifford"] == pytest.approx(18 / 36)


def test_result_is_json_ready_and_deterministic(qft4):
    a = qft4.evaluate(QFT4).to_dict()
    fresh = RubriQEvaluator(target_algorithm="qft", num_qubits=4).evaluate(QFT4).to_dict()
    assert json.loads(json.dumps(a)) == a
    assert a == fresh
    for key in (
        "reward",
        "parsed",
        "strategy",
        "error",
        "scores",
        "t_count",
        "process_fidelity",
        "average_fidelity",
        "depth",
        "num_qubits",
        "hardware",
    ):
        assert key in a


def test_garbage_scores_zero_with_reason(qft4):
    r = qft4.evaluate("I am sorry, I cannot write quantum circuits.")
    assert r.reward == 0.0 and not r.parsed and r.error_type == "parse"
    assert all(v == 0.0 for v in r.scores.values())
    assert "direct_qasm" in r.error and "fenced_block" in r.error and "python_code" in r.error


def test_unsupported_control_flow_is_a_typed_error(qft4):
    text = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[4]; creg c[1]; measure q[0] -> c[0]; if (c==1) x q[1];'
    r = qft4.evaluate(text)
    assert r.reward == 0.0 and r.error_type == "unsupported" and "control flow" in r.error


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
def test_evaluate_never_raises(qft4, text):
    r = qft4.evaluate(text)
    assert 0.0 <= r.reward <= 1.0


def test_weights_must_sum_to_one_and_be_non_negative():
    with pytest.raises(ConfigError):
        RubricWeights(fidelity=0.5)
    with pytest.raises(ConfigError):
        RubricWeights(clifford=-0.1, fidelity=0.7)
    RubricWeights(clifford=0.1, fidelity=0.5)  # sums to 1: accepted


def test_custom_weights_change_the_reward():
    cfg = RubricConfig.from_dict(
        {"weights": {"clifford": 0, "tcount": 0, "hardware": 0, "fidelity": 1.0, "efficiency": 0}}
    )
    r = RubriQEvaluator(target_algorithm="qft", num_qubits=4, config=cfg).evaluate(QFT4)
    assert r.reward == pytest.approx(r.process_fidelity)


def test_complexity_aware_weight_uses_reference_t0():
    cfg = RubricConfig.from_dict({"complexity": {"enabled": True, "kappa": 0.5, "t_ref": 50}})
    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=4, config=cfg)
    t0 = ev.target.t0
    assert t0 == 927  # the reference QFT-4 (same gates as the textbook circuit)
    r = ev.evaluate(QFT4)
    w_t = 0.15 * (1 + 0.5 * math.log(t0 / 50))
    assert r.weights["tcount"] == pytest.approx(w_t / (0.85 + w_t))
    assert sum(r.weights.values()) == pytest.approx(1.0)


def test_yaml_config_round_trip(tmp_path):
    cfg = RubricConfig.from_yaml(REPO / "configs/rubric_default.yaml")
    assert cfg == RubricConfig()
    bad = tmp_path / "bad.yaml"
    bad.write_text("weights:\n  fidelty: 1.0\n")
    with pytest.raises(ConfigError, match="fidelty"):
        RubricConfig.from_yaml(bad)


def test_target_errors_are_clear():
    with pytest.raises(TargetError, match="unknown target"):
        make_target("shor", 4)
    with pytest.raises(TargetError, match="num_qubits"):
        make_target("qft", 0)
    with pytest.raises(TargetError, match="unknown parameter"):
        make_target("qft", 3, phase=0.1)


def test_circuit_target_t0_and_rewrite():
    target_qasm = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; ccx q[0],q[1],q[2]; t q[0]; tdg q[0];'
    ev = RubriQEvaluator(target_algorithm="circuit", target_qasm=target_qasm)
    assert ev.target.t0 == 9
    better = ev.evaluate('OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; ccx q[0],q[1],q[2];')
    assert better.process_fidelity == pytest.approx(1.0) and better.t_count == 7
    assert "Rewrite" in ev.target.prompt()[1]["content"]


def test_prompts_state_conventions_and_format():
    messages = make_target("qft", 4).prompt("qasm3")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "little-endian" in messages[1]["content"] and "OpenQASM 3.0" in messages[1]["content"]
    with pytest.raises(TargetError):
        make_target("qft", 4).prompt("cirq")


def test_cli_score_table_and_json():
    runner = CliRunner()
    path = str(REPO / "rubriq/examples/qft4_textbook.qasm")
    out = runner.invoke(app, ["score", path, "--target", "qft", "--qubits", "4"])
    assert out.exit_code == 0, out.output
    assert "reward" in out.output and "ibm_eagle" in out.output
    out = runner.invoke(app, ["score", "-", "--target", "qft", "--qubits", "4", "--json"], input=QFT4)
    data = json.loads(out.output)
    assert data["t_count"] == 927 and data["process_fidelity"] == pytest.approx(1.0)
    out = runner.invoke(app, ["score", path, "--target", "nope", "--qubits", "4"])
    assert out.exit_code == 2 and "unknown target" in out.output


def test_cli_targets_lists_every_target():
    out = CliRunner().invoke(app, ["targets"])
    assert out.exit_code == 0
    for name in (
        "qft",
        "qpe",
        "heisenberg",
        "tfim",
        "amplitude_encoding",
        "angle_encoding",
        "basis_encoding",
        "circuit",
    ):
        assert name in out.output


def test_empty_circuit_reward_and_fidelity_gating():
    """Under the paper's formula a circuit that does nothing collects every non-fidelity weight."""
    empty = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2];'
    paper = RubriQEvaluator(target_algorithm="qft", num_qubits=2).evaluate(empty)
    # S_C = S_T = S_E = 1; S_H = 0.3 + 0.2 + 1.0*0.2 (no gates: native fraction 1) + 0.3 = 1
    # F_process of the identity vs QFT-2: |Tr(QFT)|^2 / 16 with Tr(QFT_2) = sum_x i^(x^2) / 2
    # = (1 + i + 1 + i) / 2 = 1 + i, so F = 2 / 16 = 1/8.
    assert paper.scores["hardware"] == pytest.approx(1.0)
    assert paper.process_fidelity == pytest.approx(1 / 8)
    assert paper.reward == pytest.approx(0.6 + 0.4 / 8)
    cfg = RubricConfig.from_dict({"fidelity_gating": "multiplicative"})
    gated = RubriQEvaluator(target_algorithm="qft", num_qubits=2, config=cfg).evaluate(empty)
    assert gated.reward == pytest.approx(0.4 / 8 + (1 / 8) * 0.6)


REWRITE_INPUT = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0]; t q[0]; t q[0]; h q[0];'


@pytest.mark.parametrize("mode", ["absolute", "relative"])
def test_correctness_gate_pays_no_t_credit_for_a_broken_deletion(mode):
    """``fidelity_gating: correct``: R = w_F S_F + [F_avg >= 0.99] sum_{d != F} w_d S_d.

    The input H T T H (T0 = 2, T_best 0: T T = S). Deleting both T gates gives H H = I, which is
    wrong: F_process = |Tr((H S H)^+ I)|^2 / 4 = |Tr S|^2 / 4 = |1 + i|^2 / 4 = 1/2, F_avg =
    (2 * 1/2 + 1) / 3 = 2/3. Under the gate it is paid w_F S_F = 0.4 * 0.5 = 0.2 and nothing else,
    although its S_T is the best possible (T = 0); ungated it collects every other term too. The
    correct reduction H S H is paid exactly what the ungated rubric pays it."""
    from rubriq.config import RubricConfig

    spec = {"target_algorithm": "circuit", "qasm": REWRITE_INPUT, "t_best": 0}
    base = {"tcount": {"mode": mode}}
    ungated = RubriQEvaluator(**spec, config=RubricConfig.from_dict(base))
    gated = RubriQEvaluator(**spec, config=RubricConfig.from_dict({**base, "fidelity_gating": "correct"}))
    broken = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0]; h q[0];'
    reduced = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0]; s q[0]; h q[0];'
    b, b0 = gated.evaluate(broken), ungated.evaluate(broken)
    assert b.t_count == 0 and b.scores["tcount"] == pytest.approx(1.0)  # the full T score ...
    assert b.process_fidelity == pytest.approx(0.5) and b.average_fidelity == pytest.approx(2 / 3)
    assert b.reward == pytest.approx(0.4 * 0.5, abs=1e-12)  # ... and none of it paid
    others = 0.2 * b0.scores["clifford"] + 0.15 * 1.0 + 0.15 * b0.scores["hardware"] + 0.1 * b0.scores["efficiency"]
    assert b0.reward == pytest.approx(0.2 + others, abs=1e-12) and b0.reward > 0.2 + 0.15
    r, r0 = gated.evaluate(reduced), ungated.evaluate(reduced)
    assert r.average_fidelity == pytest.approx(1.0) and r.t_count == 0
    assert r.reward == pytest.approx(r0.reward, abs=1e-12)
    if mode == "relative":  # S_T = (T0 - T) / (T0 - T_best) = 1 for the reduction, 0 for a copy
        copy = gated.evaluate(REWRITE_INPUT)
        assert r.scores["tcount"] == 1.0 and copy.scores["tcount"] == 0.0
        assert copy.reward == pytest.approx(ungated.evaluate(REWRITE_INPUT).reward, abs=1e-12)  # correct: all paid
    # a correct circuit just at the threshold is paid; the gate reads fidelity.correct_threshold
    strict = RubriQEvaluator(
        **spec,
        config=RubricConfig.from_dict({**base, "fidelity_gating": "correct", "fidelity": {"correct_threshold": 0.6}}),
    )
    assert strict.evaluate(broken).reward == pytest.approx(b0.reward, abs=1e-12)  # F_avg 2/3 >= 0.6: all paid


def test_reading_a_score_table_is_what_the_rubric_computes():
    """docs/rubric.md 'Reading a score': every number of its table, recomputed (rerun: this test)."""
    import re

    from rubriq.config import RubricConfig

    readme = (Path(__file__).resolve().parents[1] / "docs" / "rubric.md").read_text(encoding="utf-8")
    start = readme.index("## Reading a score")
    end = readme.find("\n## ", start + 1)
    section = readme[start : end if end > 0 else len(readme)]
    rows = {
        m.group(1): m.groups()[1:]
        for m in re.finditer(r"^\| ([^|]+?) \| ([\d.-]+) \| ([\d.]+) \| ([\d.]+) \|$", section, re.M)
    }
    header = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[4];\n'
    texts = {
        "textbook QFT-4 (correct)": (
            Path(__file__).resolve().parents[1] / "rubriq/examples/qft4_textbook.qasm"
        ).read_text(),
        "empty 4-qubit circuit": header,
        "H on every qubit (wrong)": header + "".join(f"h q[{k}];\n" for k in range(4)),
        "unparseable text": "I cannot do that.",
    }
    assert set(rows) == set(texts)
    paper = RubriQEvaluator(target_algorithm="qft", num_qubits=4)
    gated = RubriQEvaluator(
        target_algorithm="qft", num_qubits=4, config=RubricConfig.from_dict({"fidelity_gating": "multiplicative"})
    )
    for name, (f_avg, reward, gated_reward) in rows.items():
        a, b = paper.evaluate(texts[name]), gated.evaluate(texts[name])
        assert (f_avg == "-") == (a.average_fidelity is None), name
        if a.average_fidelity is not None:
            assert round(a.average_fidelity, 3) == float(f_avg), name
        assert round(a.reward, 3) == float(reward) and round(b.reward, 3) == float(gated_reward), name
