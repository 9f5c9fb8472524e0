"""``rubriq optimize``: a user's circuit back with fewer T gates, verified, beside the compilers.

1. the input (OpenQASM 2 / 3, or Qiskit Python run in the completions' sandbox) is loaded and
   checked (:mod:`rubriq.suites.user`: a unitary circuit, at most 256 qubits) and becomes a
   rewrite target (:class:`~rubriq.targets.circuit.CircuitTarget`);
2. a policy (a local model or one behind an OpenAI-compatible endpoint) gets the rewrite prompt
   in the style it was trained with and writes N candidates;
3. every circuit (each candidate, each compiler's output, the hybrid) is checked against the
   input by the rubric's fidelity engine (:func:`rubriq.sim.compute_fidelity` through
   :class:`~rubriq.evaluator.RubriQEvaluator`), which says how it decided: ``exact`` (dense
   simulation, |1 - F| <= 1e-12), ``clifford`` (stabilizer tableaux, exact at any width),
   ``qcec`` (mqt.qcec's equivalence proof) or ``sampled`` (an estimate with its interval: never
   counted as verified).  Only ``equivalent`` circuits are kept;
4. the compilers (Qiskit, TKET, PyZX: the routes of :mod:`rubriq.baselines.compilers`) run on
   the same input, each route within a time limit; ``then_pyzx`` runs PyZX on the policy's
   best circuit (the hybrid row ``policy+pyzx``, kept only if verified and lower in T);
5. the best verified circuit (fewest T, then fewest two-qubit gates, then depth) that does not
   have more T gates than the input is the answer, with a sidecar that says what it is and how
   it was verified (:meth:`Optimization.sidecar`).

A policy that cannot take the circuit (the prompt and a rewrite as long as the input do not fit
its context; the endpoint refuses) gets a one-line reason in its row; the compilers' rows are
computed all the same.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from qiskit import QuantumCircuit

from rubriq.evaluation.settings import OPTIMIZE_SAMPLING
from rubriq.models.sampling import SamplingSpec
from rubriq.suites.user import UserCircuit

log = logging.getLogger(__name__)

COMPILERS = ("qiskit", "tket", "pyzx")
"""The compilers ``rubriq optimize`` runs (``rubriq.baselines.compilers.METHODS``)."""
_MODULES = {"qiskit": "qiskit", "tket": "pytket", "pyzx": "pyzx"}
THEN = ("pyzx",)
"""Post-passes on the policy's best circuit (``--then``)."""


def installed_compilers() -> tuple[str, ...]:
    """The compilers of :data:`COMPILERS` whose library is installed here (the default)."""
    return tuple(c for c in COMPILERS if importlib.util.find_spec(_MODULES[c]) is not None)


def missing_compiler(name: str) -> str | None:
    """Why compiler ``name`` cannot run here (unknown, or its library missing), else None."""
    if name not in COMPILERS:
        return f"unknown compiler {name!r}; use {', '.join(COMPILERS)}"
    if importlib.util.find_spec(_MODULES[name]) is None:
        return f"{name} needs the {_MODULES[name]} package (pip install -e '.[baselines]')"
    return None


def two_qubit_count(circuit: QuantumCircuit) -> int:
    """Two-qubit gates of ``circuit``; a gate on three or more qubits (ccx, ccz, mcx, a user's
    gate ...) counts as the two-qubit gates of Qiskit's decomposition of it (ccx: 6 CX, the
    same ancilla-free decomposition whose 7 T gates the T-count counts).

    >>> qc = QuantumCircuit(3); _ = qc.cx(0, 1); _ = qc.ccx(0, 1, 2); _ = qc.t(2)
    >>> two_qubit_count(qc)
    7
    """
    from qiskit import transpile

    count, wide = 0, QuantumCircuit(circuit.num_qubits)
    for inst in circuit.data:
        n = inst.operation.num_qubits
        if n == 2:
            count += 1
        elif n > 2:
            wide.append(inst.operation, [circuit.find_bit(q).index for q in inst.qubits])
    if wide.data:
        lowered = transpile(wide, basis_gates=["u", "cx"], optimization_level=0)
        count += sum(1 for inst in lowered.data if inst.operation.num_qubits == 2)
    return count


