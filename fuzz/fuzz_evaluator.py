"""Long fuzzing run of the evaluator (outside CI).

    .venv/bin/python fuzz/fuzz_evaluator.py --examples 20000

Uses the same generators as tests/test_fuzz.py with a much larger budget and prints the
error-type mix.  Any exception or time-limit breach stops the run with the failing input.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from rubriq.config import BudgetConfig, ExtractionConfig, RubricConfig  # noqa: E402
from rubriq.evaluator import RubriQEvaluator  # noqa: E402
from tests.fuzz_strategies import completions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--time-limit", type=float, default=15.0)
    args = parser.parse_args()
    cfg = RubricConfig(extraction=ExtractionConfig(python_timeout_s=3.0), budget=BudgetConfig(time_s=10.0))
    evaluator = RubriQEvaluator(target_algorithm="qft", num_qubits=3, config=cfg, cache_size=0)
    mix: collections.Counter[str] = collections.Counter()

    @settings(max_examples=args.examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(completions())
    def run(text):
        start = time.monotonic()
        result = evaluator.evaluate(text)
        assert time.monotonic() - start < args.time_limit, text
        mix[result.error_type or "ok"] += 1

    run()
    print(dict(mix))


if __name__ == "__main__":
    main()
