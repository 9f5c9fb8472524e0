"""The paper's public API (Appendix H).

>>> from rubriq.evaluator import RubriQEvaluator
>>> evaluator = RubriQEvaluator(target_algorithm="qft", num_qubits=1)
>>> scores = evaluator.evaluate('OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];')
>>> scores.parsed, scores.strategy, scores.t_count, round(scores.process_fidelity, 12)
(True, 'direct_qasm', 0, 1.0)
>>> evaluator.evaluate("no circuit here").reward
0.0
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any

from qiskit import QuantumCircuit

from rubriq.budget import BudgetExceeded, Deadline
from rubriq.cache import LRUCache
from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import UnsupportedCircuitError
from rubriq.config import ExtractionConfig, RubricConfig
from rubriq.evaluator.result import EvaluationResult, is_cacheable
from rubriq.extract.cascade import extract
from rubriq.rubric.base import ScoringContext
from rubriq.rubric.engine import RubricScores, score_facts
from rubriq.sim import certified_first
from rubriq.sim.exact import SimulationTooLargeError
from rubriq.targets import Target, make_target

log = logging.getLogger(__name__)


class RubriQEvaluator:
    """Score completions against one target with the rubric.

    ``RubriQEvaluator(target_algorithm="qft", num_qubits=4)``; other targets take their
    parameters as keywords (``phase=0.25`` for qpe, ``t=0.5`` for heisenberg ...), and
    ``target_algorithm="circuit", target_qasm=...`` scores rewrites of a given circuit.
    A ready :class:`~rubriq.targets.Target` can be passed as ``target=``.
    """

    def __init__(
        self,
        target_algorithm: str | None = None,
        num_qubits: int | None = None,
        *,
        target: Target | None = None,
        target_qasm: str | None = None,
        config: RubricConfig | None = None,
        cache_size: int = 4096,
        **target_params: Any,
    ) -> None:
        if target is None:
            if target_algorithm is None:
                raise ValueError("pass target_algorithm=... (see `rubriq targets`) or target=...")
            if target_qasm is not None:
                target_params["qasm"] = target_qasm
            target = make_target(target_algorithm, num_qubits, **target_params)
        self.target = target
        self.config = config or RubricConfig()
        check_backend(self.config.fidelity.backend)
        self.extraction = completion_limits(target, self.config.extraction)
        if certified_first(target, self.config.fidelity):
            from rubriq.sim import certify

            certify.warm_up()  # the qcec worker's start-up is the target's cost, not a completion's
        self.context = ScoringContext(config=self.config, target=target)
        self._cache: LRUCache[str, EvaluationResult] = LRUCache(cache_size)
        self._scores: LRUCache[tuple, RubricScores] = LRUCache(cache_size)
        self._executor: Any = None
        self._executor_workers = 0
        self.stats = {"evaluations": 0, "text_cache_hits": 0, "circuit_cache_hits": 0, "scored": 0}
        self.sandbox_problems = check_sandbox(self.config)
        if self.config.extraction.allow_python and self.config.extraction.python_prefilter:
            from rubriq.extract.sandbox.guard import GuardError, deserialization_names

            try:  # once per machine and package versions (then read from the cache folder)
                deserialization_names()
            except GuardError as exc:  # each Python completion says so (parse error), none runs
                log.error("RubriQ pre-filter: %s", exc)

    def evaluate(self, text: str) -> EvaluationResult:
        """Score one completion; never raises for any input string; same input, same result."""
        self.stats["evaluations"] += 1
        key = text if isinstance(text, str) else repr(text)
        hit = self._cache.get(key)
        if hit is not None:
            self.stats["text_cache_hits"] += 1
            return hit
        result = self._evaluate(text)
        if is_cacheable(result):
            self._cache[key] = result
        return result

    def evaluate_circuit(
        self, circuit: QuantumCircuit, strategy: str = "circuit", deadline: Deadline | None = None
    ) -> EvaluationResult:
        """Score a QuantumCircuit directly (no extraction)."""
        result = EvaluationResult(parsed=True, strategy=strategy, target=self.target.spec())
        deadline = deadline or Deadline(self.config.budget.time_s)
        try:
            facts = CircuitFacts.from_circuit(circuit, max_gates=self.extraction.max_gates, deadline=deadline)
            rubric = self._score(facts, deadline)
        except UnsupportedCircuitError as exc:
            return _failed(result, "unsupported", str(exc))
        except SimulationTooLargeError as exc:
            return _failed(result, "simulation", str(exc))
        except (BudgetExceeded, MemoryError) as exc:
            return _failed(result, "budget", str(exc) or type(exc).__name__)
        except RecursionError as exc:
            return _failed(result, "unsupported", f"circuit nested too deeply: {exc}")
        except Exception as exc:  # a bug in the rubric must not kill a training run
            return _failed(result, "internal", f"{type(exc).__name__}: {exc}")
        fid = rubric.details["fidelity"]
        hw = rubric.details["hardware"]
        result.reward = rubric.reward
        result.scores = rubric.scores
        result.weights = rubric.weights
        result.t_count = rubric.details["tcount"]["t_count"]
        result.process_fidelity = fid["process_fidelity"]
        result.average_fidelity = fid["average_fidelity"]
        result.fidelity_kind = fid["kind"]
        result.fidelity_method = fid["method"]
        result.fidelity_interval = fid["interval"]
        result.fidelity_verdict = fid["verdict"]
        result.fidelity_note = fid["note"]
        result.depth = facts.depth
        result.num_qubits = facts.num_qubits
        result.num_gates = facts.num_gates
        result.gate_counts = dict(facts.gate_counts)
        result.hardware = hw["backends"]
        result.best_backend = hw["best_backend"]
        result.circuit = facts.circuit
        return result

    def _score(self, facts: CircuitFacts, deadline: Deadline) -> RubricScores:
        """Score facts, once per distinct circuit (identical circuits in a GRPO group, even
        with different surrounding text, are simulated once)."""
        key = facts.key()
        hit = self._scores.get(key)
        if hit is not None:
            self.stats["circuit_cache_hits"] += 1
            return hit
        rubric = self._scores[key] = score_facts(facts, dataclasses.replace(self.context, deadline=deadline))
        self.stats["scored"] += 1
        return rubric

    def evaluate_batch(self, texts: list[str], workers: int | None = None) -> list[EvaluationResult]:
        """Evaluate many completions; order-preserving, deterministic, equal to one-by-one.

        Distinct texts are scored once.  With ``workers`` > 1 they are spread over that many
        processes (each with its own evaluator built from this one's target spec and config,
        and its own sandbox); ``workers=None`` uses one process per core for batches of 8 or
        more distinct texts.
        """
        texts = list(texts)
        unique = list(dict.fromkeys(t if isinstance(t, str) else repr(t) for t in texts))
        todo = [t for t in unique if t not in self._cache]
        if workers is None:
            workers = (os.cpu_count() or 1) if len(todo) >= 8 else 1
        if workers > 1 and len(todo) > 1:
            try:
                for text, result in zip(
                    todo, self._pool(workers).map(_worker_evaluate, todo, chunksize=1), strict=True
                ):
                    if is_cacheable(result):
                        self._cache[text] = result
            except Exception:  # a broken worker pool must not stop training: finish sequentially
                self.close()
        results = {t: self.evaluate(t) for t in unique}
        return [results[t if isinstance(t, str) else repr(t)] for t in texts]

    def _pool(self, workers: int):
        if self._executor is None or self._executor_workers != workers:
            self.close()
            self._executor = spawn_pool(workers, _worker_init, (self.target.spec(), self.config.to_dict()))
            self._executor_workers = workers
        return self._executor

    def close(self) -> None:
        """Stop the batch worker processes (if any)."""
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
            self._executor = None

    def _evaluate(self, text: str) -> EvaluationResult:
        deadline = Deadline(self.config.budget.time_s)
        try:
            extraction = extract(text, self.extraction, deadline)
        except (BudgetExceeded, MemoryError) as exc:
            return _failed(EvaluationResult(target=self.target.spec()), "budget", str(exc) or type(exc).__name__)
        except Exception as exc:  # pragma: no cover - extract() catches its strategies' errors
            return _failed(EvaluationResult(target=self.target.spec()), "internal", f"{type(exc).__name__}: {exc}")
        if extraction.circuit is None:
            kind = (
                "sandbox"
                if extraction.sandbox_error
                else "budget"
                if extraction.budget_error
                else "unsupported"
                if extraction.unsupported_error
                else "limit"
                if extraction.limit_error
                else "parse"
            )
            return _failed(EvaluationResult(target=self.target.spec()), kind, extraction.error)
        result = self.evaluate_circuit(extraction.circuit, extraction.strategy or "circuit", deadline)
        result.sandbox = extraction.sandbox
        result.strategy_detail = extraction.detail
        return result


_WORKER: RubriQEvaluator | None = None


def spawn_pool(workers: int, initializer: Callable[..., None], initargs: tuple) -> Any:
    """A ``ProcessPoolExecutor`` of ``workers`` spawned processes, each set up by
    ``initializer(*initargs)`` (the evaluator's and the batch evaluator's scoring pools)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=initializer, initargs=initargs
    )


