"""Small rewrite-with-fewer-T tasks a 135M model can learn: seeded Clifford+T circuits with
planted, visible T redundancy, each with its PyZX optimum recorded.

The T-count suite's circuits (``suites.py``) are 5-48 qubits and up to 200 KB of QASM: far beyond
what a small model on a CPU can read and rewrite.  This generator writes circuits of 2-4 qubits
and 10-30 gates whose T gates can be removed in ways a reader can see, so that correct rewrites
differ in T and the gap to the compiler is known.  A circuit is a *core* (random Clifford+T
gates, with an H between any two T-type gates on a qubit, so the core's own T gates do not merge
locally) plus planted *redundancies*, each of which costs two T gates that a rewrite can save:

* ``adjacent``: ``t q; tdg q`` (cancel), ``t q; t q`` (= ``s q``), ``tdg q; tdg q`` (= ``sdg q``);
* ``commuting``: the same pair with gates between that commute with a Z rotation on ``q``
  (``cx`` with ``q`` as control, ``s``/``sdg``/``z`` on ``q``, anything on other qubits);
* ``parity``: a T-type gate on the parity x_a + x_b, twice: ``cx a,b; t b; cx a,b`` ...
  ``cx a,b; t b; cx a,b`` (= ``cx a,b; s b; cx a,b``), the phase-polynomial merge "through
  CNOTs" that PyZX's phase teleportation finds.

For every circuit the generator records the circuit (``qasm``), its T-count ``t0``, the
*planted rewrite* (the core with each redundancy replaced by its Clifford remainder: T =
``t_planted``) and the PyZX optimum (``t_pyzx``, full reduction with QuiZX when installed,
verified equivalent), so that a completion's T can be compared with both.  :func:`partial_rewrite`
undoes a random subset of the planted reductions: correct answers with every T-count from
``t0`` down to ``t_planted`` (the SFT warm-start's answers, so that GRPO has correct answers of
different T to compare).

**Answer formats** (``answer_format``, the SFT answers ``sft_answers``).  ``circuit`` (the
default): the answer is the rewritten circuit's OpenQASM 2.0 (``qasm2.dumps``), nothing else.
``pairs``: the same circuit, preceded by one comment line per planted redundancy the answer
removes (kept ones are not named), in circuit order, so that the model names the gates it
removes before it writes the circuit (a short chain of thought)::

    // cancel 2 t q[1] + 3 tdg
    // merge 6 t q[1] + 10 t -> s
    OPENQASM 2.0;
    include "qelib1.inc";
    ...

A number is a gate's position among the gate statements of the INPUT circuit as the prompt
shows it (1-based: the first statement after ``qreg`` is 1); the first gate is written as its
statement there (without ``;``), the second by its name only: the two act on the same qubit.
``cancel A + B``: the two gates multiply to the identity and both go; ``merge A + B -> C``:
gate A becomes the Clifford C on that qubit (in A's place) and gate B goes.  The input with
exactly these edits is equivalent to the input and to the answer's circuit.  A ``parity`` pair
names its two T-type gates inside the ``cx`` sandwiches (a merged Clifford sits between the
first sandwich's ``cx`` gates; the answer's circuit also drops the ``cx`` pairs left around
nothing).  A line costs 15-23 tokens of SmolLM2's tokenizer; an answer of the rewriting study's
SFT corpus, fenced as the warm-start learns it, 108 in the median and 188 at most, under GRPO's
192-token completion limit (writing the qubit again after the second gate and after the
Clifford would cost 4-8 more per line and push 6 of its 800 answers past that limit).  The
comment lines come before the ``OPENQASM`` header: Qiskit's OpenQASM 2 parser reads comments
there (the extraction's ``direct_qasm`` starts at the header, its ``fenced_block`` loads the
block whole: both give the same circuit), and :func:`rubriq.studies.analysis.rewrite_copies`
skips ``//`` lines, so the format changes no score and a copy of the input with comment lines is
still a copy.  The format draws no random number and reorders nothing: the circuits and every
other column are those of ``circuit``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from qiskit import QuantumCircuit, qasm2

REDUNDANCY_KINDS = ("adjacent", "commuting", "parity")
ANSWER_FORMATS = ("circuit", "pairs")
"""``RewriteGeneratorSpec.answer_format``: the SFT answer as the circuit alone, or with the
cancelled pairs named before it (the module docstring)."""
Gate = tuple[str, tuple[int, ...]]
"""A gate as (QuantumCircuit method name, qubits)."""
PAIRS = {
    # (first, second) -> the Clifford gate they equal (None: the identity)
    ("t", "tdg"): None,
    ("tdg", "t"): None,
    ("t", "t"): "s",
    ("tdg", "tdg"): "sdg",
}


PAIR_SLOTS = {"adjacent": (0, -1), "commuting": (0, -1), "parity": (1, -2)}
"""Kind -> where its two T-type gates sit in ``Planted.written`` (a parity pair: inside the
first and the last ``cx`` sandwich)."""


@dataclass(frozen=True)
class RewriteGeneratorSpec:
    """Which small rewrite circuits to generate (``rubriq data build``'s ``rewrite_small``)."""

    count: int = 120
    """Circuits to generate (distinct: a duplicate draw is skipped)."""
    qubits: tuple[int, ...] = (2, 3, 4)
    core_gates: tuple[int, int] = (6, 12)
    """Range (inclusive) of the number of core gates."""
    core_t_fraction: float = 0.3
    """Probability that a core gate is a T-type gate (where one may go)."""
    redundancies: tuple[int, int] = (2, 4)
    """Range (inclusive) of planted redundancies per circuit (each saves 2 T)."""
    kinds: tuple[str, ...] = REDUNDANCY_KINDS
    seed: int = 0
    answers: int = 2
    """SFT answers per circuit (``sft_answers``: partial rewrites, see :func:`partial_rewrite`)."""
    keep_probability: float = 0.5
    """Probability that an SFT answer keeps a planted redundancy as written (0: every answer is
    the planted rewrite)."""
    copies: bool = True
    """Whether an SFT answer may keep every redundancy (a copy of the input); False reduces one
    of them at random in such a draw, so every answer has fewer T gates than the input."""
    optimum: bool = True
    """Record the PyZX optimum (``t_pyzx``, ~0.25 s per circuit); an SFT corpus needs none."""
    target_t_best: bool = True
    """Put the PyZX optimum into the target as ``t_best`` (the relative T score's full-credit
    point, ``tcount.mode: relative``); needs ``optimum``."""
    answer_format: Literal["circuit", "pairs"] = "circuit"
    """How an SFT answer is written: ``circuit``, the circuit alone; ``pairs``, one comment line
    per removed planted redundancy naming its two gates by their position in the input, then the
    circuit (the module docstring)."""

    def __post_init__(self) -> None:
        if self.count < 1 or self.answers < 1:
            raise ValueError(f"count and answers must be >= 1, got count={self.count}, answers={self.answers}")
        if not 0.0 <= self.keep_probability <= 1.0:
            raise ValueError(f"keep_probability must lie in [0, 1], got {self.keep_probability}")
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got {self.answer_format!r}")
        if self.target_t_best and not self.optimum:
            raise ValueError("target_t_best needs optimum: true (t_best is the recorded PyZX optimum)")
        unknown = set(self.kinds) - set(REDUNDANCY_KINDS)
        if unknown or not self.kinds:
            raise ValueError(
                f"unknown redundancy kind(s) in {list(self.kinds)}; use a non-empty subset of {REDUNDANCY_KINDS}"
            )


@dataclass
class Planted:
    """One planted redundancy: its kind, the gates as written in the circuit and as reduced."""

    kind: str
    written: list[Gate]
    reduced: list[Gate]

    def pair(self) -> tuple[int, int]:
        """The indices in ``written`` of the two T-type gates that the redundancy removes or
        merges (the ``PAIRS`` key), as :func:`_plant` writes each kind."""
        first, second = PAIR_SLOTS[self.kind]
        return first % len(self.written), second % len(self.written)


@dataclass
class SmallRewrite:
    """A generated rewrite task (see the module docstring)."""

    name: str
    num_qubits: int
    pieces: list = field(default_factory=list)
    """The circuit in order: ``("gate", (name, qubits))`` or ``("planted", Planted)``."""

    def circuit(self, keep: set[int] | None = None) -> QuantumCircuit:
        """The circuit; with ``keep``, the planted redundancies whose index is NOT in ``keep`` are
        written reduced (``keep=None``: all as written, the task's input; ``keep=set()``: the
        planted rewrite)."""
        qc = QuantumCircuit(self.num_qubits)
        index = 0
        for kind, piece in self.pieces:
            if kind == "gate":
                _append(qc, *piece)
                continue
            gates = piece.written if keep is None or index in keep else piece.reduced
            for g in gates:
                _append(qc, *g)
            index += 1
        return qc

    @property
    def planted(self) -> list[Planted]:
        return [p for k, p in self.pieces if k == "planted"]

    def qasm(self, keep: set[int] | None = None) -> str:
        return qasm2.dumps(self.circuit(keep))

    def pair_lines(self, keep: set[int] | None = None) -> list[str]:
        """The ``pairs`` answer format's comment lines (the module docstring) for the answer
        ``circuit(keep)``: one per planted redundancy NOT in ``keep`` (``keep=None``: none, the
        input), in circuit order, each naming its two gates by their 1-based position among the
        input circuit's gate statements."""
        lines: list[str] = []
        position = 0  # gate statements of the input circuit before this piece
        index = 0
        for kind, piece in self.pieces:
            if kind == "gate":
                position += 1
                continue
            if keep is not None and index not in keep:
                a, b = piece.pair()
                (first, (q,)), (second, _) = piece.written[a], piece.written[b]
                named = f"{position + a + 1} {first} q[{q}] + {position + b + 1} {second}"
                clifford = PAIRS[(first, second)]
                lines.append(f"// cancel {named}" if clifford is None else f"// merge {named} -> {clifford}")
            position += len(piece.written)
            index += 1
        return lines

    def answer(self, keep: set[int] | None = None, answer_format: str = "circuit") -> str:
        """An SFT answer: ``qasm(keep)``, with ``pair_lines(keep)`` before it in the ``pairs``
        format."""
        text = self.qasm(keep)
        if answer_format == "circuit":
            return text
        if answer_format != "pairs":
            raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got {answer_format!r}")
        return "".join(line + "\n" for line in self.pair_lines(keep)) + text


def _append(qc: QuantumCircuit, name: str, qubits: tuple[int, ...]) -> None:
    getattr(qc, name)(*qubits)


def _t_count(circuit: QuantumCircuit) -> int:
    from rubriq.circuit.gates import canonical_ops
    from rubriq.circuit.tcount import t_count

    return t_count(canonical_ops(circuit))


def _core(rng: np.random.Generator, n: int, gates: int, t_fraction: float) -> list[Gate]:
    """Random Clifford+T gates with an H (or a CX target) between two T-type gates on a qubit."""
    out: list[Gate] = []
    last_phase = [False] * n  # whether the last gate touching the qubit's Z basis was a T-type gate
    while len(out) < gates:
        q = int(rng.integers(n))
        r = rng.random()
        if r < t_fraction and not last_phase[q]:
            out.append((str(rng.choice(["t", "tdg"])), (q,)))
            last_phase[q] = True
        elif r < t_fraction + 0.3 and n > 1:
            a, b = (int(x) for x in rng.choice(n, size=2, replace=False))
            out.append(("cx", (a, b)))
            last_phase[b] = False  # the target's Z phase now sits on another parity
        elif r < t_fraction + 0.55:
            out.append(("h", (q,)))
            last_phase[q] = False
        else:
            out.append((str(rng.choice(["s", "x", "z", "sdg"])), (q,)))
            # s / z / sdg keep the phase basis: a T before and after them would merge
            if out[-1][0] == "x":
                last_phase[q] = False
    return out


def _commuting_gates(rng: np.random.Generator, n: int, q: int) -> list[Gate]:
    """1-3 gates that commute with a Z rotation on ``q``."""
    gates: list[Gate] = []
    for _ in range(int(rng.integers(1, 4))):
        others = [x for x in range(n) if x != q]
        r = rng.random()
        if r < 0.4 and others:
            gates.append(("cx", (q, int(rng.choice(others)))))
        elif r < 0.7 and others:
            o = int(rng.choice(others))
            gates.append((str(rng.choice(["h", "t", "s", "x"])), (o,)))
        else:
            gates.append((str(rng.choice(["s", "sdg", "z"])), (q,)))
    return gates


def _plant(rng: np.random.Generator, n: int, kind: str) -> Planted:
    (first, second), clifford = list(PAIRS.items())[int(rng.integers(len(PAIRS)))]
    q = int(rng.integers(n))
    written: list[Gate]
    reduced: list[Gate]
    if kind == "adjacent":
        written = [(first, (q,)), (second, (q,))]
        reduced = [] if clifford is None else [(clifford, (q,))]
    elif kind == "commuting":
        middle = _commuting_gates(rng, n, q)
        written = [(first, (q,)), *middle, (second, (q,))]
        reduced = middle + ([] if clifford is None else [(clifford, (q,))])
    elif kind == "parity":
        if n < 2:
            return _plant(rng, n, "adjacent")
        a, b = (int(x) for x in rng.choice(n, size=2, replace=False))
        between: list[Gate] = [(str(rng.choice(["h", "s", "x"])), (o,)) for o in range(n) if o not in (a, b)]
        middle = between[:1]
        written = [
            ("cx", (a, b)),
            (first, (b,)),
            ("cx", (a, b)),
            *middle,
            ("cx", (a, b)),
            (second, (b,)),
            ("cx", (a, b)),
        ]
        reduced = middle + ([] if clifford is None else [("cx", (a, b)), (clifford, (b,)), ("cx", (a, b))])
    else:
        raise ValueError(f"unknown redundancy kind {kind!r}; use one of {REDUNDANCY_KINDS}")
    return Planted(kind, written, reduced)


def generate_one(rng: np.random.Generator, spec: RewriteGeneratorSpec, name: str) -> SmallRewrite:
    """One circuit of ``spec`` drawn from ``rng``: a core with redundancies planted at random places."""
    n = int(rng.choice(spec.qubits))
    core = _core(rng, n, int(rng.integers(spec.core_gates[0], spec.core_gates[1] + 1)), spec.core_t_fraction)
    pieces: list = [("gate", g) for g in core]
    for _ in range(int(rng.integers(spec.redundancies[0], spec.redundancies[1] + 1))):
        kinds = [k for k in spec.kinds if k != "parity" or n >= 2]
        planted = _plant(rng, n, str(rng.choice(kinds)))
        pieces.insert(int(rng.integers(len(pieces) + 1)), ("planted", planted))
    return SmallRewrite(name, n, pieces)


def pyzx_optimum(circuit: QuantumCircuit) -> int:
    """The verified PyZX T-count of ``circuit`` (full reduction, QuiZX when installed, and phase
    teleportation; the fewer).  Raises if neither route's output verifies."""
    from rubriq.baselines.compilers import count_t, pyzx_full_reduce, pyzx_teleport
    from rubriq.baselines.verify import verify

    best = None
    for route in (pyzx_full_reduce, pyzx_teleport):
        out = route(circuit)
        if verify(circuit, out)[0] == "exact":
            t = count_t(out)
            best = t if best is None else min(best, t)
    if best is None:
        raise RuntimeError("no PyZX route gave a verified circuit")
    return best


def generate(spec: RewriteGeneratorSpec = RewriteGeneratorSpec()) -> list[SmallRewrite]:
    """``spec.count`` distinct circuits (by QASM), reproducible from ``spec.seed``."""
    rng = np.random.default_rng(spec.seed)
    out: list[SmallRewrite] = []
    seen: set[str] = set()
    attempts = 0
    while len(out) < spec.count:
        attempts += 1
        if attempts > 50 * spec.count:
            raise RuntimeError(f"could not draw {spec.count} distinct circuits from {spec}")
        task = generate_one(rng, spec, f"small-{spec.seed}-{len(out)}")
        text = task.qasm()
        if text in seen:
            continue
        seen.add(text)
        out.append(task)
    return out


def partial_keep(
    task: SmallRewrite, rng: np.random.Generator, keep_probability: float = 0.5, copies: bool = True
) -> set[int]:
    """The planted redundancies a partial rewrite keeps (as written): each with
    ``keep_probability``.  With ``copies=False`` a draw that keeps every redundancy has one of
    them (at random) reduced, so the answer always has fewer T gates than the input."""
    n = len(task.planted)
    keep = {i for i in range(n) if rng.random() < keep_probability}
    if not copies and n and len(keep) == n:
        keep.discard(int(rng.integers(n)))
    return keep


def partial_rewrite(
    task: SmallRewrite, rng: np.random.Generator, keep_probability: float = 0.5, copies: bool = True
) -> QuantumCircuit:
    """An equivalent circuit that keeps the planted redundancies of :func:`partial_keep` (as
    written) and reduces the others: its T-count lies between ``t_planted`` and ``t0``."""
    return task.circuit(partial_keep(task, rng, keep_probability, copies))


def rewrite_record(task: SmallRewrite, with_optimum: bool = True) -> dict:
    """The facts recorded for a task: qasm, t0, t_planted, t_pyzx (with ``with_optimum``), gates,
    planted kinds."""
    written = task.circuit()
    planted = task.circuit(set())
    record = {
        "name": task.name,
        "num_qubits": task.num_qubits,
        "qasm": qasm2.dumps(written),
        "planted_qasm": qasm2.dumps(planted),
        "t0": _t_count(written),
        "t_planted": _t_count(planted),
        "gates": written.size(),
        "planted": [p.kind for p in task.planted],
    }
    if with_optimum:
        record["t_pyzx"] = pyzx_optimum(written)
    return record


def small_rewrite_rows(
    spec: RewriteGeneratorSpec = RewriteGeneratorSpec(), style: str = "compact", sft_seed: int = 0
) -> list[dict]:
    """Dataset rows (``rows.target_row`` with the ``circuit`` target) for the generated
    circuits, with the recorded facts and ``sft_answers``: ``spec.answers`` partial rewrites
    (QASM) for the warm-start (see :func:`partial_rewrite`), so that the warm-started policy has
    learned several correct answers of different T per prompt, not one; written in
    ``spec.answer_format``."""
    from rubriq.data.rows import target_row
    from rubriq.targets.circuit import CircuitTarget

    rng = np.random.default_rng(sft_seed)
    rows = []
    for task in generate(spec):
        facts = rewrite_record(task, with_optimum=spec.optimum)
        t_best = {"t_best": facts["t_pyzx"]} if spec.target_t_best else {}
        target = CircuitTarget(qasm=facts["qasm"], **t_best)
        sft_answers = [
            task.answer(partial_keep(task, rng, spec.keep_probability, spec.copies), spec.answer_format)
            for _ in range(spec.answers)
        ]
        row = target_row(
            target,
            "qasm2",
            f"rewrite-small-{task.name}",
            {
                "collection": "small_rewrite",
                "name": task.name,
                "t_planted": facts["t_planted"],
                "t_pyzx": facts.get("t_pyzx"),
                "planted": json.dumps(facts["planted"]),
                "sft_answers": sft_answers,
            },
            style=style,
        )
        row["family"] = "rewrite_small"
        rows.append(row)
    return rows


__all__ = [
    "ANSWER_FORMATS",
    "PAIR_SLOTS",
    "REDUNDANCY_KINDS",
    "RewriteGeneratorSpec",
    "SmallRewrite",
    "generate",
    "generate_one",
    "partial_keep",
    "partial_rewrite",
    "pyzx_optimum",
    "rewrite_record",
    "small_rewrite_rows",
]
