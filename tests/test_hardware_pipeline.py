"""The hardware path offline, end to end: catalog (Nighthawk, error rates from the snapshots),
transpilation for IBM and IonQ, noisy emulation with KL (GHZ small, deep circuit large),
resubmission protection and token redaction."""

import json
import os
import statistics

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ionq")

from rubriq.circuit.backends import CATALOG, error_rates, get_backend  # noqa: E402
from rubriq.hardware.emulate import ideal_distribution, kl_divergence, with_measurements  # noqa: E402
from rubriq.hardware.submit_ibm_ionq import HardwareRun, load_circuits, main, write_results  # noqa: E402
from rubriq.hardware.transpile import transpile_for  # noqa: E402


def ghz(n=3):
    qc = QuantumCircuit(n)
    qc.h(0)
    for i in range(n - 1):
        qc.cx(i, i + 1)
    return qc


def deep(layers=60, seed=0):
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(3)
    for _ in range(layers):
        qc.cx(0, 1)
        qc.cx(1, 2)
        qc.rz(float(rng.uniform(0, 6)), 0)
        qc.h(2)
        qc.cx(2, 0)
    return qc


def test_catalog_has_the_papers_devices_and_snapshot_error_rates():
    from qiskit_ibm_runtime.fake_provider import FakeNighthawk, FakeSherbrooke

    assert {"ibm_eagle", "ibm_heron", "ibm_nighthawk", "ionq_aria", "ionq_forte"} <= set(CATALOG)
    night = get_backend("ibm_nighthawk")
    assert night.num_qubits == FakeNighthawk().num_qubits == 120 and night.topology == "square"
    # square lattice: max degree 4 (heavy-hex: 3)
    degree = {}
    for a, b in night.coupling_edges():
        degree[a] = degree.get(a, 0) + 1
        degree[b] = degree.get(b, 0) + 1
    assert max(degree.values()) == 4
    target = FakeSherbrooke().target
    sx = statistics.median(
        p.error for p in target["sx"].values() if p is not None and p.error is not None and p.error < 1
    )
    ecr = statistics.median(p.error for p in target["ecr"].values() if p is not None and p.error < 1)
    rates = error_rates("ibm_eagle")
    assert rates["error_1q"] == pytest.approx(sx) and rates["error_2q"] == pytest.approx(ecr)
    for name in ("ionq_aria", "ionq_forte"):
        spec = get_backend(name)
        assert spec.error_2q and "ionq.com" in spec.source


@pytest.mark.parametrize(
    "backend,native",
    [
        ("ibm_eagle", {"ecr", "rz", "sx", "x"}),
        ("ionq_aria", {"gpi", "gpi2", "ms"}),
        ("ionq_forte", {"gpi", "gpi2", "zz"}),
    ],
)
def test_transpiled_circuits_use_native_gates_only(backend, native):
    t = transpile_for(with_measurements(ghz()), backend)
    gates = set(t.gate_counts) - {"measure", "barrier"}
    assert gates <= native | {"id"}, gates
    assert t.two_qubit_gates == 2 and t.swaps_inserted == 0


def test_routing_inserts_swaps_on_heavy_hex_for_a_triangle():
    tri = QuantumCircuit(3)
    tri.cx(0, 1)
    tri.cx(1, 2)
    tri.cx(2, 0)  # a triangle cannot be placed on heavy-hex without a SWAP
    assert transpile_for(with_measurements(tri), "ibm_eagle").swaps_inserted >= 1
    assert transpile_for(with_measurements(tri), "ionq_aria").swaps_inserted == 0


def test_kl_divergence_against_hand_values():
    assert kl_divergence({"0": 50, "1": 50}, {"0": 0.5, "1": 0.5}) == pytest.approx(0.0, abs=1e-12)
    # all shots on one of two equally likely outcomes: KL = ln 2 (floor 1/shots changes nothing here)
    assert kl_divergence({"0": 1000}, {"0": 0.5, "1": 0.5}, eps=0.0) == pytest.approx(np.log(2))
    # an outcome the ideal never produces costs ln(p / eps') instead of infinity
    assert np.isfinite(kl_divergence({"0": 90, "1": 10}, {"0": 1.0}))


@pytest.mark.parametrize("backend", ["ibm_eagle", "ionq_aria"])
def test_offline_emulation_ghz_small_deep_large(backend, tmp_path):
    run = HardwareRun([backend], shots=4096, out=tmp_path, offline=True, say=lambda m: None)
    rows = run.run({"ghz3": ghz(), "deep": deep(layers=150)})
    kl = {r["circuit"]: r["kl"] for r in rows}
    assert all(r["mode"] == "emulation" and sum(r["counts"].values()) == 4096 for r in rows)
    assert kl["ghz3"] < 0.1  # readout and gate noise of a 2-CNOT circuit
    assert kl["deep"] > 0.3 and kl["deep"] > 5 * kl["ghz3"]
    paths = write_results(rows, tmp_path)
    data = json.loads(paths["results"].read_text())
    assert {r["circuit"] for r in data["rows"]} == {"ghz3", "deep"} and paths["plot"].stat().st_size > 10_000
    # the noiseless reference is exact: GHZ has weight 1/2 on 000 and 111
    assert ideal_distribution(with_measurements(ghz())) == pytest.approx({"000": 0.5, "111": 0.5})


