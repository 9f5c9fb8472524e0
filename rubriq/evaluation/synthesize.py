"""``rubriq synthesize``: best-of-N synthesis for one spec, with an optional verified post-pass.

1. the spec -> a target: ``--target`` and ``--qubits`` (and ``--param k=v``), or recognized in
   free text ("a 4-qubit QFT", "3-qubit phase estimation of phase 0.25", ...);
   otherwise an error that lists the targets it understands;
2. N completions of the target's prompt (the prompt the policy was trained on), each scored
   with the rubric;
3. the best functionally correct completion by reward (F_avg >= 1 - eps), as QASM with its
   score breakdown and a text drawing;
4. ``optimize``: compiler post-passes (PyZX, Qiskit O3); a rewrite is kept only if it is
   verified equivalent to the sampled circuit (``baselines/verify.py``: exactly up to 10
   qubits, mqt.qcec beyond), the rubric re-scores it as correct against the target, and its
   T-count or depth is lower.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from qiskit import QuantumCircuit

from rubriq.evaluation.metrics import DEFAULT_EPS
from rubriq.evaluation.records import Candidate, Rewrite
from rubriq.evaluation.settings import SYNTHESIS_SAMPLING
from rubriq.evaluator.result import is_correct
from rubriq.models.sampling import SamplingSpec
from rubriq.targets import TARGETS, Target, make_target

log = logging.getLogger(__name__)

# keyword -> target name (first match wins; longer phrases first)
KEYWORDS = (
    ("quantum phase estimation", "qpe"),
    ("phase estimation", "qpe"),
    ("qpe", "qpe"),
    ("quantum fourier transform", "qft"),
    ("fourier", "qft"),
    ("qft", "qft"),
    ("heisenberg", "heisenberg"),
    ("transverse-field ising", "tfim"),
    ("transverse field ising", "tfim"),
    ("ising", "tfim"),
    ("tfim", "tfim"),
    ("amplitude encoding", "amplitude_encoding"),
    ("angle encoding", "angle_encoding"),
    ("basis encoding", "basis_encoding"),
)
UNDERSTOOD = (
    "a N-qubit QFT / quantum Fourier transform (inverse: 'inverse QFT'), N-qubit quantum phase "
    "estimation (phase p), N-qubit Heisenberg or transverse-field Ising evolution (time t), N-qubit "
    "amplitude / angle / basis encoding"
)


class SpecNotUnderstood(ValueError):
    """The free-text spec names no target RubriQ knows (the message lists what it understands)."""

    pass


def target_from_text(text: str) -> Target:
    """Recognize a target and its size in a natural-language spec.

    >>> target_from_text("Synthesize a 4-qubit QFT circuit with few T gates").spec()["num_qubits"]
    4
    >>> target_from_text("3-qubit phase estimation of phase 0.25").spec()["phase"]
    0.25
    """
    low = text.lower()
    name = next((t for k, t in KEYWORDS if k in low), None)
    size = re.search(r"(\d+)\s*-?\s*qubits?", low)
    if name is None or size is None:
        raise SpecNotUnderstood(
            f"cannot map this text to a target; I understand: {UNDERSTOOD}. Or pass "
            f"--target ({', '.join(sorted(TARGETS))}) and --qubits"
        )
    params: dict[str, Any] = {}
    if name == "qft" and "inverse" in low:
        params["inverse"] = True
    number = r"([0-9]*\.?[0-9]+)"
    if name == "qpe" and (m := re.search(r"phase\s*(?:of|=|phi|)\s*" + number, low)):
        params["phase"] = float(m.group(1))
    if name in ("heisenberg", "tfim") and (m := re.search(r"(?:time|t)\s*=?\s*" + number, low)):
        params["t"] = float(m.group(1))
    return make_target(name, int(size.group(1)), **params)


@dataclass
class Synthesis:
    """The outcome of best-of-N synthesis for one target."""

    target: Target
    candidates: list[Candidate] = field(default_factory=list)
    """Every sampled candidate with its rubric result and circuit, in sampling order."""
    best: Candidate | None = None
    """The functionally correct candidate with the highest reward (None if none is correct)."""
    circuit: QuantumCircuit | None = None
    """The best candidate's circuit."""
    optimized: Rewrite | None = None
    """The post-pass rewrite kept (``optimize``), if any."""


