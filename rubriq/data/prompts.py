"""The prompt datasets (paper section VI): synthesis tasks and rewrite-with-fewer-T tasks.

Rows carry everything the reward function needs, so the training loop never guesses:

* ``prompt``: chat messages (system + user) as in the paper, with the target's conventions;
* ``format``: qasm2, qasm3 or python (the output format the prompt asks for);
* ``target``: JSON spec that ``rubriq.targets.target_from_spec`` rebuilds the target from;
* ``reference``: OpenQASM 2.0 of the reference circuit, ``t0`` its T-count, ``bucket``.

Synthesis families: QFT on 2-8 qubits; QPE on 3-7 qubits with eigenphases {0.125, 0.25,
0.375, 0.5, 0.75}; Hamiltonian simulation (Heisenberg XXX and transverse-field Ising, 2-6
qubits, t in {0.25, 0.5, 1.0}); data encodings (amplitude, angle, basis; 2-6 qubits, seeded
data).  The breadth families (issue #27: Clifford+T primitives, entangled states, oracles,
arithmetic, QAOA, XY chain, Clifford tableaux; ``rubriq.data.catalog``, docs/targets.md) are
added by ``PromptSpec.breadth``; ``PromptSpec.default()``, what ``rubriq data build`` writes,
has them all, ``PromptSpec()`` alone is the paper's dataset.  Splits (seed 42) are by *target* (family, size and parameters): all output formats of
one target land in the same split.  Every target of the largest size of each family (QFT 8,
QPE 7, Hamiltonians 6, encodings 6) goes to ``test`` to measure generalization to unseen
sizes; the remaining targets are split 80/10/10 into train/validation/test.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rubriq.data.catalog import BREADTH_FAMILIES, breadth_targets
from rubriq.data.rewrites import RewriteGeneratorSpec
from rubriq.data.rows import target_row
from rubriq.suites import NotCliffordT, SuiteCircuit, make_entry, to_clifford_t
from rubriq.targets import Target, make_target
from rubriq.targets.qft import PAPER_PHASES

log = logging.getLogger(__name__)

FORMATS = ("qasm2", "qasm3", "python")
HELD_OUT_SIZES = {
    "qft": 8,
    "qpe": 7,
    "hamiltonian": 6,
    "encoding": 6,
    "multi_controlled": 7,
    "state": 8,
    "oracle": 6,
    "arithmetic": 8,
    "qaoa": 6,
    "clifford": 4,
}
"""Family -> the size whose every target goes to test (unseen sizes).  The primitives (one or
two widths each, one target per wiring) are split at random like the rest."""


@dataclass(frozen=True)
class PromptSpec:
    """Which synthesis targets to include (defaults: the paper's)."""

    qft_sizes: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8)
    qpe_sizes: tuple[int, ...] = (3, 4, 5, 6, 7)
    qpe_phases: tuple[float, ...] = PAPER_PHASES
    hamiltonian_sizes: tuple[int, ...] = (2, 3, 4, 5, 6)
    hamiltonian_times: tuple[float, ...] = (0.25, 0.5, 1.0)
    encoding_sizes: tuple[int, ...] = (2, 3, 4, 5, 6)
    encoding_seeds: tuple[int, ...] = (0, 1)
    encodings: tuple[str, ...] = ("amplitude_encoding", "angle_encoding", "basis_encoding")
    formats: tuple[str, ...] = FORMATS
    prompt_style: str = "full"
    """full: the paper's system + user prompt; compact: one short user message (CPU runs);
    minimal: the task in the fewest words, under an empty system message (``Target.prompt``)."""
    extra_targets: tuple[dict[str, Any], ...] = ()
    """More synthesis targets, as JSON specs (``{"algorithm": "toffoli", "num_qubits": 3}``: any
    registered family, ``rubriq targets``), each in every format of ``formats``."""
    small_rewrites: tuple[RewriteGeneratorSpec, ...] = ()
    """Generated small rewrite-with-fewer-T tasks (``rewrites.py``; OpenQASM 2.0 only, the
    circuit is the prompt); each circuit is its own target for the split."""
    breadth: tuple[str, ...] = ()
    """Breadth families to add (``rubriq.data.catalog.BREADTH_FAMILIES``: toffoli, ccz, cs, ch,
    peres, mcx, mcz, ghz, ...); () for the paper's families only."""
    breadth_small: bool = False
    """A few targets per breadth family instead of all."""

    @classmethod
    def default(cls) -> PromptSpec:
        """The paper's families and every breadth family (``rubriq data build``)."""
        return cls(breadth=BREADTH_FAMILIES)

    @classmethod
    def small(cls) -> PromptSpec:
        """A few rows per family (tests, the CPU quickstart)."""
        return cls(
            qft_sizes=(2, 3, 8),
            qpe_sizes=(3, 7),
            qpe_phases=(0.25, 0.5),
            hamiltonian_sizes=(2, 6),
            hamiltonian_times=(0.5,),
            encoding_sizes=(2, 6),
            encoding_seeds=(0,),
            breadth=BREADTH_FAMILIES,
            breadth_small=True,
        )


