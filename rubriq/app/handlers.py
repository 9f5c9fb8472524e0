"""What each tab of the app does, as plain functions over the project's API (no Gradio here).

Every handler takes the page's raw inputs and returns a view (a dataclass of display-ready
values) or raises :class:`AppInputError` with a message for the page; nothing here computes a
score itself: scoring is ``RubriQEvaluator``, synthesis is ``evaluation.synthesize``, the
baselines are ``baselines.runner.run_method`` (the code behind ``rubriq score``,
``rubriq synthesize`` and ``rubriq baselines``).

>>> view = score_text('OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];', "qft", 1)
>>> view.correct, view.metrics["T-count"], view.strategy
(True, 0, 'direct_qasm')
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubriq.cache import LRUCache
from rubriq.config import RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.evaluator.result import EvaluationResult, is_correct
from rubriq.rubric.engine import DIMENSION_NAMES
from rubriq.targets import TARGETS, Target, TargetError, make_target, parse_params

log = logging.getLogger(__name__)

MAX_INPUT_BYTES = 2_000_000
"""Largest pasted or uploaded text (the extraction caps then apply as everywhere)."""
DRAWING_MAX_GATES = 400
"""Above this many gates the page shows the QASM only (a text drawing would be unreadable)."""


class AppInputError(ValueError):
    """Bad input, with the message the page shows."""


# -- targets -------------------------------------------------------------------------------
def target_choices() -> list[str]:
    """Target names from the registry (a new target appears without UI changes)."""
    return list(TARGETS)


def target_help(name: str) -> str:
    """What a target is and which parameters it takes, from the registry (markdown)."""
    cls = TARGETS.get(name)
    if cls is None:
        return f"unknown target {name!r}"
    lines = [f"**{name}** ({cls.kind}): {cls.summary}."]
    if name == "circuit":
        lines.append("Paste the circuit to rewrite as reference QASM; the qubit count comes from it.")
    else:
        lines.append(f"Qubits: {cls.min_qubits}-{cls.max_qubits}.")
    if cls.parameters and name != "circuit":
        lines.append(
            "Parameters (one `key=value` per line): " + "; ".join(f"`{k}`: {v}" for k, v in cls.parameters.items())
        )
    return "\n\n".join(lines)


def build_target(name: str, qubits: float | int | None, params_text: str = "", reference_qasm: str = "") -> Target:
    """A target from the page's fields; AppInputError with the cause when they do not make one."""
    if name not in TARGETS:
        raise AppInputError(f"unknown target {name!r}; pick one of {', '.join(TARGETS)}")
    try:
        params = parse_params([line.strip() for line in (params_text or "").splitlines() if line.strip()])
    except TargetError as exc:
        raise AppInputError(f"parameters: {exc}") from None
    if name == "circuit":
        reference = check_text(reference_qasm, "reference QASM")
        params["qasm"] = reference
        qubits = None
    elif qubits is None or (isinstance(qubits, float) and not qubits.is_integer()):
        raise AppInputError("qubits: give a whole number of qubits")
    try:
        return make_target(name, None if qubits is None else int(qubits), **params)
    except TargetError as exc:
        raise AppInputError(str(exc)) from None


def check_text(text: str | None, what: str = "input") -> str:
    """The text, or ``AppInputError`` when it is empty, over the size limit or binary."""
    if text is None or not str(text).strip():
        raise AppInputError(f"{what} is empty: paste a completion or circuit, or upload a file")
    size = len(str(text).encode("utf-8", errors="replace"))
    if size > MAX_INPUT_BYTES:
        raise AppInputError(f"{what} is {size / 1e6:.1f} MB; the limit is {MAX_INPUT_BYTES / 1e6:.0f} MB")
    if "\x00" in text:
        raise AppInputError(f"{what} contains NUL bytes: this looks like a binary file, not text")
    return str(text)


