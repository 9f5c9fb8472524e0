"""Extraction on real model output: RubriQ's cascade beside plain Qiskit, per corpus source.

    .venv/bin/python benchmarks/bench_extraction.py [--corpus benchmarks/llm_outputs] [--out ...]
    .venv/bin/python benchmarks/bench_extraction.py --qiskit-human-eval   # also the Qiskit-Python source

Reads every ``*.jsonl`` under the corpus folder (and its git-ignored ``local/`` folder, where
``llm_outputs/fetch_yucong.py`` puts texts that may not be redistributed); each line has
``source`` and ``text``.  Per source: texts, RubriQ parse rate (the cascade with Python off),
plain-Qiskit parse rate (``rubriq.extract.qasm.plain_qiskit_load``: the raw text or the first
fenced block, at least one qubit, as in tests/test_extraction_property.py), texts only
one of them parses, and the classes of RubriQ's failures.  Prints a markdown table and writes it
to benchmarks/results/extraction.md.

With ``--qiskit-human-eval`` (the dataset fetched by ``llm_outputs/fetch_qiskit_human_eval.py``,
not committed): Qiskit-Python written by Qiskit's developers.  For every task whose function
needs no argument, the reference is what calling the function gives: its canonical solution
runs in a plain subprocess (as the dataset's own test harness runs it; no RubriQ involved),
which returns the circuit as QPY (summary counts: README).  Tasks whose function returns a QuantumCircuit are kept:
fixed circuits, parameterized ones (unbound Parameters) and dynamic ones (classical control
flow).  RubriQ then extracts prompt + solution, as a model's fenced answer, through the full
cascade with the sandbox (pre-filter on), once as written (the function is never called: rule
``zero_arg_function`` must find it) and once with ``qc = <function>()`` appended; each extracted
circuit is compared with the reference by Operator on the qubits the reference acts on
(measurements, resets, barriers and delays removed from both, as scoring does).  Per task and
summary tables go to benchmarks/results/extraction_qiskit_human_eval.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubriq.config import ExtractionConfig  # noqa: E402
from rubriq.extract.cascade import extract  # noqa: E402
from rubriq.extract.qasm import plain_qiskit_load  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CLASSES = (  # (class, pattern in RubriQ's error), first match wins
    ("no circuit in the text", r"no OPENQASM header; fenced_block: no code block"),
    ("index out of range", r"out.of.range"),
    ("undefined gate or name", r"is not defined|not defined in this scope|undefined"),
    ("non-ASCII in code", r"non-ASCII"),
    ("size or qubit cap", r"larger than|qubits declared|cap \d+"),
    ("classical control flow", r"classical control|control flow"),
    ("syntax error", r"ParseError|ParsingError|syntax|token|expected|mismatched"),
)


def failure_class(error: str) -> str:
    for name, pattern in CLASSES:
        if re.search(pattern, error or ""):
            return name
    return "other"


QHE_FILE = REPO / "benchmarks" / "llm_outputs" / "local" / "qiskit-human-eval.json"
QHE_OUT = REPO / "benchmarks" / "results" / "extraction_qiskit_human_eval.md"
MAX_OPERATOR_QUBITS = 12
REFERENCE = r"""
import base64, io, json, signal, sys
from qiskit import QuantumCircuit, qpy
def alarm(signum, frame):
    raise TimeoutError("the task's function ran too long")
signal.signal(signal.SIGALRM, alarm)
for line in sys.stdin:
    task = json.loads(line)
    out = {"task_id": task["task_id"]}
    try:
        signal.alarm(int(sys.argv[1]))
        namespace = {"__name__": "qiskit_human_eval"}
        exec(compile(task["prompt"] + task["canonical_solution"], "<task>", "exec"), namespace)
        value = namespace[task["entry_point"]]()
        signal.alarm(0)
        out["type"] = type(value).__name__
        if isinstance(value, QuantumCircuit):
            buffer = io.BytesIO()
            qpy.dump(value, buffer)
            out["qpy"] = base64.b64encode(buffer.getvalue()).decode()
    except BaseException as exc:
        signal.alarm(0)
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    print("REFERENCE " + json.dumps(out), flush=True)
"""


def zero_argument_function(task: dict) -> bool:
    """Whether the task's entry point needs no argument (from its source, nothing is run)."""
    import ast

    tree = ast.parse(task["prompt"] + task["canonical_solution"])
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == task["entry_point"]:
            a = node.args
            required = len(a.posonlyargs) + len(a.args) - len(a.defaults) + sum(d is None for d in a.kw_defaults)
            return required == 0
    return False


