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
from collections import OrderedDict
from typing import Any

from qiskit import QuantumCircuit

from rubriq.budget import BudgetExceeded, Deadline
from rubriq.config import RubricConfig
from rubriq.evaluator.result import EvaluationResult
from rubriq.extract.cascade import extract
from rubriq.rubric.base import ScoringContext
from rubriq.rubric.engine import score_facts
from rubriq.rubric.facts import CircuitFacts
from rubriq.rubric.gates import UnsupportedCircuitError
from rubriq.sim.exact import SimulationTooLargeError
from rubriq.targets import Target, make_target


class RubriQEvaluator:
    """Score completions against one target with the rubric.

    ``RubriQEvaluator(target_algorithm="qft", num_qubits=4)``; other targets take their
    parameters as keywords (``phase=0.25`` for qpe, ``t=0.5`` for heisenberg ...), and
    ``target_algorithm="circuit", target_qasm=...`` scores rewrites of a given circuit.
    A ready :class:`~rubriq.targets.Target` can be passed as ``target=``.
    """

    def __init__(self, target_algorithm: str | None = None, num_qubits: int | None = None, *,
                 target: Target | None = None, target_qasm: str | None = None,
                 config: RubricConfig | None = None, cache_size: int = 4096, **target_params: Any) -> None:
        if target is None:
            if target_algorithm is None:
                raise ValueError("pass target_algorithm=... (see `rubriq targets`) or target=...")
            if target_qasm is not None:
                target_params["qasm"] = target_qasm
            target = make_target(target_algorithm, num_qubits, **target_params)
        self.target = target
        self.config = config or RubricConfig()
        self.context = ScoringContext(config=self.config, target=target)
        self._cache: OrderedDict[str, EvaluationResult] = OrderedDict()
        self._cache_size = cache_size

    def evaluate(self, text: str) -> EvaluationResult:
        """Score one completion; never raises for any input string; same input, same result."""
        key = text if isinstance(text, str) else repr(text)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        result = self._evaluate(text)
        self._cache[key] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return result

    def evaluate_circuit(self, circuit: QuantumCircuit, strategy: str = "circuit",
                         deadline: Deadline | None = None) -> EvaluationResult:
        """Score a QuantumCircuit directly (no extraction)."""
        result = EvaluationResult(parsed=True, strategy=strategy, target=self.target.spec())
        deadline = deadline or Deadline(self.config.budget.time_s)
        try:
            facts = CircuitFacts.from_circuit(circuit, max_gates=self.config.extraction.max_gates, deadline=deadline)
            rubric = score_facts(facts, dataclasses.replace(self.context, deadline=deadline))
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
        result.depth = facts.depth
        result.num_qubits = facts.num_qubits
        result.num_gates = facts.num_gates
        result.gate_counts = dict(facts.gate_counts)
        result.hardware = hw["backends"]
        result.best_backend = hw["best_backend"]
        result.circuit = facts.circuit
        return result

    def _evaluate(self, text: str) -> EvaluationResult:
        deadline = Deadline(self.config.budget.time_s)
        try:
            extraction = extract(text, self.config.extraction, deadline)
        except (BudgetExceeded, MemoryError) as exc:
            return _failed(EvaluationResult(target=self.target.spec()), "budget", str(exc) or type(exc).__name__)
        except Exception as exc:  # pragma: no cover - extract() catches its strategies' errors
            return _failed(EvaluationResult(target=self.target.spec()), "internal", f"{type(exc).__name__}: {exc}")
        if extraction.circuit is None:
            return _failed(EvaluationResult(target=self.target.spec()), "parse", extraction.error)
        return self.evaluate_circuit(extraction.circuit, extraction.strategy, deadline)


def _failed(result: EvaluationResult, kind: str, message: str | None) -> EvaluationResult:
    result.reward = 0.0
    result.error_type = kind
    result.error = message
    result.scores = {k: 0.0 for k in result.scores}
    return result


__all__ = ["EvaluationResult", "RubriQEvaluator"]