def synthesize(
    target: Target,
    model: str = "embedded",
    sampling: SamplingSpec = SYNTHESIS_SAMPLING,
    fmt: str = "qasm2",
    eps: float = DEFAULT_EPS,
    optimize: bool = False,
    config=None,
    policy=None,
    evaluator=None,
    on_batch=None,
    style: str | None = None,
) -> Synthesis:
    """``sampling.samples`` candidates for ``target``; ``policy``: an already loaded (tokenizer, model) pair or an
    :class:`~rubriq.evaluation.endpoint.EndpointPolicy` (a model behind an OpenAI-compatible
    endpoint), else ``model`` is loaded; ``evaluator``: a RubriQEvaluator for ``target`` to
    reuse; ``on_batch(done, total)``: generation progress; ``style``: the prompt style (default:
    the one ``model`` was trained with, from its ``rubriq_policy.json``; ``full`` otherwise)."""
    from rubriq.evaluation.evaluate import load_policy, prompt_style_of
    from rubriq.evaluation.sampling import as_policy
    from rubriq.evaluator import RubriQEvaluator

    style = style or (prompt_style_of(model) if policy is None else "full")
    if policy is None:
        policy = load_policy(model)
    row = {
        "id": f"{target.name}-{target.num_qubits}",
        "prompt": target.prompt(fmt, style),
        "format": fmt,
        "target": target.spec(),
        "t0": target.t0,
    }
    records = as_policy(policy).generate(
        [row], sampling, description="sampling candidates", on_batch=on_batch, progress=on_batch is None
    )
    evaluator = evaluator or RubriQEvaluator(target=target, config=config)
    out = Synthesis(target)
    for rec in records:
        result = evaluator.evaluate(rec.text)
        out.candidates.append(Candidate(rec.scored(result), result.circuit))
    correct = [c for c in out.candidates if is_correct(c.result, 1 - eps)]
    if correct:
        out.best = max(correct, key=lambda c: c.result["reward"])
        out.circuit = out.best.circuit
        if optimize and out.circuit is not None:
            out.optimized = post_pass(out.circuit, evaluator, eps)
    return out


def post_pass(circuit: QuantumCircuit, evaluator, eps: float = DEFAULT_EPS) -> Rewrite | None:
    """The best compiler rewrite of ``circuit`` that is verified equivalent to it (exact or
    qcec), still correct against the target, and lowers the T-count or the depth; or None."""
    from rubriq.baselines.compilers import pyzx_full_reduce, pyzx_teleport, qiskit_o3
    from rubriq.baselines.runner import VERIFIED
    from rubriq.baselines.verify import verify

    base = evaluator.evaluate_circuit(circuit)
    best: Rewrite | None = None
    for name, route in (
        ("pyzx_teleport", pyzx_teleport),
        ("pyzx_full_reduce", pyzx_full_reduce),
        ("qiskit_o3", qiskit_o3),
    ):
        try:
            candidate = route(circuit)
        except Exception as exc:  # noqa: BLE001 - a compiler failing on one circuit is not fatal
            log.warning("post-pass %s failed: %s", name, exc)
            continue
        verdict, detail = verify(circuit, candidate)
        if verdict not in VERIFIED:
            log.info("post-pass %s: not kept, %s (%s)", name, verdict, detail)
            continue
        res = evaluator.evaluate_circuit(candidate)
        if res.t_count is None or res.depth is None:
            continue
        better = res.t_count <= base.t_count and (res.t_count < base.t_count or res.depth < base.depth)
        if is_correct(res, 1 - eps) and better and (best is None or res.reward > best.result["reward"]):
            best = Rewrite(name, res.to_dict(), candidate, verdict)
    return best