def read_upload(path: str | Path | None) -> str:
    """The text of an uploaded .qasm/.py/.txt file, or AppInputError (too large, binary)."""
    if path is None:
        raise AppInputError("no file uploaded")
    p = Path(path)
    if not p.is_file():
        raise AppInputError(f"upload {p.name}: not a file")
    if p.stat().st_size > MAX_INPUT_BYTES:
        raise AppInputError(
            f"upload {p.name} is {p.stat().st_size / 1e6:.1f} MB; the limit is {MAX_INPUT_BYTES / 1e6:.0f} MB"
        )
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AppInputError(
            f"upload {p.name} is not UTF-8 text (byte {exc.start}): upload a .qasm or .py file"
        ) from None
    return check_text(text, f"upload {p.name}")


# -- score -----------------------------------------------------------------------------------
@dataclass
class ScoreView:
    """What the Score tab shows for one completion."""

    reward: float
    correct: bool
    summary: str
    """One markdown paragraph: reward, correct or not (F_avg vs the threshold), or the error."""
    scores: list[tuple[str, float, float]]
    """(dimension, score, weight) in the paper's order."""
    metrics: dict[str, Any]
    hardware: list[list[Any]]
    strategy: str | None
    error_type: str | None
    error: str | None
    drawing: str
    qasm: str
    result: dict[str, Any] = field(repr=False)


_EVALUATORS: LRUCache[str, RubriQEvaluator] = LRUCache(8, on_evict=lambda evaluator: evaluator.close())
_LOCK = threading.Lock()


def evaluator_for(target: Target, config: RubricConfig | None = None) -> RubriQEvaluator:
    """One evaluator per target spec (kept for the 8 most recent): repeated scoring is cached."""
    key = repr(sorted(target.spec().items())) + (repr(config.to_dict()) if config else "")
    with _LOCK:
        hit = _EVALUATORS.get(key)
        if hit is not None:
            return hit
        evaluator = _EVALUATORS[key] = RubriQEvaluator(target=target, config=config)
        return evaluator


def score_text(
    text: str,
    target_name: str,
    qubits: float | int | None = None,
    params_text: str = "",
    reference_qasm: str = "",
    config: RubricConfig | None = None,
) -> ScoreView:
    """Score one completion (any format; Python runs in the sandbox) against a target."""
    text = check_text(text, "completion")
    target = build_target(target_name, qubits, params_text, reference_qasm)
    evaluator = evaluator_for(target, config)
    return view_of(evaluator.evaluate(text), evaluator.config.fidelity.correct_threshold)


def view_of(result: EvaluationResult, threshold: float) -> ScoreView:
    """The Score tab's view of an evaluation result."""
    from qiskit import qasm2

    correct = is_correct(result, threshold)
    if result.error_type:
        summary = f"**reward {result.reward:.4f}**: not scored, `{result.error_type}` error: {result.error}"
    else:
        fid = "F_state" if result.fidelity_kind == "state" else "F_avg"
        verdict = f" (qcec: {result.fidelity_verdict})" if result.fidelity_verdict else ""
        summary = (
            f"**reward {result.reward:.4f}**: {'correct' if correct else 'NOT correct'}, "
            f"{fid} = {result.average_fidelity:.6f} {'>=' if correct else '<'} {threshold}{verdict}"
        )
    scores = [(name, float(result.scores[name]), float(result.weights.get(name, math.nan))) for name in DIMENSION_NAMES]
    metrics = {
        "T-count": result.t_count,
        "depth": result.depth,
        "qubits": result.num_qubits,
        "gates": result.num_gates,
        "F_process": result.process_fidelity,
        "F_avg": result.average_fidelity,
        "fidelity method": result.fidelity_method,
        "interval": result.fidelity_interval,
        "verdict": result.fidelity_verdict,
    }
    hardware = [
        [
            name,
            round(row["score"], 4),
            row["fits_qubits"],
            row["fits_depth"],
            round(row["native_fraction"], 3),
            row["swaps"],
        ]
        for name, row in (result.hardware or {}).items()
    ]
    drawing, qasm = "", ""
    if result.circuit is not None:
        circuit = result.circuit
        drawing = (
            str(circuit.draw("text", fold=100))
            if circuit.size() <= DRAWING_MAX_GATES
            else f"({circuit.size()} gates: too many to draw; the QASM is below)"
        )
        try:
            qasm = qasm2.dumps(circuit)
        except Exception as exc:  # noqa: BLE001 - e.g. a gate QASM 2 cannot name
            qasm = f"// not expressible in OpenQASM 2: {exc}"
    return ScoreView(
        result.reward,
        correct,
        summary,
        scores,
        metrics,
        hardware,
        result.strategy,
        result.error_type,
        result.error,
        drawing,
        qasm,
        result.to_dict(),
    )


