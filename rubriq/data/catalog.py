"""The breadth families' instances in the prompt datasets (issue #27; docs/targets.md).

``breadth_targets(names, small)`` lists the targets of each named family: the Clifford+T
primitives on every placement of their wires in 3 (and 4) qubits, multi-controlled gates with
and without an ancilla, the entangled states, textbook oracles, arithmetic, QAOA, the XY chain
and Clifford tableaux, each with seeded parameters.  ``small`` keeps a few per family (tests,
the CPU quickstart).  Every list is deterministic: the same call gives the same targets.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import numpy as np

from rubriq.targets import Target, make_target


def _wirings(name: str, arity: int, widths: Iterable[int]) -> list[Target]:
    """The gate on every ordered choice of wires in each width (symmetric wires collapse to one
    spec; ``synthesis_targets`` keeps one target per spec)."""
    out = []
    for n in widths:
        for wires in itertools.permutations(range(n), arity):
            out.append(make_target(name, n, wires=list(wires)))
    return _unique(out)


def _unique(targets: list[Target]) -> list[Target]:
    seen: dict[str, Target] = {}
    for t in targets:
        seen.setdefault(repr(sorted(t.spec().items())), t)
    return list(seen.values())


def _multi(name: str, small: bool) -> list[Target]:
    sizes = (4, 5) if small else (4, 5, 6, 7)
    return [make_target(name, n, ancillas=a) for n in sizes for a in (1, 0)]


def _graphs(n: int) -> dict[str, list[list[int]]]:
    return {
        "path": [[k, k + 1] for k in range(n - 1)],
        "ring": [[k, (k + 1) % n] for k in range(n)] if n > 2 else [[0, 1]],
        "star": [[0, k] for k in range(1, n)],
        "complete": [[i, j] for i in range(n) for j in range(i + 1, n)],
    }


FAMILIES: dict[str, Callable[[bool], list[Target]]] = {
    # Clifford+T primitives: every wiring on 3 qubits (2 for the two-qubit gates), and on one
    # more qubit unless small
    "toffoli": lambda small: _wirings("toffoli", 3, (3,) if small else (3, 4)),
    "ccz": lambda small: _wirings("ccz", 3, (3,) if small else (3, 4)),
    "cs": lambda small: _wirings("cs", 2, (2,) if small else (2, 3)),
    "ch": lambda small: _wirings("ch", 2, (2,) if small else (2, 3)),
    "peres": lambda small: _wirings("peres", 3, (3,) if small else (3, 4)),
    "mcx": lambda small: _multi("mcx", small),
    "mcz": lambda small: _multi("mcz", small),
    # entangled states
    "ghz": lambda small: [make_target("ghz", n) for n in ((2, 3, 8) if small else range(2, 9))],
    "w_state": lambda small: [make_target("w_state", n) for n in ((2, 3) if small else range(2, 7))],
    "bell": lambda small: [make_target("bell", which=w) for w in ("phi+", "phi-", "psi+", "psi-")],
    "graph_state": lambda small: _unique(
        [
            make_target("graph_state", n, edges=edges)
            for n in ((3, 4) if small else (3, 4, 5, 6))
            for edges in _graphs(n).values()
        ]
    ),
    # textbook oracles
    "bernstein_vazirani": lambda small: [
        make_target("bernstein_vazirani", n + 1, secret=s)
        for n in ((2, 3) if small else (2, 3, 4, 5))
        for s in _seeded_ints(n, 2 if small else 3, low=1)
    ],
    "deutsch_jozsa": lambda small: _unique(
        [make_target("deutsch_jozsa", n + 1, seed=seed) for n in ((2, 3) if small else (1, 2, 3, 4)) for seed in (0, 1)]
        + [make_target("deutsch_jozsa", 3, truth_table=t) for t in ("0000", "1111")]
    ),
    "grover": lambda small: _unique(
        [
            make_target("grover", n, marked=[m])
            for n in ((2, 3) if small else (2, 3, 4))
            for m in _seeded_ints(n, 1 if small else 2)
        ]
        + ([] if small else [make_target("grover", 3, marked=[1, 6]), make_target("grover", 4, marked=[0, 5, 10])])
    ),
    "simon": lambda small: [
        make_target("simon", 2 * n, secret=s) for n in ((2,) if small else (2, 3)) for s in _seeded_ints(n, 2, low=1)
    ],
    # arithmetic
    "cuccaro_adder": lambda small: [make_target("cuccaro_adder", 2 * n + 2) for n in ((1, 2) if small else (1, 2, 3))],
    "draper_adder": lambda small: [make_target("draper_adder", 2 * n) for n in ((1, 2) if small else (1, 2, 3))],
    "constant_adder": lambda small: [
        make_target("constant_adder", n, constant=c)
        for n in ((2, 3) if small else (2, 3, 4))
        for c in _seeded_ints(n, 2, low=1)
    ],
    "comparator": lambda small: [
        make_target("comparator", n + 1, value=v)
        for n in ((2,) if small else (2, 3, 4))
        for v in _seeded_ints(n, 2, low=1)
    ],
    # variational and Hamiltonian simulation
    "qaoa": lambda small: [
        make_target("qaoa", n, edges=edges, gamma=g, beta=b)
        for n in ((3,) if small else (3, 4, 5, 6))
        for edges in list(_graphs(n).values())[: 1 if small else 3]
        for g, b in ((0.4, 0.3),) + (() if small else ((0.8, 0.2),))
    ],
    "xy": lambda small: [
        make_target("xy", n, t=t)
        for n in ((2, 6) if small else range(2, 7))
        for t in ((0.5,) if small else (0.25, 0.5, 1.0))
    ],
    # Clifford
    "random_clifford": lambda small: [
        make_target("random_clifford", n, seed=s)
        for n in ((1, 2) if small else (1, 2, 3, 4))
        for s in range(2 if small else 3)
    ],
    "clifford_tableau": lambda small: [
        make_target("clifford_tableau", n, **_tableau(n, 1000 + s))
        for n in ((2,) if small else (2, 3))
        for s in range(2)
    ],
    "stabilizer_state": lambda small: [
        make_target("stabilizer_state", n, stabilizers=_tableau(n, 2000 + s)["stabilizer"])
        for n in ((2, 3) if small else (2, 3, 4))
        for s in range(2)
    ],
}
"""Family name -> the targets it contributes (``small``: a few)."""


def _seeded_ints(n: int, count: int, low: int = 0) -> list[int]:
    """``count`` distinct seeded integers in [low, 2^n) (fewer if the range is smaller)."""
    values = np.random.default_rng(n).permutation(np.arange(low, 2**n))
    return sorted(int(v) for v in values[:count])


def _tableau(n: int, seed: int) -> dict[str, list[str]]:
    from qiskit.quantum_info import random_clifford

    return random_clifford(n, seed=seed).to_dict()


BREADTH_FAMILIES: tuple[str, ...] = tuple(FAMILIES)


def breadth_targets(names: Iterable[str], small: bool = False) -> list[Target]:
    """The targets of the named breadth families, in the order given."""
    out: list[Target] = []
    for name in names:
        if name not in FAMILIES:
            raise ValueError(f"unknown breadth family {name!r}; known: {', '.join(FAMILIES)}")
        out += FAMILIES[name](small)
    return out
