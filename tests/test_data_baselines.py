"""Datasets, collections, stratification and the compiler baselines."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator
from typer.testing import CliRunner

from rubriq.baselines.compilers import METHODS, count_t
from rubriq.baselines.runner import run_method, run_suite, write_reports
from rubriq.baselines.verify import verify
from rubriq.cli import app
from rubriq.data import build_all
from rubriq.data.prompts import HELD_OUT_SIZES, load_split
from rubriq.evaluator import RubriQEvaluator
from rubriq.suites import (
    PUBLISHED_TCOUNTS,
    NotCliffordT,
    SuiteCircuit,
    load_mqt,
    load_qiskit_arith,
    load_tcount_suite,
    stratify,
    to_clifford_t,
)
from rubriq.targets import target_from_spec

FAST_PYZX = (
    "tof_3",
    "tof_4",
    "tof_5",
    "tof_10",
    "barenco_tof_3",
    "barenco_tof_4",
    "barenco_tof_5",
    "mod5_4",
    "mod_mult_55",
    "rc_adder_6",
    "vbe_adder_3",
    "csla_mux_3",
    "qft_4",
    "hwb6",
)


@pytest.fixture(scope="module")
def suite(tcount_suite):
    return {c.name: c for c in load_tcount_suite(tcount_suite)}


@pytest.fixture(scope="module")
def published():
    return {r["circuit"]: r for r in csv.DictReader(open(PUBLISHED_TCOUNTS, encoding="utf-8"))}


def test_small_dataset_build(tmp_path, tcount_suite):
    report = build_all(tmp_path, small=True, collections=("tcount",), suite_dir=tcount_suite)
    assert set(report["prompts"]["rows"]) == {"train", "validation", "test"}
    rows = {s: load_split(tmp_path / "prompts", s) for s in ("train", "validation", "test")}
    everything = [r for split in rows.values() for r in split]
    assert len(everything) == sum(report["prompts"]["rows"].values())
    targets = {s: {r["target"] for r in split} for s, split in rows.items()}
    assert report["prompts"]["targets"] == {s: len(t) for s, t in targets.items()}
    assert not (targets["train"] & targets["test"]) and not (targets["train"] & targets["validation"])
    assert {r["format"] for r in everything} == {"qasm2", "qasm3", "python"}
    assert {r["family"] for r in everything} == {
        "qft",
        "qpe",
        "hamiltonian",
        "encoding",
        "primitive",
        "multi_controlled",
        "state",
        "oracle",
        "arithmetic",
        "qaoa",
        "clifford",
    }
    assert set(report["prompts"]["families"]) == {r["algorithm"] for r in everything}
    # unseen sizes only in test
    for split in ("train", "validation"):
        assert all(HELD_OUT_SIZES.get(r["family"]) != r["num_qubits"] for r in rows[split])
    assert any(r["family"] == "qft" and r["num_qubits"] == 8 for r in rows["test"])
    # the target spec rebuilds the target; exact reference circuits score F = 1
    for row in everything[:40]:
        target = target_from_spec(json.loads(row["target"]))
        assert target.num_qubits == row["num_qubits"] and target.t0 == row["t0"]
        assert row["prompt"][0]["role"] == "system" and row["prompt"][1]["role"] == "user"
        if target.reference_is_exact:
            assert RubriQEvaluator(target=target).evaluate(row["reference"]).process_fidelity == pytest.approx(1.0)
    from datasets import load_from_disk

    hf = load_from_disk(str(tmp_path / "prompts" / "hf"))
    assert hf["train"].num_rows == len(rows["train"])
    rewrite = report["rewrite-tcount"]
    assert rewrite["circuits"] == 35 and sum(b["selected"] for b in rewrite["buckets"].values()) == 30
    # same seed, same splits
    again = build_all(tmp_path / "again", small=True, collections=())
    assert [r["id"] for r in load_split(tmp_path / "again" / "prompts", "test")] == [r["id"] for r in rows["test"]]
    assert again["prompts"] == report["prompts"]


@pytest.mark.parametrize("config", ["default", "quickstart"])
def test_splits_share_no_target(config):
    """Every output format of one target lands in the same split: no held-out target was trained on.
    The old row-level split put 20 of the default dataset's 76 test rows' targets in train."""
    import yaml

    from rubriq.config import from_dict
    from rubriq.data.prompts import PromptSpec, split_rows, synthesis_rows

    if config == "default":
        rows, options = synthesis_rows(PromptSpec()), {}
    else:
        build = dict(
            yaml.safe_load(open(Path(__file__).parents[1] / "configs" / "quickstart_cpu.yaml"))["data"]["build"]
        )
        options = {
            "seed": build.pop("seed"),
            "held_out": build.pop("held_out"),
            "fractions": tuple(build.pop("fractions")),
        }
        rows = synthesis_rows(from_dict(PromptSpec, build))
    splits = split_rows(rows, **options)
    keys = {
        name: {json.dumps(json.loads(r["target"]), sort_keys=True) for r in split} for name, split in splits.items()
    }
    assert keys["test"] and keys["train"]
    assert not (keys["train"] & keys["test"]) and not (keys["train"] & keys["validation"])
    assert not (keys["validation"] & keys["test"])
    assert sum(len(v) for v in splits.values()) == len(rows)
    # each target's formats stay together: rows per target are the number of formats
    formats = len({r["format"] for r in rows})
    for split in splits.values():
        assert len(split) == formats * len({r["target"] for r in split})


def test_a_leaking_split_is_refused(tmp_path):
    from rubriq.data.prompts import save_splits

    row = {"target": '{"algorithm": "qft", "num_qubits": 2}', "family": "qft", "num_qubits": 2}
    with pytest.raises(ValueError, match="both 'train' and 'test'"):
        save_splits({"train": [row], "test": [dict(row, format="python")]}, tmp_path / "leak")
    assert not (tmp_path / "leak").exists()


def _fake(name: str, t0: int) -> SuiteCircuit:
    qc = QuantumCircuit(1)
    for _ in range(t0 % 7):
        qc.h(0)
    qc.rz(0.001 * t0, 0)  # make every circuit distinct
    return SuiteCircuit("fake", name, qc, t0)


def test_stratification_quota_no_padding_no_duplicates():
    circuits = (
        [_fake(f"a{i}", i) for i in range(0, 80)]
        + [_fake(f"b{i}", 80 + i) for i in range(10)]
        + [_fake(f"c{i}", 200 + i) for i in range(300)]
    )
    selected, report = stratify(circuits, total=150, seed=42)
    assert report == {
        "<80": {"available": 80, "selected": 70},
        "80-140": {"available": 10, "selected": 10},
        ">140": {"available": 300, "selected": 70},
    }
    assert len(selected) == 150 == len({c.name for c in selected})
    few, rep = stratify(circuits[:20], total=500)
    assert len(few) == 20 and rep["<80"] == {"available": 20, "selected": 20}
    dup = [circuits[0], SuiteCircuit("fake", "copy", circuits[0].circuit.copy(), circuits[0].t0)]
    assert len(stratify(dup, total=10)[0]) == 1
    assert stratify(circuits, total=150, seed=42)[0] == selected  # deterministic


def test_to_clifford_t_is_exact_and_refuses_approximation():
    qc = QuantumCircuit(2)
    qc.rz(math.pi / 4, 0)
    qc.p(3 * math.pi / 4, 1)
    qc.cp(math.pi / 2, 0, 1)
    out = to_clifford_t(qc)
    assert set(out.count_ops()) <= {"cx", "h", "s", "sdg", "t", "tdg", "x", "y", "z"}
    assert Operator(out).equiv(Operator(qc)) and np.allclose(Operator(out).data, Operator(qc).data)
    bad = QuantumCircuit(1)
    bad.rz(0.3, 0)
    with pytest.raises(NotCliffordT):
        to_clifford_t(bad)


def test_collections_build_exact_clifford_t_circuits():
    report: dict = {}
    mqt = load_mqt(sizes=[3], benchmarks=("ghz", "qft", "cdkm_ripple_carry_adder"), report=report)
    names = {c.name for c in mqt}
    assert "ghz_3" in names and "qft_3" not in names  # qft_3 needs pi/8 rotations: skipped, counted
    assert report.get("needs approximate synthesis", 0) >= 1
    arith = load_qiskit_arith()
    by_name = {c.name: c for c in arith}
    mcx = by_name["mcx_vchain_3"]
    assert mcx.t0 == count_t(mcx.circuit) and mcx.t0 > 0
    assert len(arith) >= 40


@pytest.mark.parametrize("name", ["tof_3", "barenco_tof_3", "mod5_4"])
def test_each_baseline_is_verified_and_reduces_t(suite, published, name):
    circuit = suite[name]
    for method in METHODS:
        result = run_method(circuit, method)
        assert result.verdict == "exact", (method, result)
        assert 0 < result.t <= circuit.t0
    assert run_method(circuit, "pyzx").t == int(published[name]["PyZX"])


def test_pyzx_reproduces_published_counts(suite, published):
    for name in FAST_PYZX:
        result = run_method(suite[name], "pyzx")
        assert result.verdict == ("exact" if suite[name].num_qubits <= 10 else "qcec"), name
        assert result.t == int(published[name]["PyZX"]), name


def test_quizx_and_python_pyzx_agree_with_an_independent_reference(monkeypatch):
    """The pyzx baseline's two engines (QuiZX, installed by make setup, and PyZX's own Python
    rewriting) give circuits equal to the input (Qiskit's Operator) with the same T-count.
    Hand-derived references: two Toffolis on the same controls cancel to the identity (T = 0).  A
    Toffoli on (0, 1 -> 2) then a CCZ on (0, 1, 3) has 7 + 7 = 14 T; the phase polynomials of both
    CCZs hold T on x0, x1 and T-dagger on x0 + x1 with the same signs (qubit 2's Hadamards do not
    touch these terms), so each of the 3 shared terms becomes one Clifford phase (T T = S): 14 - 6 = 8."""
    from qiskit.quantum_info import Operator

    from rubriq.baselines import compilers

    assert compilers._quizx() is not None, "quizx is not installed: make setup installs it"
    cancel = QuantumCircuit(3)
    cancel.ccx(0, 1, 2)
    cancel.ccx(0, 1, 2)
    shared = QuantumCircuit(4)
    shared.ccx(0, 1, 2)
    shared.ccz(0, 1, 3)
    counts = {}
    for engine in ("quizx", "python"):
        if engine == "python":
            monkeypatch.setattr(compilers, "_quizx", lambda: None)
        for name, circuit in (("cancel", cancel), ("shared", shared)):
            out = compilers.pyzx_full_reduce(circuit)
            assert Operator(out).equiv(Operator(circuit)), (engine, name)
            counts[engine, name] = count_t(out)
    assert counts["quizx", "cancel"] == counts["python", "cancel"] == 0
    assert count_t(shared) == 14  # the rubric counts 7 per Toffoli and per CCZ
    assert counts["quizx", "shared"] == counts["python", "shared"] == 8


def test_a_quizx_panic_is_a_failed_route_not_a_crash(monkeypatch):
    """pyo3 raises a Rust panic as PanicException, a BaseException the runner's `except Exception`
    would not catch: the route turns it into an error, so the cell is `failed` and the run goes on."""
    import types

    from rubriq.baselines import compilers, runner

    PanicException = type("PanicException", (BaseException,), {})

    def panic(g):
        raise PanicException("index out of bounds")

    fake = types.SimpleNamespace(qasm=lambda text: object(), full_simp=panic, extract_circuit=None)
    monkeypatch.setattr(compilers, "_quizx", lambda: fake)
    monkeypatch.setitem(runner.METHODS, "pyzx", (compilers.pyzx_full_reduce,))
    circuit = QuantumCircuit(3)
    circuit.ccx(0, 1, 2)
    result = run_method(SuiteCircuit("t", "toffoli", circuit, count_t(circuit)), "pyzx")
    assert result.verdict == "failed" and "quizx panicked: index out of bounds" in result.detail


def test_quizx_reaches_published_pyzx_counts(suite, published):
    """QuiZX's rewriting, PyZX's basic optimization, verified: the published PyZX counts."""
    from rubriq.baselines.compilers import pyzx_full_reduce

    for name in ("gf2^4_mult", "ham15-low", "gf2^8_mult", "adder_8"):
        out = pyzx_full_reduce(suite[name].circuit)
        assert verify(suite[name].circuit, out)[0] == "qcec", name
        assert count_t(out) == int(published[name]["PyZX"]), name


def test_inequivalent_output_is_flagged_and_not_counted(suite, tmp_path):
    original = suite["tof_3"].circuit
    broken = original.copy()
    broken.data.pop(len(broken.data) // 2)
    assert verify(original, broken)[0] == "not_equivalent"
    # beyond the exact limit: qcec decides
    assert verify(original, original.copy(), exact_qubits=2)[0] == "qcec"
    assert verify(original, broken, exact_qubits=2)[0] == "not_equivalent"
    rows = run_suite([suite["tof_3"]], ["pyzx"], progress=False)
    rows[0].results["pyzx"].verdict = "not_equivalent"
    csv_path, md_path = write_reports(rows, ["pyzx"], tmp_path, "t")
    line = list(csv.DictReader(open(csv_path)))[0]
    assert line["C_pyzx"] == "" and line["verified_pyzx"] == "not_equivalent"
    assert "!" in md_path.read_text()


def test_cli_data_build_and_fetch_offline(tmp_path, tcount_suite, monkeypatch):
    runner = CliRunner()
    out = runner.invoke(
        app,
        [
            "data",
            "build",
            "--out",
            str(tmp_path / "d"),
            "--small",
            "--collections",
            "tcount",
            "--suite-dir",
            str(tcount_suite),
        ],
    )
    assert out.exit_code == 0, out.output
    assert (tmp_path / "d" / "rewrite-tcount" / "train.jsonl").exists()
    import urllib.request

    def no_network(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    out = runner.invoke(app, ["data", "fetch", "tcount-suite", "--dest", str(tmp_path / "suite")])
    assert out.exit_code == 1 and "could not download" in out.output


def test_cli_baselines_writes_reports(tmp_path, tcount_suite, monkeypatch):
    """The fetched suite is found by default, and the published columns come from RubriQ's table."""
    monkeypatch.setenv("RUBRIQ_CACHE", str(tcount_suite.parent))
    out = CliRunner().invoke(
        app,
        ["baselines", "--suite", "tcount", "--methods", "pyzx,qiskit", "--max-t0", "28", "--out", str(tmp_path)],
    )
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(open(tmp_path / "baselines.csv")))
    assert {r["circuit"] for r in rows} == {"tof_3", "barenco_tof_3", "mod5_4"}
    assert all(r["verified_pyzx"] == "exact" and r["T_pyzx"] == r["published_PyZX"] for r in rows)
    assert "Summary per method and T0 bucket" in (tmp_path / "baselines.md").read_text()


