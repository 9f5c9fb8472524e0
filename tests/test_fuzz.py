"""Property tests: on generated and mutated completions the evaluator never raises and
returns a well-formed result (the budget itself is tested deterministically, with completions
that would run forever: tests/test_extraction.py, tests/test_rewrite.py, tests/test_hostile.py).
Longer runs: python fuzz/fuzz_evaluator.py."""

from hypothesis import HealthCheck, given, settings

from rubriq.config import BudgetConfig, ExtractionConfig, RubricConfig
from rubriq.evaluator import RubriQEvaluator
from tests.fuzz_strategies import completions, mutated, qasm_programs

CFG = RubricConfig(extraction=ExtractionConfig(python_timeout_s=3.0), budget=BudgetConfig(time_s=10.0))
EVALUATOR = RubriQEvaluator(target_algorithm="qft", num_qubits=3, config=CFG)


def _check(text: str) -> None:
    result = EVALUATOR.evaluate(text)
    assert 0.0 <= result.reward <= 1.0
    assert (result.error is None) == (result.error_type is None)
    if result.error_type is not None:
        assert result.reward == 0.0
    result.to_dict()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated(qasm_programs()))
def test_mutated_qasm_never_raises(text):
    _check(text)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(completions())
def test_completions_never_raise(text):
    _check(text)
