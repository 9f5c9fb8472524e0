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
from collections.abc import Callable

_KEYWORDS = (
    "OPENQASM",
    "include",
    "qreg",
    "creg",
    "qubit",
    "bit",
    "gate",
    "opaque",
    "measure",
    "barrier",
    "reset",
    "if",
    "for",
    "while",
    "def",
    "input",
    "output",
    "const",
    "let",
    "ctrl",
    "inv",
    "pow",
    "gphase",
    "box",
    "extern",
    "float",
    "int",
    "uint",
    "angle",
    "bool",
)


def comments(text: str) -> str:
    r"""``//`` and ``/* */`` comments, outside string literals: models annotate their circuits in
    any script (``// |0⟩ → |1⟩``, ``γ ≈ 0.4``), and every cap is checked on what is left.

    >>> comments('h q[0]; // Hadamard → |+⟩\ninclude "a//b"; /* x\ny */ x q[1];')
    'h q[0]; \ninclude "a//b";  x q[1];'
    """
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"' and _string_end(text, i) > 0:  # a literal never spans lines
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            j = i
            while j < n and text[j] not in '"/':
                j += 1
            if j == i:  # a lone '/' (division) or an unterminated quote
                j = i + 1
            out.append(text[i:j])
            i = j
    return "".join(out)


def _string_end(text: str, i: int) -> int:
    """End (exclusive) of the string literal opening at ``i``, or -1 if it is not closed on its line."""
    end = text.find('"', i + 1)
    newline = text.find("\n", i + 1)
    if end < 0 or 0 <= newline < end:
        return -1
    return end + 1


def unicode_symbols(text: str) -> str:
    """pi written as the Greek letter, typographic minus, dashes and quotes, a byte-order mark,
    zero-width and non-breaking spaces."""
    for old, new in (
        ("\u03c0", "pi"),
        ("\u2212", "-"),
        ("\u2013", "-"),
        ("\u2014", "-"),
        ("\u201c", '"'),
        ("\u201d", '"'),
        ("\u2018", "'"),
        ("\u2019", "'"),
        ("\u00d7", "*"),
        ("\u00a0", " "),
        ("\ufeff", ""),
        ("\u200b", ""),
        ("\r\n", "\n"),
    ):
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


_ALIASES = {
    "cnot": "cx",
    "CNOT": "cx",
    "toffoli": "ccx",
    "fredkin": "cswap",
    "tdag": "tdg",
    "sdag": "sdg",
    "tdagger": "tdg",
    "sdagger": "sdg",
}


def gate_aliases(text: str) -> str:
    """Common misspellings of gate names at the start of a statement (cnot -> cx, ...)."""
    pattern = re.compile(r"(^|;|\{)(\s*)(" + "|".join(_ALIASES) + r")\b", re.M)
    return pattern.sub(lambda m: m.group(1) + m.group(2) + _ALIASES[m.group(3)], text)


_MULTI = {
    "ccz": "z",
    "cccz": "z",
    "mcz": "z",
    "cccx": "x",
    "ccccx": "x",
    "c3x": "x",
    "c4x": "x",
    "mcx": "x",
    "mct": "x",
    "mcx_gray": "x",
}
_QASM2_BY_ARITY = {"x": {2: "cx", 3: "ccx", 4: "c3x", 5: "c4x"}, "z": {2: "cz", 3: "ccz"}}
_MULTI_STATEMENT = re.compile(
    r"(^|;|\{)(\s*)(" + "|".join(sorted(_MULTI, key=len, reverse=True)) + r")\s+([^;(]+);", re.M
)


def multi_controlled(text: str) -> str:
    r"""Multi-controlled gates by the names models use (``ccz``, ``cccx``, ``c3x``, ``mcx`` with any
    number of qubits), unless the program defines them: in OpenQASM 2 the qelib1 gate of that
    arity (``mcx a,b,c,d`` -> ``c3x``), otherwise ``ctrl(k) @ x`` (OpenQASM 3).

    >>> multi_controlled("qreg q[5];\nmcx q[0],q[1],q[2],q[3];")
    'qreg q[5];\nc3x q[0],q[1],q[2],q[3];'
    >>> multi_controlled("qubit[3] q;\nccz q[0], q[1], q[2];")
    'qubit[3] q;\nctrl(2) @ z q[0], q[1], q[2];'
    """
    defined = set(re.findall(r"\b(?:gate|opaque)\s+([A-Za-z_]\w*)", text))
    qasm3 = detect_version(text) == 3

    def fix(m: re.Match) -> str:
        name, args = m.group(3), m.group(4)
        if name in defined:
            return m.group(0)
        base, k = _MULTI[name], len([a for a in args.split(",") if a.strip()])
        if not qasm3 and k in _QASM2_BY_ARITY[base]:
            return f"{m.group(1)}{m.group(2)}{_QASM2_BY_ARITY[base][k]} {args.strip()};"
        if k < 2:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}ctrl({k - 1}) @ {base} {args.strip()};"

    return _MULTI_STATEMENT.sub(fix, text)


