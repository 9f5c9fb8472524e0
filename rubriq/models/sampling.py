"""How a policy is sampled, declared once: :class:`SamplingSpec` (temperature, top-p, top-k,
samples per prompt, new tokens, seed) and :class:`Policy`, the ``generate`` interface that a
local model (:class:`rubriq.evaluation.sampling.LocalPolicy`) and a model behind an
OpenAI-compatible endpoint (:class:`rubriq.evaluation.endpoint.EndpointPolicy`) both implement.

Every place that samples a policy holds a ``SamplingSpec`` (evaluation's settings, the
leaderboard, the studies, the SFT curve, ``rubriq evaluate`` / ``synthesize`` / ``optimize``,
whose options are derived from its fields by :func:`rubriq.options.typer_options`) and hands it
down as one object; a context that samples differently by default (GRPO's temperature 1.0, the
leaderboard's 0.8) builds its default spec with those values instead of declaring the fields
again. Its fields self-document as TRL's ``GRPOConfig`` does (``metadata={"help": ...}``).

>>> SamplingSpec().greedy
True
>>> spec = SamplingSpec(temperature=0.8, top_p=0.95, samples=4)
>>> spec.generate_kwargs()
{'do_sample': True, 'max_new_tokens': 256, 'temperature': 0.8, 'top_p': 0.95}
>>> SamplingSpec(samples=4).validate()
Traceback (most recent call last):
...
ValueError: greedy decoding (temperature 0) gives one distinct sample; set a temperature > 0
>>> SamplingSpec.from_dict({"temprature": 1.0})
Traceback (most recent call last):
...
ValueError: unknown sampling key 'temprature' (known: temperature, top_p, top_k, samples, max_new_tokens, seed)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from rubriq.config import ConfigError, from_dict
from rubriq.options import option

T = TypeVar("T")


@dataclass(frozen=True)
class SamplingSpec:
    """How completions are drawn from a policy: one object from the YAML (or the command line) to
    the sampler."""

    temperature: float = option(
        0.0, "Sampling temperature; 0: greedy decoding (one distinct completion: --samples must be 1).", metavar="T"
    )
    top_p: float = option(
        1.0, "Nucleus sampling with temperature > 0: the smallest top-probability set of mass P (1: all).", metavar="P"
    )
    top_k: int | None = option(
        None,
        "Sample among the K most likely tokens (temperature > 0; 0: all; unset: the model's generation "
        "config, transformers' default 50; not sent to an endpoint when unset).",
        metavar="K",
    )
    samples: int = option(1, "Completions per prompt (the k of pass@k).", metavar="K", short="-n")
    max_new_tokens: int = option(256, "Tokens per completion at most.", metavar="N")
    seed: int = option(0, "Sampling seed (sample k of a prompt on an endpoint: N + k).", metavar="N")

    @property
    def greedy(self) -> bool:
        """Temperature 0: greedy decoding."""
        return self.temperature == 0

    def validate(self) -> None:
        """``ValueError`` naming what is wrong (one sentence: the CLI reports it as one line)."""
        if self.samples < 1:
            raise ValueError("samples must be >= 1")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.greedy and self.samples > 1:
            raise ValueError("greedy decoding (temperature 0) gives one distinct sample; set a temperature > 0")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0: all tokens), got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    def generate_kwargs(self) -> dict[str, Any]:
        """The keywords of transformers' ``generate`` for one completion per row: greedy at
        temperature 0, else sampling at the temperature with top-p (and top-k when set)."""
        kwargs: dict[str, Any] = {"do_sample": not self.greedy, "max_new_tokens": self.max_new_tokens}
        if not self.greedy:
            kwargs.update(temperature=self.temperature, top_p=self.top_p)
            if self.top_k is not None:
                kwargs["top_k"] = self.top_k
        return kwargs

    def replace(self, **changes: Any) -> SamplingSpec:
        """A copy with ``changes`` (field names; an unknown one is a ``ValueError`` naming it)."""
        _check_keys(changes)
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, base: SamplingSpec | None = None) -> SamplingSpec:
        """A YAML mapping onto the spec (over ``base``, default :class:`SamplingSpec`); an
        unknown key is a ``ValueError`` naming it."""
        return (base or cls()).replace(**dict(data or {}))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = tuple(f.name for f in dataclasses.fields(SamplingSpec))
"""The spec's field names, in declaration order."""


