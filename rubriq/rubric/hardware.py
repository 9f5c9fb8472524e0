"""S_H: hardware fit (paper eqs. 9-10).

    S_H(c) = max_b [ w_q 1[n <= Q_b] + w_d 1[D <= D_b] + w_n NativeFrac_b(c)
                     + w_r exp(-lambda * SwapOH_b(c)) ]

over the backends b of ``rubriq.circuit.backends`` (by default IBM Eagle and Heron, IonQ
Forte and Aria), with

* n, D: the circuit's width and depth (as written, measurements stripped);
* Q_b, D_b: the backend's qubit count and depth budget;
* NativeFrac_b: fraction of the circuit's gates (as written) in the backend's native set;
* SwapOH_b: SWAPs inserted by a deterministic routing (Qiskit's SABRE layout + routing with
  a fixed seed) of the circuit's two-qubit interactions on the backend's real coupling map;
  0 on all-to-all devices, and +inf (so the term is 0) when the circuit does not fit.

Defaults: w_q = 0.30, w_d = 0.20, w_n = 0.20, w_r = 0.30, lambda = 0.1 (``HardwareConfig``).
Routing is the costly part (~10 ms on the 127-qubit map), so its result is cached per
(interaction sequence, width, backend, seed): the completions of a GRPO group that share an
interaction pattern are routed once.

>>> from rubriq.circuit.facts import CircuitFacts
>>> facts = CircuitFacts.from_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[3];'
...                                'cx q[0],q[1]; cx q[1],q[2]; cx q[0],q[2];')
>>> result = score(facts, ScoringContext())
>>> result.details["backends"]["ibm_eagle"]["swaps"]  # no triangles in heavy-hex
1
>>> result.details["best_backend"], round(result.value, 3)
('ionq_forte', 0.8)
"""

from __future__ import annotations

import functools
import math

from rubriq.circuit.backends import BackendSpec, get_backend
from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import STANDARD_GATES, Op
from rubriq.config import HardwareConfig
from rubriq.rubric.base import DimensionScore, ScoringContext


@functools.cache
def _two_qubit_pattern(name: str) -> tuple[tuple[int, int], ...]:
    """Two-qubit interactions (local indices) of a standard multi-qubit gate's definition."""
    definition = STANDARD_GATES[name].definition
    pairs: list[tuple[int, int]] = []
    index = {bit: i for i, bit in enumerate(definition.qubits)}
    for inst in definition.data:
        local = tuple(index[q] for q in inst.qubits)
        if len(local) == 2:
            pairs.append((local[0], local[1]))
        elif len(local) > 2:
            pairs.extend((local[a], local[b]) for a, b in _two_qubit_pattern(inst.operation.name))
    return tuple(pairs)


def interaction_pairs(ops: tuple[Op, ...]) -> tuple[tuple[int, int], ...]:
    """The ordered two-qubit interactions of a canonical gate list (3-qubit gates expanded)."""
    pairs: list[tuple[int, int]] = []
    for op in ops:
        if len(op.qubits) == 2:
            pairs.append((op.qubits[0], op.qubits[1]))
        elif len(op.qubits) == 3:
            pairs.extend((op.qubits[a], op.qubits[b]) for a, b in _two_qubit_pattern(op.name))
    return tuple(pairs)


@functools.lru_cache(maxsize=8192)
def swap_overhead(pairs: tuple[tuple[int, int], ...], num_qubits: int, backend: str, seed: int) -> int:
    """SWAPs that SABRE (fixed seed) inserts to route ``pairs`` on ``backend``'s coupling map."""
    spec = get_backend(backend)
    if spec.all_to_all or not pairs:
        return 0
    from qiskit import QuantumCircuit
    from qiskit.transpiler import PassManager
    from qiskit.transpiler.passes import SabreLayout

    circuit = QuantumCircuit(num_qubits)
    for a, b in pairs:
        circuit.cx(a, b)
    routed = PassManager([SabreLayout(_coupling_map(backend), seed=seed)]).run(circuit)
    return int(routed.count_ops().get("swap", 0))


@functools.cache
def _coupling_map(backend: str):
    from qiskit.transpiler import CouplingMap

    edges = get_backend(backend).coupling_edges() or ()
    return CouplingMap([[a, b] for a, b in edges] + [[b, a] for a, b in edges])


def backend_fit(
    facts: CircuitFacts, spec: BackendSpec, cfg: HardwareConfig, pairs: tuple[tuple[int, int], ...]
) -> dict:
    """The four terms of eq. 10 for one backend, and their weighted sum."""
    fits_qubits = facts.num_qubits <= spec.num_qubits
    fits_depth = facts.depth <= spec.max_depth
    total = facts.num_gates
    native = sum(c for name, c in facts.gate_counts.items() if name in spec.native_gates)
    native_frac = 1.0 if total == 0 else native / total
    swaps = swap_overhead(pairs, facts.num_qubits, spec.name, cfg.routing_seed) if fits_qubits else math.inf
    routing_term = math.exp(-cfg.swap_lambda * swaps)
    value = (
        cfg.w_qubits * fits_qubits
        + cfg.w_depth * fits_depth
        + cfg.w_native * native_frac
        + cfg.w_routing * routing_term
    )
    return {
        "score": value,
        "fits_qubits": fits_qubits,
        "fits_depth": fits_depth,
        "native_fraction": native_frac,
        "swaps": None if math.isinf(swaps) else swaps,
    }


def score(facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore:
    """Return S_H in [0, 1] with the per-backend breakdown and the best backend."""
    cfg = ctx.config.hardware
    pairs = interaction_pairs(facts.ops)
    breakdown = {name: backend_fit(facts, get_backend(name), cfg, pairs) for name in cfg.backends}
    best = max(breakdown, key=lambda name: breakdown[name]["score"])  # first on ties: config order
    return DimensionScore(breakdown[best]["score"], {"best_backend": best, "backends": breakdown})
