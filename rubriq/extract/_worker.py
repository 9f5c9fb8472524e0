"""Child side of the Python execution: run one completion, print its circuit as JSON.

Runs in a separate, resource-limited process (see python_exec.py).  It reads the code from
stdin, executes it as ``__main__``, finds the QuantumCircuit it built, and writes one line
``RUBRIQ-RESULT <json>`` on the result pipe given by ``RUBRIQ_RESULT_FD`` (falling back to
stdout).  Whatever it writes is only a *description* that the parent re-validates.
"""

from __future__ import annotations

import json
import os
import sys

PREFERRED_NAMES = ("qc", "circuit", "circ", "quantum_circuit", "qft_circuit", "result")


def find_circuit(namespace: dict):
    from qiskit import QuantumCircuit

    for name in PREFERRED_NAMES:
        if isinstance(namespace.get(name), QuantumCircuit):
            return namespace[name]
    found = [v for v in namespace.values() if isinstance(v, QuantumCircuit)]
    return found[-1] if found else None


def main() -> None:
    fd = int(os.environ.get("RUBRIQ_RESULT_FD", "1"))
    out = os.fdopen(fd, "w", closefd=False)
    code = sys.stdin.read()
    import qiskit  # noqa: F401  (imported before the untrusted code runs)

    from rubriq.extract.serialize import circuit_to_payload

    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # no file writes from here on

    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(code, "<completion>", "exec"), namespace)
        circuit = find_circuit(namespace)
        if circuit is None:
            result = {"error": "the code ran but defined no QuantumCircuit"}
        else:
            result = {"circuit": circuit_to_payload(circuit)}
    except BaseException as exc:  # the completion's own failure is a result, not a crash
        result = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    out.write("RUBRIQ-RESULT " + json.dumps(result) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