def reference_circuits(tasks: list[dict], per_task_s: int = 300) -> dict[str, object]:
    """{task_id: the QuantumCircuit calling its function returns} for the tasks whose function
    returns one, from one plain subprocess (one qiskit import; each task in a fresh namespace,
    with an alarm)."""
    import base64
    import io
    import subprocess
    import tempfile

    from qiskit import qpy

    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "QISKIT_SETTINGS": "/nonexistent", "OMP_NUM_THREADS": "1"}
        proc = subprocess.run(
            [sys.executable, "-c", REFERENCE, str(per_task_s)],
            input="".join(json.dumps(t) + "\n" for t in tasks),
            capture_output=True,
            text=True,
            env=env,
            cwd=home,  # some solutions write files (task 82 writes bell.qpy)
            check=False,
        )
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("REFERENCE "):
            item = json.loads(line.split(" ", 1)[1])
            if "qpy" in item:
                found[item["task_id"]] = qpy.load(io.BytesIO(base64.b64decode(item["qpy"])))[0]
    return found


def kind_of(circuit) -> str:
    from qiskit.circuit import ControlFlowOp

    if any(isinstance(inst.operation, ControlFlowOp) for inst in circuit.data):
        return "dynamic"
    return "parameterized" if circuit.parameters else "fixed"


def same_operator(ours, reference) -> str:
    """'equal' or 'different': ours against the function's own result read with its layout
    (``with_layout_applied``, i.e. ``Operator.from_circuit``: routing is seeded at random, so two
    runs of a transpiling task place their swaps differently). Operator on the qubits either acts
    on, up to MAX_OPERATOR_QUBITS; wider ones by MQT QCEC."""
    from qiskit.circuit import QuantumCircuit
    from qiskit.quantum_info import Operator

    from rubriq.circuit.gates import STRIPPED_INSTRUCTIONS
    from rubriq.circuit.layout import with_layout_applied

    reference = with_layout_applied(reference)

    def unitary_part(circuit):
        return [inst for inst in circuit.data if inst.operation.name not in STRIPPED_INSTRUCTIONS]

    if ours.num_qubits != reference.num_qubits:
        return "different"
    active = sorted({c.find_bit(q).index for c in (ours, reference) for inst in unitary_part(c) for q in inst.qubits})

    def reduced(circuit, qubits):
        out = QuantumCircuit(len(qubits), global_phase=circuit.global_phase)
        where = {q: i for i, q in enumerate(qubits)}
        for inst in unitary_part(circuit):
            out.append(inst.operation, [where[circuit.find_bit(q).index] for q in inst.qubits])
        return out

    if len(active) <= MAX_OPERATOR_QUBITS:
        return "equal" if Operator(reduced(ours, active)).equiv(Operator(reduced(reference, active))) else "different"
    from mqt import qcec

    everything = list(range(ours.num_qubits))
    verdict = str(qcec.verify(reduced(ours, everything), reduced(reference, everything)).equivalence).rsplit(".", 1)[-1]
    return "equal" if verdict.startswith("equivalent") else "different"


