"""The wire format of ``POST /v1/score``, checked field by field: every bad input is a
:class:`BadRequest` whose message names the field (``items[3].target: unknown target 'qftt'
...``), raised before anything is scored.

A request is a JSON object::

    {"items": [{"completion": "<model output>", "target": <target spec>}, ...],
     "rubric": {"weights": {...}}}            # optional

A target spec is what ``rubriq data build`` writes in a dataset's ``target`` column (a JSON
string, or the same as an object): ``{"algorithm": "qft", "num_qubits": 4, ...}``, or a rewrite
target ``{"algorithm": "circuit", "qasm": "OPENQASM 2.0; ..."}``.  ``rubric`` overrides the
reward-shaping sections of the server's rubric (:data:`REQUEST_SECTIONS`); the sections that
bound work or hold the sandbox (extraction, budget, fidelity engine) are the server's alone.

The answer has one result per item, in order: ``EvaluationResult.to_dict()`` plus ``correct``
(F_avg >= the correctness threshold, :func:`rubriq.evaluator.result.is_correct`) and ``t0``
(the target's reference T-count).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from rubriq.cache import LRUCache
from rubriq.config import ConfigError, RubricConfig
from rubriq.evaluator.result import EvaluationResult, is_correct
from rubriq.extract.sandbox.protocol import check_depth

log = logging.getLogger(__name__)

MAX_DEPTH = 32
"""Deepest nesting of brackets a request body may have (a request needs 6: items, an item, a
target with a list of terms); checked in linear time before the JSON parser, which recurses."""
MAX_TARGET_DEPTH = 8
"""Deepest nesting of a target spec given as a JSON string (parsed on its own)."""
MAX_MESSAGE_CHARS = 300
"""Longest reason an error answer quotes (one line; what a client sent is cut, never echoed whole)."""
REQUEST_SECTIONS = ("weights", "fidelity_gating", "complexity", "tcount", "hardware", "efficiency")
"""Rubric sections a request may set: the reward's shape, not its cost or its safety."""
TOP_LEVEL = ("items", "rubric")
ITEM_FIELDS = ("completion", "target")


class BadRequest(ValueError):
    """A request RubriQ will not score: HTTP ``status`` (400 not JSON, 413 too large, 422 a bad
    field) and a message that starts with the field it is about."""

    def __init__(self, status: int, field: str, message: str) -> None:
        message = " ".join(str(message).split())  # one line, whatever a client's value holds
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - 3] + "..."
        field = " ".join(str(field).split())[:MAX_MESSAGE_CHARS]
        super().__init__(f"{field}: {message}")
        self.status, self.field, self.message = status, field, message


@dataclass(frozen=True)
class Limits:
    """What one request may hold (from :class:`~rubriq.serve.settings.ServeSettings`)."""

    max_items: int = 1024
    max_completion_bytes: int = 1024 * 1024


@dataclass(frozen=True)
class Item:
    completion: str
    spec: str
    """The target spec as sorted JSON (:func:`rubriq.evaluator.batch.spec_key`)."""
    t0: int | None = None
    """The target's reference T-count (answered with the result)."""


@dataclass(frozen=True)
class ScoreRequest:
    items: list[Item]
    config: RubricConfig | None
    """The request's rubric (None: the server's)."""


@dataclass(frozen=True)
class TargetInfo:
    """What the server keeps of a checked target: its T0 and the completion cap it allows."""

    t0: int | None
    max_completion_bytes: int


class Targets:
    """Checked target specs (built once, then remembered by their sorted JSON); thread-safe."""

    def __init__(self, config: RubricConfig, limits: Limits, size: int = 4096) -> None:
        self.config, self.limits = config, limits
        self._known: LRUCache[str, TargetInfo] = LRUCache(size)
        self._lock = threading.Lock()

    def check(self, spec: str, field: str) -> TargetInfo:
        with self._lock:
            known = self._known.get(spec)
        if known is not None:
            return known
        from rubriq.evaluator import completion_limits
        from rubriq.targets import target_from_spec

        try:
            target = target_from_spec(json.loads(spec))
        except (ValueError, TypeError, LookupError) as exc:  # TargetError is a ValueError
            raise BadRequest(422, field, str(exc) or type(exc).__name__) from None
        except (ArithmeticError, AttributeError, RecursionError, MemoryError) as exc:
            # a value of a type or size the target's parameters do not expect (1e308 qubits, ...):
            # the request's fault, said in one line (the target classes check what they expect)
            log.info("%s: target refused (%s: %s)", field, type(exc).__name__, str(exc)[:200])
            raise BadRequest(
                422, field, f"not a target spec this server can build ({type(exc).__name__}: {exc})"
            ) from None
        caps = completion_limits(target, self.config.extraction).max_qasm_bytes
        grown = caps > self.config.extraction.max_qasm_bytes  # a rewrite target's larger caps
        info = TargetInfo(
            t0=_t0(target),
            max_completion_bytes=max(self.limits.max_completion_bytes, 2 * caps if grown else 0),
        )
        with self._lock:
            self._known[spec] = info
        return info


def _t0(target: Any) -> int | None:
    try:
        return int(target.t0)
    except Exception:  # noqa: BLE001 - a target without a reference T-count
        return None


