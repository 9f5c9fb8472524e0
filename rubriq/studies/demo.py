"""``rubriq study demo`` (``make demo``): what the rewriting study's policies do, side by side.

From the committed weights, on a few of the rewriting study's held-out test targets (circuits to
rewrite with fewer T gates, never trained on): the base model, the SFT warm-start and the GRPO
policy (each when its weights are committed) are sampled alike, every sample is scored by the
rubric (extraction in the sandbox, F_avg against the input circuit), and each is sorted into a
correct reduction (F_avg >= 1 - eps and T < T0), a copy of the input, another correct circuit, or a
wrong one. The report (``OUT/report.md``) gives the correct-reduction rate of each policy with its
95% Wilson interval, and one verified sample with fewer T gates (input and output circuits, T0 ->
T, F_avg), or says plainly that none was found. Then a few GRPO steps from the warm-start on the
study's training prompts, so that the whole pipeline (sampling, sandboxed scoring, reward, LoRA
update) runs on the machine.

Settings: :class:`DemoSettings` (``configs/demo_rewriting.yaml``). The held-out and training
prompts are the study's, as its kept units commit them (``results/studies/rewriting/grpo/data``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rubriq.config import ConfigError, load_yaml_mapping
from rubriq.models.generation import Sampler
from rubriq.models.sampling import SamplingSpec

log = logging.getLogger(__name__)

OUTCOMES = ("reduction", "copy", "other_correct", "wrong")
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo_rewriting.yaml"
"""Shipped with the package (rubriq/configs, a link to the repository's configs/ in a checkout)."""


@dataclass(frozen=True)
class DemoSettings:
    """What ``rubriq study demo`` samples and trains; YAML maps onto it one to one."""

    prompts: str = "results/studies/rewriting/grpo/data/test.jsonl"
    """The held-out rewrite prompts (the study's test targets, as its kept units commit them)."""
    train_prompts: str = "results/studies/rewriting/grpo/data/train.jsonl"
    """The training prompts the GRPO steps draw from (the study's, after its difficulty filter)."""
    count: int = 6
    """How many held-out prompts (the first ones of the file)."""
    sampling: SamplingSpec = field(
        default_factory=lambda: SamplingSpec(temperature=0.8, samples=4, max_new_tokens=192, seed=0)
    )
    """How every policy is sampled (the study's training temperature and completion length)."""
    policies: dict[str, str] = field(
        default_factory=lambda: {
            "base": "embedded",
            "warm-start": "results/studies/rewriting/warm_start",
            "GRPO": "results/studies/rewriting/grpo/weights/rubric_seed0",
        }
    )
    """Label -> model: ``embedded``, a model folder or a LoRA adapter folder (adapters on adapters
    are followed). A folder that is not there is reported as not committed, not an error."""
    train_config: str = "configs/studies/rewriting_train.yaml"
    """The training settings of the GRPO steps (the study's)."""
    grpo_from: str = "warm-start"
    """Which policy the GRPO steps start from (a label of ``policies``)."""
    grpo_steps: int = 2
    """GRPO steps to run (0: none)."""
    reward: Literal["rubric", "sparse_inverse_t", "sparse_correct"] = "sparse_correct"
    """The reward of the GRPO steps, as a study arm names it (sparse_correct: 1 if correct)."""
    sampler: Sampler = "static"
    """The sampling path (``GenerationFlags.sampler``): static, loop or generate."""
    batch_size: int = 24
    """Completions decoded together (24: a policy's 6 prompts x 4 samples in one batch, which on
    2 cores samples faster than batches of 8; another batch size draws other samples of the same
    distribution)."""

    @classmethod
    def from_yaml(cls, path: str | Path) -> DemoSettings:
        """The settings of a YAML file, the sampling keys (samples, temperature, top_p, top_k,
        max_new_tokens, seed) flat beside the others as in every RubriQ YAML; an unknown key or a
        bad value is a :class:`ConfigError` naming it."""
        from rubriq.models.sampling import read_section

        names = {name: name for name in ("samples", "temperature", "top_p", "top_k", "max_new_tokens", "seed")}
        settings = read_section(cls, load_yaml_mapping(path), cls().sampling, names, str(path))
        settings.validate()
        return settings

    def validate(self) -> None:
        """:class:`ConfigError` naming the field that is wrong."""
        if self.count < 1:
            raise ConfigError(f"count must be >= 1, got {self.count}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.grpo_steps < 0:
            raise ConfigError(f"grpo_steps must be >= 0, got {self.grpo_steps}")
        if self.grpo_steps and self.grpo_from not in self.policies:
            raise ConfigError(f"grpo_from {self.grpo_from!r} is not a policy ({', '.join(self.policies)})")
        if self.sampler not in ("static", "loop", "generate"):
            raise ConfigError(f"sampler must be static, loop or generate, got {self.sampler!r}")
        try:
            self.sampling.validate()
        except ValueError as exc:
            raise ConfigError(f"sampling: {exc}") from None


def read_rows(path: str | Path, count: int | None = None) -> list[dict]:
    """The first ``count`` rows of a prompt file (JSONL), with a clear error when it is absent."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"{path}: no such prompt file (the rewriting study's kept units commit it; on a checkout "
            "without them, run `rubriq study convergence configs/studies/rewriting_cpu.yaml --arm none --seed 0`)"
        )
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        raise ConfigError(f"{path}: no prompt rows")
    return rows[:count] if count else rows


def committed(model: str) -> bool:
    """Whether a policy's weights are there (``embedded`` always is)."""
    if model == "embedded":
        return True
    folder = Path(model)
    return (folder / "adapter_config.json").is_file() or (folder / "config.json").is_file()


def outcome_counts(records: list, eps: float | None = None) -> dict[str, int]:
    """How many samples fell in each :data:`OUTCOMES` class (the study's definition, one place:
    :func:`rubriq.studies.analysis.rewrite_outcome`; ``eps``: 1 - the rubric's correctness
    threshold, None: the default threshold's)."""
    from rubriq.studies.analysis import rewrite_outcome

    counts = dict.fromkeys(OUTCOMES, 0)
    for record in records:
        counts[(rewrite_outcome(record) if eps is None else rewrite_outcome(record, eps)) or "wrong"] += 1
    return counts


def best_reduction(records_by_policy: dict[str, list]) -> tuple[str, Any] | None:
    """A verified correct reduction to show: the one with the fewest T gates of the last policy
    that has one (the trained one first), ties broken by F_avg; None when no policy has one."""
    from rubriq.studies.analysis import rewrite_outcome

    for label in reversed(list(records_by_policy)):
        found = [r for r in records_by_policy[label] if rewrite_outcome(r) == "reduction"]
        if found:
            return label, min(found, key=lambda r: (r.result["t_count"], -r.result["average_fidelity"]))
    return None


def circuit_text(qasm: str) -> str:
    """A QASM 2 program drawn as text (qiskit's drawer), parsed with the rubric's limits."""
    from rubriq.extract.qasm import load_qasm

    return str(load_qasm(qasm).draw(output="text", fold=-1))


def completion_qasm(text: str) -> str:
    """The circuit of a completion as OpenQASM 2, extracted as the rubric extracted it: the
    program from its ``OPENQASM`` header, else its first code block that yields a circuit (a
    Python block runs in the sandbox, as when it was scored)."""
    from qiskit import qasm2

    from rubriq.config import ExtractionConfig
    from rubriq.extract.cascade import NotApplicable, direct_qasm, fenced_block

    try:
        return qasm2.dumps(direct_qasm(text, ExtractionConfig()))
    except NotApplicable:
        return qasm2.dumps(fenced_block(text, ExtractionConfig()))


def sample_policy(label: str, model_name: str, rows: list[dict], settings: DemoSettings) -> list:
    """Every row sampled ``settings.sampling.samples`` times from one policy, scored."""
    from rubriq.evaluation.sampling import generate, score
    from rubriq.models import load_model, load_tokenizer

    model, tokenizer = load_model(model_name), load_tokenizer(model_name)
    model.eval()
    records = generate(
        model,
        tokenizer,
        rows,
        settings.sampling,
        batch_size=settings.batch_size,
        sampler=settings.sampler,
        description=f"sampling {label}",
    )
    return score(records, progress=False)


def run_grpo(settings: DemoSettings, out: Path) -> dict[str, Any]:
    """``grpo_steps`` GRPO steps from the ``grpo_from`` policy on the training prompts; the
    per-step reward, loss and seconds."""
    from rubriq.models import load_model, load_tokenizer
    from rubriq.reward import RubricRewards
    from rubriq.training.config import TrainSettings
    from rubriq.training.train_rubriq import build

    rows = read_rows(settings.train_prompts)
    data_dir = out / "grpo_data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = TrainSettings.from_yaml(settings.train_config)
    train = dataclasses.replace(
        base,
        output_dir=str(out / "grpo"),
        data=dataclasses.replace(base.data, dataset=str(data_dir), split="train", build={}),
        grpo=base.grpo.replace(max_steps=settings.grpo_steps, save_strategy="no", logging_steps=1, seed=0),
        reward=dataclasses.replace(base.reward, kind=settings.reward),
        sft=dataclasses.replace(base.sft, enabled=False),
        generation=dataclasses.replace(base.generation, sampler=settings.sampler),
    )
    name = settings.policies[settings.grpo_from]
    rewards = RubricRewards(train.rubric, workers=train.reward.workers)
    start = time.perf_counter()
    try:
        trainer = build(train, policy=(load_tokenizer(name), load_model(name)), rewards=rewards)
        trainer.train()
    finally:
        rewards.close()
    steps = [
        {k: h[k] for k in ("step", "reward", "loss", "step_time") if k in h}
        for h in trainer.state.log_history
        if "reward" in h
    ]
    return {
        "from": settings.grpo_from,
        "reward": settings.reward,
        "steps": steps,
        "seconds": time.perf_counter() - start,
        "scored": int(rewards.stats["evaluated"]),
    }


def run(settings: DemoSettings, out: str | Path = "runs/demo", progress=None) -> Path:
    """Sample and score every committed policy, run the GRPO steps, write ``OUT/report.md``,
    ``OUT/summary.json`` and every scored sample (``OUT/records_<policy>.jsonl``); return the
    report's path. ``progress(message)`` is told each stage."""
    from rubriq.evaluation.sampling import save_records

    say = progress or (lambda message: log.info("%s", message))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = read_rows(settings.prompts, settings.count)
    policies: dict[str, dict[str, Any]] = {}
    records_by_policy: dict[str, list] = {}
    for label, model in settings.policies.items():
        if not committed(model):
            say(f"{label}: {model} is not committed yet (skipped)")
            policies[label] = {"model": model, "committed": False}
            continue
        say(f"{label}: sampling {len(rows)} prompts x {settings.sampling.samples} from {model}")
        start = time.perf_counter()
        records = sample_policy(label, model, rows, settings)
        records_by_policy[label] = records
        save_records(records, out / f"records_{_slug(label)}.jsonl")
        policies[label] = {
            "model": model,
            "committed": True,
            "samples": len(records),
            "outcomes": outcome_counts(records),
            "seconds": time.perf_counter() - start,
        }
    grpo = None
    if settings.grpo_steps and policies.get(settings.grpo_from, {}).get("committed"):
        say(f"GRPO: {settings.grpo_steps} steps from the {settings.grpo_from} policy ({settings.reward})")
        grpo = run_grpo(settings, out)
    elif settings.grpo_steps:
        say(f"GRPO: skipped, the {settings.grpo_from} policy is not committed")
    shown = best_reduction(records_by_policy)
    summary = {
        "prompts": [r.get("id") for r in rows],
        "sampling": settings.sampling.to_dict(),
        "policies": policies,
        "shown": None if shown is None else {"policy": shown[0], **_sample(shown[1])},
        "grpo": grpo,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    report = out / "report.md"
    report.write_text("\n".join(report_lines(settings, rows, summary, shown)) + "\n")
    return report


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label).strip("_").lower() or "policy"


def _sample(record) -> dict[str, Any]:
    return {
        "prompt_id": record.prompt_id,
        "t0": record.t0,
        "t": record.result.get("t_count"),
        "average_fidelity": record.result.get("average_fidelity"),
        "text": record.text,
    }


def report_lines(settings: DemoSettings, rows: list[dict], summary: dict, shown) -> list[str]:
    """The report (markdown): the policies side by side, the sample shown, the GRPO steps."""
    from rubriq.sim.measures import CORRECT_THRESHOLD
    from rubriq.studies.aggregate import wilson
    from rubriq.tables import fmt, format_ci, markdown_table

    spec = settings.sampling
    lines = [
        "# RubriQ demo: the rewriting study's policies on held-out circuits",
        "",
        f"{len(rows)} held-out rewrite prompts (the study's test targets: never trained on) x {spec.samples} "
        f"samples at temperature {spec.temperature}, up to {spec.max_new_tokens} tokens. Every sample is "
        f"scored by the rubric; a correct reduction is correct (F_avg >= {CORRECT_THRESHOLD}) with fewer T "
        "gates than the input (T < T0); a copy is the input verbatim. Rates with 95% Wilson intervals.",
        "",
    ]
    table = []
    for label, info in summary["policies"].items():
        if not info["committed"]:
            table.append([label, f"`{info['model']}`", "not committed yet", "-", "-", "-", "-", "-"])
            continue
        n, counts = info["samples"], info["outcomes"]
        table.append(
            [
                label,
                f"`{info['model']}`",
                str(n),
                f"{counts['reduction']} ({format_ci(wilson(counts['reduction'], n))})",
                str(counts["copy"]),
                str(counts["other_correct"]),
                str(counts["wrong"]),
                fmt(info["seconds"], 1),
            ]
        )
    lines += markdown_table(
        ["policy", "weights", "samples", "correct reductions", "copies", "other correct", "wrong", "seconds"], table
    )
    lines += ["", "## A verified sample with fewer T gates", ""]
    if shown is None:
        lines.append("None was found: no policy wrote a correct circuit with fewer T gates than its input here.")
    else:
        label, record = shown
        row = next(r for r in rows if r.get("id") == record.prompt_id)
        source = json.loads(row["target"])["qasm"]
        lines += [
            f"Policy **{label}**, prompt `{record.prompt_id}`: T {record.t0} -> {record.result['t_count']}, "
            f"F_avg = {record.result['average_fidelity']:.6f} against the input (verified by the rubric).",
            "",
            "Input:",
            "",
            "```text",
            circuit_text(source),
            "```",
            "",
            "Output:",
            "",
            "```text",
            circuit_text(completion_qasm(record.text)),
            "```",
            "",
            "The output as the policy wrote it:",
            "",
            "````",  # four: the completion has its own ``` fence
            record.text.strip(),
            "````",
        ]
    lines += ["", "## GRPO steps", ""]
    grpo = summary["grpo"]
    if grpo is None:
        lines.append("Not run (grpo_steps 0, or the policy to start from is not committed).")
    else:
        lines += [
            f"{len(grpo['steps'])} GRPO steps from the {grpo['from']} policy with the `{grpo['reward']}` reward on "
            f"the study's training prompts ({grpo['scored']} completions scored, {grpo['seconds']:.0f} s): the "
            "whole pipeline ran (sampling, sandboxed scoring, reward, LoRA update). A few steps train nothing "
            "measurable; the study's results are in results/studies/rewriting/.",
            "",
        ]
        lines += markdown_table(
            ["step", "mean reward", "loss", "seconds"],
            [
                [str(s.get("step")), fmt(s.get("reward")), fmt(s.get("loss")), fmt(s.get("step_time"), 1)]
                for s in grpo["steps"]
            ],
        )
    return lines


__all__ = [
    "DEFAULT_CONFIG",
    "DemoSettings",
    "OUTCOMES",
    "best_reduction",
    "circuit_text",
    "committed",
    "completion_qasm",
    "outcome_counts",
    "read_rows",
    "report_lines",
    "run",
    "run_grpo",
    "sample_policy",
]