# -- synthesize ----------------------------------------------------------------------------------
@dataclass
class SynthesisView:
    """What the Synthesize tab shows: summary, candidates table, best circuit."""

    summary: str
    table: list[list[Any]]
    """Per candidate, sorted by reward: rank, reward, correct, F_avg, T, depth, parsed/error."""
    best_qasm: str
    best_drawing: str


def synthesize_view(
    policy,
    spec: str,
    target_name: str = "",
    qubits: float | int | None = None,
    params_text: str = "",
    n: float | int = 4,
    fmt: str = "qasm2",
    optimize: bool = False,
    max_new_tokens: float | int = 256,
    on_batch: Callable[[int, int], None] | None = None,
    config: RubricConfig | None = None,
    style: str = "full",
) -> SynthesisView:
    """N samples from the loaded policy for a spec (free text, or an explicit target), each scored;
    ``style``: the prompt style the policy was trained with."""
    from qiskit import qasm2

    from rubriq.evaluation.settings import SYNTHESIS_SAMPLING
    from rubriq.evaluation.synthesize import SpecNotUnderstood, synthesize, target_from_text

    if policy is None:
        raise AppInputError(
            "no model is loaded: start the app with `rubriq app --model embedded` (the bundled "
            "SmolLM2-135M) or `--model runs/quickstart/train/final` (a trained adapter)"
        )
    if n is None or int(n) != n or not 1 <= int(n) <= 64:
        raise AppInputError("samples: give a whole number between 1 and 64")
    if max_new_tokens is None or int(max_new_tokens) != max_new_tokens or not 16 <= int(max_new_tokens) <= 2048:
        raise AppInputError("max new tokens: give a whole number between 16 and 2048")
    if target_name:
        target = build_target(target_name, qubits, params_text)
    else:
        try:
            target = target_from_text(check_text(spec, "spec"))
        except SpecNotUnderstood as exc:
            raise AppInputError(str(exc).replace("--target", "a target").replace("--qubits", "qubits")) from None
        except TargetError as exc:
            raise AppInputError(str(exc)) from None
    evaluator = evaluator_for(target, config)
    out = synthesize(
        target,
        sampling=SYNTHESIS_SAMPLING.replace(samples=int(n), max_new_tokens=int(max_new_tokens)),
        fmt=fmt,
        optimize=optimize,
        policy=policy,
        evaluator=evaluator,
        on_batch=on_batch,
        style=style,
    )
    rows = sorted(out.candidates, key=lambda c: -c.result["reward"])
    threshold = evaluator.config.fidelity.correct_threshold
    table = []
    for rank, c in enumerate(rows, 1):
        r = c.result
        f = r["average_fidelity"]
        table.append(
            [
                rank,
                round(r["reward"], 4),
                is_correct(r, threshold),
                None if f is None else round(f, 6),
                r["t_count"],
                r["depth"],
                r["strategy"] if r["parsed"] else f"{r['error_type']}: {str(r['error'])[:80]}",
            ]
        )
    parsed = sum(c.result["parsed"] for c in out.candidates)
    summary = f"target {target!r}, T0 = {target.t0}: {len(rows)} samples, {parsed} parsed"
    best_qasm = best_drawing = ""
    if out.best is None:
        summary += "; no functionally correct circuit among them (try more samples or a trained policy)"
    else:
        circuit = out.circuit
        summary += f"; best correct: reward {out.best.result['reward']:.4f}, T = {out.best.result['t_count']}"
        if optimize and out.optimized is not None:
            o = out.optimized
            circuit = o.circuit
            summary += (
                f"; post-pass {o.method} (verified equivalent, {o.verdict}; correct): T {out.best.result['t_count']}"
                f" -> {o.result['t_count']}, depth {out.best.result['depth']} -> {o.result['depth']}"
            )
        elif optimize:
            summary += "; post-pass: no compiler rewrite lowered the T-count or depth"
        assert circuit is not None  # a best candidate always has its circuit
        best_qasm = qasm2.dumps(circuit)
        best_drawing = str(circuit.draw("text", fold=100)) if circuit.size() <= DRAWING_MAX_GATES else ""
    return SynthesisView(summary, table, best_qasm, best_drawing)