def parse(body: bytes, limits: Limits, targets: Targets, server_config: RubricConfig) -> ScoreRequest:
    """The checked request in ``body``, or :class:`BadRequest` naming the first bad field.

    Size, depth and type limits come before anything recursive: the body's nesting
    (:data:`MAX_DEPTH`, in linear time), UTF-8, JSON without NaN or Infinity, integers of at most
    4300 digits (Python's own limit); then every field's type, a target string's own depth
    (:data:`MAX_TARGET_DEPTH`), the items' count and each completion's size.  Every refusal is a
    :class:`BadRequest` with a one-line reason (4xx), never an exception of the parser."""
    data = _loads(body, "body", MAX_DEPTH, 400)
    if not isinstance(data, dict):
        raise BadRequest(422, "body", f"expected a JSON object with 'items', got {_kind(data)}")
    unknown = sorted(set(data) - set(TOP_LEVEL))
    if unknown:
        raise BadRequest(422, "body", f"unknown field(s) {unknown}; known: {', '.join(TOP_LEVEL)}")
    if "items" not in data:
        raise BadRequest(422, "items", "required: a list of {completion, target} objects")
    raw = data["items"]
    if not isinstance(raw, list):
        raise BadRequest(422, "items", f"expected a list, got {_kind(raw)}")
    if not raw:
        raise BadRequest(422, "items", "empty: send at least one {completion, target} object")
    if len(raw) > limits.max_items:
        raise BadRequest(
            413, "items", f"{len(raw)} items, more than the server's --max-items {limits.max_items} (split the batch)"
        )
    config = _rubric(data.get("rubric"), server_config)
    items = []
    for i, entry in enumerate(raw):
        where = f"items[{i}]"
        if not isinstance(entry, dict):
            raise BadRequest(422, where, f"expected an object with completion and target, got {_kind(entry)}")
        extra = sorted(set(entry) - set(ITEM_FIELDS))
        if extra:
            raise BadRequest(422, where, f"unknown field(s) {extra}; known: {', '.join(ITEM_FIELDS)}")
        for name in ITEM_FIELDS:
            if name not in entry:
                raise BadRequest(422, f"{where}.{name}", "required")
        completion = entry["completion"]
        if not isinstance(completion, str):
            raise BadRequest(422, f"{where}.completion", f"expected a string, got {_kind(completion)}")
        spec = _spec(entry["target"], f"{where}.target")
        info = targets.check(spec, f"{where}.target")
        size = len(completion.encode("utf-8", "surrogatepass"))
        if size > info.max_completion_bytes:
            raise BadRequest(
                413,
                f"{where}.completion",
                f"{size} bytes, more than the {info.max_completion_bytes} this target allows (--max-completion-kb)",
            )
        items.append(Item(completion, spec, info.t0))
    return ScoreRequest(items, config)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(data: bytes | str, field: str, max_depth: int, status: int) -> Any:
    """``json.loads`` within the limits of :func:`parse` (BadRequest naming ``field`` otherwise)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(400, field, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        check_depth(data, max_depth)
    except ValueError:
        raise BadRequest(
            status, field, f"JSON nested deeper than {max_depth} levels (or with unbalanced brackets)"
        ) from None
    try:
        return json.loads(data, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise BadRequest(status, field, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NaN, an integer of 5000 digits, ...
        raise BadRequest(status, field, f"not valid JSON: {exc}") from None


def _spec(target: Any, field: str) -> str:
    if isinstance(target, str):
        target = _loads(target, field, MAX_TARGET_DEPTH, 422)
    if not isinstance(target, dict):
        raise BadRequest(422, field, f"expected a target spec (an object with 'algorithm'), got {_kind(target)}")
    if "algorithm" not in target:
        raise BadRequest(422, field, "the spec has no 'algorithm' (see GET /v1/targets)")
    try:
        return json.dumps(target, sort_keys=True)
    except (TypeError, ValueError) as exc:  # pragma: no cover - parsed JSON always dumps
        raise BadRequest(422, field, str(exc)) from None


def _rubric(data: Any, server: RubricConfig) -> RubricConfig | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise BadRequest(422, "rubric", f"expected an object of rubric sections, got {_kind(data)}")
    refused = sorted(set(data) - set(REQUEST_SECTIONS))
    if refused:
        raise BadRequest(
            422,
            f"rubric.{refused[0]}",
            f"not settable per request (the server's --config sets it); a request may set: {', '.join(REQUEST_SECTIONS)}",
        )
    merged = server.to_dict()
    for name, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(name), dict):
            merged[name] = {**merged[name], **value}
        else:
            merged[name] = value
    try:
        config = RubricConfig.from_dict(merged)
    except (ConfigError, ValueError, TypeError, ArithmeticError, LookupError) as exc:
        raise BadRequest(422, "rubric", str(exc) or type(exc).__name__) from None
    return None if config == server else config


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), f"a number ({value!r})" if isinstance(value, (int, float)) else type(value).__name__
    )


def result_dict(result: EvaluationResult, threshold: float, t0: int | None) -> dict[str, Any]:
    """One item's answer: ``to_dict()``, ``correct`` and ``t0``."""
    out = result.to_dict()
    out["correct"] = is_correct(result, threshold)
    out["t0"] = t0
    return out


def failed_dict(error_type: str, message: str, spec: str, t0: int | None) -> dict[str, Any]:
    """The answer for an item the server could not score (its worker died twice): reward 0,
    ``error_type`` set, like any failed evaluation."""
    result = EvaluationResult(error=message, error_type=error_type, target=json.loads(spec))
    return result_dict(result, 1.0, t0)
