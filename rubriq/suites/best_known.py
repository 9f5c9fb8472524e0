"""The best known T-count of each T-count suite circuit, with its source
(``best_known_tcounts.csv`` beside this file; the sources: ``published_tcounts.md``).

Two columns, never mixed:

* ``best_known``: the lowest published **ancilla-free** T-count (the same unitary on the same
  qubits): the minimum of the T-par, Nam et al., PyZX and Feynman columns of
  ``published_tcounts.csv`` and of AlphaTensor-Quantum's Table 1 rows whose compiled circuit has
  as many qubits as the original (``ATQ_table1``: no gadget ancilla was added; the GF(2^m)
  multipliers and mod5_4);
* ``best_known_ancillas``: a lower published count that needs extra ancillas (Hadamard
  gadgetization: AlphaTensor-Quantum's other rows, polytof), blank when there is none: a
  different problem, shown for reference.

``best_known_source`` names every method that reached the count (``;``-separated); a key of
:data:`SOURCES`.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

BEST_KNOWN_TCOUNTS = Path(__file__).with_name("best_known_tcounts.csv")
SOURCES = {
    "PyZX": "Kissinger & van de Wetering, Phys. Rev. A 102, 022406 (2020), arXiv:1903.10477; PyZX's T-count "
    "benchmark notebook (ancilla-free)",
    "Tpar": "Amy, Maslov & Mosca, IEEE TCAD 33 (2014), arXiv:1303.2042; T-par's released output files (ancilla-free)",
    "Nam": "Nam, Ross, Su, Childs & Maslov, npj Quantum Inf. 4, 23 (2018), arXiv:1710.07345; the released 'heavy' "
    "outputs (ancilla-free)",
    "Feynman": "Amy, Feynman (github.com/meamy/feynman); its released output files' headers (ancilla-free)",
    "ATQ_table1": "Ruiz et al., Quantum circuit optimization with AlphaTensor, Nature Machine Intelligence 7, 374 "
    "(2025), Table 1, 'T-count without gadgets', rows whose compiled qubit count equals the original (no ancilla)",
    "ATQ_gadgetized": "Ruiz et al. (2025), Table 1 / released results, 'without gadgets' column on a circuit compiled "
    "with Hadamard-gadget ancillas (extra qubits)",
    "polytof_gadgetized": "polytof, arXiv:2602.15285 (2026), github.com/khoruzhii/polytof: internal Hadamards "
    "replaced by ancilla gadgets (extra qubits)",
}
"""Source key -> citation (the paper, and where the number is printed)."""


@dataclass(frozen=True)
class BestKnown:
    """One circuit's best known T-counts."""

    circuit: str
    t0: int
    best_known: int
    sources: tuple[str, ...]
    best_known_ancillas: int | None = None
    ancilla_sources: tuple[str, ...] = ()
    notes: str = ""


def load_best_known(path: str | Path = BEST_KNOWN_TCOUNTS) -> dict[str, BestKnown]:
    """circuit -> :class:`BestKnown` of the committed table.

    >>> load_best_known()["tof_3"].best_known, load_best_known()["gf2^4_mult"].sources
    (15, ('ATQ_table1',))
    """
    out = {}
    with open(path, encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            out[r["circuit"]] = BestKnown(
                r["circuit"],
                int(r["T0"]),
                int(r["best_known"]),
                tuple(r["best_known_source"].split(";")),
                int(r["best_known_ancillas"]) if r["best_known_ancillas"] else None,
                tuple(s for s in r["best_known_ancillas_source"].split(";") if s),
                r["notes"],
            )
    return out


def best_known_columns(path: str | Path = BEST_KNOWN_TCOUNTS) -> dict[str, dict[str, str]]:
    """circuit -> {"best_known": ..., "best_known_ancillas": ...} as report cells (strings)."""
    return {
        name: {
            "best_known": str(b.best_known),
            "best_known_ancillas": "" if b.best_known_ancillas is None else str(b.best_known_ancillas),
        }
        for name, b in load_best_known(path).items()
    }


__all__ = ["BEST_KNOWN_TCOUNTS", "SOURCES", "BestKnown", "best_known_columns", "load_best_known"]
