"""Stage 5, the evaluations: every arm-seed is evaluated at steps 0, ``eval_every``, ...
``steps`` (or ``eval_at``) by **sampling** ``samples`` completions per prompt at the training
temperature, scored with the training config's rubric (the paper's reward: one yardstick for
all arms), on the held-out split (``split`` ``test`` in its rows), on each further held-out tier
(``eval_tiers``: ``split`` the tier's name) and, with ``train_eval_prompts``, on a fixed sample
of training prompts (learning on its own prompts vs generalization; ``split`` ``train``).

The sampling seed depends on (seed, step) and the prompt set only (:func:`eval_seed`), so at a
given step all arms draw with the same seed; with ``same_eval_seed`` it is step 0's at every
step (common random numbers across steps too).  Step 0 (the warm-start, for every arm) is
evaluated once per seed and shared (:func:`step0_evaluation`).
"""

from __future__ import annotations

import json
import statistics
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubriq.config import RubricConfig
from rubriq.evaluation.records import RecordLike
from rubriq.studies import layout
from rubriq.studies.settings import REWRITE_OUTCOMES


def eval_seed(seed: int, step: int, split: str = "test") -> int:
    """Sampling seed of the evaluation of prompt set ``split`` at ``step`` (equal for every arm).

    >>> eval_seed(0, 50), eval_seed(0, 50, "train"), eval_seed(0, 50, "hard")
    (1000053, 1000060, 1000154)
    """
    offset = {"test": 0, "train": 7}.get(split)
    if offset is None:  # a further tier: an offset of its own, whatever the order of the tiers
        offset = 11 + zlib.crc32(split.encode()) % 1000
    return 1_000_003 * (seed + 1) + step + offset


def held_out_metrics(
    records: Sequence[RecordLike], k: int, eps: float, t_pyzx: dict[str, int] | None = None
) -> dict[str, Any]:
    """EVAL_METRICS of scored records (see docs/metrics.md); ``t_pyzx`` maps prompt ids of small
    rewrite prompts to their PyZX optimum (the gap metrics, :func:`analysis.rewrite_gap`)."""
    from rubriq.evaluation.metrics import summarize
    from rubriq.evaluator.result import is_correct
    from rubriq.studies.analysis import family_of_spec, rewrite_gap

    s = summarize(records, eps, ks=(k,))
    t_correct = [r["result"]["t_count"] for r in records if is_correct(r["result"], 1 - eps)]
    gap = rewrite_gap(records, t_pyzx or {}, eps)
    is_rewrite = [family_of_spec(r.get("target") or "") == "rewrite" for r in records]
    rewrite = [r for r, w in zip(records, is_rewrite, strict=True) if w]
    synthesis = [r for r, w in zip(records, is_rewrite, strict=True) if not w]

    def rate(rs):
        return statistics.fmean(1.0 if is_correct(r["result"], 1 - eps) else 0.0 for r in rs) if rs else None

    return {
        "mean_reward": s["mean_reward"],
        "correct_rate": s["correct_rate"],
        "pass@k": s.get(f"pass@{k}"),
        "mean_t_correct": statistics.fmean(t_correct) if t_correct else None,
        "wrong_rewarded_rate": s["wrong_rewarded_rate"],
        "trivial_rate": s["trivial_rate"],
        "parse_rate": s["parse_rate"],
        "mean_fidelity": s["mean_fidelity"],
        "compression": s.get("compression"),
        "gap_closed": gap["gap_closed"],
        "reached_pyzx": gap["reached_pyzx"],
        "t_gap_pyzx": gap["t_gap_pyzx"],
        "rewrite_correct_rate": rate(rewrite),
        "synthesis_correct_rate": rate(synthesis),
        **rewrite_outcomes(rewrite, eps),
        "completions": s["completions"],
    }


