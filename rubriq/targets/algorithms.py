"""Textbook oracle algorithms as measurement-free unitaries with the oracle inside.

* ``bernstein_vazirani`` (n + 1 qubits): (H^n (x) I) O_s (H^n (x) I), O_s|x>|y> = |x>|y XOR s.x>;
  on |0^n>|1>... it leaves the query register in |s>.  Clifford: checked exactly at any width.
* ``deutsch_jozsa`` (n + 1 qubits): the same with O_f for a constant or balanced f given by its
  truth table; on |0^n>|-> the query register ends in |0^n> exactly when f is constant.
* ``grover`` (n qubits): (D O)^r H^n with O the phase flip of the marked states and
  D = H^n (2|0><0| - I) H^n the diffuser; on |0^n> it amplifies the marked states.
* ``simon`` (2n qubits): (H^n (x) I) O_f (H^n (x) I) with the standard 2-to-1 oracle of period s,
  f(x) = x XOR (x_j s) (j the lowest set bit of s) written into the output register.  Clifford.

Unitaries are built analytically (permutations and Hadamard transforms); references are the
textbook circuits (multi-controlled gates in Qiskit's decomposition where the oracle needs them).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from qiskit import QuantumCircuit

from rubriq.targets.base import Target, TargetError, completion_for, reference_clifford


def _bits_param(name: str, value: Any, n: int, what: str = "secret") -> str:
    """A bit string of length n, written q[n-1]..q[0] (Qiskit's order, s_k = value[n-1-k])."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 2**n:
            raise TargetError(f"{name}: {what} must lie in [0, 2^{n}), got {value}")
        return format(value, f"0{n}b")
    if not isinstance(value, str) or len(value) != n or set(value) - set("01"):
        raise TargetError(
            f"{name}: {what} must be a string of {n} bits (q[{n - 1}]..q[0]) or an integer, got {value!r}"
        )
    return value


def _hadamards(n: int) -> np.ndarray:
    h = np.array([[1.0, 1.0], [1.0, -1.0]]) / math.sqrt(2)
    out = np.array([[1.0]])
    for _ in range(n):
        out = np.kron(h, out)
    return out


def _h_inputs(n: int, extra: int) -> np.ndarray:
    """H on the low n qubits, identity on the ``extra`` high ones."""
    return np.kron(np.eye(2**extra), _hadamards(n))


def _permutation(dim: int, f) -> np.ndarray:
    u = np.zeros((dim, dim))
    for x in range(dim):
        u[f(x), x] = 1.0
    return u


class _Oracle(Target):
    family = "oracle"
    kind = "unitary"

    def clifford(self):
        return self._clifford

    @functools.cached_property
    def _clifford(self):
        return None


class _SecretOracle(_Oracle):
    """A Clifford oracle for an n-bit secret s (``params["secret"]``, written q[n-1]..q[0]):
    simulated from its reference circuit beyond ``max_dense_qubits``."""

    max_qubits = 256
    max_dense_qubits = 12

    @property
    def n(self) -> int:
        """The secret's bits."""
        raise NotImplementedError

    def _secret(self, params, n: int) -> str:
        """``params``' secret as n bits, or a seeded nonzero one when it gives none."""
        secret = params.get("secret")
        if secret is None:
            secret = int(np.random.default_rng(n).integers(1, 2**n)) if n < 63 else 1
        return _bits_param(self.name, secret, n)

    def _ones(self) -> list[int]:
        s = self.params["secret"]
        return [k for k in range(self.n) if s[self.n - 1 - k] == "1"]

    def apply(self, states, deadline=None):
        from rubriq.circuit.gates import canonical_ops
        from rubriq.sim.exact import simulate

        if self.num_qubits <= self.max_dense_qubits:
            return self.unitary() @ states
        return simulate(tuple(canonical_ops(self._reference)), self.num_qubits, np.array(states, dtype=complex))

    _clifford = functools.cached_property(reference_clifford)


class BernsteinVaziraniTarget(_SecretOracle):
    """Bernstein-Vazirani with a secret string s."""

    name = "bernstein_vazirani"
    min_qubits = 2
    summary = "Bernstein-Vazirani unitary (H^n x I) O_s (H^n x I) for a secret s (Clifford)"
    parameters = {"secret": "n bits s, written q[n-1]..q[0] (string) or an integer (default: seeded)"}

    @property
    def n(self) -> int:
        return self.num_qubits - 1

    def _validate(self, params):
        return {"secret": self._secret(params, self.n)}

    def description(self):
        n, s = self.n, self.params["secret"]
        return (
            f"Synthesize the {n + 1}-qubit Bernstein-Vazirani unitary for the secret s = {s} (written q[{n - 1}]..q[0]): "
            f"U = (H on q[0]..q[{n - 1}]) O_s (H on q[0]..q[{n - 1}]) with the oracle O_s|x>|y> = |x>|y XOR (s.x mod 2)>, "
            f"x on q[0]..q[{n - 1}] and y on q[{n}]. On |0...0> with q[{n}] = |-> the query register ends in |s>."
        )

    def short_description(self):
        n, s = self.n, self.params["secret"]
        return (
            f"Bernstein-Vazirani for secret {s} (q[{n - 1}]..q[0]): H on q[0]..q[{n - 1}], oracle "
            f"q[{n}] ^= s.x, H on q[0]..q[{n - 1}]."
        )

    def _oracle_target(self, x: int) -> int:
        parity = sum((x >> k) & 1 for k in self._ones()) & 1
        return x ^ (parity << self.n)

    def _build_unitary(self):
        h = _h_inputs(self.n, 1)
        return h @ _permutation(self.dim, self._oracle_target) @ h

    def _build_reference(self):
        n = self.n
        qc = QuantumCircuit(n + 1)
        qc.h(range(n))
        for k in self._ones():
            qc.cx(k, n)
        qc.h(range(n))
        return qc

    def completion_size(self):
        return completion_for(3 * self.num_qubits)


class DeutschJozsaTarget(_Oracle):
    """Deutsch-Jozsa with a constant or balanced f given by its truth table."""

    name = "deutsch_jozsa"
    min_qubits = 2
    max_qubits = 9
    summary = "Deutsch-Jozsa unitary (H^n x I) O_f (H^n x I), f constant or balanced (truth table)"
    parameters = {
        "truth_table": "2^n bits f(0), f(1), ... as a string or list; constant or balanced (default: seeded balanced)",
        "seed": "seed for the default truth table (default 0)",
    }

    @property
    def n(self) -> int:
        return self.num_qubits - 1

    def _validate(self, params):
        size = 2**self.n
        table = params.get("truth_table")
        seed = params.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TargetError(f"deutsch_jozsa: seed must be an integer, got {seed!r}")
        if table is None:
            bits = np.zeros(size, dtype=int)
            bits[np.random.default_rng(seed).permutation(size)[: size // 2]] = 1
            table = "".join(map(str, bits))
        if isinstance(table, (list, tuple)):
            table = "".join(str(b) if b in (0, 1) and not isinstance(b, bool) else "?" for b in table)
        if not isinstance(table, str) or len(table) != size or set(table) - set("01"):
            raise TargetError(f"deutsch_jozsa: truth_table must hold {size} bits f(0)..f({size - 1}), got {table!r}")
        ones = table.count("1")
        if ones not in (0, size // 2, size):
            raise TargetError(f"deutsch_jozsa: f must be constant or balanced, but it is 1 on {ones} of {size} inputs")
        return {"truth_table": table}

    def _marked(self) -> list[int]:
        return [x for x, b in enumerate(self.params["truth_table"]) if b == "1"]

    def description(self):
        n, table = self.n, self.params["truth_table"]
        kind = "balanced" if 0 < table.count("1") < len(table) else "constant"
        return (
            f"Synthesize the {n + 1}-qubit Deutsch-Jozsa unitary U = (H on q[0]..q[{n - 1}]) O_f (H on q[0]..q[{n - 1}]) "
            f"for the {kind} function f with truth table f(0), f(1), ..., f({2**n - 1}) = {table}, where the oracle is "
            f"O_f|x>|y> = |x>|y XOR f(x)>, x = the integer on q[0]..q[{n - 1}] and y on q[{n}]."
        )

    def short_description(self):
        n = self.n
        return (
            f"Deutsch-Jozsa: H on q[0]..q[{n - 1}], oracle q[{n}] ^= f(x) with f(0..{2**n - 1}) = "
            f"{self.params['truth_table']}, H on q[0]..q[{n - 1}]."
        )

    def _build_unitary(self):
        h = _h_inputs(self.n, 1)
        marked = set(self._marked())
        return h @ _permutation(self.dim, lambda x: x ^ ((x % 2**self.n in marked) << self.n)) @ h

    def _build_reference(self):
        from qiskit.circuit.library import MCXGate

        n = self.n
        qc = QuantumCircuit(n + 1)
        qc.h(range(n))
        marked = self._marked()
        if len(marked) == 2**n:  # constant 1
            qc.x(n)
        else:
            for x in marked:
                zeros = [k for k in range(n) if not (x >> k) & 1]
                if zeros:
                    qc.x(zeros)
                qc.append(MCXGate(n), [*range(n), n])
                if zeros:
                    qc.x(zeros)
        qc.h(range(n))
        return qc.decompose(reps=8)


class GroverTarget(_Oracle):
    """Grover's algorithm on n qubits: r iterations of oracle + diffuser after H^n."""

    name = "grover"
    min_qubits = 2
    max_qubits = 8
    summary = "Grover: (D O)^r H^n, O the phase flip of the marked states, D the diffuser"
    parameters = {
        "marked": "marked basis states (integers; default: one seeded state)",
        "iterations": "r (default: round(pi/4 sqrt(N/M) - 1/2), the optimum)",
    }

    def _validate(self, params):
        marked = params.get("marked")
        if marked is None:
            marked = [int(np.random.default_rng(self.num_qubits).integers(0, self.dim))]
        if isinstance(marked, int) and not isinstance(marked, bool):
            marked = [marked]
        if (
            not isinstance(marked, (list, tuple))
            or not marked
            or any(isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < self.dim for m in marked)
            or len(set(marked)) != len(marked)
            or len(marked) >= self.dim
        ):
            raise TargetError(
                f"grover: marked must be 1 to {self.dim - 1} distinct integers in [0, {self.dim}), got {marked!r}"
            )
        marked = sorted(marked)
        default = max(1, round(math.pi / 4 * math.sqrt(self.dim / len(marked)) - 0.5))
        iterations = params.get("iterations", default)
        if isinstance(iterations, bool) or not isinstance(iterations, int) or not 1 <= iterations <= 64:
            raise TargetError(f"grover: iterations must be an integer in [1, 64], got {iterations!r}")
        return {"marked": marked, "iterations": iterations}

    def description(self):
        n, p = self.num_qubits, self.params
        return (
            f"Synthesize the {n}-qubit Grover circuit as one unitary: H on q[0]..q[{n - 1}], then {p['iterations']} "
            f"iteration(s) of the oracle O (multiply the amplitude of the marked basis states {p['marked']} by -1) "
            f"followed by the diffuser D = H^n (2|0><0| - I) H^n. No measurement."
        )

    def short_description(self):
        n, p = self.num_qubits, self.params
        return (
            f"Grover on {n} qubits: H on all, then {p['iterations']} x (phase -1 on states {p['marked']}, then "
            "diffuser H^n (2|0><0| - I) H^n)."
        )

    def _build_unitary(self):
        n = self.num_qubits
        h = _hadamards(n)
        oracle = np.ones(self.dim)
        oracle[self.params["marked"]] = -1
        reflect = -np.ones(self.dim)
        reflect[0] = 1
        g = h @ np.diag(reflect) @ h @ np.diag(oracle)
        return np.linalg.matrix_power(g, self.params["iterations"]) @ h

    def _phase_flip(self, qc: QuantumCircuit, x: int) -> None:
        """Multiply |x> by -1: X on the zero bits, a multi-controlled Z, X again."""
        from qiskit.circuit.library import MCXGate

        n = self.num_qubits
        zeros = [k for k in range(n) if not (x >> k) & 1]
        if zeros:
            qc.x(zeros)
        if n == 1:
            qc.z(0)
        else:
            qc.h(n - 1)
            qc.append(MCXGate(n - 1), range(n))
            qc.h(n - 1)
        if zeros:
            qc.x(zeros)

    def _build_reference(self):
        n = self.num_qubits
        qc = QuantumCircuit(n)
        qc.h(range(n))
        for _ in range(self.params["iterations"]):
            for x in self.params["marked"]:
                self._phase_flip(qc, x)
            qc.h(range(n))
            self._phase_flip(qc, 0)  # 2|0><0| - I up to a global phase of -1
            qc.h(range(n))
        return qc.decompose(reps=8)


class SimonTarget(_SecretOracle):
    """Simon's algorithm with period s on n + n qubits."""

    name = "simon"
    min_qubits = 4
    summary = "Simon unitary (H^n x I) O_f (H^n x I), f 2-to-1 with period s (Clifford)"
    parameters = {"secret": "the period s != 0: n bits written q[n-1]..q[0] or an integer (default: seeded)"}

    def _validate(self, params):
        if self.num_qubits % 2:
            raise TargetError(f"simon: num_qubits must be even (n input + n output qubits), got {self.num_qubits}")
        bits = self._secret(params, self.num_qubits // 2)
        if "1" not in bits:
            raise TargetError("simon: the period s must not be 0")
        return {"secret": bits}

    @property
    def n(self) -> int:
        return self.num_qubits // 2

    def _period_map(self, x: int) -> int:
        j = self._ones()[0]
        return x ^ (sum(1 << k for k in self._ones()) if (x >> j) & 1 else 0)

    def description(self):
        n, s = self.n, self.params["secret"]
        j = self._ones()[0]
        return (
            f"Synthesize the {2 * n}-qubit Simon unitary U = (H on q[0]..q[{n - 1}]) O_f (H on q[0]..q[{n - 1}]) for the "
            f"period s = {s} (written q[{n - 1}]..q[0]): O_f|x>|y> = |x>|y XOR f(x)>, x on q[0]..q[{n - 1}], y on "
            f"q[{n}]..q[{2 * n - 1}], with f(x) = x XOR (s if bit {j} of x is 1 else 0), so f(x) = f(x XOR s)."
        )

    def short_description(self):
        n, s = self.n, self.params["secret"]
        j = self._ones()[0]
        return (
            f"Simon, period {s} (q[{n - 1}]..q[0]): H on q[0]..q[{n - 1}]; oracle y ^= f(x) into q[{n}]..q[{2 * n - 1}], "
            f"f(x) = x XOR (s if x bit {j} is 1); H on q[0]..q[{n - 1}]."
        )

    def _build_unitary(self):
        n = self.n
        h = _h_inputs(n, n)
        low = 2**n - 1
        return h @ _permutation(self.dim, lambda v: v ^ (self._period_map(v & low) << n)) @ h

    def _build_reference(self):
        n = self.n
        qc = QuantumCircuit(2 * n)
        qc.h(range(n))
        for k in range(n):
            qc.cx(k, n + k)
        j = self._ones()[0]
        for k in self._ones():
            qc.cx(j, n + k)
        qc.h(range(n))
        return qc

    def completion_size(self):
        return completion_for(4 * self.num_qubits)


ALGORITHMS: tuple[type[Target], ...] = (BernsteinVaziraniTarget, DeutschJozsaTarget, GroverTarget, SimonTarget)