def synthesis_targets(spec: PromptSpec = PromptSpec()) -> list[Target]:
    """The distinct targets of ``spec`` (equal specs, e.g. two seeds drawing the same data, once)."""
    targets: list[Target] = [make_target("qft", n) for n in spec.qft_sizes]
    targets += [make_target("qpe", n, phase=p) for n in spec.qpe_sizes for p in spec.qpe_phases]
    targets += [
        make_target(name, n, t=t)
        for name in ("heisenberg", "tfim")
        for n in spec.hamiltonian_sizes
        for t in spec.hamiltonian_times
    ]
    for n in spec.encoding_sizes:
        for seed in spec.encoding_seeds:
            targets += [make_target(name, n, seed=seed) for name in spec.encodings]
    from rubriq.targets import target_from_spec

    targets += [target_from_spec(dict(extra)) for extra in spec.extra_targets]
    targets += breadth_targets(spec.breadth, small=spec.breadth_small)
    # two seeds can draw the same data (a 2-qubit basis encoding has 4 values): one row set per target
    unique = {json.dumps(t.spec(), sort_keys=True): t for t in reversed(targets)}
    return [t for t in targets if unique[json.dumps(t.spec(), sort_keys=True)] is t]


def prompt_style_of_rows(rows: list[dict]) -> str:
    """``full`` when the prompts carry the paper's system message, ``minimal`` when they carry an
    empty one, else ``compact``.

    >>> prompt_style_of_rows([{"prompt": [{"role": "user", "content": "QFT"}]}])
    'compact'
    >>> prompt_style_of_rows([{"prompt": [{"role": "system", "content": ""}, {"role": "user", "content": "QFT"}]}])
    'minimal'
    """
    first = (rows[0].get("prompt") or [{}])[0] if rows else {}
    if first.get("role") != "system":
        return "compact"
    return "minimal" if not first.get("content") else "full"


def synthesis_rows(spec: PromptSpec = PromptSpec()) -> list[dict]:
    """The synthesis dataset's rows: every target of ``spec`` in every format, then the small
    rewrite tasks of ``spec.small_rewrites`` (OpenQASM 2.0)."""
    from rubriq.data.rewrites import small_rewrite_rows

    rows = []
    for i, target in enumerate(synthesis_targets(spec)):
        for fmt in spec.formats:
            rows.append(
                target_row(target, fmt, f"{target.name}-{target.num_qubits}-{i}-{fmt}", style=spec.prompt_style)
            )
    for generator in spec.small_rewrites:
        rows += small_rewrite_rows(generator, style=spec.prompt_style)
    return rows


def prompt_reference_circuits() -> list[SuiteCircuit]:
    """The reference circuits of the synthesis prompts' targets that reduce exactly to Clifford+T
    (the ``prompts`` collection of ``rubriq baselines``)."""
    import hashlib
    import json

    out = []
    for target in synthesis_targets():
        tag = hashlib.sha256(json.dumps(target.spec(), sort_keys=True).encode()).hexdigest()[:8]
        try:
            out.append(
                make_entry(
                    "prompts",
                    f"{target.name}_{target.num_qubits}_{tag}",
                    to_clifford_t(target.reference_circuit()),
                    "reference circuit",
                )
            )
        except NotCliffordT:
            continue
    return out


def rewrite_rows(circuits: list[SuiteCircuit], formats: tuple[str, ...] = ("qasm2",)) -> list[dict]:
    """The rewrite dataset's rows: each circuit as a rewrite-with-fewer-T target."""
    from rubriq.targets.circuit import CircuitTarget

    rows = []
    for c in circuits:
        target = CircuitTarget(qasm=c.qasm())
        for fmt in formats:
            rows.append(
                target_row(
                    target, fmt, f"rewrite-{c.collection}-{c.name}-{fmt}", {"collection": c.collection, "name": c.name}
                )
            )
    return rows