def bare_measurements(text: str) -> str:
    """``measure q[0];`` without a target bit (OpenQASM 3 style) in an OpenQASM 2 program:
    dropped (measurements never enter the scored unitary)."""
    if detect_version(text) == 3:
        return text
    return re.sub(r"(^|;)(\s*)measure\s+[^;>=]+;", r"\1\2", text, flags=re.M)


_FOR = re.compile(
    r"\bfor\s+(?:(?:u?int|const\s+int)(?:\s*\[\s*\d+\s*\])?\s+)?([A-Za-z_]\w*)\s+in\s*"
    r"(\[[^\]]*\]|\{[^}]*\})\s*\{([^{}]*)\}"
)
MAX_UNROLLED = 4096
"""Most loop iterations unrolled per loop (beyond, the loop is left to the parser)."""


class ExpansionTooLarge(ValueError):
    """Unrolling the program's loops would make it larger than the size cap."""


def for_loops(text: str, max_bytes: int | None = None) -> str:
    """``for i in [0:n] { ... }`` loops (pre-3.0 syntax without a type, or 3.0's ``for int i``),
    unrolled: Qiskit's OpenQASM 3 importer cannot index a register with the loop variable.
    Ranges are inclusive (``[start:stop]``, ``[start:step:stop]``); sets (``{0, 2}``) too.
    With ``max_bytes``, a program whose unrolled text would pass it raises
    :class:`ExpansionTooLarge` as soon as it does (nested loops multiply: two loops of 4096 in
    72 bytes were 160 MB of text), before the text is built.

    >>> for_loops("for i in [0:2] { h q[i]; }")
    ' h q[0];  h q[1];  h q[2]; '
    >>> for_loops("for i in [0:4095] { for j in [0:4095] { h q[0]; } }", max_bytes=65536)
    Traceback (most recent call last):
    ...
    rubriq.extract.quirks.ExpansionTooLarge: unrolling the for loops makes the program larger than 65536 bytes
    """
    size = len(text)

    def values(spec: str) -> list[int] | None:
        nums = [
            p.strip()
            for p in spec[1:-1].replace(",", ":" if spec[0] == "[" else ",").split(":" if spec[0] == "[" else ",")
        ]
        try:
            ints = [int(v) for v in nums if v]
        except ValueError:
            return None
        if spec[0] == "{":
            return ints
        if len(ints) == 2:
            start, step, stop = ints[0], 1, ints[1]
        elif len(ints) == 3:
            start, step, stop = ints
        else:
            return None
        if step == 0 or abs(stop - start) // abs(step) + 1 > MAX_UNROLLED:
            return None
        return list(range(start, stop + (1 if step > 0 else -1), step))

    def unroll(m: re.Match) -> str:
        var, spec, body = m.group(1), m.group(2), m.group(3)
        nonlocal size
        vals = values(spec)
        if vals is None or len(vals) > MAX_UNROLLED:
            return m.group(0)
        pattern = re.compile(rf"\b{re.escape(var)}\b")
        longest = max((len(str(v)) for v in vals), default=0)
        piece = len(body) + len(pattern.findall(body)) * max(0, longest - len(var))
        size += len(vals) * piece - len(m.group(0))  # checked before the text is built
        if max_bytes is not None and size > max_bytes:
            raise ExpansionTooLarge(f"unrolling the for loops makes the program larger than {max_bytes} bytes")
        return "".join(pattern.sub(str(v), body) for v in vals)

    previous = None
    while previous != text:  # nested loops unroll from the inside out
        previous, text = text, _FOR.sub(unroll, text)
    return text


RULES: tuple[Callable[[str], str], ...] = (
    unicode_symbols,
    comments,
    markdown_fences,
    prose_lines,
    python_constants,
    gate_aliases,
    multi_controlled,
    bare_measurements,
    for_loops,
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


def normalize(text: str, max_bytes: int | None = None) -> tuple[int, str]:
    """Apply every rule, detect the dialect, and set its header: ``(version, program)``; with
    ``max_bytes``, loops are unrolled only as long as the program stays within it."""
    for rule in RULES:
        text = for_loops(text, max_bytes) if rule is for_loops else rule(text)
    version = detect_version(text)
    return version, with_header(text, version)