def _worker_init(spec: dict, config: dict) -> None:
    global _WORKER
    from rubriq.targets import target_from_spec

    _WORKER = RubriQEvaluator(target=target_from_spec(spec), config=RubricConfig.from_dict(config))


def _worker_evaluate(text: str) -> EvaluationResult:
    assert _WORKER is not None
    return _WORKER.evaluate(text)


_WARNED: set[tuple[str, ...]] = set()


def check_sandbox(config: RubricConfig) -> tuple[str, ...]:
    """Why the Python sandbox cannot hold here (empty when nothing is known to be wrong); said
    once per process through logging, with what it means for Python completions."""
    if not config.extraction.allow_python:
        return ()
    from rubriq.extract.sandbox import environment_problems

    problems = environment_problems()
    if problems and problems not in _WARNED:
        _WARNED.add(problems)
        consequence = (
            "Python completions will get error_type='sandbox'"
            if config.extraction.sandbox_strict
            else "Python completions will run with missing isolation layers (extraction.sandbox_strict is off)"
        )
        log.warning("RubriQ sandbox: %s. %s; see `rubriq doctor` and SECURITY.md.", "; ".join(problems), consequence)
    return problems


def check_backend(backend: str) -> None:
    """Fail at construction, with the install command, if an optional backend is missing."""
    from rubriq.sim.torch_backend import BackendUnavailable

    needs = {
        "torch": ("torch", "pip install torch"),
        "cudaq": ("cudaq", "pip install cudaq"),
        "qcec": ("mqt.qcec", "pip install mqt.qcec"),
    }
    if backend in needs:
        import importlib.util

        module, cmd = needs[backend]
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise BackendUnavailable(f"fidelity.backend={backend} needs {module}: {cmd}")


