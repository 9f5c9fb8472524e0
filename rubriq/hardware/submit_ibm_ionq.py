"""Transpile, run and compare on IBM and IonQ hardware, or their offline noisy emulation.

    python -m rubriq.hardware.submit_ibm_ionq --circuits outputs/ --backend ibm_eagle
    rubriq hardware run outputs/ --backend ibm_heron --backend ionq_forte [--dry-run]

Top to bottom, per backend and circuit:

1. input: ``.qasm`` files (a folder or files) or an evaluation JSONL (``rubriq evaluate``),
   from which the ``--top-k`` correct circuits by reward are taken;
2. add final measurements; transpile at optimization level 3 (``transpile.py``); report depth,
   two-qubit gates, inserted SWAPs;
3. noiseless distribution (exact) and a sampled one: real hardware when ``IBM_QUANTUM_TOKEN``
   (qiskit-ibm-runtime SamplerV2) or ``IONQ_API_KEY`` (qiskit-ionq) is set and
   ``--offline`` is not given, otherwise the offline noisy emulation (``emulate.py``; said so
   on the console and in the results);
4. KL(sampled || noiseless), flagged above ``--threshold`` (0.05, the paper's);
5. ``results.json``, ``jobs.json`` (job ids saved as soon as jobs exist; a rerun polls them
   and never resubmits), ``kl.png`` (Fig. 8 style).  ``--dry-run`` prints what would be sent.

Tokens are read from the environment only and never written: every file and console line
passes through ``rubriq.redaction.redact``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qiskit import QuantumCircuit, qasm2

from rubriq.circuit.backends import CATALOG, get_backend
from rubriq.extract.files import InputError, read_text_file
from rubriq.hardware.jobs import JobStore, job_key, write_text
from rubriq.hardware.options import DEFAULT_OUT, DEFAULT_SHOTS, KL_THRESHOLD, HardwareOptions
from rubriq.options import add_arguments, from_namespace
from rubriq.redaction import contains_secret, redact


# -- input ---------------------------------------------------------------------------------
def circuit_from_file(path: Path) -> QuantumCircuit:
    """The circuit in a ``.qasm`` file, or in any text the scorer reads (Qiskit Python, run in
    the sandbox; an LLM answer with a fenced block), with the file named in every error."""
    from rubriq.extract.cascade import extract

    text = read_text_file(path)
    found = extract(text)
    if found.circuit is None:
        raise InputError(f"{path}: no circuit could be read ({found.sandbox_error or found.error})")
    if found.circuit.num_qubits == 0:
        raise InputError(f"{path}: the circuit has no qubits")
    return found.circuit


def load_circuits(paths: Sequence[str | Path], top_k: int = 5) -> dict[str, QuantumCircuit]:
    """Name -> circuit from files (``.qasm``, ``.py``, any text the scorer reads), folders of
    ``.qasm`` files, or the top-k correct circuits of an evaluation JSONL."""
    out: dict[str, QuantumCircuit] = {}
    for p in map(Path, paths):
        if p.is_dir():
            files = sorted(p.glob("*.qasm"))
            jsonl = sorted(p.glob("*.jsonl"))
            if not files and not jsonl:
                raise InputError(f"{p} holds no .qasm or .jsonl files")
            for f in files:
                out[f.stem] = circuit_from_file(f)
            for f in jsonl:
                out.update(top_k_from_records(f, top_k))
        elif p.suffix == ".jsonl":
            read_text_file(p)
            out.update(top_k_from_records(p, top_k))
        else:
            out[p.stem] = circuit_from_file(p)
    if not out:
        raise InputError(
            "no circuits to run: " + ", ".join(map(str, paths)) + " gave none (an evaluation JSONL "
            "contributes only functionally correct completions)"
        )
    return out


def top_k_from_records(path: Path, k: int) -> dict[str, QuantumCircuit]:
    """The k best-rewarded functionally correct completions of a saved evaluation."""
    from rubriq.evaluation.sampling import load_records
    from rubriq.evaluator.result import is_correct
    from rubriq.extract.cascade import extract

    try:
        records = [r for r in load_records(path) if is_correct(r.get("result", {}))]
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    records.sort(key=lambda r: -float(r["result"].get("reward") or 0.0))
    out: dict[str, QuantumCircuit] = {}
    for r in records:
        if len(out) == k:
            break
        circuit = extract(r["text"]).circuit
        if circuit is not None:
            out[f"{r.get('prompt_id', 'c')}-s{r.get('sample', 0)}"] = circuit
    return out


# -- providers -------------------------------------------------------------------------------
def token_for(provider: str) -> str | None:
    """The API token of ``provider`` (ibm or ionq) from the environment, or None."""
    names = ("IBM_QUANTUM_TOKEN", "QISKIT_IBM_TOKEN") if provider == "ibm" else ("IONQ_API_KEY",)
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


class RealProvider:
    """Submit to and poll a real device (created only when a token is set)."""

    def __init__(self, backend: str, token: str, device: str | None = None) -> None:
        self.spec = get_backend(backend)
        self.token = token
        if self.spec.provider == "ibm":
            from qiskit_ibm_runtime import QiskitRuntimeService

            self.service = QiskitRuntimeService(channel="ibm_quantum_platform", token=token)
            self.device = self.service.backend(device or self.spec.provider_name)
        else:
            from rubriq.hardware.transpile import ionq_backend

            self.device = ionq_backend(backend, token=token)

    def submit(self, circuit: QuantumCircuit, shots: int) -> str:
        if self.spec.provider == "ibm":
            from qiskit.transpiler.preset_passmanagers import generate_preset_pass_manager
            from qiskit_ibm_runtime import SamplerV2

            # the circuit was laid out on the snapshot; re-target it to the live device's current
            # calibration (faulty qubits, changed gate set) so the runtime accepts it as ISA
            isa = generate_preset_pass_manager(optimization_level=1, backend=self.device, seed_transpiler=42).run(
                circuit
            )
            return SamplerV2(mode=self.device).run([isa], shots=shots).job_id()
        return self.device.run(circuit, shots=shots).job_id()

    def poll(self, job_id: str) -> tuple[str, dict[str, int] | None]:
        if self.spec.provider == "ibm":
            job = self.service.job(job_id)
            status = str(job.status())
            if status != "DONE":
                return status, None
            from rubriq.hardware.emulate import _counts

            return status, _counts(job.result()[0])
        job = self.device.retrieve_job(job_id)
        status = job.status().name
        return status, (dict(job.get_counts()) if status == "DONE" else None)


# -- the pipeline ----------------------------------------------------------------------------
@dataclass
class HardwareRun:
    """One run of the hardware pipeline over backends: transpile, sample (device or emulation), KL."""

    backends: list[str]
    shots: int = DEFAULT_SHOTS
    seed: int = 42
    threshold: float = KL_THRESHOLD
    out: Path = Path(DEFAULT_OUT)
    offline: bool = False
    dry_run: bool = False
    say: Callable[[str], None] = print
    providers: dict[str, Any] = field(default_factory=dict)
    """Injected providers by backend (tests); else RealProvider when a token is set."""

    def __post_init__(self) -> None:
        raw = self.say
        self.say = lambda message: raw(redact(message))  # every console line, whoever prints it
        self._unstored_ids: dict[str, str] = {}

    def mode(self, backend: str) -> str:
        if self.offline:
            return "emulation"
        if backend in self.providers or token_for(get_backend(backend).provider):
            return "hardware"
        return "emulation"

    def run(self, circuits: dict[str, QuantumCircuit]) -> list[dict]:
        from rubriq.hardware.emulate import ideal_distribution, kl_divergence, with_measurements
        from rubriq.hardware.transpile import transpile_for

        for b in self.backends:
            get_backend(b)
        store = JobStore(self.out / "jobs.json")
        rows: list[dict] = []
        for backend in self.backends:
            mode = self.mode(backend)
            if mode == "emulation" and not self.dry_run:
                self.say(
                    f"{backend}: no token for {get_backend(backend).provider.upper()} (or --offline): running "
                    "the OFFLINE noisy emulation, not the device"
                )
            for name, circuit in circuits.items():
                measured = with_measurements(circuit)
                t = transpile_for(measured, backend, seed=self.seed)
                row = {
                    "backend": backend,
                    "circuit": name,
                    "mode": mode,
                    "shots": self.shots,
                    "qubits": circuit.num_qubits,
                    "depth": t.depth,
                    "two_qubit_gates": t.two_qubit_gates,
                    "swaps_inserted": t.swaps_inserted,
                    "gate_counts": t.gate_counts,
                }
                if self.dry_run:
                    rows.append(row)
                    continue
                key = job_key(backend, name, qasm2.dumps(measured), self.shots)
                counts = self._counts(store, key, backend, name, t.circuit, mode)
                if counts is None:
                    row["status"] = (store.get(key) or {}).get("status")
                    rows.append(row)
                    continue
                ideal = ideal_distribution(measured)
                kl = kl_divergence(counts, ideal)
                row.update(
                    status="done",
                    job_id=(store.get(key) or {}).get("job_id"),
                    kl=kl,
                    flagged=kl > self.threshold,
                    counts=counts,
                )
                rows.append(row)
        return rows

    def _counts(
        self, store: JobStore, key: str, backend: str, name: str, circuit: QuantumCircuit, mode: str
    ) -> dict[str, int] | None:
        """Counts of a finished job (saved, polled or emulated now); None while a job is pending."""
        from rubriq.hardware.emulate import emulate

        entry = store.get(key)
        if entry and entry.get("counts") is not None:
            self.say(f"{backend}/{name}: finished earlier (job {entry.get('job_id')}), not resubmitted")
            return entry["counts"]
        counts: dict[str, int] | None

        def record(**fields: Any) -> None:
            """The job's entry: what runs (backend, circuit, shots, mode), then ``fields``."""
            store.record(key, backend=backend, circuit=name, shots=self.shots, mode=mode, **fields)

        if mode == "emulation":
            counts = emulate(circuit, backend, self.shots, self.seed)
            record(job_id=None, status="DONE", counts=counts)
            return counts
        provider = self.providers.get(backend)
        if provider is None:
            token = token_for(get_backend(backend).provider)
            if token is None:  # mode() said hardware only because a token is set
                raise RuntimeError(f"{backend}: no API token in the environment")
            provider = self.providers[backend] = RealProvider(backend, token)
        job_id = (entry or {}).get("job_id") or self._unstored_ids.get(key)
        if entry and entry.get("job_id_withheld") and not job_id:
            self.say(
                f"{backend}/{name}: submitted earlier, but the provider's job id contained the API token and "
                "was not stored: find the job in the provider's console (not resubmitted)"
            )
            return None
        if job_id:
            status, counts = provider.poll(job_id)
            self.say(f"{backend}/{name}: job {job_id} is {status}")
        else:
            job_id = provider.submit(circuit, self.shots)
            # a job id that carries the token is never written (redacting it would store an id
            # that cannot be polled): it is kept for this run only and marked as withheld
            withheld = contains_secret(job_id)
            if withheld:
                self._unstored_ids[key] = job_id
            record(job_id=None if withheld else job_id, job_id_withheld=withheld, status="SUBMITTED")
            self.say(f"{backend}/{name}: submitted job {job_id}")
            status, counts = provider.poll(job_id)
        store.record(key, status=status, counts=counts)
        return counts


