"""Typed records: one sampled completion (:class:`Record`), the same with its rubric result
(:class:`ScoredRecord`), a synthesis candidate with its circuit (:class:`Candidate`) and a
post-pass rewrite (:class:`Rewrite`).

Records are what ``rubriq evaluate``, the quickstart and the studies write as JSONL (one
``to_json()`` per line) and read back (``from_json``), so that every metric and report can be
recomputed without sampling again.  A line's unknown fields are kept in ``extra`` and written
back: reading and rewriting a file loses nothing.  Metrics also accept plain mappings with the
same keys (a hand-made record in a test), so records offer read-only mapping access
(``record["t0"]``, ``record.get("result")``).

>>> r = Record(prompt_id="qft-2-0-qasm2", text="OPENQASM 2.0;", target='{"algorithm": "qft"}', t0=0)
>>> s = r.scored({"parsed": False, "reward": 0.0})
>>> ScoredRecord.from_json(s.to_json()) == s, s["result"]["reward"], s.get("bucket"), s.get("seed", "-")
(True, 0.0, None, '-')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from qiskit import QuantumCircuit

_MISSING = object()


def dataset_of(row: dict) -> str:
    """The dataset a prompt row belongs to: ``rewrite-<collection>`` for rewrite rows, else
    ``synthesis`` (or the row's own ``dataset`` field).

    >>> dataset_of({"collection": "tcount"}), dataset_of({})
    ('rewrite-tcount', 'synthesis')
    """
    if row.get("dataset"):
        return str(row["dataset"])
    return f"rewrite-{row['collection']}" if row.get("collection") else "synthesis"


_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    """The named fields of a record class (``extra`` excluded), computed once per class."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls)) - {"extra"}
    return names


class RecordLike(Protocol):
    """What the metrics read from a record: a :class:`Record` or a plain mapping with its keys."""

    def get(self, key: str, default: Any = None, /) -> Any: ...

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True)
class Record:
    """One completion sampled for one prompt row."""

    prompt_id: str | None
    """The prompt row's ``id``."""
    text: str
    """The completion as generated."""
    target: str | None = None
    """The target's JSON spec (the dataset's ``target`` column)."""
    family: str | None = None
    format: str | None = None
    """Output format asked for: qasm2, qasm3 or python."""
    bucket: str | None = None
    """T0 bucket of the target (<80, 80-140, >140)."""
    t0: int | None = None
    """The target's reference T-count."""
    dataset: str = "synthesis"
    """``synthesis`` or ``rewrite-<collection>``."""
    sample: int = 0
    """Index of this completion among the prompt's samples."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Fields of a JSONL line this class does not name, kept and written back."""

    @classmethod
    def of_row(cls, row: dict, text: str, sample: int) -> Record:
        """Completion ``sample`` of prompt ``row`` (a dataset row: its id, target, family, format,
        bucket, T0 and dataset), as every policy returns it."""
        return cls(
            prompt_id=row.get("id"),
            text=text,
            target=row.get("target"),
            family=row.get("family"),
            format=row.get("format"),
            bucket=row.get("bucket"),
            t0=row.get("t0"),
            dataset=dataset_of(row),
            sample=sample,
        )

    def scored(self, result: Any) -> ScoredRecord:
        """This record with its rubric result (an ``EvaluationResult`` or its ``to_dict()``)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(Record)}
        return ScoredRecord(**values, result=result if isinstance(result, dict) else result.to_dict())

    def to_json(self) -> dict[str, Any]:
        """One JSONL line's object (``extra`` merged back in)."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "extra"}
        return {**self.extra, **out}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        """A record from a JSONL object: a :class:`ScoredRecord` when it has a ``result``;
        ``ValueError`` naming the missing fields otherwise."""
        missing = [k for k in ("prompt_id", "text") if k not in data]
        if missing:
            raise ValueError(f"a record needs {', '.join(missing)}")
        names = _field_names(ScoredRecord)
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names}
        if "result" in known:
            return ScoredRecord(**known, extra=extra)
        return Record(**known, extra=extra)

    # read-only mapping access: the metrics accept these records and plain dicts alike
    def __getitem__(self, key: str) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """A field (or an ``extra`` field) by name, like ``dict.get``."""
        if key in _field_names(type(self)):
            return getattr(self, key)
        return self.extra.get(key, default)

    def __contains__(self, key: object) -> bool:
        return self.get(str(key), _MISSING) is not _MISSING


@dataclass(frozen=True)
class ScoredRecord(Record):
    """A :class:`Record` with its rubric result (``EvaluationResult.to_dict()``)."""

    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """One scored synthesis candidate and the circuit extracted from it (None if unparsed)."""

    record: ScoredRecord
    circuit: QuantumCircuit | None = field(default=None, repr=False, compare=False)

    @property
    def result(self) -> dict[str, Any]:
        """The candidate's rubric result."""
        return self.record.result


@dataclass(frozen=True)
class Rewrite:
    """A compiler rewrite kept by the post-pass: verified equivalent, still correct, cheaper."""

    method: str
    """The compiler route (pyzx_teleport, pyzx_full_reduce, qiskit_o3)."""
    result: dict[str, Any]
    """The rubric result of the rewrite against the target."""
    circuit: QuantumCircuit = field(repr=False, compare=False)
    verdict: str = "exact"
    """How equivalence with the sampled circuit was shown: exact or qcec."""
