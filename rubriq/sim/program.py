"""Compile canonical gates into a short program of in-place simulation kernels.

Two passes, each with one job:

1. :func:`fuse_single_qubit`: consecutive one-qubit gates on the same qubit are multiplied
   into one 2x2 matrix (a transpiled circuit's rz-sx-rz runs become one instruction);
2. :func:`classify`: every instruction becomes the cheapest kernel that implements it exactly:
   a diagonal (phase) multiply, a permutation (slice swap), or a dense update.

The kernels (``kernels.py``) work on a state block of shape (2^n, m) in place, so a gate
costs one pass over (part of) the block instead of Qiskit Operator's matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rubriq.rubric.gates import Op, op_matrix

_TOL = 1e-14


@dataclass(frozen=True)
class Instr:
    kind: str
    """diag1 anti1 dense1 cx cz swap diag2 dense2 ccx ccz cswap"""
    qubits: tuple[int, ...]
    data: tuple = ()


def fuse_single_qubit(ops) -> list[tuple[str, tuple[int, ...], np.ndarray | Op]]:
    """[('1q', (q,), 2x2 matrix) | ('op', qubits, Op)] with 1q runs multiplied together."""
    pending: dict[int, np.ndarray] = {}
    out: list = []

    def flush(q: int) -> None:
        m = pending.pop(q, None)
        if m is not None:
            out.append(("1q", (q,), m))

    for op in ops:
        if len(op.qubits) == 1:
            q = op.qubits[0]
            m = op_matrix(op.name, op.params)
            pending[q] = m @ pending[q] if q in pending else m
            continue
        for q in op.qubits:
            flush(q)
        out.append(("op", op.qubits, op))
    for q in sorted(pending):
        flush(q)
    return out


def _one_qubit_instr(q: int, m: np.ndarray) -> Instr | None:
    if abs(m[0, 1]) < _TOL and abs(m[1, 0]) < _TOL:
        d0, d1 = complex(m[0, 0]), complex(m[1, 1])
        if abs(d0 - 1) < _TOL and abs(d1 - 1) < _TOL:
            return None  # identity
        return Instr("diag1", (q,), (d0, d1))
    if abs(m[0, 0]) < _TOL and abs(m[1, 1]) < _TOL:
        return Instr("anti1", (q,), (complex(m[0, 1]), complex(m[1, 0])))
    return Instr("dense1", (q,), tuple(complex(x) for x in m.reshape(-1)))


def classify(fused) -> list[Instr]:
    program: list[Instr] = []
    for kind, qubits, item in fused:
        if kind == "1q":
            instr = _one_qubit_instr(qubits[0], item)
            if instr is not None:
                program.append(instr)
            continue
        name = item.name
        if name in ("cx", "cz", "swap", "ccx", "ccz", "cswap"):
            program.append(Instr(name, qubits))
        else:  # cy iswap dcx ecr: dense two-qubit update (rare in practice)
            m = op_matrix(name, item.params)
            program.append(Instr("dense2", qubits, tuple(complex(x) for x in m.reshape(-1))))
    return program


def compile_ops(ops) -> list[Instr]:
    """The kernel program of a canonical gate list."""
    return classify(fuse_single_qubit(ops))