# -- baselines -----------------------------------------------------------------------------------
BASELINE_METHODS = ("qiskit", "tket", "pyzx")


@dataclass
class BaselineView:
    """What the Baselines tab shows: one row per compiler, with its verdict."""

    summary: str
    table: list[list[Any]]
    """Per method: method, T, depth, verdict, seconds, detail."""


def baselines_view(text: str, methods: list[str] | None = None, time_limit_s: float | int = 60) -> BaselineView:
    """Qiskit O3 / TKET / PyZX on one circuit (``rubriq baselines``'s code: every output verified),
    each method in a separate process ended at ``time_limit_s``."""
    from rubriq.circuit.gates import UnsupportedCircuitError, strip_non_unitary
    from rubriq.extract.qasm import QASMError, QASMLimits, load_qasm
    from rubriq.suites import make_entry

    text = check_text(text, "circuit")
    methods = [m for m in (methods or BASELINE_METHODS)]
    unknown = [m for m in methods if m not in BASELINE_METHODS]
    if unknown or not methods:
        raise AppInputError(f"methods: pick from {', '.join(BASELINE_METHODS)}")
    if time_limit_s is None or not 1 <= float(time_limit_s) <= 600:
        raise AppInputError("time limit: give 1-600 seconds")
    try:
        circuit = strip_non_unitary(load_qasm(text, QASMLimits(max_bytes=MAX_INPUT_BYTES, max_qubits=256)))
        entry = make_entry("app", "input", circuit, "pasted")
    except (QASMError, ValueError, UnsupportedCircuitError) as exc:
        raise AppInputError(f"the circuit does not load as OpenQASM 2/3: {exc}") from None
    if circuit.num_qubits == 0 or circuit.size() == 0:
        raise AppInputError("the circuit does not load as OpenQASM 2/3: no qubits or no gates found in the text")
    table = []
    for method in methods:
        res = run_with_limit(entry, method, float(time_limit_s))
        depth = res.circuit.depth() if res.circuit is not None else None
        table.append([method, res.t, depth, res.verdict, round(res.seconds, 2), res.detail[:120]])
    summary = (
        f"{circuit.num_qubits} qubits, T0 = {entry.t0}, depth {circuit.depth()}; verdicts: `exact` / `qcec` "
        "= verified equivalent, anything else is not counted"
    )
    return BaselineView(summary, table)


def run_with_limit(entry, method: str, limit_s: float, work=None):
    """``run_method`` in a child process, killed at ``limit_s`` (a PyZX route can run for tens of
    minutes on one circuit): a timed-out method is reported as such.  ``work(entry, method,
    conn)``, a module-level function, replaces the child's job (tests give one that sleeps)."""
    from rubriq.baselines.runner import MethodResult

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=work or _method_child, args=(entry, method, child), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(limit_s):
            return parent.recv()
        return MethodResult(None, limit_s, "timeout", f"no result within {limit_s:g} s")
    except EOFError:
        return MethodResult(None, 0.0, "failed", "the worker process died")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()


def _method_child(entry, method, conn) -> None:
    from rubriq.baselines.runner import run_method

    conn.send(run_method(entry, method))
    conn.close()