def target_key(row: dict) -> str:
    """What makes two rows the same task: the target's JSON spec (family, size and resolved
    parameters, keys sorted), whatever output format the prompt asks for.  A circuit's recorded
    best T-count (``t_best``) is a fact about the target, not part of what it is: the same
    circuit with and without it is one target.

    >>> a = {"target": '{"algorithm": "circuit", "qasm": "x", "t_best": 1}'}
    >>> target_key(a) == target_key({"target": '{"algorithm": "circuit", "qasm": "x"}'})
    True
    """
    key = row["target"]
    if '"t_best"' not in key:
        return key
    spec = json.loads(key)
    spec.pop("t_best", None)
    return json.dumps(spec, sort_keys=True)


def split_rows(
    rows: list[dict],
    seed: int = 42,
    held_out: dict[str, int] = HELD_OUT_SIZES,
    fractions: tuple[float, float] = (0.1, 0.1),
) -> dict[str, list[dict]]:
    """train / validation / test **by target**: every row of one target (all its output formats)
    lands in the same split, so a held-out score is on targets the policy never trained on.

    Targets of the largest size of each family (``held_out``) go to test; the other targets are
    split ``fractions`` (validation, test) at random (``seed``), the rest to train.

    >>> rows = [{"target": t, "family": "qft", "num_qubits": 2, "format": f} for t in "abcd" for f in ("q2", "py")]
    >>> splits = split_rows(rows, held_out={}, fractions=(0.25, 0.25))
    >>> {k: len(v) for k, v in splits.items()}, check_disjoint(splits)
    ({'train': 4, 'validation': 2, 'test': 2}, None)
    """
    first: dict[str, dict] = {}
    for r in rows:
        first.setdefault(target_key(r), r)
    # The paper's families are drawn together, as they always were; each breadth family
    # (rubriq.data.catalog) and the small rewrite tasks (rewrites.py) are drawn on their own, so
    # adding or removing one moves no other target between splits.
    groups: dict[str, list[str]] = {}
    for k, r in first.items():
        name = r.get("algorithm")
        group = name if isinstance(name, str) and name in BREADTH_FAMILIES else ""
        if r.get("family") == "rewrite_small":
            group = "rewrite_small"
        groups.setdefault(group, []).append(k)
    where: dict[str, str] = {}
    for keys in groups.values():
        where.update(_draw(keys, first, seed, held_out, fractions))
    splits: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for r in rows:
        splits[where[target_key(r)]].append(r)
    return splits


def add_generated_splits(
    splits: dict[str, list[dict]], extra: dict[str, Any], style: str = "compact"
) -> dict[str, int]:
    """Add one split per name of ``extra`` (name -> :class:`RewriteGeneratorSpec` fields, or a
    list of them): generated small rewrite rows, drawn after the main splits, in order.  A row
    whose target is already in a split is dropped, so every split stays disjoint by target (a
    harder held-out tier never meets a training circuit; an SFT corpus never meets a held-out
    one).  A name may be that of an empty split (``validation`` when ``fractions`` keeps none
    for it), which the generated rows then fill.  Returns how many rows each new split dropped.

    >>> spec = {"count": 6, "qubits": [2], "core_gates": [1, 1], "redundancies": [1, 1], "kinds": ["adjacent"],
    ...         "optimum": False, "target_t_best": False}
    >>> splits = {"train": []}
    >>> dropped = add_generated_splits(splits, {"a": spec, "b": dict(spec, seed=0)})
    >>> len(splits["a"]), len(splits["b"]), dropped
    (6, 0, {'a': 0, 'b': 6})
    """
    from rubriq.config import from_dict
    from rubriq.data.rewrites import small_rewrite_rows

    dropped: dict[str, int] = {}
    for name, specs in extra.items():
        if splits.get(name):
            raise ValueError(f"extra split {name!r} is already a split of the dataset ({len(splits[name])} rows)")
        seen = {target_key(r) for rows in splits.values() for r in rows}
        rows: list[dict] = []
        for fields in specs if isinstance(specs, (list, tuple)) else [specs]:
            generator = (
                fields if isinstance(fields, RewriteGeneratorSpec) else from_dict(RewriteGeneratorSpec, dict(fields))
            )
            rows += small_rewrite_rows(generator, style=style)
        splits[name] = [r for r in rows if target_key(r) not in seen]
        dropped[name] = len(rows) - len(splits[name])
    return dropped