class FakeProvider:
    """Stands in for a device: jobs stay QUEUED on their first poll, then finish."""

    def __init__(self, leak: str = ""):
        self.submitted, self.polls, self.leak = [], [], leak

    def submit(self, circuit, shots):
        self.submitted.append(shots)
        return f"job-{len(self.submitted)}{self.leak}"

    def poll(self, job_id):
        self.polls.append(job_id)
        if self.polls.count(job_id) == 1:
            return "QUEUED", None
        return "DONE", {"000": 2000, "111": 2096}


def test_jobs_are_saved_at_once_polled_on_rerun_and_never_resubmitted(tmp_path):
    provider = FakeProvider()
    first = HardwareRun(["ionq_aria"], out=tmp_path, providers={"ionq_aria": provider}, say=lambda m: None)
    rows = first.run({"ghz3": ghz()})
    assert rows[0]["mode"] == "hardware" and rows[0].get("kl") is None and rows[0]["status"] == "QUEUED"
    saved = json.loads((tmp_path / "jobs.json").read_text())
    assert [e["job_id"] for e in saved.values()] == ["job-1"]
    second = HardwareRun(["ionq_aria"], out=tmp_path, providers={"ionq_aria": provider}, say=lambda m: None)
    rows = second.run({"ghz3": ghz()})
    assert provider.submitted == [4096] and rows[0]["kl"] < 0.01 and rows[0]["job_id"] == "job-1"
    third = HardwareRun(["ionq_aria"], out=tmp_path, providers={"ionq_aria": provider}, say=lambda m: None)
    third.run({"ghz3": ghz()})
    assert provider.submitted == [4096] and len(provider.polls) == 2  # finished: neither polled nor resubmitted


def test_tokens_never_reach_files_or_the_console(tmp_path, monkeypatch, capsys):
    secret = "ionq-SECRET-token-1234"
    monkeypatch.setenv("IONQ_API_KEY", secret)
    provider = FakeProvider(leak=f"?apiKey={secret}")  # a provider echoing the key in its job id
    said = []
    run = HardwareRun(["ionq_aria"], out=tmp_path, providers={"ionq_aria": provider}, say=said.append)
    run.run({"ghz3": ghz()})
    rows = run.run({"ghz3": ghz()})  # the same run polls the id it kept in memory
    write_results(rows, tmp_path)
    assert said and not any(secret in line for line in said), said  # HardwareRun redacts, not only the CLI
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    # the id was withheld, not rewritten into one that cannot be polled; a later run does not resubmit
    entry = next(iter(json.loads((tmp_path / "jobs.json").read_text()).values()))
    assert entry["job_id"] is None and entry["job_id_withheld"] is True
    # a job still pending when its run ends cannot be polled later, and is not resubmitted
    pending, later_said = FakeProvider(leak=f"?apiKey={secret}"), []
    HardwareRun(["ionq_aria"], out=tmp_path / "p", providers={"ionq_aria": pending}, say=lambda m: None).run(
        {"ghz3": ghz()}
    )
    HardwareRun(["ionq_aria"], out=tmp_path / "p", providers={"ionq_aria": pending}, say=later_said.append).run(
        {"ghz3": ghz()}
    )
    assert pending.submitted == [4096] and len(pending.polls) == 1
    assert any("not stored" in line for line in later_said), later_said
    (tmp_path / "c.qasm").write_text(qasm2.dumps(ghz()))
    assert (
        main(
            [
                "--circuits",
                str(tmp_path / "c.qasm"),
                "--backend",
                "ionq_aria",
                "--dry-run",
                "--out",
                str(tmp_path / "dry"),
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    assert secret not in out.out + out.err and "hardware" in out.out  # a token is set: the dry run says so
    assert not (tmp_path / "dry").exists()  # a dry run writes nothing


def test_cli_reads_qasm_folders_and_reports_bad_input(tmp_path, capsys):
    (tmp_path / "bell.qasm").write_text(qasm2.dumps(ghz(2)))
    assert list(load_circuits([tmp_path])) == ["bell"]
    assert main(["--circuits", str(tmp_path / "missing"), "--dry-run"]) == 2
    assert "does not exist" in capsys.readouterr().err
    os.environ.pop("IONQ_API_KEY", None)
    assert (
        main(["--circuits", str(tmp_path), "--backend", "ionq_forte", "--offline", "--out", str(tmp_path / "o")]) == 0
    )
    assert "OFFLINE" in capsys.readouterr().out
    assert json.loads((tmp_path / "o" / "results.json").read_text())["rows"][0]["mode"] == "emulation"