def test_route_timeout_is_recorded_and_other_routes_count(suite, monkeypatch):
    import time as _time

    from rubriq.baselines import compilers, runner

    def slow(circuit):
        _time.sleep(30)  # paces nothing: a route that outlasts its 5 s limit (run_method cuts it; nothing waits)
        return circuit

    slow.__name__ = "slow_route"
    monkeypatch.setitem(runner.METHODS, "pyzx", (slow, compilers.pyzx_teleport))
    result = runner.run_method(suite["tof_3"], "pyzx", route_timeout_s=5.0)  # the detail says who was cut
    assert result.verified and result.t == 15 and "slow_route: over 5 s" in result.detail
    monkeypatch.setitem(runner.METHODS, "pyzx", (slow,))
    alone = runner.run_method(suite["tof_3"], "pyzx", route_timeout_s=1.0)
    assert alone.verdict == "timeout" and alone.t is None


def test_best_is_the_verified_minimum_and_workers_agree(suite, tmp_path):
    from rubriq.baselines.runner import load_done

    circuits = [suite[n] for n in ("tof_3", "barenco_tof_3", "mod5_4")]
    methods = ["qiskit", "pyzx", "best"]
    one = run_suite(circuits, methods, progress=False)
    two = run_suite(circuits, methods, progress=False, workers=2)
    for a, b in zip(one, two, strict=True):
        assert {m: (r.t, r.verdict) for m, r in a.results.items()} == {
            m: (r.t, r.verdict) for m, r in b.results.items()
        }
        verified = [r.t for m, r in a.results.items() if m != "best" and r.verified]
        assert a.results["best"].verified and a.results["best"].t <= min(verified)
    write_reports(one, methods, tmp_path, "t")
    done = load_done(tmp_path / "baselines.csv", methods)
    assert len(done) == 9 and done[("tof_3", "pyzx")].t == 15