def build_splits(build: dict[str, Any]) -> dict[str, list[dict]]:
    """The splits a training config's ``data.build`` describes: :class:`PromptSpec` fields plus
    ``seed``, ``held_out`` and ``fractions`` of :func:`split_rows`, and ``extra_splits`` of
    :func:`add_generated_splits`."""
    from rubriq.config import from_dict

    build = dict(build)
    seed = build.pop("seed", 42)
    options = {k: build.pop(k) for k in ("held_out", "fractions") if k in build}
    if "fractions" in options:
        options["fractions"] = tuple(options["fractions"])
    extra = build.pop("extra_splits", {}) or {}
    spec = from_dict(PromptSpec, build)
    splits = split_rows(synthesis_rows(spec), seed=seed, **options)
    if extra:
        dropped = add_generated_splits(splits, extra, style=spec.prompt_style)
        for name, n in dropped.items():
            if n:
                log.info("extra split %s: %d generated rows left out (their target is in another split)", name, n)
    return splits


def split_summary(splits: dict[str, list[dict]]) -> dict[str, dict[str, int]]:
    """Rows and distinct targets per split."""
    return {name: {"rows": len(rows), "targets": len({target_key(r) for r in rows})} for name, rows in splits.items()}


def family_summary(splits: dict[str, list[dict]]) -> dict[str, dict[str, dict[str, int]]]:
    """Per target name (``algorithm``): rows and distinct targets in each split.

    >>> rows = {"train": [{"algorithm": "ghz", "target": "a"}, {"algorithm": "ghz", "target": "a"}], "test": []}
    >>> family_summary(rows)
    {'ghz': {'rows': {'train': 2, 'test': 0}, 'targets': {'train': 1, 'test': 0}}}
    """
    names = sorted({r["algorithm"] for rows in splits.values() for r in rows})
    return {
        name: {
            "rows": {s: sum(1 for r in rows if r["algorithm"] == name) for s, rows in splits.items()},
            "targets": {s: len({target_key(r) for r in rows if r["algorithm"] == name}) for s, rows in splits.items()},
        }
        for name in names
    }


def _draw(
    keys: list[str], first: dict[str, dict], seed: int, held_out: dict[str, int], fractions: tuple[float, float]
) -> dict[str, str]:
    """Split name per target key: held-out sizes to test, the rest ``fractions`` at random."""
    test_keys = {k for k in keys if held_out.get(first[k]["family"]) == first[k]["num_qubits"]}
    rest = [k for k in keys if k not in test_keys]
    order = np.random.default_rng(seed).permutation(len(rest))
    n_val, n_test = int(round(fractions[0] * len(rest))), int(round(fractions[1] * len(rest)))
    val_keys = {rest[i] for i in order[:n_val]}
    test_keys |= {rest[i] for i in order[n_val : n_val + n_test]}
    return {k: "test" if k in test_keys else "validation" if k in val_keys else "train" for k in keys}


def check_disjoint(splits: dict[str, list[dict]]) -> None:
    """Raise ValueError if any target appears in two splits (a leak between train and test)."""
    seen: dict[str, str] = {}
    for name, rows in splits.items():
        for r in rows:
            other = seen.setdefault(target_key(r), name)
            if other != name:
                raise ValueError(f"target {target_key(r)} is in both {other!r} and {name!r}: splits must be by target")


def save_splits(splits: dict[str, list[dict]], out: Path) -> Path:
    """Hugging Face ``datasets`` (save_to_disk) and one JSONL file per split."""
    from datasets import Dataset, DatasetDict

    check_disjoint(splits)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    DatasetDict({name: Dataset.from_list(rows) for name, rows in splits.items() if rows}).save_to_disk(str(out / "hf"))
    for name, rows in splits.items():
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    return out


def load_split(directory: Path | str, split: str) -> list[dict]:
    """Rows of one split from a folder written by :func:`save_splits` (JSONL)."""
    path = Path(directory) / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no split {split!r} in {directory} (expected {path.name}); build it with `rubriq data build`"
        )
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