def rewrite_outcomes(records: Sequence[RecordLike], eps: float) -> dict[str, float | None]:
    r"""Of the rewrite samples among ``records`` (the others are skipped): the fractions that are
    a correct verbatim copy of the input, correct with fewer T than the input, and not correct
    (:data:`rubriq.studies.settings.REWRITE_OUTCOMES`; None without rewrite samples).

    >>> spec = '{"algorithm": "circuit", "qasm": "qreg q[1];\\nt q[0];\\nt q[0];\\n"}'
    >>> ok = lambda t: {"parsed": True, "average_fidelity": 1.0, "t_count": t}
    >>> recs = [{"target": spec, "t0": 2, "text": "qreg q[1];\nt q[0];\nt q[0];", "result": ok(2)},
    ...         {"target": spec, "t0": 2, "text": "qreg q[1];\ns q[0];", "result": ok(0)},
    ...         {"target": spec, "t0": 2, "text": "qreg q[1];", "result": dict(ok(0), average_fidelity=0.5)},
    ...         {"target": '{"algorithm": "ghz", "num_qubits": 2}', "t0": 0, "text": "", "result": ok(0)}]
    >>> rewrite_outcomes(recs, 0.01)  # of 3 rewrite samples: a copy, a reduction, a wrong one
    {'rewrite_copy_rate': 0.3333333333333333, 'rewrite_reduction_rate': 0.3333333333333333, 'rewrite_wrong_rate': 0.3333333333333333}
    """
    from rubriq.studies.analysis import family_of_spec, rewrite_copies

    rewrite = [r for r in records if family_of_spec(str(r.get("target") or "")) == "rewrite"]
    if not rewrite:
        return dict.fromkeys(REWRITE_OUTCOMES)
    counts, n = rewrite_copies(rewrite, eps), len(rewrite)
    return {
        "rewrite_copy_rate": counts["copies"] / n,
        "rewrite_reduction_rate": counts["fewer_t"] / n,
        "rewrite_wrong_rate": (n - counts["correct"]) / n,
    }


class Evaluator:
    """Samples and scores a policy on a fixed set of rows (the held-out split, or the sample of
    training prompts) without disturbing training's RNG, generating the way GRPO does (shared
    prefill, completions ended after their code block)."""

    def __init__(self, study, settings, tokenizer, rows: list[dict], split: str = "test") -> None:
        self.study, self.tokenizer, self.rows, self.split = study, tokenizer, rows, split
        self.end_after_code_block = settings.generation.end_after_code_block
        self.t_pyzx = {r["id"]: int(r["t_pyzx"]) for r in rows if r.get("t_pyzx") is not None}
        self.rubric: RubricConfig = settings.rubric
        self.eps = 1 - settings.rubric.fidelity.correct_threshold
        self.sampling = study.held_out_sampling(settings)

    def __call__(self, model, seed: int, step: int, records_path: Path | None = None) -> dict[str, Any]:
        import torch

        from rubriq.evaluation.sampling import generate, save_records, score
        from rubriq.models.generation import GenerationFlags, install_prefix_generate

        flags = GenerationFlags.of_generate(self.end_after_code_block)
        install_prefix_generate(model, self.tokenizer, flags)  # idempotent
        state, training = torch.random.get_rng_state(), model.training
        start = time.perf_counter()
        try:
            records = generate(
                model,
                self.tokenizer,
                self.rows,
                self.sampling.replace(seed=eval_seed(seed, 0 if self.study.same_eval_seed else step, self.split)),
                batch_size=self.study.batch_size,
                progress=False,
                sampler="generate",  # transformers' generate, as the committed studies' evaluations were drawn
            )
        finally:
            torch.random.set_rng_state(state)
            model.train(training)
        scored = score(records, self.rubric)
        if records_path is not None:
            save_records(scored, records_path)
        return {
            "step": step,
            "split": self.split,
            **held_out_metrics(scored, self.sampling.samples, self.eps, self.t_pyzx),
            "eval_seconds": time.perf_counter() - start,
        }


def train_sample(study, rows: list[dict]) -> list[dict]:
    """The fixed sample of ``train_eval_prompts`` training prompts (the same for every arm and seed)."""
    import numpy as np

    if not study.train_eval_prompts:
        return []
    order = np.random.default_rng(20261201).permutation(len(rows))
    return [rows[i] for i in sorted(order[: study.train_eval_prompts])]


def study_evaluators(study, data, warm) -> list[Evaluator]:
    """The held-out evaluation, with ``train_eval_prompts`` the training-prompt one, and one per
    further tier (``eval_tiers``), in that order."""
    evaluators = [Evaluator(study, data.settings, warm.tokenizer, data.eval_rows)]
    sample = train_sample(study, data.train_rows)
    if sample:
        evaluators.append(Evaluator(study, data.settings, warm.tokenizer, sample, split="train"))
    for name, rows in data.tiers.items():
        evaluators.append(Evaluator(study, data.settings, warm.tokenizer, rows, split=name))
    return evaluators


def step0_evaluation(evaluate: Evaluator, warm, out: Path, seed: int) -> dict:
    """The warm-start's evaluation for ``seed`` (``OUT/step0``), computed once and shared by every arm."""
    path = layout.step0_path(out, evaluate.split, seed)
    if path.is_file():
        return json.loads(path.read_text())
    row = evaluate(warm.load(), seed, 0, layout.step0_records(out, evaluate.split, seed))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row, indent=2))
    return row


__all__ = [
    "Evaluator",
    "eval_seed",
    "held_out_metrics",
    "rewrite_outcomes",
    "step0_evaluation",
    "study_evaluators",
    "train_sample",
]
