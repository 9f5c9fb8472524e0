"""Sample any model behind an OpenAI-compatible chat endpoint (vLLM, llama.cpp's server, Ollama,
hosted APIs) through the official ``openai`` client: ``rubriq evaluate --endpoint``,
``rubriq synthesize --endpoint`` and ``rubriq app --endpoint``.

* **The prompt**: each dataset row's ``prompt`` (its chat messages: system + user, or the compact
  user message) is sent as it is; the reply's message content is the completion.
* **Samples**: ``samples`` per prompt, asked for with the API's ``n`` where the server honours it
  (one request per prompt); a server that returns fewer choices, or rejects ``n`` > 1, gets one
  request per missing sample from then on.  A request for samples ``k..`` of a prompt carries
  ``seed + k``, so that single-sample requests to a seeded server are distinct draws.
  ``temperature``, ``top_p`` (when sampling), ``max_tokens`` (``max_completion_tokens`` where a
  server asks for it) and ``seed`` are passed through.
* **The key**: read from the environment variable named by ``api_key_env`` (default
  ``OPENAI_API_KEY``), never written to a file or printed: every message passes through the
  hardware path's :func:`rubriq.redaction.redact`.
* **A robust client**: at most ``concurrency`` requests in flight; ``timeout`` per request;
  retries with exponential backoff and jitter on 429, 5xx, timeouts and connection errors,
  honouring ``Retry-After`` (the ``openai`` client's own retry loop, which does exactly this:
  ``max_retries=retries``); :meth:`EndpointPolicy.check` lists the server's models first, so a
  wrong key (401/403), a wrong URL or a model the server does not serve is a one-line
  :class:`EndpointError` before any slow work.
* **Nothing paid for twice**: every completion is appended to a JSONL cache
  (:class:`CompletionCache`) the moment it arrives, keyed by (endpoint, model, messages,
  sampling settings, sample index); a rerun finds it there and requests only what is missing, so
  a run killed half way resumes without re-querying anything it has.
* **Usage**: prompt and completion tokens from the responses, summed (:class:`Usage`), with a
  cost where a price per million tokens is given.

The records are the same :class:`~rubriq.evaluation.records.Record` objects that local sampling
(:func:`rubriq.evaluation.sampling.generate`) returns, so scoring, metrics, ``summary.json`` and
``rubriq report`` treat both alike.

>>> key = cache_key("http://127.0.0.1:8000/v1/", "m", [{"role": "user", "content": "QFT"}],
...                 {"temperature": 0.8, "top_p": 0.95, "max_tokens": 64, "seed": 0}, 3)
>>> key == cache_key("http://127.0.0.1:8000/v1", "m", [{"content": "QFT", "role": "user"}],
...                  {"seed": 0, "max_tokens": 64, "top_p": 0.95, "temperature": 0.8}, 3), len(key)
(True, 64)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubriq.evaluation.records import Record
from rubriq.evaluation.settings import EndpointSettings
from rubriq.extract.files import open_record
from rubriq.models.sampling import SamplingSpec

log = logging.getLogger(__name__)

PLACEHOLDER_KEY = "no-key"
"""Sent when the key's variable is unset (local servers need none; the client needs a value)."""


class EndpointError(RuntimeError):
    """The endpoint cannot be used (key refused, model unknown, unreachable, request rejected,
    retries exhausted): a one-line message with the key redacted."""


def default_cache() -> Path:
    """The completion cache of commands without an output folder (``synthesize``, the app)."""
    from rubriq.cache import cache_root

    return cache_root() / "completions.jsonl"


def _normal_url(url: str) -> str:
    return url.rstrip("/")