@dataclass
class Row:
    """One method's circuit: its T-count, two-qubit gates, depth, and how it compares with the input."""

    method: str
    t: int | None = None
    two_qubit: int | None = None
    depth: int | None = None
    verdict: str = "failed"
    """``equivalent``, ``not equivalent``, ``unverified`` (an estimate only), ``failed``,
    ``skipped``, ``none`` (no candidate verified), or ``input``."""
    how: str = ""
    """How the verdict was reached: exact, clifford, qcec, sampled (the fidelity engine's method)."""
    seconds: float = 0.0
    note: str = ""
    fidelity: dict[str, Any] = field(default_factory=dict)
    """F_process, F_avg, method, interval, note of the fidelity engine."""
    kept: bool = True
    """False for a hybrid row that verified but did not lower T (shown, never chosen)."""
    circuit: QuantumCircuit | None = field(default=None, repr=False, compare=False)

    @property
    def verified(self) -> bool:
        return self.verdict == "equivalent"

    def key(self) -> tuple[int, int, int]:
        return (self.t if self.t is not None else 1 << 60, self.two_qubit or 0, self.depth or 0)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "circuit"}
        out["verified"] = self.verified
        return out


@dataclass
class Optimization:
    """What ``rubriq optimize`` found for one circuit."""

    source: UserCircuit
    t0: int
    rows: list[Row] = field(default_factory=list)
    """The input first, then the policy, the hybrid and the compilers, in that order."""
    best: Row | None = None
    """The verified circuit chosen (fewest T, then two-qubit gates, then depth; T <= T0)."""
    candidates: list[dict[str, Any]] = field(default_factory=list)
    """Every policy sample: T, verdict, F_avg, error."""
    policy: dict[str, Any] = field(default_factory=dict)
    """How the policy was sampled (model, endpoint, prompt style, samples, temperature ...)."""

    def sidecar(self, input_name: str, output_name: str | None = None) -> dict[str, Any]:
        """The JSON written beside the output circuit."""
        import hashlib

        from rubriq import __version__

        best = self.best
        return {
            "input": input_name,
            "input_sha256": hashlib.sha256(self.source.text.encode()).hexdigest(),
            "output": output_name,
            "qubits": self.source.circuit.num_qubits,
            "T0": self.t0,
            "T": best.t if best else None,
            "two_qubit": best.two_qubit if best else None,
            "depth": best.depth if best else None,
            "method": best.method if best else None,
            "verdict": best.verdict if best else None,
            "verified_by": best.how if best else None,
            "fidelity": best.fidelity if best else None,
            "t_count_convention": "RubriQ's gate table (rubriq/circuit/tcount.py): T/Tdg 1, ccx/ccz 7, "
            "odd multiples of pi/4 1, other rotations 3*ceil(log2(1/eps))",
            "rows": [r.to_dict() for r in self.rows],
            "policy": self.policy,
            "candidates": self.candidates,
            "rubriq": __version__,
        }


def verification_config(source: UserCircuit):
    """The rubric settings candidates are checked with: completion limits wide enough for a
    rewrite of this circuit, a longer time budget than GRPO's (one circuit, checked carefully)."""
    from rubriq.config import BudgetConfig, FidelityConfig, RubricConfig

    return RubricConfig(
        fidelity=FidelityConfig(certify_timeout_s=120.0, estimate_time_s=30.0),
        budget=BudgetConfig(time_s=300.0),
    )


def check_circuit(evaluator, circuit: QuantumCircuit, method: str, seconds: float = 0.0) -> Row:
    """``circuit`` against the evaluator's target (the input) by the rubric's fidelity engine."""
    from rubriq.sim import EXACT_EQUIVALENCE_TOL

    start = time.perf_counter()
    res = evaluator.evaluate_circuit(circuit)
    seconds += time.perf_counter() - start
    row = Row(method, seconds=seconds, circuit=circuit)
    if res.error_type is not None or res.process_fidelity is None:
        row.verdict, row.note = "unverified", f"{res.error_type}: {res.error}"
        return row
    row.t, row.depth, row.two_qubit = res.t_count, res.depth, two_qubit_count(circuit)
    row.how = res.fidelity_method or ""
    row.fidelity = {
        "process_fidelity": res.process_fidelity,
        "average_fidelity": res.average_fidelity,
        "method": res.fidelity_method,
        "interval": list(res.fidelity_interval) if res.fidelity_interval else None,
        "verdict": res.fidelity_verdict,
        "note": res.fidelity_note,
    }
    gap = 1.0 - res.process_fidelity
    if res.fidelity_verdict == "equivalent":
        row.verdict = "equivalent"
    elif res.fidelity_verdict is None and res.fidelity_method in ("exact", "clifford") and gap <= EXACT_EQUIVALENCE_TOL:
        row.verdict = "equivalent"
    elif res.fidelity_verdict == "not_equivalent" or (res.fidelity_method in ("exact", "clifford") and gap > 0):
        row.verdict = "not equivalent"
        row.note = f"F_process {res.process_fidelity:.6f}"
    else:
        lo_hi = res.fidelity_interval
        where = f" in [{lo_hi[0]:.6f}, {lo_hi[1]:.6f}]" if lo_hi else f" = {res.process_fidelity:.6f}"
        row.verdict = "unverified"
        row.note = f"F_process{where} ({res.fidelity_method}); not proven: {res.fidelity_note or 'no proof'}"
    return row


