"""A study's trained policies kept for good: ``rubriq study weights YAML --arm ARM --seed N``.

A study keeps every finished unit's records and the SHA-256 of its trained adapter
(:mod:`rubriq.studies.units`), not the weights: a few are committed on purpose. An arm's adapter
was trained on the study's *merged* warm-start (``OUT/sft/model``, 540 MB, not kept), so
:func:`keep_weights` renames its base to the warm-start *adapter* it was merged from
(``warm_start_model``, committed), relative to the kept folder: ``rubriq.models.load_model``
merges that chain back into the very model the arm trained, and ``rubriq evaluate --model`` /
``rubriq synthesize --model`` / ``rubriq optimize --model`` load it by path. Beside the adapter:
``SHA256SUMS`` (``sha256sum -c`` format) and a model card (``README.md``, the Hugging Face
convention) whose numbers are the unit's committed held-out evaluation at step 0 and at its last
step, with 95% intervals over prompts.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from rubriq.config import ConfigError
from rubriq.models import POLICY_INFO
from rubriq.studies import layout
from rubriq.studies.units import adapter_fingerprint, git_commit

log = logging.getLogger(__name__)

WEIGHTS_DIR = "weights"
"""Where :func:`keep_weights` puts a unit's trained adapter inside ``results_dir``."""