def write_results(rows: list[dict], out: Path, threshold: float = KL_THRESHOLD) -> dict[str, Path]:
    """Write ``results.json`` (and ``kl.png`` when there are KLs) into ``out``."""
    from rubriq.hardware.plots import kl_plot

    paths = {"results": out / "results.json"}
    write_text(paths["results"], json.dumps({"threshold": threshold, "rows": rows}, indent=2))
    if any(r.get("kl") is not None for r in rows):
        paths["plot"] = kl_plot(rows, out / "kl.png", threshold)
    return paths


def dry_run_table(rows: list[dict]) -> str:
    """What a dry run would send, as a markdown table."""
    from rubriq.tables import markdown_table

    lines = markdown_table(
        ["backend", "circuit", "mode", "qubits", "depth", "2q gates", "SWAPs inserted", "shots"],
        [
            [
                r["backend"],
                r["circuit"],
                r["mode"],
                r["qubits"],
                r["depth"],
                r["two_qubit_gates"],
                r["swaps_inserted"],
                r["shots"],
            ]
            for r in rows
        ],
    )
    lines.append(
        "estimated cost: neither provider publishes an offline estimate through its SDK; see the IBM "
        "Quantum and IonQ pricing pages (IonQ bills per gate-shot)"
    )
    return "\n".join(lines)


