"""Gate kernels on a block of column states, for NumPy and PyTorch alike.

The block S has shape (2^n, m): row index bit q is qubit q (Qiskit's little-endian order) and
the m columns are independent states (the 2^n_t basis inputs of a unitary, or k sampled
inputs).  The true block is kept as

    true = diag(P) . Pi . S        (P: a phase per row, Pi: a row permutation)

so that diagonal gates (rz, p, t, s, z, cz, ccz and the phases of X-like gates) only update
the length-2^n vector P, and permutation gates (x, cx, swap, ccx, cswap) only update the
index vector of Pi, both at O(2^n) cost instead of a pass over the O(2^n m) block.  Only a
dense gate (h, sx, a general fused one-qubit matrix, cy/iswap/dcx/ecr) touches the block: it
first materializes the pending P and Pi (one gather and one multiply), then mixes the two
halves in place with two preallocated scratch buffers (a fresh 16 MB temporary costs more in
page faults than the arithmetic).  A decomposed QFT-10 has 10 dense gates among 250.

With numba installed, the dense updates on NumPy blocks run as compiled kernels that read the
pending permutation and phases while they write (``_numba_kernels.py``): one pass per dense
gate.  Otherwise only indexing, gathers and in-place arithmetic are used, through a small
adapter per array library, so the same algorithm runs on NumPy and on torch tensors (CPU or CUDA).  Written by
hand because no maintained library applies gates to a block of column vectors with an
ancilla projection (Aer's unitary simulator has no projection; Qiskit's Operator composes
dense matrices).
"""

from __future__ import annotations

from rubriq.sim.program import Instr


class NumpyOps:
    """The array operations the kernels need, on NumPy."""

    import numpy as _np

    name = "numpy"

    def __init__(self) -> None:
        self.np = self._np

    def arange(self, n):
        return self.np.arange(n, dtype=self.np.int64)

    def ones(self, n, dtype):
        return self.np.ones(n, dtype=dtype)

    def empty_like(self, x):
        return self.np.empty_like(x)

    def empty(self, size, like):
        return self.np.empty(size, dtype=like.dtype)

    def take_rows(self, src, index, out):
        self.np.take(src, index, axis=0, out=out)

    def table(self, values):
        return self.np.asarray(values, dtype=complex)

    def where(self, cond, a, b):
        return self.np.where(cond, a, b)

    def mul_into(self, src, scalar, out):
        self.np.multiply(src, scalar, out=out)


class TorchOps:
    """The array operations the kernels need, on torch (CPU or CUDA)."""

    name = "torch"

    def __init__(self, device) -> None:
        import torch

        self.torch = torch
        self.device = device

    def arange(self, n):
        return self.torch.arange(n, dtype=self.torch.int64, device=self.device)

    def ones(self, n, dtype):
        return self.torch.ones(n, dtype=dtype, device=self.device)

    def empty_like(self, x):
        return self.torch.empty_like(x)

    def empty(self, size, like):
        return like.new_empty(size)

    def take_rows(self, src, index, out):
        self.torch.index_select(src, 0, index, out=out)

    def table(self, values):
        return self.torch.tensor(values, dtype=self.torch.complex128, device=self.device)

    def where(self, cond, a, b):
        t = self.torch
        dtype = t.complex128
        return t.where(cond, t.tensor(a, dtype=dtype, device=self.device), t.tensor(b, dtype=dtype, device=self.device))

    def mul_into(self, src, scalar, out):
        self.torch.mul(src, scalar, out=out)


def _load_numba():
    try:
        from rubriq.sim import _numba_kernels
    except ImportError:  # numba is optional: the NumPy kernels below run without it
        return None
    return _numba_kernels


_NUMBA = None
_NUMBA_LOADED = False


def numba_kernels():
    """The compiled kernels module, or None when numba is not installed."""
    global _NUMBA, _NUMBA_LOADED
    if not _NUMBA_LOADED:
        _NUMBA, _NUMBA_LOADED = _load_numba(), True
    return _NUMBA