def keep_weights(out: Path, results: Path, study, name: str, seed: int, commit: bool = False) -> Path:
    """Copy the trained adapter of the finished arm-seed ``(name, seed)`` of study folder ``out``
    into ``results/weights/NAME_seedSEED`` with its base renamed to the warm-start adapter, a
    ``SHA256SUMS`` file and a model card; the unit must be kept in ``results`` already (its
    records make the card) and the weights must be the ones its ``adapter.json`` fingerprints (a
    mismatch is an error, not a silent copy of other weights). With ``commit``, commit the
    folder. Returns the folder."""
    unit = layout.arm_dir(out, name, seed)
    final = unit / "final"
    if not (unit / "done.json").is_file() or not (final / "adapter_config.json").is_file():
        raise ConfigError(f"{final}: no finished arm-seed with a trained adapter here (is {name} seed {seed} done?)")
    if not study.warm_start_model:
        raise ConfigError("the study has no warm_start_model: its arms' adapters rest on a merged model not kept")
    kept = layout.arm_dir(results, name, seed)
    if not (kept / "adapter.json").is_file():
        raise ConfigError(f"{kept}: the unit is not kept in {results} (run the study with results_dir first)")
    expected = json.loads((kept / "adapter.json").read_text())
    found = adapter_fingerprint(final)
    weights = [f for f in found if f.endswith(".safetensors")]
    if not weights or any(expected.get(f) != found[f] for f in weights):
        raise ConfigError(f"{final}: its weights are not the ones {kept / 'adapter.json'} names (another run?)")
    dst = results / WEIGHTS_DIR / f"{name}_seed{seed}"
    if dst.exists():
        shutil.rmtree(dst)
    # training_args.bin is a pickle (not loaded by anyone, unsafe to load) and the tokenizer is the
    # warm-start's (loaded through the base chain): neither is kept
    keep = ("adapter_config.json", *weights)
    dst.mkdir(parents=True)
    for file in keep:
        if (final / file).is_file():
            shutil.copy2(final / file, dst / file)
    base = os.path.relpath(Path(study.warm_start_model).resolve(), dst.resolve())
    config = json.loads((dst / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = base
    (dst / "adapter_config.json").write_text(json.dumps(config, indent=2))
    (dst / POLICY_INFO).write_text(json.dumps(policy_info(results, study, name, seed, base, final), indent=2))
    (dst / "README.md").write_text(model_card(results, study, name, seed, base))
    sums = adapter_fingerprint(dst)
    (dst / "SHA256SUMS").write_text("".join(f"{digest}  {file}\n" for file, digest in sums.items()))
    log.info("the adapter of %s seed %d kept in %s (on %s)", name, seed, dst, base)
    if commit:
        git_commit(dst, f"study weights: the trained adapter of {name} seed {seed} ({dst})")
    return dst


def policy_info(results: Path, study, name: str, seed: int, base: str, final: Path) -> dict:
    """The kept adapter's ``rubriq_policy.json`` (what ``synthesize``, ``optimize`` and the app
    read to prompt a policy the way it was trained): the trained folder's own where it wrote one,
    else the warm-start's (the arm trained on the warm-start's prompts), with the prompt style and
    formats of the study's training prompts, the renamed base and how it was trained."""
    from rubriq.data.prompts import prompt_style_of_rows
    from rubriq.models import read_policy_info

    info = read_policy_info(final) or read_policy_info(study.warm_start_model)
    rows = layout.read_jsonl(results / "data" / "train.jsonl")
    if rows:
        info["prompt_style"] = prompt_style_of_rows(rows)
        info["formats"] = sorted({r.get("format", "qasm2") for r in rows})
    arm = study.arms[name]
    info.update(
        {
            "adapter_base": base,
            "sft_warm_start": True,
            "algorithm": "grpo",
            "reward": arm.reward,
            "trained_by": f"rubriq study convergence (arm {name}, seed {seed}, {study.steps} GRPO steps from the "
            f"warm-start {Path(study.warm_start_model).name}; {Path(study.train_config).name})",
        }
    )
    return info


def held_out_outcomes(records: list[dict]) -> dict[str, Any]:
    r"""Per-prompt means over the prompts of ``records`` (scored samples of rewrite prompts) of
    each outcome of :func:`rubriq.studies.analysis.rewrite_outcome` (``reduction``, ``copy``,
    ``wrong``), as (mean, low, high) with a 95% t-interval over prompts (samples of one prompt
    are not independent; prompts are); ``samples`` and ``prompts`` count them.

    >>> spec = '{"algorithm": "circuit", "qasm": "qreg q[1];\\nt q[0];\\nt q[0];\\n"}'
    >>> ok = {"parsed": True, "average_fidelity": 1.0, "t_count": 0}
    >>> bad = {"parsed": True, "average_fidelity": 0.5, "t_count": 0}
    >>> recs = [{"prompt_id": p, "target": spec, "t0": 2, "text": "qreg q[1];\ns q[0];", "result": r}
    ...         for p, r in [("a", ok), ("a", bad), ("b", bad), ("b", bad)]]
    >>> out = held_out_outcomes(recs)
    >>> out["reduction"][0], out["wrong"][0], out["samples"], out["prompts"]
    (0.25, 0.75, 4, 2)
    """
    from collections import defaultdict

    from rubriq.evaluation.metrics import mean_ci
    from rubriq.studies.analysis import rewrite_outcome

    per_prompt: dict = defaultdict(list)
    for i, record in enumerate(records):
        outcome = rewrite_outcome(record)
        if outcome is not None:
            per_prompt[record.get("prompt_id", i)].append(outcome)
    out: dict = {"samples": sum(map(len, per_prompt.values())), "prompts": len(per_prompt)}
    for outcome in ("reduction", "copy", "wrong"):
        out[outcome] = mean_ci([sum(o == outcome for o in v) / len(v) for v in per_prompt.values()])
    return out


def card_front_matter(name: str, base_model: str, tags: list[str], dataset: str, metrics: list[dict]) -> dict:
    """The YAML front matter of a kept rewriting adapter's model card (the Hugging Face
    convention): library, base model, license, tags, and one ``model-index`` result on the rewrite
    task with ``dataset`` (its description) and ``metrics``."""
    return {
        "library_name": "peft",
        "base_model": base_model,
        "license": "apache-2.0",
        "language": ["en"],
        "tags": ["quantum-computing", "quantum-circuits", "openqasm", "t-count", "lora", *tags, "rubriq"],
        "pipeline_tag": "text-generation",
        "model-index": [
            {
                "name": name,
                "results": [
                    {
                        "task": {
                            "type": "text-generation",
                            "name": "rewrite a Clifford+T circuit with fewer T gates (same unitary)",
                        },
                        "dataset": {"type": "rubriq/rewrite_small", "name": dataset},
                        "metrics": metrics,
                    }
                ],
            }
        ],
    }


def model_card(results: Path, study, name: str, seed: int, base: str) -> str:
    """The kept adapter's README.md: front matter (base model, library, the held-out metrics at
    the unit's last step) and what it is, how it was trained, how it did, its limits, how to load."""
    import yaml

    from rubriq.models import EMBEDDED_HUB_ID
    from rubriq.tables import fmt, markdown_table

    unit = layout.arm_dir(results, name, seed)
    evals = [r for r in layout.read_jsonl(unit / "evals.jsonl") if r.get("split", "test") == "test"]
    if not evals:
        raise ConfigError(f"{unit}: no held-out evaluation kept (evals.jsonl)")
    last = max(evals, key=lambda r: r["step"])
    step = last["step"]
    first_row = next((r for r in evals if r["step"] == 0), {})
    at = {
        0: held_out_outcomes(layout.read_jsonl(layout.step0_records(results, "test", seed))),
        step: held_out_outcomes(layout.read_jsonl(layout.step_records(unit, "test", step))),
    }
    final = at[step]
    arm = study.arms[name]
    reward = arm.reward + (f" with {json.dumps(arm.rubric, sort_keys=True)}" if getattr(arm, "rubric", None) else "")

    def interval(values) -> str:
        return "-" if values[1] is None else f"{fmt(values[1])}-{fmt(values[2])}"

    metrics = [
        {
            "type": "correct_reduction_rate",
            "value": round(final["reduction"][0], 3),
            "name": f"correct with T < T0 (95% CI over prompts {interval(final['reduction'])})",
        },
        {
            "type": "copy_rate",
            "value": round(final["copy"][0], 3),
            "name": f"correct copy of the input (95% CI {interval(final['copy'])})",
        },
        {
            "type": "wrong_rate",
            "value": round(final["wrong"][0], 3),
            "name": f"not equivalent or unparsed (95% CI {interval(final['wrong'])})",
        },
        {"type": "gap_closed", "value": round(last["gap_closed"], 3), "name": "fraction of the T gap to PyZX closed"},
    ]
    meta = card_front_matter(
        f"rubriq-rewriting-grpo-{name}-seed{seed}",
        EMBEDDED_HUB_ID,
        ["grpo"],
        f"{final['prompts']} held-out generated rewrite circuits, "
        f"{final['samples'] // max(final['prompts'], 1)} samples each",
        metrics,
    )
    folder = f"{results}/{WEIGHTS_DIR}/{name}_seed{seed}"
    rows = [
        ("correct, T < T0", "reduction"),
        ("correct copy of the input", "copy"),
        ("wrong (not equivalent, or unparsed)", "wrong"),
    ]
    table = markdown_table(
        [
            "metric",
            "step 0 (the warm-start)",
            f"step {step}",
            f"95% interval over the {final['prompts']} prompts, step {step}",
        ],
        [
            *([label, at[0][key][0], final[key][0], interval(final[key])] for label, key in rows),
            ["gap to PyZX closed", first_row.get("gap_closed"), last.get("gap_closed"), "-"],
            ["parsed", first_row.get("parse_rate"), last.get("parse_rate"), "-"],
        ],
    )
    text = f"""---
{yaml.safe_dump(meta, sort_keys=False)}---

# RubriQ rewriting GRPO policy: arm `{name}`, seed {seed}

A LoRA adapter on RubriQ's rewriting warm-start (itself a LoRA adapter on SmolLM2-135M-Instruct)
that rewrites small OpenQASM 2.0 Clifford+T circuits, trained with GRPO on the reward of the arm
`{name}` of the rewriting study (docs/studies.md, "Rewriting";
`results/studies/rewriting/README.md`). One arm-seed of a study of several: read the study's
summary (`{results}/summary.md`) for what the arms do against each other and against no
training, with intervals over seeds. A research artifact, not a usable optimizer.

## Model

- **Base:** the warm-start adapter `{base}` (relative to this folder; `base_model_name_or_path`
  in `adapter_config.json`), itself on SmolLM2-135M-Instruct (RubriQ's embedded model). Loading
  this folder with RubriQ merges the warm-start into the base, then applies this adapter: the
  model the arm trained.
- **Prompt:** the warm-start's (`rubriq_policy.json`), answers in OpenQASM 2.0.
- **Files:** `adapter_config.json`, the weights, `rubriq_policy.json`, this card; `SHA256SUMS` lists
  each file's hash. The weights file is the one the unit's `{results}/arms/{name}/seed{seed}/adapter.json`
  fingerprints.

## Training data and recipe

`rubriq study convergence` with the study's YAML (training config `{Path(study.train_config).name}`):
GRPO (TRL) for {study.steps} steps from the warm-start, reward `{reward}`, seed {seed}, on the
study's generated training prompts (`{results}/data/train.jsonl`, disjoint by target from the
held-out split); CPU.

## Evaluation

On the study's held-out rewrite targets (`{results}/data/test.jsonl`), {final["samples"] // max(final["prompts"], 1)}
samples each at the training temperature, the same sampling seed at step 0 and step {step}, checked
by RubriQ's fidelity engine (correct: F_avg >= 0.99); from the unit's committed records:

{chr(10).join(table)}

## Intended use and limits

- For: reproducing RubriQ's rewriting study and as a starting point for further training.
- Not for: optimizing circuits you depend on without verification. Trained on 2-3 qubit
  circuits of a few dozen gates; most samples are wrong. `rubriq optimize` verifies every sample
  against the input and returns only verified ones.

## How to load

```bash
rubriq evaluate --model {folder} --dataset {results}/data -n 8 --temperature 0.8 --top-p 1 --max-new-tokens 192
rubriq optimize my_circuit.qasm --model {folder} -n 8
```

```python
from rubriq.models import load_model

# the warm-start merged, then this adapter merged
model = load_model("{folder}")
```
"""
    return text