def test_resume_skips_cells_already_in_the_csv(suite, tmp_path, monkeypatch):
    from rubriq.baselines import runner

    circuits = [suite["tof_3"], suite["mod5_4"]]
    first = run_suite(circuits[:1], ["qiskit", "pyzx"], progress=False)
    write_reports(first, ["qiskit", "pyzx"], tmp_path, "t")
    calls = []
    real = runner.run_method
    monkeypatch.setattr(runner, "run_method", lambda c, m, t=None: calls.append((c.name, m)) or real(c, m, t))
    rows = run_suite(
        circuits,
        ["qiskit", "pyzx"],
        progress=False,
        done=runner.load_done(tmp_path / "baselines.csv", ["qiskit", "pyzx"]),
    )
    assert sorted(calls) == [("mod5_4", "pyzx"), ("mod5_4", "qiskit")]
    assert {r.circuit.name: r.results["pyzx"].t for r in rows} == {"tof_3": 15, "mod5_4": 8}


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--route-timeout", "0"], "--route-timeout"),
        (["--workers", "-2"], "--workers"),
        (["--limit", "-1"], "--limit"),
        (["--max-t0", "-5"], "--max-t0"),
    ],
)
def test_cli_baselines_rejects_bad_numbers(args, flag, tmp_path):
    out = CliRunner().invoke(app, ["baselines", "--out", str(tmp_path), *args])
    assert out.exit_code == 2 and flag in out.output