def check_options(backends: list[str], shots: int, top_k: int, threshold: float) -> None:
    """:class:`InputError` naming the flag, before anything is transpiled or emulated."""
    unknown = [b for b in backends if b not in CATALOG]
    if unknown:
        raise InputError(
            f"--backend: unknown backend {', '.join(unknown)}; the catalog has {', '.join(CATALOG)} "
            "(rubriq hardware backends)"
        )
    if shots < 1:
        raise InputError(f"--shots: must be >= 1, got {shots}")
    if top_k < 1:
        raise InputError(f"--top-k: must be >= 1, got {top_k}")
    if not threshold >= 0:
        raise InputError(f"--threshold: the KL threshold (nats) must be >= 0, got {threshold}")


def run_pipeline(circuits: dict[str, QuantumCircuit], run: HardwareRun) -> tuple[list[dict], dict[str, Path]]:
    """Run ``circuits`` on ``run``'s backends, print one line per (backend, circuit) and write the
    results (nothing is written on a dry run, which prints the table of what would be sent)."""
    rows = run.run(circuits)
    if run.dry_run:
        run.say(dry_run_table(rows))
        return rows, {}
    paths = write_results(rows, Path(run.out), run.threshold)
    for r in rows:
        if r.get("kl") is not None:
            run.say(
                f"{r['backend']:>14} {r['circuit']:<24} {r['mode']:<9} depth {r['depth']:>5} "
                f"2q {r['two_qubit_gates']:>5} swaps {r['swaps_inserted']:>4}  KL {r['kl']:.4f}"
                f"{'  > threshold' if r['flagged'] else ''}"
            )
        else:
            run.say(f"{r['backend']:>14} {r['circuit']:<24} pending ({r.get('status')}); rerun to poll")
    run.say("wrote " + ", ".join(str(p) for p in paths.values()))
    return rows, paths


def pipeline(options: HardwareOptions, say: Callable[[str], None]) -> HardwareRun:
    """The :class:`HardwareRun` that ``options`` describe."""
    return HardwareRun(
        list(options.backend),
        options.shots,
        options.seed,
        options.threshold,
        Path(options.out),
        options.offline,
        options.dry_run,
        say,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m rubriq.hardware.submit_ibm_ionq``: parse arguments, run, return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--circuits", nargs="+", required=True, metavar="PATH", help=".qasm / .py files, folders, or evaluation JSONL"
    )
    add_arguments(parser, HardwareOptions)
    args = parser.parse_args(argv)
    options = from_namespace(HardwareOptions, args)
    say = lambda msg: print(redact(msg))  # noqa: E731
    try:
        check_options(list(options.backend), options.shots, options.top_k, options.threshold)
        circuits = load_circuits(args.circuits, options.top_k)
        run_pipeline(circuits, pipeline(options, say))
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(redact(f"error: {exc}"), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
