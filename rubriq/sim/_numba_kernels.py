"""Compiled (numba) kernels for the dense updates of the exact engine: one fused pass.

Each kernel reads the pending row permutation and phases (see ``kernels.py``) while it applies
a dense one- or two-qubit matrix, writing into a second buffer: materializing the pending
permutation/phases and the dense update cost one pass over the block instead of five to
eight NumPy passes.  Parallel over row groups (``numba.set_num_threads``).  Optional: without
numba the NumPy kernels run.
"""

from __future__ import annotations

import os

import numba
import numpy as np
from numba import njit, prange


def _cache_usable() -> bool:
    """numba caches next to this file, or under NUMBA_CACHE_DIR / the user's cache folder; with
    none writable (a read-only install used by another user) ``cache=True`` makes every call
    fail ("no locator available"), so compile without a cache there (numba reads
    NUMBA_CACHE_DIR at import, so it cannot be pointed elsewhere from here)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return True
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    if os.access(here if os.path.isdir(here) else os.path.dirname(here), os.W_OK):
        return True
    home_cache = os.path.join(os.path.expanduser("~"), ".cache")
    return os.access(home_cache if os.path.isdir(home_cache) else os.path.expanduser("~"), os.W_OK)


CACHE = _cache_usable()


@njit(parallel=True, cache=CACHE, fastmath=False)
def dense1(src, out, perm, p, q, g00, g01, g10, g11):  # pragma: no cover - compiled
    """A 2x2 update of qubit ``q`` on the rows of ``src`` (through ``perm``) into ``out``, in parallel."""
    rows, m = src.shape
    low = (1 << q) - 1
    for k in prange(rows // 2):
        r0 = ((k >> q) << (q + 1)) | (k & low)
        r1 = r0 | (1 << q)
        s0 = perm[r0]
        s1 = perm[r1]
        p0 = p[r0]
        p1 = p[r1]
        a0 = g00 * p0
        a1 = g01 * p1
        b0 = g10 * p0
        b1 = g11 * p1
        for c in range(m):
            x0 = src[s0, c]
            x1 = src[s1, c]
            out[r0, c] = a0 * x0 + a1 * x1
            out[r1, c] = b0 * x0 + b1 * x1


@njit(parallel=True, cache=CACHE, fastmath=False)
def dense2(src, out, perm, p, a, b, g):  # pragma: no cover - compiled
    """A 4x4 update of qubits ``a``, ``b`` on the rows of ``src`` (through ``perm``) into ``out``, in parallel."""
    rows, m = src.shape
    lo = min(a, b)
    hi = max(a, b)
    low_lo = (1 << lo) - 1
    low_hi = (1 << hi) - 1
    for k in prange(rows // 4):
        t = ((k >> lo) << (lo + 1)) | (k & low_lo)
        r0 = ((t >> hi) << (hi + 1)) | (t & low_hi)
        r1 = r0 | (1 << a)
        r2 = r0 | (1 << b)
        r3 = r1 | (1 << b)
        s0, s1, s2, s3 = perm[r0], perm[r1], perm[r2], perm[r3]
        # fold the pending phases into the columns of g
        c00, c01, c02, c03 = g[0, 0] * p[r0], g[0, 1] * p[r1], g[0, 2] * p[r2], g[0, 3] * p[r3]
        c10, c11, c12, c13 = g[1, 0] * p[r0], g[1, 1] * p[r1], g[1, 2] * p[r2], g[1, 3] * p[r3]
        c20, c21, c22, c23 = g[2, 0] * p[r0], g[2, 1] * p[r1], g[2, 2] * p[r2], g[2, 3] * p[r3]
        c30, c31, c32, c33 = g[3, 0] * p[r0], g[3, 1] * p[r1], g[3, 2] * p[r2], g[3, 3] * p[r3]
        for c in range(m):
            x0 = src[s0, c]
            x1 = src[s1, c]
            x2 = src[s2, c]
            x3 = src[s3, c]
            out[r0, c] = c00 * x0 + c01 * x1 + c02 * x2 + c03 * x3
            out[r1, c] = c10 * x0 + c11 * x1 + c12 * x2 + c13 * x3
            out[r2, c] = c20 * x0 + c21 * x1 + c22 * x2 + c23 * x3
            out[r3, c] = c30 * x0 + c31 * x1 + c32 * x2 + c33 * x3


def set_threads(threads: int) -> None:
    """Use ``threads`` threads (at most numba's maximum) for the parallel kernels."""
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]


def as_matrix(data) -> np.ndarray:
    """A 4x4 complex matrix from 16 values."""
    return np.asarray(data, dtype=np.complex128).reshape(4, 4)