def cache_key(endpoint: str, model: str, messages: Sequence[dict], sampling: dict[str, Any], sample: int) -> str:
    """The cache key of one completion: SHA-256 of (endpoint, model, messages, sampling
    settings, sample index) as canonical JSON (key order and a trailing ``/`` do not matter)."""
    payload = {
        "endpoint": _normal_url(endpoint),
        "model": model,
        "messages": list(messages),
        "sampling": sampling,
        "sample": sample,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class CompletionCache:
    """Completions by :func:`cache_key`, in a JSONL file appended to (and flushed) line by line
    as completions arrive; a torn last line (a kill mid-write) is skipped when read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.entries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._torn = False  # the file ends inside a line: the next entry starts a new one
        if self.path.is_file():
            bad = 0
            text = self.path.read_text(encoding="utf-8")
            self._torn = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry
                except (ValueError, KeyError, TypeError):
                    bad += line.strip() != ""
            if bad:
                log.warning("%s: skipped %d unreadable line(s) (a run killed mid-write)", self.path, bad)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached entry of ``key``, or None."""
        return self.entries.get(key)

    def add(self, entry: dict[str, Any]) -> None:
        """Append one completion (a dict with its ``key``) and flush it to disk."""
        with self._lock:
            self.entries[entry["key"]] = entry
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open_record(self.path, "a") as fh:  # 0600: completions and their scores
                fh.write(("\n" if self._torn else "") + json.dumps(entry, sort_keys=True) + "\n")
                fh.flush()
            self._torn = False


@dataclass
class Usage:
    """Tokens and requests of the completions an endpoint run returned (cached ones included:
    what the evaluation cost), and of the requests made by this run."""

    completions: int = 0
    from_cache: int = 0
    requests: int = 0
    """Requests answered during this run."""
    retries: int = 0
    """Retries the client made during this run (429, 5xx, timeouts, connection errors)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    run_prompt_tokens: int = 0
    """Of ``prompt_tokens``: those of this run's requests (the rest were paid for before)."""
    run_completion_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, other: Usage) -> None:
        """Add another run's counts to these."""
        with self._lock:
            for name in self.counts():
                setattr(self, name, getattr(self, name) + getattr(other, name))

    @staticmethod
    def counts() -> tuple[str, ...]:
        """The names of the summed counts."""
        return (
            "completions",
            "from_cache",
            "requests",
            "retries",
            "prompt_tokens",
            "completion_tokens",
            "run_prompt_tokens",
            "run_completion_tokens",
        )

    def cost(self, price_in: float | None, price_out: float | None = None) -> float | None:
        """USD for the tokens at ``price_in`` / ``price_out`` per million (None without a price).

        >>> Usage(prompt_tokens=2_000_000, completion_tokens=500_000).cost(0.5, 2.0)
        2.0
        """
        given = price_in if price_in is not None else price_out
        if given is None:
            return None
        p_in = given
        p_out = price_out if price_out is not None else given
        return (self.prompt_tokens * p_in + self.completion_tokens * p_out) / 1e6

    def to_dict(self, settings: EndpointSettings | None = None) -> dict[str, Any]:
        """The counts, ``total_tokens`` and (with a price in ``settings``) ``cost_usd``."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self.counts()}
        out["total_tokens"] = self.prompt_tokens + self.completion_tokens
        if settings is not None:
            cost = self.cost(settings.price_per_1m_tokens, settings.price_per_1m_output_tokens)
            if cost is not None:
                out["cost_usd"] = round(cost, 6)
        return out


def _redact(text: str, settings: EndpointSettings) -> str:
    from rubriq.redaction import TOKEN_VARIABLES, redact

    return redact(text, names=(*TOKEN_VARIABLES, settings.api_key_env))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _server_message(exc: Exception) -> str:
    """The server's own error message (the ``error.message`` of an OpenAI-style body)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", "") or exc)