def _gates_outside_qelib1() -> QuantumCircuit:
    """cp / cu / cs / ch / rzz / ccx, a custom `gate` definition and a final swap (issue #24)."""
    custom = QuantumCircuit(2, name="entangle_t")
    custom.h(0)
    custom.cx(0, 1)
    custom.t(1)
    qc = QuantumCircuit(4)
    qc.h(0)
    qc.cp(math.pi / 4, 0, 1)
    qc.cu(0.3, 0.2, 0.1, 0.05, 1, 2)
    qc.cs(2, 3)
    qc.ch(0, 3)
    qc.rzz(0.7, 1, 2)
    qc.ccx(0, 1, 2)
    qc.append(custom.to_gate(), [2, 3])
    qc.swap(0, 3)
    return qc


@pytest.mark.parametrize("route", [r for routes in METHODS.values() for r in routes], ids=lambda r: r.__name__)
def test_every_route_takes_any_gate_and_returns_a_self_contained_equivalent_circuit(route):
    """Each compiler route on gates outside qelib1 and a final swap: the output has no pending
    layout and equals Operator.from_circuit of the input (Qiskit's own reading, layout included)."""
    from qiskit.quantum_info import process_fidelity

    qc = _gates_outside_qelib1()
    out = route(qc)
    assert out.layout is None  # any permutation the compiler elided is explicit now
    assert process_fidelity(Operator(out), Operator.from_circuit(qc)) > 1 - 1e-9
    assert verify(qc, out)[0] == "exact"


