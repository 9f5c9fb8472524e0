"""Recovery rules for the OpenQASM that language models actually write.

Each rule is a small named function ``str -> str`` that is semantics-preserving on valid
programs; :data:`RULES` composes them in order.  ``docs/extraction.md`` lists them for users.

>>> text = 'OPENQASM 2.0;\\ninclude "stdgates.inc";\\nqubit[2] q;\\ncnot q[0], q[1];\\nThis is a Bell pair.'
>>> version, fixed = normalize(text)
>>> version
3
>>> print(fixed)
OPENQASM 3.0;
include "stdgates.inc";
qubit[2] q;
cx q[0], q[1];
"""

from __future__ import annotations

import re
from typing import Callable

_KEYWORDS = (
    "OPENQASM", "include", "qreg", "creg", "qubit", "bit", "gate", "opaque", "measure", "barrier",
    "reset", "if", "for", "while", "def", "input", "output", "const", "let", "ctrl", "inv", "pow",
    "gphase", "box", "extern", "float", "int", "uint", "angle", "bool",
)


def unicode_symbols(text: str) -> str:
    """pi written as the Greek letter, typographic minus and quotes."""
    for old, new in (("\u03c0", "pi"), ("\u2212", "-"), ("\u201c", '"'), ("\u201d", '"'),
                     ("\u2018", "'"), ("\u2019", "'"), ("\u00d7", "*"), ("\u00a0", " ")):
        text = text.replace(old, new)
    return text


def markdown_fences(text: str) -> str:
    """Lines of Markdown code fences (```qasm ... ```)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("```"))


def _is_prose(line: str) -> bool:
    s = line.strip()
    if not s or s.startswith("//") or s.startswith("/*") or s.startswith("*"):
        return False
    if any(ch in s for ch in ";{}"):
        return False
    first = re.match(r"[A-Za-z_]+", s)
    if first and first.group(0) in _KEYWORDS:
        return False
    # A gate application spread over lines still has brackets or commas between identifiers;
    # prose has several words of letters.
    return len(re.findall(r"[A-Za-z]{2,}", s)) >= 2 or s.endswith((".", ":", "!", "?"))


def prose_lines(text: str) -> str:
    """Explanatory sentences before, between or after the statements."""
    return "\n".join(line for line in text.splitlines() if not _is_prose(line))


def python_constants(text: str) -> str:
    """``np.pi``, ``math.pi``, ``numpy.pi`` spelled inside QASM."""
    return re.sub(r"\b(?:np|numpy|math)\.pi\b", "pi", text)


_ALIASES = {"cnot": "cx", "CNOT": "cx", "toffoli": "ccx", "fredkin": "cswap", "tdag": "tdg",
            "sdag": "sdg", "tdagger": "tdg", "sdagger": "sdg"}


def gate_aliases(text: str) -> str:
    """Common misspellings of gate names at the start of a statement (cnot -> cx, ...)."""
    pattern = re.compile(r"(^|;|\{)(\s*)(" + "|".join(_ALIASES) + r")\b", re.M)
    return pattern.sub(lambda m: m.group(1) + m.group(2) + _ALIASES[m.group(3)], text)


RULES: tuple[Callable[[str], str], ...] = (
    unicode_symbols, markdown_fences, prose_lines, python_constants, gate_aliases,
)

_QASM3_MARKERS = re.compile(
    r"\bqubit\b|\bbit\s*\[|\bbit\s+\w+\s*;|stdgates\.inc|\bctrl\s*(\(|@)|\binv\s*@|\bpow\s*\("
    r"|\bnegctrl\b|\bgphase\b|\bfor\s+\w|\bwhile\s*\(|\bdef\s+\w|\binput\s|=\s*measure\b"
    r"|OPENQASM\s+3"
)
_HEADER = re.compile(r"\bOPENQASM\s+[0-9.]+\s*;?[ \t]*")
_INCLUDE = re.compile(r'\binclude\s+"[^"\n]*"\s*;?[ \t]*')


def detect_version(text: str) -> int:
    """3 if the program uses any OpenQASM 3 syntax (whatever its header says), else 2."""
    return 3 if _QASM3_MARKERS.search(text) else 2


def with_header(text: str, version: int) -> str:
    """One header and the standard include for ``version``; other headers/includes removed.

    Only the standard libraries are kept: ``include "qelib1.inc"`` for 2.0 and
    ``include "stdgates.inc"`` for 3.0 (other includes are rejected earlier, see qasm.py).
    """
    body = _INCLUDE.sub("", _HEADER.sub("", text)).strip("\n")
    if version == 3:
        body = re.sub(r"\bcu1\s*\(", "cp(", body)  # stdgates.inc has cp, not cu1
        head = 'OPENQASM 3.0;\ninclude "stdgates.inc";'
    else:
        head = 'OPENQASM 2.0;\ninclude "qelib1.inc";'
    return head + "\n" + body


def qasm3_declarations_to_2(text: str) -> str:
    """Rewrite OpenQASM 3 declarations and measurements in 2.0 syntax (a fallback)."""
    text = re.sub(r"\bqubit\s*\[\s*(\d+)\s*\]\s*(\w+)\s*;", r"qreg \2[\1];", text)
    text = re.sub(r"\bqubit\s+(\w+)\s*;", r"qreg \1[1];", text)
    text = re.sub(r"\bbit\s*\[\s*(\d+)\s*\]\s*(\w+)\s*;", r"creg \2[\1];", text)
    text = re.sub(r"\bbit\s+(\w+)\s*;", r"creg \1[1];", text)
    text = re.sub(r"(\w+(?:\[\d+\])?)\s*=\s*measure\s+([^;]+);", r"measure \2 -> \1;", text)
    return text


def normalize(text: str) -> tuple[int, str]:
    """Apply every rule, detect the dialect, and set its header: ``(version, program)``."""
    for rule in RULES:
        text = rule(text)
    version = detect_version(text)
    return version, with_header(text, version)