def completion_limits(target: Target, extraction: ExtractionConfig) -> ExtractionConfig:
    """The extraction caps for completions scored against ``target``: a rewrite target's caps grow
    to fit a rewrite written out gate by gate in Clifford+T (a Toffoli is one line of the
    target, 15 of the rewrite): 8 times the target's QASM bytes and 16 times its gates.  The
    T-count suite's hwb8 is 125 KB of QASM, above the 64 KB default; without this a correct
    rewrite of the larger suite circuits could not be scored.

    >>> from rubriq.targets import make_target
    >>> completion_limits(make_target("qft", 3), ExtractionConfig()) == ExtractionConfig()
    True
    """
    qasm = target.params.get("qasm") if target.family == "circuit" else None
    if not isinstance(qasm, str):
        room = target.completion_size()  # wide targets (a 100-qubit Clifford) say what a correct answer needs
        if room is None:
            return extraction
        return dataclasses.replace(
            extraction,
            max_qasm_bytes=max(extraction.max_qasm_bytes, room[0]),
            max_qubits=max(extraction.max_qubits, target.num_qubits),
            max_clbits=max(extraction.max_clbits, target.num_qubits),
            max_gates=max(extraction.max_gates, room[1]),
        )
    gates = getattr(target, "ops", ())
    return dataclasses.replace(
        extraction,
        max_qasm_bytes=max(extraction.max_qasm_bytes, 8 * len(qasm.encode())),
        max_qubits=max(extraction.max_qubits, target.num_qubits),
        max_clbits=max(extraction.max_clbits, target.num_qubits),
        max_gates=max(extraction.max_gates, 16 * len(gates)),
    )


def _failed(result: EvaluationResult, kind: str, message: str | None) -> EvaluationResult:
    result.reward = 0.0
    result.error_type = kind
    result.error = message
    result.scores = {k: 0.0 for k in result.scores}
    return result


__all__ = ["EvaluationResult", "RubriQEvaluator"]
