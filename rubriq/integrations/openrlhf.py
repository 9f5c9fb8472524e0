"""The RubriQ reward for OpenRLHF: ``reward_func(queries, prompts, labels, **kwargs)``, the
function of a remote-reward file (``--reward.remote_url /path/to/this/file.py``; older releases:
``--remote_rm_url``), with ``--data.label_key target`` passing the dataset's target spec as the
label.

OpenRLHF passes each ``query`` as the prompt and the response decoded together (special tokens
kept); the completion scored is what follows the prompt, without trailing special tokens
(:func:`split_query`).  When OpenRLHF cut a long prompt to fit ``--data.max_len`` (it keeps the
prompt's last tokens), the query starts with a tail of the prompt instead: the completion is
what follows that tail, scored against the label's target like any other, with
``prompt_truncated`` = 1 in its ``extra_logs`` (OpenRLHF logs the mean: the fraction of
truncated prompts).  The prompt itself is never scored: a rewrite prompt shows the target
circuit.

OpenRLHF's executor turns any ``Exception`` of the reward function into a missing reward
(logged at info level) and trains on.  What must stop the run is therefore raised as
:class:`StopTraining`, which it does not catch: a missing or malformed label (without
``--data.label_key`` every label is ""), a query in which the response cannot be told from the
prompt, and a failure to score (``rubriq serve`` unavailable for the client's whole patience, a
target the scorer does not know).  The first call of a misconfigured run raises it.

Returns ``rewards`` (R, for the advantages), ``scores`` (R again, in [0, 1], for dynamic
filtering) and ``extra_logs`` (each dimension, ``correct``, ``parsed``, ``prompt_truncated``), as
torch tensors of one value per query (plain lists where torch is missing).  In-process by
default; set ``RUBRIQ_URL`` (and ``RUBRIQ_API_KEY``) in the Ray job's ``env_vars`` to score
through ``rubriq serve``.

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

from rubriq.integrations.backend import EXAMPLE_TARGET, backend, target_of
from rubriq.rubric.engine import DIMENSION_NAMES

log = logging.getLogger(__name__)

# special tokens a decode with skip_special_tokens=False leaves after the response
_TRAILING_SPECIALS = re.compile(r"(?:\s*(?:<\|[^<>|\s]{1,40}\|>|</s>|<eos>|<end_of_turn>|<\|endoftext\|>))+\s*\Z")

MIN_TAIL = 16
"""Characters of the prompt's end a truncated query must start with to be told apart from its
response (a chat template's assistant header alone is longer)."""


class StopTraining(BaseException):  # noqa: N818 - named for what it does
    """An error that must end the OpenRLHF run: its executor catches every ``Exception`` of the
    reward function and trains on without a reward, so this one is not an ``Exception``."""


def split_query(query: str, prompt: str) -> tuple[str, bool] | None:
    """(the response in ``query``, whether the query holds only a tail of ``prompt``): the text
    after the prompt, or after the prompt's tail the query starts with (OpenRLHF truncated the
    prompt), trailing special tokens removed; None when the query holds neither.

    >>> split_query("<s>[INST] hi [/INST] qreg q[1];</s>", "[INST] hi [/INST]")
    (' qreg q[1];', False)
    >>> split_query("dit=. Write it.\\nAnswer: qreg q[1];", "A long spec ... edit=. Write it.\\nAnswer:")
    (' qreg q[1];', True)
    """
    at = query.find(prompt) if prompt else 0
    if at >= 0:
        return _TRAILING_SPECIALS.sub("", query[at + len(prompt) :]), False
    start = _after_prompt_tail(query, prompt)
    if start is None:
        return None
    return _TRAILING_SPECIALS.sub("", query[start:]), True


def _after_prompt_tail(query: str, prompt: str) -> int | None:
    """Where the response starts in a query that begins with the longest tail of ``prompt``
    (decoded from the prompt's last tokens; a cut inside a character may decode to up to a few
    replacement characters first), None when no tail of ``MIN_TAIL`` characters fits."""
    for skip in range(4):
        probe = query[skip : skip + MIN_TAIL]
        if len(probe) < MIN_TAIL:
            return None
        at = prompt.find(probe)
        while at >= 0:  # the first place is the longest tail
            if query.startswith(prompt[at:], skip):
                return skip + len(prompt) - at
            at = prompt.find(probe, at + 1)
    return None


def reward_func(queries: list[str], prompts: list[str], labels: list[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's remote reward function: ``rewards``, ``scores``, ``extra_logs`` for a batch."""
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts, {len(labels)} labels: one each per sample")
    targets = [_target(label, i) for i, label in enumerate(labels)]
    completions: list[str] = []
    truncated: list[float] = []  # 1.0 where the query holds only a tail of its prompt
    for i, (query, prompt) in enumerate(zip(queries, prompts, strict=True)):
        split = split_query(query, prompt)
        if split is None:
            raise StopTraining(
                f"query {i} holds neither its prompt ({len(prompt)} characters) nor {MIN_TAIL} characters of its "
                f"end, so its response cannot be told from the prompt; it starts {query[:80]!r}. If OpenRLHF "
                "cut the prompt to fit, raise --data.max_len (prompt + response tokens) or lower "
                "--rollout.max_new_tokens"
            )
        completions.append(split[0])
        truncated.append(float(split[1]))
    if any(truncated):
        log.warning(
            "%d of %d queries hold only a tail of their prompt (OpenRLHF truncated it to fit --data.max_len); "
            "their responses are scored against the labels' targets",
            int(sum(truncated)),
            len(queries),
        )
    try:
        rows = backend(kwargs.get("url"), kwargs.get("api_key"), kwargs.get("config")).score(completions, targets)
    except Exception as exc:  # noqa: BLE001 - OpenRLHF would swallow it and train on None rewards
        raise StopTraining(f"RubriQ could not score: {type(exc).__name__}: {exc}") from exc
    rewards = [float(r["reward"]) for r in rows]
    logs: dict[str, list[float]] = {name: [float(r["scores"][name]) for r in rows] for name in DIMENSION_NAMES}
    logs["correct"] = [1.0 if r.get("correct") else 0.0 for r in rows]
    logs["parsed"] = [1.0 if r.get("parsed") else 0.0 for r in rows]
    logs["prompt_truncated"] = truncated
    return {
        "rewards": _tensor(rewards),
        "scores": _tensor(rewards),
        "extra_logs": {k: _tensor(v) for k, v in logs.items()},
    }


def _target(label: Any, i: int) -> str | dict:
    try:
        return target_of(label)
    except ValueError as exc:
        hint = " (OpenRLHF passes '' when --data.label_key is not set)" if label in ("", None) else ""
        raise StopTraining(
            f"label {i}: {exc}{hint}. Run OpenRLHF with --data.label_key target: the dataset's target column, a "
            f"JSON object such as {EXAMPLE_TARGET}"
        ) from None


def _tensor(values: list[float]) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - OpenRLHF always has torch
        return values
    return torch.tensor(values, dtype=torch.float32)


__all__ = ["MIN_TAIL", "StopTraining", "reward_func", "split_query"]

if __name__ != "rubriq.integrations.openrlhf":
    # Loaded from its file path (OpenRLHF's --reward.remote_url names this file): the package's
    # own functions and StopTraining, one module state.
    from rubriq.integrations.openrlhf import *  # noqa: F403