def qiskit_human_eval(path: Path, timeout_s: float) -> str:
    """The Qiskit HumanEval tables (markdown)."""
    from rubriq.config import ExtractionConfig

    tasks = json.loads(path.read_text(encoding="utf-8"))
    config = ExtractionConfig(python_timeout_s=timeout_s)
    rows = ["| task | function | kind | qubits | as written | with `qc = f()` |", "|---|---|---|---:|---|---|"]
    summary: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    zero = [t for t in tasks if zero_argument_function(t)]
    references = reference_circuits(zero)
    for task in zero:
        reference = references.get(task["task_id"])
        if reference is None:
            continue
        kind = kind_of(reference)
        cells = []
        for mode, suffix in (("as written", ""), ("with call", f"\nqc = {task['entry_point']}()\n")):
            text = "```python\n" + task["prompt"] + task["canonical_solution"] + suffix + "```"
            found = extract(text, config)
            detail = getattr(found, "detail", None)  # (getattr: the script also measures older RubriQ)
            unsupported = getattr(found, "unsupported_error", None)
            if found.circuit is not None:
                verdict = same_operator(found.circuit, reference)
                cell = f"extracted, Operator {verdict}" + (f" ({detail.split(':')[0]})" if detail else "")
                summary[kind][f"{mode}: extracted"] += 1
                summary[kind][f"{mode}: {verdict}"] += 1
            else:
                reason = unsupported or found.error or ""
                label = "unsupported" if unsupported else "not extracted"
                cell = f"{label}: {reason[:110]}".replace("|", "/")
                summary[kind][f"{mode}: {label}"] += 1
            cells.append(cell)
        summary[kind]["tasks"] += 1
        name = task["task_id"].split("/")[-1]
        rows.append(f"| {name} | `{task['entry_point']}` | {kind} | {reference.num_qubits} | {cells[0]} | {cells[1]} |")
    head = [
        "| kind | tasks | as written: extracted | Operator-equal | with `qc = f()`: extracted | Operator-equal | refused as unsupported (as written) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in ("fixed", "parameterized", "dynamic"):
        c = summary[kind]
        head.append(
            f"| {kind} | {c['tasks']} | {c['as written: extracted']} | {c['as written: equal']} | "
            f"{c['with call: extracted']} | {c['with call: equal']} | {c['as written: unsupported']} |"
        )
    return "\n".join(head) + "\n\n" + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "benchmarks" / "llm_outputs")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "extraction.md")
    parser.add_argument(
        "--qiskit-human-eval",
        nargs="?",
        const=QHE_FILE,
        type=Path,
        help=f"also extract the Qiskit HumanEval tasks (default file {QHE_FILE.relative_to(REPO)})",
    )
    parser.add_argument("--python-timeout", type=float, default=60.0, help="per-task sandbox time (s)")
    parser.add_argument("--qhe-out", type=Path, default=QHE_OUT, help="where the Qiskit HumanEval tables go")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if args.qiskit_human_eval is not None:
        if not args.qiskit_human_eval.is_file():
            raise SystemExit(
                f"{args.qiskit_human_eval} not found: run benchmarks/llm_outputs/fetch_qiskit_human_eval.py first"
            )
        tables = qiskit_human_eval(args.qiskit_human_eval, args.python_timeout)
        print(tables)
        args.qhe_out.parent.mkdir(parents=True, exist_ok=True)
        args.qhe_out.write_text(tables)
    files = sorted(args.corpus.glob("*.jsonl")) + sorted((args.corpus / "local").glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no *.jsonl under {args.corpus}")
    config = ExtractionConfig(allow_python=False)
    stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    classes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    local = set()
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            source, text = item["source"], item["text"]
            if path.parent.name == "local":
                local.add(source)
            ours = extract(text, config)
            theirs = plain_qiskit_load(text) is not None
            s = stats[source]
            s["texts"] += 1
            s["rubriq"] += ours.circuit is not None
            s["qiskit"] += theirs
            s["only_rubriq"] += ours.circuit is not None and not theirs
            s["only_qiskit"] += ours.circuit is None and theirs
            if ours.circuit is None:
                classes[source][failure_class(ours.error)] += 1
    header = (
        "| source | texts | RubriQ parses | Qiskit parses | only RubriQ | only Qiskit | RubriQ failures |\n"
        "|---|---:|---:|---:|---:|---:|---|"
    )
    rows = [header]
    for source, s in stats.items():
        n = s["texts"]
        fails = ", ".join(f"{k} {v}" for k, v in classes[source].most_common()) or "-"
        name = source + (" (local copy, not committed)" if source in local else "")
        rows.append(
            f"| {name} | {n} | {s['rubriq']} ({s['rubriq'] / n:.1%}) | {s['qiskit']} ({s['qiskit'] / n:.1%}) | "
            f"{s['only_rubriq']} | {s['only_qiskit']} | {fails} |"
        )
    table = "\n".join(rows)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