@pytest.mark.parametrize("method", ["qiskit", "tket", "pyzx"])
def test_each_method_verifies_the_app_example_and_the_gate_mix(method):
    from rubriq.app import QFT3_EXAMPLE
    from rubriq.extract.qasm import load_qasm
    from rubriq.suites import make_entry

    for circuit in (load_qasm(QFT3_EXAMPLE), _gates_outside_qelib1()):
        result = run_method(make_entry("test", "c", circuit, "test"), method)
        assert result.verdict == "exact", (method, result.detail)
        assert result.circuit is not None and result.circuit.layout is None
        ref = Operator.from_circuit(circuit)
        assert Operator(result.circuit).equiv(ref, atol=1e-6)


def test_an_elided_final_permutation_is_applied_before_verification():
    """h/cp(pi/2)/cp(pi/4)/h/swap: Qiskit's pass manager moves the swap into its layout; read
    without it, the circuit is another unitary (F = 0.25), read with it, the same one."""
    from qiskit.quantum_info import process_fidelity
    from qiskit.transpiler import generate_preset_clifford_t_pass_manager

    from rubriq.baselines.compilers import CLIFFORD_T_BASIS, compiler_input, with_layout_applied

    qc = QuantumCircuit(3)
    qc.h(2)
    qc.cp(math.pi / 2, 1, 2)
    qc.cp(math.pi / 4, 0, 2)
    qc.h(1)
    qc.swap(0, 2)
    raw = generate_preset_clifford_t_pass_manager(
        optimization_level=3, basis_gates=CLIFFORD_T_BASIS, seed_transpiler=42
    ).run(compiler_input(qc))
    assert raw.layout is not None and raw.layout.final_layout is not None
    plain = raw.copy()
    plain._layout = None
    assert process_fidelity(Operator(plain), Operator(qc)) == pytest.approx(0.25, abs=1e-6)
    fixed = with_layout_applied(raw)
    assert fixed.layout is None
    assert process_fidelity(Operator(fixed), Operator(qc)) > 1 - 1e-9
    assert count_t(fixed) == count_t(plain)  # the explicit swaps are Clifford


def test_a_routed_layout_with_an_initial_permutation_is_applied_too():
    from qiskit import transpile
    from qiskit.transpiler import CouplingMap

    from rubriq.baselines.compilers import with_layout_applied

    rng = np.random.default_rng(5)
    qc = QuantumCircuit(5)
    for _ in range(12):
        a, b = rng.choice(5, 2, replace=False)
        qc.cp(float(rng.random()), int(a), int(b))
        qc.h(int(a))
    out = transpile(qc, coupling_map=CouplingMap.from_line(5), optimization_level=3, seed_transpiler=1)
    assert out.layout is not None
    assert Operator(with_layout_applied(out)).equiv(Operator(qc))
