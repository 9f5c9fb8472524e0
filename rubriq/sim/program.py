"""Compile canonical gates into a short program of in-place simulation kernels.

Three passes, each with one job:

1. :func:`fuse_single_qubit`: consecutive one-qubit gates on the same qubit are multiplied
   into one 2x2 matrix (a transpiled circuit's rz-sx-rz runs become one instruction);
2. :func:`classify`: every instruction becomes the cheapest kernel that implements it exactly:
   a diagonal (phase) multiply, a permutation (slice swap), or a dense update;
3. :func:`fuse_two_qubit`: runs of instructions confined to one pair of qubits that hold at
   least two dense updates (e.g. h-h-cx-rz-cx-h-h of an XX rotation) become one 4x4 update
   (or a diagonal, if that is what they multiply to); runs of diagonals and permutations are
   left alone, since those cost O(2^n), not a pass over the block.

The kernels (``kernels.py``) work on a state block of shape (2^n, m) in place, so a gate
costs one pass over (part of) the block instead of Qiskit Operator's matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rubriq.circuit.gates import Op, op_matrix

_TOL = 1e-14


@dataclass(frozen=True)
class Instr:
    """One kernel instruction: its kind, its qubits and its data (phases, permutation or matrix)."""

    kind: str
    """diag1 anti1 dense1 cx cz swap diag2 dense2 ccx ccz cswap (two-qubit data: index
    bit_q0 + 2 bit_q1 of ``qubits``)"""
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
    """The cheapest exact kernel for each fused instruction (diagonal, permutation or dense)."""
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


_PERMS = {
    "cx": lambda x: (x[0], x[1] ^ x[0]),
    "swap": lambda x: (x[1], x[0]),
}
_ROW_PERMS: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}


def _row_perm(kind: str, local: tuple[int, ...]) -> np.ndarray:
    """Row order r such that (perm matrix of the gate) @ m == m[r] (cached)."""
    key = (kind, local)
    if key not in _ROW_PERMS:
        rows = np.zeros(4, dtype=np.int64)
        for x in range(4):
            bits = [x & 1, x >> 1]
            gate_out = _PERMS[kind](tuple(bits[i] for i in local))
            out = list(bits)
            for i, v in zip(local, gate_out, strict=True):
                out[i] = v
            rows[out[0] + 2 * out[1]] = x
        _ROW_PERMS[key] = rows
    return _ROW_PERMS[key]


def _one_qubit_matrix(ins: Instr) -> np.ndarray:
    d = ins.data
    if ins.kind == "diag1":
        return np.array([[d[0], 0], [0, d[1]]])
    if ins.kind == "anti1":
        return np.array([[0, d[0]], [d[1], 0]])
    return np.array(d).reshape(2, 2)


def left_multiply(m: np.ndarray, ins: Instr, pair: tuple[int, int]) -> np.ndarray:
    """(4x4 matrix of ``ins`` on ``pair``) @ m, basis index = bit_a + 2 * bit_b, without
    forming the 4x4 matrix (this runs once per instruction of every fused block)."""
    a, b = pair
    m3 = m.reshape(2, 2, 4)  # [bit_b, bit_a, column]
    if len(ins.qubits) == 1:
        g = _one_qubit_matrix(ins)
        if ins.qubits[0] == a:
            return np.matmul(g, m3).reshape(4, 4)
        return np.tensordot(g, m3, axes=(1, 0)).reshape(4, 4)
    pos = {q: i for i, q in enumerate(pair)}
    local = tuple(pos[q] for q in ins.qubits)  # gate's qubits as 0 (= a) or 1 (= b)
    if ins.kind == "cz":
        out = m.copy()
        out[3] *= -1
        return out
    if ins.kind == "dense2":
        g = np.array(ins.data).reshape(4, 4)
        if local != (0, 1):
            swap = [0, 2, 1, 3]
            g = g[swap][:, swap]
        return g @ m
    return m[_row_perm(ins.kind, local)]


def _emit_block(block: dict, out: list[Instr]) -> None:
    instrs = block["instrs"]
    dense = sum(1 for i in instrs if i.kind in ("dense1", "dense2"))
    if dense < 2:
        out.extend(instrs)
        return
    pair = block["pair"]
    m = np.eye(4, dtype=complex)
    for ins in instrs:
        m = left_multiply(m, ins, pair)
    if np.max(np.abs(m - np.diag(np.diag(m)))) < _TOL:
        out.append(Instr("diag2", pair, tuple(complex(x) for x in np.diag(m))))
    else:
        out.append(Instr("dense2", pair, tuple(complex(x) for x in m.reshape(-1))))


def fuse_two_qubit(program: list[Instr]) -> list[Instr]:
    """Greedy two-qubit blocking (see the module docstring); order-preserving per qubit."""
    out: list[Instr] = []
    blocks: dict[int, dict] = {}  # qubit -> its open block {"pair", "instrs"}
    pending: dict[int, list[Instr]] = {}  # one-qubit instructions waiting for a partner

    def close(q: int) -> None:
        block = blocks.get(q)
        if block is not None:
            for x in block["pair"]:
                blocks.pop(x, None)
            _emit_block(block, out)
        out.extend(pending.pop(q, []))

    for ins in program:
        qs = ins.qubits
        if len(qs) == 1:
            q = qs[0]
            if q in blocks:
                blocks[q]["instrs"].append(ins)
            else:
                pending.setdefault(q, []).append(ins)
            continue
        if len(qs) == 2 and qs[0] in blocks and blocks[qs[0]] is blocks.get(qs[1]):
            blocks[qs[0]]["instrs"].append(ins)
            continue
        for q in qs:
            close(q)
        if len(qs) == 2:
            block = {"pair": (min(qs), max(qs)), "instrs": pending.pop(qs[0], []) + pending.pop(qs[1], []) + [ins]}
            blocks[qs[0]] = blocks[qs[1]] = block
        else:
            out.append(ins)
    for q in sorted(set(blocks) | set(pending)):
        close(q)
    return out


def compile_ops(ops) -> list[Instr]:
    """The kernel program of a canonical gate list."""
    return fuse_two_qubit(classify(fuse_single_qubit(ops)))