def run_compiler(source: UserCircuit, method: str, evaluator, route_timeout_s: float | None) -> Row:
    """The verified route of ``method`` with the fewest T (each route within ``route_timeout_s``);
    the reason of the first failure when none verifies."""
    from rubriq.baselines.compilers import METHODS, with_layout_applied
    from rubriq.baselines.runner import RouteTimeout, time_limit

    start = time.perf_counter()
    best: Row | None = None
    reasons = []
    for route in METHODS[method]:
        try:
            with time_limit(route_timeout_s):
                out = with_layout_applied(route(source.circuit))
                row = check_circuit(evaluator, out, method)
        except RouteTimeout as exc:
            reasons.append(f"{route.__name__}: timed out ({exc})")
            continue
        except Exception as exc:  # noqa: BLE001 - a compiler failing on one circuit is a row, not an abort
            reasons.append(f"{route.__name__}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
            continue
        if row.verified and (best is None or not best.verified or row.key() < best.key()):
            best = row
        elif best is None:
            best = row
        if not row.verified:
            reasons.append(f"{route.__name__}: {row.verdict} {row.note}".strip())
    if best is None:
        best = Row(method, verdict="failed", note="; ".join(reasons))
    elif not best.verified:
        best.note = "; ".join(reasons)
    best.method, best.seconds = method, time.perf_counter() - start
    return best


@dataclass
class PolicySpec:
    """How the policy is sampled."""

    model: str = "embedded"
    sampling: SamplingSpec = field(default_factory=lambda: OPTIMIZE_SAMPLING)
    """How rewrites are sampled; ``max_new_tokens`` 0: enough for a rewrite as long as the input
    (its tokens x 1.25 + 64)."""
    style: str = "full"
    endpoint: Any = None
    """An :class:`~rubriq.evaluation.endpoint.EndpointPolicy` (then ``model`` is its served name)."""


class PolicyCannotTake(ValueError):
    """The circuit does not fit the policy (its context), said in one line."""


def rewrite_row(source: UserCircuit, style: str, t_best: int | None = None) -> tuple[Any, dict]:
    """(the rewrite target, the prompt row) for ``source`` in prompt ``style``."""
    from rubriq.data.rows import target_row
    from rubriq.targets.circuit import CircuitTarget

    target = CircuitTarget(qasm=source.qasm, **({"t_best": t_best} if t_best is not None else {}))
    return target, target_row(target, "qasm2", f"optimize-{source.name}", style=style)


def token_budget(tokenizer, row: dict, source: UserCircuit, max_new_tokens: int, context: int | None) -> int:
    """The tokens to generate (``max_new_tokens``, or enough for a rewrite as long as the input);
    :class:`PolicyCannotTake` when the prompt and those tokens exceed the model's ``context``."""
    prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=True, add_generation_prompt=True)
    prompt_tokens = len(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
    circuit_tokens = len(tokenizer(source.qasm, add_special_tokens=False)["input_ids"])
    new = max_new_tokens or int(1.25 * circuit_tokens) + 64
    if context is not None and prompt_tokens + new > context:
        raise PolicyCannotTake(
            f"too large for the model's context: the prompt is {prompt_tokens:,} tokens and a rewrite as long as "
            f"the input needs ~{new:,} more, over its {context:,}-token context"
        )
    return new


def sample_policy(source: UserCircuit, spec: PolicySpec, evaluator, row: dict, policy: Any = None) -> tuple[Row, list]:
    """The policy's row (its best verified candidate) and every candidate's facts."""
    from rubriq.evaluation.sampling import as_policy

    start = time.perf_counter()
    if spec.endpoint is not None:
        policy = spec.endpoint
        max_new = spec.sampling.max_new_tokens or int(1.25 * len(source.qasm) / 3) + 64  # ~3 characters a token
    else:
        if policy is None:
            from rubriq.evaluation.evaluate import load_policy

            policy = load_policy(spec.model)
        tokenizer, model = policy
        context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        max_new = token_budget(tokenizer, row, source, spec.sampling.max_new_tokens, context)
    records = as_policy(policy).generate(
        [row], spec.sampling.replace(max_new_tokens=max_new), description="sampling rewrites"
    )
    candidates, rows = [], []
    for rec in records:
        res = evaluator.evaluate(rec.text)
        facts: dict[str, Any] = {"sample": rec.sample, "parsed": res.parsed, "error": res.error_type}
        if res.circuit is not None and res.error_type is None:
            checked = check_circuit(evaluator, res.circuit, "policy")
            rows.append(checked)
            facts.update(t=checked.t, verdict=checked.verdict, how=checked.how, F_avg=res.average_fidelity)
        candidates.append(facts)
    ok = [r for r in rows if r.verified]
    seconds = time.perf_counter() - start
    parsed = sum(1 for c in candidates if c["parsed"])
    fewer = sum(1 for r in ok if r.t is not None and r.t < evaluator.target.t0)
    tally = (
        f"{len(records)} samples ({max_new} tokens each at most): {parsed} parsed, {len(ok)} equivalent "
        f"({fewer} with T < T0), {len(rows) - len(ok)} not equivalent or unproven"
    )
    if not ok:
        return Row("policy", verdict="none", seconds=seconds, note=f"no equivalent rewrite; {tally}"), candidates
    best = min(ok, key=Row.key)
    best.seconds, best.note = seconds, tally
    return best, candidates


def then_pyzx(source: UserCircuit, start: Row, evaluator, route_timeout_s: float | None) -> Row:
    """PyZX's routes on the policy's best circuit, checked against the input; kept only when
    verified and lower in T than the policy's circuit."""
    if start.circuit is None or not start.verified:
        return Row("policy+pyzx", verdict="skipped", note="no verified policy circuit to start from", kept=False)
    seed = dataclasses.replace(source, circuit=start.circuit)
    row = run_compiler(seed, "pyzx", evaluator, route_timeout_s)
    row.method = "policy+pyzx"
    if row.verified and row.t is not None and start.t is not None and row.t >= start.t:
        row.kept = False
        row.note = f"not kept: T {row.t} is not lower than the policy's {start.t}"
    return row


def optimize(
    source: UserCircuit,
    compilers: tuple[str, ...] = (),
    spec: PolicySpec | None = None,
    then: tuple[str, ...] = (),
    route_timeout_s: float | None = 300.0,
    policy: Any = None,
    on_row=None,
) -> Optimization:
    """Sample the policy (``spec``; None: no policy), run ``compilers`` and ``then`` on
    ``source``; every circuit checked against it.  ``on_row(row)`` is called as each row is
    done; ``policy``: an already loaded (tokenizer, model) pair."""
    from rubriq.evaluator import RubriQEvaluator

    style = spec.style if spec is not None else "full"
    target, row = rewrite_row(source, style)
    evaluator = RubriQEvaluator(target=target, config=verification_config(source))
    out = Optimization(source, int(target.t0))
    base = Row(
        "input",
        t=out.t0,
        two_qubit=two_qubit_count(source.circuit),
        depth=source.circuit.depth(),
        verdict="input",
        circuit=source.circuit,
    )
    out.rows.append(base)
    done = on_row or (lambda r: None)
    done(base)
    policy_row: Row | None = None
    if spec is not None:
        out.policy = {
            "model": spec.model,
            "endpoint": getattr(spec.endpoint, "endpoint", None),
            "prompt_style": spec.style,
            "samples": spec.sampling.samples,
            "temperature": spec.sampling.temperature,
            "top_p": spec.sampling.top_p,
            "seed": spec.sampling.seed,
        }
        try:
            policy_row, out.candidates = sample_policy(source, spec, evaluator, row, policy)
        except PolicyCannotTake as exc:
            policy_row = Row("policy", verdict="skipped", note=str(exc))
        except (RuntimeError, ValueError, OSError) as exc:  # an endpoint's error, a model that does not load
            policy_row = Row("policy", verdict="failed", note=" ".join(str(exc).split()))
        out.rows.append(policy_row)
        done(policy_row)
        if "pyzx" in then:
            hybrid = then_pyzx(source, policy_row, evaluator, route_timeout_s)
            out.rows.append(hybrid)
            done(hybrid)
    for name in compilers:
        compiled = run_compiler(source, name, evaluator, route_timeout_s)
        out.rows.append(compiled)
        done(compiled)
    eligible = [
        r for r in out.rows[1:] if r.verified and r.kept and r.t is not None and r.t <= out.t0 and r.circuit is not None
    ]
    out.best = min(eligible, key=Row.key) if eligible else None
    return out


__all__ = [
    "COMPILERS",
    "THEN",
    "Optimization",
    "PolicyCannotTake",
    "PolicySpec",
    "Row",
    "check_circuit",
    "installed_compilers",
    "missing_compiler",
    "optimize",
    "rewrite_row",
    "run_compiler",
    "sample_policy",
    "two_qubit_count",
]
