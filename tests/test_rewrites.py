"""The small rewrite-task generator (rubriq/data/rewrites.py): every circuit and every rewrite
it writes is checked against Qiskit's Operator, T-counts against hand counts, and the recorded
optimum against PyZX's own T-count."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator

from rubriq.data.prompts import PromptSpec, check_disjoint, split_rows, synthesis_rows
from rubriq.data.rewrites import (
    Planted,
    RewriteGeneratorSpec,
    SmallRewrite,
    generate,
    partial_rewrite,
    pyzx_optimum,
    rewrite_record,
    small_rewrite_rows,
)

SPEC = RewriteGeneratorSpec(count=12, qubits=(2, 3), core_gates=(4, 8), redundancies=(1, 3), seed=5)


def _hand_t(circuit: QuantumCircuit) -> int:
    """T-count by hand: every t / tdg gate (the generator writes no other non-Clifford gate)."""
    return sum(1 for inst in circuit.data if inst.operation.name in ("t", "tdg"))


def test_each_circuit_its_planted_and_partial_rewrites_are_the_same_unitary():
    rng = np.random.default_rng(0)
    tasks = generate(SPEC)
    assert len(tasks) == 12 and len({t.qasm() for t in tasks}) == 12
    for task in tasks:
        circuit, planted = task.circuit(), task.circuit(set())
        reference = Operator(circuit)
        assert Operator(planted).equiv(reference), task.name
        for _ in range(3):
            assert Operator(partial_rewrite(task, rng)).equiv(reference), task.name
        # every planted redundancy costs exactly two T gates that the planted rewrite saves
        assert _hand_t(circuit) - _hand_t(planted) == 2 * len(task.planted)
        assert {p.kind for p in task.planted} <= {"adjacent", "commuting", "parity"}


def test_the_generator_is_reproducible_and_seeded():
    first = [t.qasm() for t in generate(SPEC)]
    assert first == [t.qasm() for t in generate(SPEC)]
    other = RewriteGeneratorSpec(count=12, qubits=(2, 3), core_gates=(4, 8), redundancies=(1, 3), seed=6)
    assert first != [t.qasm() for t in generate(other)]


def test_hand_built_redundancies_reduce_as_derived():
    """t t = s, t tdg = 1, and a parity phase twice: cx t cx ... cx t cx = cx s cx."""
    task = SmallRewrite("hand", 2)
    task.pieces = [
        ("gate", ("h", (0,))),
        ("planted", Planted("adjacent", [("t", (1,)), ("t", (1,))], [("s", (1,))])),
        ("planted", Planted("commuting", [("t", (0,)), ("cx", (0, 1)), ("tdg", (0,))], [("cx", (0, 1))])),
        (
            "planted",
            Planted(
                "parity",
                [("cx", (0, 1)), ("t", (1,)), ("cx", (0, 1)), ("cx", (0, 1)), ("t", (1,)), ("cx", (0, 1))],
                [("cx", (0, 1)), ("s", (1,)), ("cx", (0, 1))],
            ),
        ),
    ]
    record = rewrite_record(task)
    assert (record["t0"], record["t_planted"]) == (6, 0)
    assert Operator(task.circuit()).equiv(Operator(task.circuit(set())))
    assert record["t_pyzx"] == 0  # PyZX finds the same: all six T gates go


def test_recorded_optimum_is_pyzx_own_count_and_never_above_the_planted_rewrite():
    import pyzx as zx
    from qiskit import qasm2

    for task in generate(SPEC)[:6]:
        record = rewrite_record(task)
        assert record["t_pyzx"] <= record["t_planted"] <= record["t0"]
        # PyZX's own route and its own T-count, independent of RubriQ's gate table
        g = zx.Circuit.from_qasm(qasm2.dumps(task.circuit())).to_graph()
        zx.full_reduce(g)
        own = zx.basic_optimization(zx.extract_circuit(g.copy()).to_basic_gates()).tcount()
        assert record["t_pyzx"] <= own, task.name
        assert pyzx_optimum(task.circuit()) == record["t_pyzx"]


def test_rows_carry_the_prompt_the_target_and_correct_sft_answers():
    from rubriq.evaluator import RubriQEvaluator
    from rubriq.targets import target_from_spec

    rows = small_rewrite_rows(SPEC)
    assert len(rows) == 12
    for row in rows[:4]:
        spec = json.loads(row["target"])
        assert spec["algorithm"] == "circuit" and spec["qasm"].strip() in row["prompt"][0]["content"]
        assert row["family"] == "rewrite_small" and row["t0"] >= row["t_planted"] >= row["t_pyzx"]
        evaluator = RubriQEvaluator(target=target_from_spec(spec))
        for answer in row["sft_answers"]:
            result = evaluator.evaluate(answer)
            assert result.fidelity_verdict == "equivalent" and result.process_fidelity == 1.0
            assert row["t_planted"] <= result.t_count <= row["t0"]


def test_small_rewrites_split_by_target_on_their_own():
    spec = PromptSpec(
        qft_sizes=(2,),
        qpe_sizes=(),
        hamiltonian_sizes=(),
        encoding_sizes=(),
        formats=("qasm2",),
        small_rewrites=(SPEC,),
    )
    with_breadth = dataclasses.replace(spec, breadth=("toffoli", "bell"), breadth_small=True)
    a = split_rows(synthesis_rows(spec), held_out={}, fractions=(0.0, 0.3))
    b = split_rows(synthesis_rows(with_breadth), held_out={}, fractions=(0.0, 0.3))
    check_disjoint(a)
    check_disjoint(b)
    for split in ("train", "test"):
        rewrite = {r["target"] for r in a[split] if r["family"] == "rewrite_small"}
        assert rewrite == {
            r["target"] for r in b[split] if r["family"] == "rewrite_small"
        }  # other families move nothing
    assert len({r["target"] for r in a["test"] if r["family"] == "rewrite_small"}) == round(0.3 * 12)


def test_bad_generator_settings_are_clear_errors():
    from rubriq.data.rewrites import generate_one

    with pytest.raises(ValueError, match="unknown redundancy kind"):
        generate_one(np.random.default_rng(0), RewriteGeneratorSpec(kinds=("magic",)), "x")
    with pytest.raises(RuntimeError, match="distinct circuits"):
        generate(RewriteGeneratorSpec(count=50, qubits=(2,), core_gates=(0, 0), redundancies=(0, 0)))