class EndpointPolicy:
    """A model behind an OpenAI-compatible endpoint, sampled like a local policy
    (:meth:`generate` returns the records :func:`~rubriq.evaluation.sampling.generate` does)."""

    def __init__(self, settings: EndpointSettings, model: str, cache: str | Path | None = None, client: Any = None):
        if not settings.enabled:
            raise ValueError("EndpointPolicy needs settings.endpoint")
        settings.validate()
        if not model:
            raise ValueError("--model: name the model the endpoint serves")
        self.settings, self.model = settings, model
        self.endpoint = _normal_url(settings.endpoint)
        self.cache = CompletionCache(cache if cache is not None else default_cache())
        self.usage = Usage()
        self._client = client
        self._server_n = True  # until the server shows it ignores or rejects n > 1
        self._token_param = "max_tokens"  # until the server asks for max_completion_tokens
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EndpointPolicy({self.model!r} at {self.endpoint})"

    # -- the client ----------------------------------------------------------------------------
    @property
    def client(self):
        """The ``openai.OpenAI`` client (created on first use)."""
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise EndpointError(
                    f"--endpoint needs the openai client: pip install -e '.[endpoint]' ({exc})"
                ) from None
            key = os.environ.get(self.settings.api_key_env) or PLACEHOLDER_KEY
            self._client = openai.OpenAI(
                base_url=self.endpoint,
                api_key=key,
                timeout=self.settings.timeout,
                max_retries=self.settings.retries,
            )
        return self._client

    def _error(self, exc: Exception, what: str) -> EndpointError:
        """A one-line, redacted :class:`EndpointError` for an ``openai`` exception."""
        import openai

        status = getattr(exc, "status_code", None)
        message = _one_line(_server_message(exc))
        has_key = bool(os.environ.get(self.settings.api_key_env))
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            why = (
                f"the key in ${self.settings.api_key_env} was refused"
                if has_key
                else f"it needs an API key: set ${self.settings.api_key_env} (or name another variable with --api-key-env)"
            )
            text = f"--endpoint {self.endpoint}: {why} (HTTP {status}: {message})"
        elif isinstance(exc, openai.NotFoundError):
            text = f"--model: {self.endpoint} has no model {self.model!r} (HTTP 404: {message})"
        elif isinstance(exc, openai.APITimeoutError):
            text = (
                f"--endpoint {self.endpoint}: {what} timed out after {self.settings.timeout:g} s, "
                f"{self.settings.retries} retries (raise --timeout)"
            )
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            text = (
                f"--endpoint {self.endpoint}: cannot reach the server ({type(cause).__name__}: "
                f"{_one_line(str(cause))}) after {self.settings.retries} retries"
            )
        elif isinstance(exc, openai.APIStatusError):
            after = " after retries" if status == 429 or (status or 0) >= 500 else ""
            text = f"--endpoint {self.endpoint}: {what} failed{after} (HTTP {status}: {message})"
        else:
            text = f"--endpoint {self.endpoint}: {what} failed ({type(exc).__name__}: {message})"
        return EndpointError(_redact(text, self.settings))

    def check(self) -> list[str]:
        """Before any slow work: the server answers, accepts the key and serves ``model``
        (its model list; a model missing from the list gets a one-token probe, since some
        servers answer to aliases they do not list).  Returns the listed model ids;
        :class:`EndpointError` otherwise."""
        import openai

        try:
            ids = [m.id for m in self.client.with_options(max_retries=min(self.settings.retries, 2)).models.list()]
        except openai.NotFoundError:  # a server without GET /models: the first request will tell
            log.info("%s lists no models (GET /models: 404); not checking %r up front", self.endpoint, self.model)
            return []
        except openai.OpenAIError as exc:
            raise self._error(exc, "listing the models") from None
        if self.model in ids or f"{self.model}:latest" in ids:
            return ids
        try:
            self.client.with_options(max_retries=min(self.settings.retries, 2)).chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": "hi"}], max_tokens=1
            )
        except openai.NotFoundError as exc:
            listed = ", ".join(ids[:12]) + (f" ... ({len(ids)} in all)" if len(ids) > 12 else "")
            raise EndpointError(
                _redact(
                    f"--model: {self.endpoint} does not serve {self.model!r} (HTTP 404: "
                    f"{_one_line(_server_message(exc))}); it lists: {listed or 'nothing'}",
                    self.settings,
                )
            ) from None
        except openai.BadRequestError:
            pass  # the model exists; the probe's settings were not to its liking
        except openai.OpenAIError as exc:
            raise self._error(exc, "probing the model") from None
        log.warning("%r is not in %s's model list, but the server answers to it", self.model, self.endpoint)
        return ids

    # -- sampling ------------------------------------------------------------------------------
    def _request(self, messages: list[dict], n: int, sampling: dict[str, Any], seed: int) -> tuple[list, Any, int]:
        """One chat completion request: (choices, usage, retries taken)."""
        import openai

        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "seed": seed}
        kwargs["temperature"] = sampling["temperature"]
        if sampling["temperature"] > 0:
            kwargs["top_p"] = sampling["top_p"]
            if "top_k" in sampling:
                kwargs["extra_body"] = {"top_k": sampling["top_k"]}
        if n > 1:
            kwargs["n"] = n
        while True:
            kwargs[self._token_param] = sampling["max_tokens"]
            try:
                raw = self.client.chat.completions.with_raw_response.create(**kwargs)
            except openai.BadRequestError as exc:
                text = _server_message(exc)
                if self._token_param == "max_tokens" and "max_completion_tokens" in text:
                    log.info("%s asks for max_completion_tokens instead of max_tokens", self.endpoint)
                    kwargs.pop("max_tokens")
                    self._token_param = "max_completion_tokens"
                    continue
                if n > 1:  # perhaps n: again with n = 1 (another 400 then is raised)
                    with self._lock:
                        if self._server_n:
                            log.info(
                                "%s rejected n = %d (%s); one request per sample", self.endpoint, n, _one_line(text)
                            )
                        self._server_n = False
                    return [], None, 0
                raise
            response = raw.parse()
            return list(response.choices or []), response.usage, int(getattr(raw, "retries_taken", 0) or 0)

    def _sample_prompt(
        self, row: dict, indices: list[int], sampling: dict[str, Any], seed: int, on_completion: Callable[[], None]
    ) -> None:
        """Request the completions ``indices`` of one prompt (as few requests as the server
        allows), caching each as it arrives."""
        messages = list(row["prompt"])
        todo = list(indices)
        while todo:
            n = len(todo) if self._server_n else 1
            first = todo[0]
            choices, usage, retries = self._request(messages, n, sampling, seed + first)
            if not choices and n > 1 and not self._server_n:
                continue  # n was rejected: again, one at a time
            if not choices:
                raise EndpointError(_redact(f"--endpoint {self.endpoint}: a response with no choices", self.settings))
            if n > 1 and len(choices) < n:
                with self._lock:
                    if self._server_n:
                        log.info(
                            "%s returned %d of n = %d choices; one request per sample", self.endpoint, len(choices), n
                        )
                    self._server_n = False
            prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
            self.usage.add(
                Usage(
                    requests=1,
                    retries=retries,
                    run_prompt_tokens=prompt_tokens,
                    run_completion_tokens=completion_tokens,
                )
            )
            request_id = hashlib.sha256(f"{time.time_ns()}-{first}-{threading.get_ident()}".encode()).hexdigest()[:16]
            for j, choice in enumerate(choices[: len(todo)]):
                k = todo[j]
                self.cache.add(
                    {
                        "key": cache_key(self.endpoint, self.model, messages, sampling, k),
                        "endpoint": self.endpoint,
                        "model": self.model,
                        "prompt_id": row.get("id"),
                        "sample": k,
                        "sampling": sampling,
                        "seed": seed + first,
                        "text": (choice.message.content if choice.message is not None else None) or "",
                        "finish_reason": choice.finish_reason,
                        "request": request_id,
                        # the request's usage on its first choice only: the lines' sum is the total
                        "usage": {
                            "prompt_tokens": prompt_tokens if j == 0 else 0,
                            "completion_tokens": completion_tokens if j == 0 else 0,
                        },
                        "time": round(time.time(), 3),
                    }
                )
                on_completion()
            todo = todo[len(choices) :]

    def generate(
        self,
        rows: list[dict],
        spec: SamplingSpec | None = None,
        *,
        progress: bool = True,
        description: str = "sampling",
        on_batch: Callable[[int, int], None] | None = None,
        **fields: Any,
    ) -> list[Record]:
        """``spec.samples`` completions per row (``fields``: spec fields one by one, over
        ``spec``), from the cache where it has them, else from the endpoint (``concurrency``
        prompts in flight); ``on_batch(done, total)`` after each completion.  The records come
        in (row, sample) order, as local sampling returns them (the :class:`Policy` interface)."""
        from rubriq.progress import progress as progress_bar

        spec = (spec or SamplingSpec()).replace(**fields)
        spec.validate()
        samples, seed = spec.samples, spec.seed
        sampling = {
            "temperature": spec.temperature,
            "top_p": spec.top_p,
            "max_tokens": spec.max_new_tokens,
            "seed": seed,
        }
        if spec.top_k is not None:  # not an OpenAI parameter: vLLM, llama.cpp and Ollama read it
            sampling["top_k"] = spec.top_k
        keys = [[cache_key(self.endpoint, self.model, r["prompt"], sampling, k) for k in range(samples)] for r in rows]
        missing = [[k for k in range(samples) if self.cache.get(keys[i][k]) is None] for i in range(len(rows))]
        total = len(rows) * samples
        cached = total - sum(map(len, missing))
        if cached:
            log.info("%d of %d completions from the cache %s", cached, total, self.cache.path)
        lock = threading.Lock()
        done = [cached]
        with progress_bar(f"{description} ({total} completions, {self.model})", total, enabled=progress) as bar:
            bar.set(cached)
            if on_batch is not None:
                on_batch(cached, total)

            def on_completion() -> None:
                with lock:
                    done[0] += 1
                    bar.set(done[0])
                    if on_batch is not None:
                        on_batch(done[0], total)

            work = [(rows[i], idx) for i, idx in enumerate(missing) if idx]
            if work:
                self._run(work, sampling, seed, on_completion, total - cached)
        records: list[Record] = []
        usage = Usage(from_cache=cached)
        for row, row_keys in zip(rows, keys, strict=True):
            for k, key in enumerate(row_keys):
                entry = self.cache.get(key)
                assert entry is not None  # every missing completion was requested above
                usage.prompt_tokens += int(entry.get("usage", {}).get("prompt_tokens", 0))
                usage.completion_tokens += int(entry.get("usage", {}).get("completion_tokens", 0))
                records.append(Record.of_row(row, entry["text"], k))
        usage.completions = len(records)
        self.usage.add(usage)
        return records

    def _run(self, work: list[tuple[dict, list[int]]], sampling: dict, seed: int, on_completion, requested: int):
        """The prompts' missing completions, ``concurrency`` prompts at a time; the first
        failure stops the rest (what arrived is in the cache) and is raised as one line."""
        import openai

        before = len(self.cache)
        pool = ThreadPoolExecutor(max_workers=self.settings.concurrency, thread_name_prefix="endpoint")
        try:
            futures = [pool.submit(self._sample_prompt, row, idx, sampling, seed, on_completion) for row, idx in work]
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f.done() and f.exception() is not None), None)
        except BaseException:  # Ctrl+C: no new requests; those in flight still land in the cache
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        # after a failure: nothing new starts, the requests in flight finish (and are cached)
        pool.shutdown(wait=True, cancel_futures=True)
        if failed is None:
            return
        exc = failed.exception()
        got = len(self.cache) - before
        kept = f" ({got} of {requested} new completions saved in {self.cache.path}; rerun to continue)"
        if isinstance(exc, EndpointError):
            raise EndpointError(str(exc) + kept) from None
        if isinstance(exc, openai.OpenAIError):
            raise EndpointError(str(self._error(exc, "a chat completion request")) + kept) from None
        assert exc is not None
        raise exc


def is_endpoint_policy(policy: Any) -> bool:
    """Whether ``policy`` samples an endpoint (else it is a local (tokenizer, model) pair)."""
    return isinstance(policy, EndpointPolicy)
