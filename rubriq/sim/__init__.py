"""Fidelity backends and the one function that picks among them.

``compute_fidelity`` reads ``FidelityConfig.backend``:

* ``auto`` / ``numpy``: exact NumPy engine (``exact.py``) up to ``max_exact_qubits``, the
  sampled estimator (``sampled.py``) above, up to ``max_sampled_qubits``;
* ``torch``: the same two methods on torch tensors (``torch_backend.py``), CUDA if available;
* ``cudaq``: CUDA-Q state vectors (``cudaq_backend.py``; never run on this project's machines);
* ``qcec``: every exact-reference unitary target is certified first (below).

Certified (rewrite targets always, every exact target with ``backend: qcec``), decided by
cost, not by kind:

* **exact first** where RubriQ's exact engine is cheap (the target's dense unitary exists and
  gates x 4^n <= ``CHEAP_EXACT_WORK``, a few ms): F = 1 to numerical tolerance
  (``EXACT_EQUIVALENCE_TOL``) is ``equivalent``, F below 1 - ``DISPROOF_TOL`` is
  ``not_equivalent`` with its exact distance (a counterexample is a proof), both with method
  ``exact``; only the sliver between the two goes on to qcec;
* **qcec first** elsewhere: mqt.qcec decides equivalence with the target's reference circuit in
  a killable worker (``certify.py``), within ``certify_timeout_s`` and the evaluation's
  deadline, at any width.  ``equivalent`` gives F = 1 (method ``qcec``).  Otherwise
  (``not_equivalent`` or ``unknown``) the distance is estimated within ``estimate_time_s``:
  exact where the dense target exists and the work is small, else sampled with its interval;
  when neither fits (too wide, too slow), F_process = 0 with the verdict and the reason in
  ``note``.

Clifford first (``clifford.py``): when ``target.clifford()`` exists and the candidate's gates
are all Clifford, the fidelity is computed exactly from stabilizer tableaux (method
``clifford``), at any width, before any of the above; other candidates take the paths above.

Wider circuits than ``target + max_ancillas`` are refused before any simulation.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from rubriq.budget import BudgetExceeded, Deadline
from rubriq.config import FidelityConfig
from rubriq.sim.exact import FidelityResult, SimulationTooLargeError, state_fidelity, unitary_fidelity
from rubriq.sim.measures import average_fidelity
from rubriq.sim.sampled import sampled_fidelity
from rubriq.sim.torch_backend import BackendUnavailable

log = logging.getLogger(__name__)


def compute_fidelity(facts, target, cfg: FidelityConfig, deadline=None, memory_mb=None) -> FidelityResult:
    """F_process and F_avg of the circuit in ``facts`` against ``target`` (see the module docstring
    for which method applies); raises SimulationTooLargeError / BudgetExceeded when none fits."""
    n_c, n_t = facts.num_qubits, target.num_qubits
    if n_c > n_t + cfg.max_ancillas:
        raise SimulationTooLargeError(
            f"circuit has {n_c} qubits for a {n_t}-qubit target (at most {cfg.max_ancillas} ancillas)"
        )
    # -- exact Clifford check (issue #27, rubriq/sim/clifford.py): a Clifford candidate for a
    # Clifford target is decided from stabilizer tableaux, exactly, at any width --------------
    from rubriq.sim.clifford import clifford_fidelity

    tableau = clifford_fidelity(facts, target)
    if tableau is not None:
        return tableau
    if target.kind == "state" and max(n_c, n_t) > cfg.max_state_qubits:
        raise SimulationTooLargeError(
            f"{max(n_c, n_t)} qubits exceed the state-simulation cap of {cfg.max_state_qubits} "
            "(only Clifford candidates of stabilizer-state targets are scored beyond it)"
        )
    # -- end of the Clifford check ------------------------------------------------------------
    if certified_first(target, cfg) and n_c <= n_t:
        decided = _cheap_exact(facts, target, cfg, deadline, memory_mb)
        if decided is not None:
            return decided
        try:
            return _certified(facts, target, cfg, deadline or Deadline(None), memory_mb)
        except BackendUnavailable:
            if cfg.backend == "qcec":
                raise
            _warn_once(
                "mqt.qcec is not installed: rewrite targets are simulated, not certified "
                "(exact up to max_exact_qubits, sampled up to max_sampled_qubits)"
            )
    return _simulated(facts, target, cfg, deadline, memory_mb)


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning(message)


def certified_first(target, cfg: FidelityConfig) -> bool:
    """Whether candidates for ``target`` go to mqt.qcec before any simulation."""
    return (
        target.kind == "unitary"
        and target.reference_is_exact
        and (cfg.backend == "qcec" or getattr(target, "certify_first", False))
    )


# a dense exact check costs ~ gates x 4^n amplitude updates (~1e9/s on one core); above this the
# distance of a non-equivalent candidate is sampled instead (an interval, in far less time)
EXACT_WORK_LIMIT = 2**31
FIRST_CERTIFY_S = 2.0
"""qcec's first attempt; every T-count suite circuit's own QASM is certified in <= 0.85 s
(benchmarks/results/rewrite.md), while a near miss can keep qcec busy for minutes (hwb8 with
one T flipped: 7-87 s)."""
DISPROOF_TOL = 1e-9
"""An equivalent candidate simulates to F = 1 - O(1e-12) by either estimator (every sampled
overlap is the same phase); F below 1 - DISPROOF_TOL is a counterexample, i.e. a proof."""


CHEAP_EXACT_WORK = 2**28
"""Gates x 4^n up to which a certified target's candidate is decided by exact simulation first:
~0.1-0.3 s at most on one core, and a few ms for the small circuits GRPO scores, where a round
trip to the qcec worker alone costs ~15 ms (benchmarks/results/fidelity.md)."""
EXACT_EQUIVALENCE_TOL = 1e-12
"""|1 - F_process| below which an exact simulation counts as equivalence: double-precision
noise of the engine is ~1e-14 on circuits of this size, and a candidate off by one T gate, or
by a rotation of 1e-5 rad, is further than this from the target."""


def _cheap_exact(facts, target, cfg: FidelityConfig, deadline, memory_mb) -> FidelityResult | None:
    """The exact verdict of a certified target's candidate when simulating it is cheap (see the
    module docstring); None when it is not cheap or not conclusive (then qcec decides)."""
    n = max(facts.num_qubits, target.num_qubits)
    if (
        cfg.backend not in ("auto", "numpy")
        or n > cfg.max_exact_qubits
        or target.num_qubits > target.max_dense_qubits
        or len(facts.ops) * 4**n > CHEAP_EXACT_WORK
    ):
        return None
    try:
        exact = unitary_fidelity(
            facts.ops, facts.num_qubits, target.unitary(), cfg.max_exact_qubits, deadline, memory_mb, cfg.threads
        )
    except SimulationTooLargeError:
        return None
    gap = 1.0 - exact.process_fidelity
    if gap <= EXACT_EQUIVALENCE_TOL:
        return dataclasses.replace(
            exact,
            process_fidelity=1.0,
            average_fidelity=1.0,
            verdict="equivalent",
            note=f"exact simulation: |1 - F| = {max(gap, 0.0):.1e} <= {EXACT_EQUIVALENCE_TOL:g}",
        )
    if gap >= DISPROOF_TOL:
        return dataclasses.replace(exact, verdict="not_equivalent", note="exact simulation (a counterexample)")
    return None


def _certified(facts, target, cfg: FidelityConfig, deadline: Deadline, memory_mb) -> FidelityResult:
    """Certify with qcec; if it cannot decide quickly, simulate (a counterexample settles it),
    then give qcec the rest of its time.  See the module docstring."""
    d = 2**target.num_qubits
    first = _certify(facts, target, min(cfg.certify_timeout_s, FIRST_CERTIFY_S), deadline)
    if first.verdict == "equivalent":
        return _equivalent(first)
    estimate, why = _estimate(facts, target, cfg, deadline, memory_mb)
    if first.verdict == "unknown" and (estimate is None or estimate.process_fidelity >= 1 - DISPROOF_TOL):
        second = _certify(facts, target, cfg.certify_timeout_s - first.seconds, deadline)
        if second.verdict == "equivalent":
            return _equivalent(second)
        first = second if second.verdict == "not_equivalent" else first
    if estimate is None:
        return FidelityResult(
            "process",
            0.0,
            average_fidelity(0.0, d),
            None,
            method="qcec",
            verdict=first.verdict,
            note=f"qcec: {first.detail}; no estimate within the limits ({why}): F set to 0",
        )
    if first.verdict == "not_equivalent":
        return dataclasses.replace(estimate, verdict="not_equivalent", note=f"qcec: {first.detail}")
    if estimate.process_fidelity < 1 - DISPROOF_TOL:
        return dataclasses.replace(
            estimate, verdict="not_equivalent", note=f"disproved by simulation (qcec: {first.detail})"
        )
    return dataclasses.replace(estimate, verdict="unknown", note=f"not certified (qcec: {first.detail})")


def _equivalent(verdict) -> FidelityResult:
    return FidelityResult(
        "process",
        1.0,
        1.0,
        None,
        method="qcec",
        verdict="equivalent",
        note=f"certified by mqt.qcec ({verdict.detail}) in {verdict.seconds:.2f} s",
    )


def _certify(facts, target, seconds: float, deadline: Deadline):
    from rubriq.sim.certify import Verdict, certify

    left = deadline.remaining()
    timeout = seconds if left is None else min(seconds, left - 0.05)
    if timeout <= 0.01:
        if deadline.expired():
            raise BudgetExceeded(f"time budget of {deadline.seconds:g} s exhausted during certification")
        return Verdict("unknown", "no time left for qcec", 0.0)
    verdict = certify(facts.circuit, target.reference_circuit(), timeout_s=timeout)
    if verdict.verdict == "unknown" and timeout < seconds:
        # undecided because the evaluation's budget, not qcec's own limit, ran out
        raise BudgetExceeded(f"time budget of {deadline.seconds:g} s exhausted during certification")
    return verdict


def _estimate(facts, target, cfg: FidelityConfig, deadline: Deadline, memory_mb):
    """(F estimate, None) within ``estimate_time_s``, or (None, why) when none fits."""
    n = max(facts.num_qubits, target.num_qubits)
    work = len(facts.ops) * 4**n
    limit = deadline.within(cfg.estimate_time_s)
    try:
        if n <= cfg.max_exact_qubits and target.num_qubits <= target.max_dense_qubits and work <= EXACT_WORK_LIMIT:
            return unitary_fidelity(
                facts.ops, facts.num_qubits, target.unitary(), cfg.max_exact_qubits, limit, memory_mb, cfg.threads
            ), None
        return sampled_fidelity(
            facts.ops,
            facts.num_qubits,
            target,
            cfg.samples,
            cfg.sample_seed,
            cfg.confidence_z,
            cfg.max_sampled_qubits,
            limit,
            memory_mb,
        ), None
    except (SimulationTooLargeError, BudgetExceeded) as exc:
        if deadline.expired():
            raise BudgetExceeded(f"time budget of {deadline.seconds:g} s exhausted during simulation") from None
        return None, str(exc)


def _simulated(facts, target, cfg: FidelityConfig, deadline, memory_mb) -> FidelityResult:
    n_c, n_t = facts.num_qubits, target.num_qubits
    backend = cfg.backend
    if target.kind == "state":
        if backend == "torch":
            from rubriq.sim.torch_backend import TorchBackend

            return TorchBackend(cfg.torch_device).state_fidelity(
                facts.ops, n_c, target.state(), cfg.max_state_qubits, deadline, memory_mb
            )
        if backend == "cudaq":
            from rubriq.sim import cudaq_backend

            return cudaq_backend.state_fidelity(facts.ops, n_c, target.state(), cfg.max_state_qubits)
        return state_fidelity(facts.ops, n_c, target.state(), cfg.max_state_qubits, deadline, memory_mb)
    exact = max(n_c, n_t) <= cfg.max_exact_qubits and n_t <= target.max_dense_qubits
    sampler: Any = None
    if backend == "torch":
        from rubriq.sim.torch_backend import TorchBackend

        sampler = TorchBackend(cfg.torch_device)
        if exact:
            return sampler.unitary_fidelity(facts.ops, n_c, target.unitary(), cfg.max_exact_qubits, deadline, memory_mb)
    elif backend == "cudaq":
        from rubriq.sim.cudaq_backend import CudaqSampler

        sampler, exact = CudaqSampler(), False
    if exact:
        return unitary_fidelity(
            facts.ops, n_c, target.unitary(), cfg.max_exact_qubits, deadline, memory_mb, cfg.threads
        )
    return sampled_fidelity(
        facts.ops,
        n_c,
        target,
        cfg.samples,
        cfg.sample_seed,
        cfg.confidence_z,
        cfg.max_sampled_qubits,
        deadline,
        memory_mb,
        sampler,
    )


__all__ = ["BackendUnavailable", "FidelityResult", "SimulationTooLargeError", "certified_first", "compute_fidelity"]
