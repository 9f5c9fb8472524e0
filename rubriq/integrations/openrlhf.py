"""The RubriQ reward for OpenRLHF: ``reward_func(queries, prompts, labels, **kwargs)``, the
function of a remote-reward file (``--reward.remote_url /path/to/this/file.py``; older releases:
``--remote_rm_url``), with ``--data.label_key target`` passing the dataset's target spec as the
label.

OpenRLHF passes each ``query`` as the prompt and the response decoded together (special tokens
kept); the completion scored is what follows the prompt, without trailing special tokens
(:func:`completion_of`).  A query that does not contain its prompt is scored as unparsed
(reward 0, ``error_type="parse"``), never as the whole text: a rewrite prompt shows the target
circuit, which must not count as the answer.

Returns ``rewards`` (R, for the advantages), ``scores`` (R again, in [0, 1], for dynamic
filtering) and ``extra_logs`` (each dimension, ``correct``, ``parsed``), as torch tensors of one
value per query (plain lists where torch is missing).  In-process by default; set
``RUBRIQ_URL`` (and ``RUBRIQ_API_KEY``) in the Ray job's ``env_vars`` to score through ``rubriq
serve``.

>>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
>>> prompt = "<|im_start|>user\\nA 1-qubit QFT<|im_end|>\\n<|im_start|>assistant\\n"
>>> query = prompt + 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];<|im_end|>'
>>> out = reward_func([query], [prompt], [spec])
>>> [round(float(v), 12) for v in out["extra_logs"]["fidelity"]], sorted(out)
([1.0], ['extra_logs', 'rewards', 'scores'])
"""

from __future__ import annotations

import logging
import re
from typing import Any

from rubriq.integrations.backend import backend, target_of
from rubriq.rubric.engine import DIMENSION_NAMES

log = logging.getLogger(__name__)

# special tokens a decode with skip_special_tokens=False leaves after the response
_TRAILING_SPECIALS = re.compile(r"(?:\s*(?:<\|[^<>|\s]{1,40}\|>|</s>|<eos>|<end_of_turn>|<\|endoftext\|>))+\s*\Z")


def completion_of(query: str, prompt: str) -> str | None:
    """The response in ``query`` (prompt + response): the text after ``prompt``, trailing special
    tokens removed; None when the prompt is not in the query.

    >>> completion_of("<s>[INST] hi [/INST] qreg q[1];</s>", "[INST] hi [/INST]")
    ' qreg q[1];'
    """
    at = query.find(prompt) if prompt else 0
    if at < 0:
        return None
    return _TRAILING_SPECIALS.sub("", query[at + len(prompt) :])


def reward_func(queries: list[str], prompts: list[str], labels: list[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's remote reward function: ``rewards``, ``scores``, ``extra_logs`` for a batch."""
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts, {len(labels)} labels: one each per sample")
    completions = [completion_of(q, p) for q, p in zip(queries, prompts, strict=True)]
    lost = [i for i, c in enumerate(completions) if c is None]
    if lost:
        log.warning("%d of %d queries do not contain their prompt; scored as unparsed", len(lost), len(queries))
    targets = [target_of(label) for label in labels]
    found = [i for i, c in enumerate(completions) if c is not None]
    results: list[dict[str, Any] | None] = [None] * len(queries)
    if found:
        scored = backend(kwargs.get("url"), kwargs.get("api_key"), kwargs.get("config")).score(
            [completions[i] for i in found],
            [targets[i] for i in found],
        )
        for i, r in zip(found, scored, strict=True):
            results[i] = r
    rows = [r if r is not None else _unparsed() for r in results]
    rewards = [float(r["reward"]) for r in rows]
    logs: dict[str, list[float]] = {name: [float(r["scores"][name]) for r in rows] for name in DIMENSION_NAMES}
    logs["correct"] = [1.0 if r.get("correct") else 0.0 for r in rows]
    logs["parsed"] = [1.0 if r.get("parsed") else 0.0 for r in rows]
    return {
        "rewards": _tensor(rewards),
        "scores": _tensor(rewards),
        "extra_logs": {k: _tensor(v) for k, v in logs.items()},
    }


def _unparsed() -> dict[str, Any]:
    return {"reward": 0.0, "scores": dict.fromkeys(DIMENSION_NAMES, 0.0), "correct": False, "parsed": False}


def _tensor(values: list[float]) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - OpenRLHF always has torch
        return values
    return torch.tensor(values, dtype=torch.float32)
