"""A compiled circuit read with its layout: one definition for every place RubriQ takes a circuit
that a transpiler produced (a baseline compiler's output, a completion that returns
``pass_manager.run(qc)``).

Qiskit keeps the permutations of compilation beside the circuit (``circuit.layout``: where each
virtual qubit was placed, where routing left it); the gates alone implement the target only up to
those permutations. :func:`with_layout_applied` writes them into the circuit as swaps, so the
circuit alone is what ``Operator.from_circuit`` reads from circuit + layout. (Qiskit has no
function that returns such a circuit, only the operator; hence this one.)
"""

from __future__ import annotations

from qiskit import QuantumCircuit


def _inverse(permutation: list[int]) -> list[int]:
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return inverse


def with_layout_applied(circuit: QuantumCircuit) -> QuantumCircuit:
    """``circuit`` with its transpiler layout made explicit as swap gates (a circuit without a
    layout is returned as is). Virtual qubit i is qubit i of the result; a device's ancillas
    (physical qubits the input did not have) come after the virtual qubits, start and end where
    they are and are acted on only by the routing swaps, so the result's operator is the input's
    operator on the first qubits, tensor identity on the ancillas.

    >>> from qiskit import transpile
    >>> from qiskit.quantum_info import Operator
    >>> from qiskit.transpiler import CouplingMap
    >>> qc = QuantumCircuit(3); _ = qc.h(0); _ = qc.cx(0, 2); _ = qc.t(1); _ = qc.cx(2, 1)
    >>> routed = transpile(qc, coupling_map=CouplingMap.from_line(4), initial_layout=[3, 1, 0],
    ...                    basis_gates=["h", "cx", "t", "swap"], seed_transpiler=1)
    >>> out = with_layout_applied(routed)
    >>> out.layout is None and Operator(out).equiv(Operator(qc).expand(Operator(QuantumCircuit(1))))
    True
    >>> out.num_qubits, [i.operation.name for i in out.data].count("swap") >= 1
    (4, True)
    """
    layout = circuit.layout
    if layout is None:
        return circuit
    from qiskit.circuit.library import PermutationGate

    n = circuit.num_qubits
    trivial = list(range(n))
    initial = layout.initial_index_layout(filter_ancillas=False)  # virtual i sits on physical initial[i]
    final = layout.routing_permutation()
    plain = circuit.copy()
    plain._layout = None  # applied below (QuantumCircuit.layout has no setter)
    out = plain.copy_empty_like()
    out.global_phase = 0.0  # composing `plain` brings its phase
    out._layout = None
    if initial != trivial:
        out.append(PermutationGate(_inverse(initial)), range(n))
    out.compose(plain, inplace=True)
    if final != trivial:
        out.append(PermutationGate(final), range(n))
    if initial != trivial:
        out.append(PermutationGate(initial), range(n))
    if out.size() == plain.size():
        return out
    return out.decompose(gates_to_decompose=["permutation"])
