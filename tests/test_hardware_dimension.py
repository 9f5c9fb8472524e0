"""S_H: limits, native fractions and routing, computed by hand."""

import math

import pytest
from qiskit import QuantumCircuit

from rubriq.circuit.backends import CATALOG, UnknownBackendError, get_backend
from rubriq.circuit.facts import CircuitFacts
from rubriq.config import HardwareConfig, RubricConfig
from rubriq.rubric import hardware
from rubriq.rubric.base import ScoringContext


def fit(circuit: QuantumCircuit, **cfg):
    ctx = ScoringContext(config=RubricConfig(hardware=HardwareConfig(**cfg)))
    return hardware.score(CircuitFacts.from_circuit(circuit), ctx)


def test_catalog_matches_device_snapshots():
    assert get_backend("ibm_eagle").num_qubits == 127
    assert get_backend("ibm_heron").num_qubits == 156
    assert max(max(e) for e in get_backend("ibm_eagle").coupling_edges()) == 126
    assert max(max(e) for e in get_backend("ibm_heron").coupling_edges()) == 155
    # heavy-hex: every qubit has degree <= 3
    for name in ("ibm_eagle", "ibm_heron"):
        degree = {}
        for a, b in get_backend(name).coupling_edges():
            degree[a] = degree.get(a, 0) + 1
            degree[b] = degree.get(b, 0) + 1
        assert max(degree.values()) == 3
    with pytest.raises(UnknownBackendError):
        get_backend("ibm_nowhere")
    assert set(CATALOG) >= {"ibm_eagle", "ibm_heron", "ionq_forte", "ionq_aria"}


def test_130_qubits_fail_eagle_but_not_heron():
    qc = QuantumCircuit(130)
    qc.x(range(130))
    result = fit(qc)
    b = result.details["backends"]
    assert b["ibm_eagle"]["fits_qubits"] is False and b["ibm_eagle"]["swaps"] is None
    assert b["ibm_heron"]["fits_qubits"] is True
    assert b["ionq_forte"]["fits_qubits"] is False and b["ionq_aria"]["fits_qubits"] is False
    # Heron: qubits 0.3 + depth 0.2 + native (x is native) 0.2 + no 2q gates 0.3 = 1.0
    assert b["ibm_heron"]["score"] == pytest.approx(1.0)
    assert b["ibm_eagle"]["score"] == pytest.approx(0.2 + 0.2)  # depth + native, routing term 0
    assert result.details["best_backend"] == "ibm_heron"


def test_depth_limit_ionq_500_ibm_1000():
    qc = QuantumCircuit(1)
    for _ in range(600):
        qc.x(0)
    b = fit(qc).details["backends"]
    assert b["ionq_forte"]["fits_depth"] is False
    assert b["ibm_eagle"]["fits_depth"] is True


def test_native_fraction_per_backend():
    qc = QuantumCircuit(2)
    qc.rz(0.1, 0)
    qc.sx(0)
    qc.ecr(0, 1)
    qc.h(1)
    b = fit(qc).details["backends"]
    assert b["ibm_eagle"]["native_fraction"] == pytest.approx(3 / 4)
    assert b["ibm_heron"]["native_fraction"] == pytest.approx(2 / 4)
    assert b["ionq_aria"]["native_fraction"] == 0.0


def test_routing_swaps_line_vs_triangle():
    line = QuantumCircuit(5)
    for i in range(4):
        line.cx(i, i + 1)
    assert fit(line).details["backends"]["ibm_eagle"]["swaps"] == 0
    triangle = QuantumCircuit(3)
    triangle.cx(0, 1)
    triangle.cx(1, 2)
    triangle.cx(0, 2)
    b = fit(triangle, swap_lambda=0.5).details["backends"]
    assert b["ibm_eagle"]["swaps"] >= 1  # heavy-hex has no triangles
    assert b["ionq_forte"]["swaps"] == 0
    expected = 0.3 + 0.2 + 0.0 + 0.3 * math.exp(-0.5 * b["ibm_eagle"]["swaps"])
    assert b["ibm_eagle"]["score"] == pytest.approx(expected)


def test_routing_is_deterministic_and_cached():
    qc = QuantumCircuit(6)
    for a in range(6):
        for b_ in range(a + 1, 6):
            qc.cx(a, b_)
    hardware.swap_overhead.cache_clear()
    first = fit(qc).details["backends"]["ibm_heron"]["swaps"]
    hits_before = hardware.swap_overhead.cache_info().hits
    assert fit(qc).details["backends"]["ibm_heron"]["swaps"] == first
    assert hardware.swap_overhead.cache_info().hits > hits_before


def test_sub_weights_must_sum_to_one():
    from rubriq.config import ConfigError

    with pytest.raises(ConfigError):
        HardwareConfig(w_qubits=0.5)