class BlockSimulator:
    """Runs a kernel program on a block; see the module docstring for the representation."""

    def __init__(self, block, n: int, ops) -> None:
        self.fast = numba_kernels() if isinstance(ops, NumpyOps) else None
        self.ops = ops
        self.n = n
        self.s = block
        self.buf = ops.empty_like(block)
        quarter = max(1, block.shape[0] * block.shape[1] // 4)
        flat = block.reshape(-1)
        self.scratch = (ops.empty(2 * quarter, flat), ops.empty(2 * quarter, flat), ops.empty(quarter, flat))
        self.rows = ops.arange(2**n)
        self.perm = ops.arange(2**n)
        self.p = ops.ones(2**n, block.dtype)
        self.perm_dirty = False
        self.p_dirty = False
        self._bits: dict[int, object] = {}

    # -- helpers ----------------------------------------------------------------------------
    def bit(self, q: int):
        b = self._bits.get(q)
        if b is None:
            b = self._bits[q] = ((self.rows >> q) & 1) == 1
        return b

    def _permute(self, sigma) -> None:
        """true'[r] = true[sigma(r)]: P <- P[sigma], Pi <- Pi[sigma]."""
        self.p = self.p[sigma]
        self.perm = self.perm[sigma]
        self.perm_dirty = True
        self.p_dirty = True  # P was permuted; cheap to keep as dirty

    def _phase(self, factor) -> None:
        self.p = self.p * factor
        self.p_dirty = True

    def materialize(self) -> None:
        """Apply the pending permutation and phases to the block."""
        if self.perm_dirty:
            self.ops.take_rows(self.s, self.perm, self.buf)
            self.s, self.buf = self.buf, self.s
            self.perm = self.ops.arange(2**self.n)
            self.perm_dirty = False
        if self.p_dirty:
            self.s *= self.p[:, None]
            self.p = self.ops.ones(2**self.n, self.s.dtype)
            self.p_dirty = False

    def rows_of(self, count: int):
        """The first ``count`` rows of the true block (a copy), without materializing the rest."""
        if self.perm_dirty:
            rows = self.s[self.perm[:count]]
        else:
            rows = self.s[:count]
            rows = rows.clone() if hasattr(rows, "clone") else rows.copy()
        if self.p_dirty:
            rows *= self.p[:count, None]
        return rows

    # -- kernels ----------------------------------------------------------------------------
    def apply(self, ins: Instr) -> None:
        kind, qs = ins.kind, ins.qubits
        r = self.rows
        if kind == "diag1":
            d0, d1 = ins.data
            self._phase(self.ops.where(self.bit(qs[0]), d1, d0))
        elif kind == "anti1":
            q = qs[0]
            a, b = ins.data  # [[0, a], [b, 0]]
            self._permute(r ^ (1 << q))
            self._phase(self.ops.where(self.bit(q), b, a))
        elif kind == "cx":
            c, t = qs
            self._permute(r ^ (self._as_int(self.bit(c)) << t))
        elif kind == "cz":
            a, b = qs
            self._phase(self.ops.where(self.bit(a) & self.bit(b), -1.0, 1.0))
        elif kind == "ccz":
            a, b, c = qs
            self._phase(self.ops.where(self.bit(a) & self.bit(b) & self.bit(c), -1.0, 1.0))
        elif kind == "diag2":
            a, b = qs
            index = self._as_int(self.bit(a)) + 2 * self._as_int(self.bit(b))
            self._phase(self.ops.table(ins.data)[index])
        elif kind == "swap":
            a, b = qs
            differ = self.bit(a) ^ self.bit(b)
            self._permute(r ^ (self._as_int(differ) * ((1 << a) | (1 << b))))
        elif kind == "ccx":
            c1, c2, t = qs
            self._permute(r ^ (self._as_int(self.bit(c1) & self.bit(c2)) << t))
        elif kind == "cswap":
            c, a, b = qs
            differ = self.bit(c) & (self.bit(a) ^ self.bit(b))
            self._permute(r ^ (self._as_int(differ) * ((1 << a) | (1 << b))))
        elif kind == "dense1" and self.fast is not None:
            g00, g01, g10, g11 = ins.data
            self.fast.dense1(self.s, self.buf, self.perm, self.p, qs[0], g00, g01, g10, g11)
            self._swapped_in()
        elif kind == "dense2" and self.fast is not None:
            self.fast.dense2(self.s, self.buf, self.perm, self.p, qs[0], qs[1], self.fast.as_matrix(ins.data))
            self._swapped_in()
        elif kind == "dense1":
            self.materialize()
            self._dense1(qs[0], ins.data)
        elif kind == "dense2":
            self.materialize()
            self._dense2(qs, ins.data)
        else:  # pragma: no cover - classify() only emits the kinds above
            raise ValueError(f"unknown kernel {kind!r}")

    def _swapped_in(self) -> None:
        """After a fused compiled kernel wrote the true block into ``buf``."""
        self.s, self.buf = self.buf, self.s
        if self.perm_dirty:
            self.perm = self.ops.arange(2**self.n)
            self.perm_dirty = False
        if self.p_dirty:
            self.p = self.ops.ones(2**self.n, self.s.dtype)
            self.p_dirty = False

    def _as_int(self, mask):
        return mask.long() if hasattr(mask, "long") else mask.astype(self.rows.dtype)

    def _halves(self, q: int):
        view = self.s.reshape(2 ** (self.n - 1 - q), 2, -1)
        return view[:, 0, :], view[:, 1, :]

    def _scratch(self, i: int, like):
        size = like.numel() if hasattr(like, "numel") else like.size
        return self.scratch[i][:size].reshape(like.shape)  # scratch 0 and 1 hold a half each

    def _dense1(self, q: int, g) -> None:
        g00, g01, g10, g11 = g
        s0, s1 = self._halves(q)
        t0, t1 = self._scratch(0, s0), self._scratch(1, s0)
        t0[...] = s0
        s0 *= g00
        self.ops.mul_into(s1, g01, t1)
        s0 += t1
        s1 *= g11
        self.ops.mul_into(t0, g10, t1)
        s1 += t1

    def _dense2(self, qs, g) -> None:
        a, b = qs  # matrix index = bit_a + 2 * bit_b (Qiskit order)
        hi, lo = max(a, b), min(a, b)
        view = self.s.reshape(2 ** (self.n - 1 - hi), 2, 2 ** (hi - 1 - lo), 2, -1)

        def block(i):
            bits = {a: i & 1, b: i >> 1}
            return view[:, bits[hi], :, bits[lo], :]

        blocks = [block(i) for i in range(4)]
        # the four old quarters and one product temporary, all in preallocated scratch
        size = blocks[0].numel() if hasattr(blocks[0], "numel") else blocks[0].size
        shape = blocks[0].shape
        old = [self.scratch[i // 2][(i % 2) * size : (i % 2 + 1) * size].reshape(shape) for i in range(4)]
        tmp = self.scratch[2][:size].reshape(shape)
        for i in range(4):
            old[i][...] = blocks[i]
        for i in range(4):
            self.ops.mul_into(old[0], g[4 * i], blocks[i])
            for j in range(1, 4):
                if g[4 * i + j] != 0:
                    self.ops.mul_into(old[j], g[4 * i + j], tmp)
                    blocks[i] += tmp


def run_program(block, n: int, program, deadline=None, ops=None) -> BlockSimulator:
    """Run ``program`` on ``block`` (modified in place or swapped with a buffer); return the
    simulator, whose ``rows_of(d)`` gives the first d rows of the result and ``materialize()``
    the whole block (``sim.s``)."""
    sim = BlockSimulator(block, n, ops or NumpyOps())
    for i, ins in enumerate(program):
        if deadline is not None and i & 15 == 0:
            deadline.check("simulation")
        sim.apply(ins)
    return sim
