"""How a policy is sampled for evaluation: the ``evaluation:`` section of a training YAML and the
base of ``rubriq evaluate``'s request (evaluation settings live with evaluation, not training);
how an OpenAI-compatible endpoint is queried (:class:`EndpointSettings`, whose fields are the
``--endpoint`` flags of ``rubriq evaluate``, ``synthesize`` and ``app``; ``endpoint.py`` uses
them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rubriq.models.sampling import SamplingSpec, read_section, write_section
from rubriq.options import option

EVAL_SAMPLING_KEYS = {
    "samples": "samples",
    "max_new_tokens": "max_new_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
}
"""The ``evaluation:`` section's keys that are :class:`SamplingSpec` fields (the same names)."""


SYNTHESIS_SAMPLING = SamplingSpec(temperature=0.8, top_p=0.95, samples=16, max_new_tokens=512)
"""How ``rubriq synthesize`` (and the app) sample candidates unless told otherwise."""


OPTIMIZE_SAMPLING = SamplingSpec(temperature=0.8, top_p=0.95, samples=8, max_new_tokens=0)
"""``rubriq optimize``'s sampling unless told otherwise (``max_new_tokens`` 0: enough tokens for a
rewrite as long as the input)."""


@dataclass(frozen=True)
class EvalSettings:
    """How a policy is sampled for evaluation (the quickstart's before/after tables)."""

    split: str = "test"
    """Held-out split of the dataset."""
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    """How each prompt is sampled (default: greedy, one completion); in YAML the section's keys
    ``samples``, ``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``."""
    batch_size: int = 8

    @classmethod
    def from_section(cls, data: dict[str, Any]) -> EvalSettings:
        """The ``evaluation:`` YAML section (its sampling keys into :attr:`sampling`); an unknown
        key is a ``ConfigError`` naming it."""
        return read_section(cls, data, cls().sampling, EVAL_SAMPLING_KEYS, "evaluation")

    def to_section(self) -> dict[str, Any]:
        """The YAML section (:meth:`from_section` reads it back)."""
        return write_section(self, EVAL_SAMPLING_KEYS)


@dataclass(frozen=True)
class EndpointSettings:
    """How an OpenAI-compatible endpoint is queried (``--endpoint`` and the flags after it in
    ``rubriq evaluate``, ``rubriq synthesize`` and ``rubriq app``)."""

    endpoint: str = option(
        "",
        "Base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, a hosted API), e.g. "
        "http://127.0.0.1:8000/v1: --model then names the served model, and nothing is loaded locally.",
        metavar="URL",
    )
    api_key_env: str = option(
        "OPENAI_API_KEY",
        "Environment variable holding the endpoint's API key (never printed or stored; unset: no key).",
        metavar="VAR",
    )
    concurrency: int = option(4, "Endpoint requests in flight at once.", metavar="N")
    timeout: float = option(120.0, "Seconds before an endpoint request is abandoned (and retried).", metavar="S")
    retries: int = option(
        5,
        "Retries per endpoint request on 429, 5xx, timeouts and connection errors (exponential backoff "
        "with jitter; a Retry-After header is honoured).",
        metavar="N",
    )
    cache: str = option(
        "",
        "JSONL completion cache; completions found there are not requested again (default: "
        "OUT/completions.jsonl for evaluate, $RUBRIQ_CACHE/completions.jsonl otherwise).",
        metavar="FILE",
    )
    price_per_1m_tokens: float | None = option(
        None,
        "USD per million prompt tokens (and completion tokens, unless --price-per-1m-output-tokens): "
        "adds the cost to the summary.",
        metavar="USD",
    )
    price_per_1m_output_tokens: float | None = option(
        None, "USD per million completion tokens (default: --price-per-1m-tokens).", metavar="USD"
    )

    def validate(self) -> None:
        """``ValueError`` naming each bad flag (the CLI reports it as one line)."""
        problems = []
        if self.endpoint and not self.endpoint.startswith(("http://", "https://")):
            problems.append(f"--endpoint: {self.endpoint!r} is not an http(s) URL")
        if self.concurrency < 1:
            problems.append(f"--concurrency: must be >= 1, got {self.concurrency}")
        if not self.timeout > 0:
            problems.append(f"--timeout: must be > 0 seconds, got {self.timeout}")
        if self.retries < 0:
            problems.append(f"--retries: must be >= 0, got {self.retries}")
        if not self.api_key_env.strip():
            problems.append("--api-key-env: give the name of an environment variable")
        for name in ("price_per_1m_tokens", "price_per_1m_output_tokens"):
            value = getattr(self, name)
            if value is not None and value < 0:
                problems.append(f"--{name.replace('_', '-')}: must be >= 0, got {value}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def enabled(self) -> bool:
        """Whether an endpoint is given (else sampling is local)."""
        return bool(self.endpoint)

    def public(self) -> dict[str, Any]:
        """The settings as recorded in ``summary.json`` (the variable's name, never its value)."""
        return asdict(self)