def _check_keys(keys: Mapping[str, Any]) -> None:
    for key in keys:
        if key not in FIELDS:
            raise ValueError(f"unknown sampling key {key!r} (known: {', '.join(FIELDS)})")


def take_spec(
    section: Mapping[str, Any], base: SamplingSpec, names: Mapping[str, str]
) -> tuple[SamplingSpec, dict[str, Any]]:
    """A settings section that spells some of the spec's fields its own way (TRL's
    ``num_generations`` for ``samples``): the spec its keys in ``names`` (the section's key ->
    the spec's field) make over ``base``, and the rest of the section.

    >>> spec, rest = take_spec({"temperature": 0.8, "num_generations": 4, "beta": 0.0},
    ...                        SamplingSpec(), {"temperature": "temperature", "num_generations": "samples"})
    >>> spec.temperature, spec.samples, rest
    (0.8, 4, {'beta': 0.0})
    """
    rest = dict(section)
    given = {names[key]: rest.pop(key) for key in list(rest) if key in names}
    return base.replace(**given), rest


def give_spec(spec: SamplingSpec, names: Mapping[str, str]) -> dict[str, Any]:
    """The section keys that :func:`take_spec` reads, with ``spec``'s values (a field left
    unset, ``top_k`` None, is left out)."""
    values = dataclasses.asdict(spec)
    return {key: values[name] for key, name in names.items() if values[name] is not None}


def read_section(
    cls: type[T], section: Mapping[str, Any], base: SamplingSpec, names: Mapping[str, str], where: str
) -> T:
    """A settings dataclass ``cls`` with a ``sampling`` field from a YAML section that writes the
    spec's fields flat (``names``: the section's key -> the spec's field, see :func:`take_spec`):
    the spec over ``base``, the other keys field by field (:func:`rubriq.config.from_dict`); a
    ``ConfigError`` starts with ``where`` and names the key."""
    if "sampling" in section:
        raise ConfigError(f"{where}: give {', '.join(names)} as keys of the section itself")
    try:
        spec, rest = take_spec(section, base, names)
        return dataclasses.replace(from_dict(cls, rest), sampling=spec)
    except ValueError as exc:  # ConfigError too
        raise ConfigError(f"{where}: {exc}") from None


def write_section(settings: Any, names: Mapping[str, str], deep: bool = False) -> dict[str, Any]:
    """The YAML section :func:`read_section` reads back: ``settings``' fields in order (``deep``:
    nested dataclasses as mappings), the spec's fields flat where the ``sampling`` field stands."""
    values = (
        dataclasses.asdict(settings)
        if deep
        else {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    )
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name == "sampling":
            out.update(give_spec(settings.sampling, names))
        else:
            out[name] = value
    return out


def sampling_field(**defaults: Any) -> Any:
    """A dataclass field holding a :class:`SamplingSpec` whose defaults are ``defaults`` (a
    context that samples otherwise by default, e.g. ``sampling_field(temperature=0.8)``)."""
    _check_keys(defaults)
    return dataclasses.field(default_factory=lambda: SamplingSpec(**defaults))


R = TypeVar("R")


@runtime_checkable
class Policy(Protocol[R]):
    """What evaluation samples: ``generate(rows, spec)`` gives ``spec.samples`` completions per
    prompt row as records (evaluation's ``Record``), in (row, sample) order. Implemented by
    ``LocalPolicy`` (a transformers model on this machine) and ``EndpointPolicy`` (a model
    behind an OpenAI-compatible server)."""

    def generate(
        self,
        rows: list[dict],
        spec: SamplingSpec,
        *,
        progress: bool = True,
        description: str = "sampling",
        on_batch: Callable[[int, int], None] | None = None,
    ) -> list[R]:
        """``spec.samples`` completions per row; ``on_batch(done, total)`` as they arrive."""
        ...
