"""A griffe extension for the API reference: RubriQ's docstrings are reStructuredText-flavoured
(``code``, :class:`X`, ``>>>`` doctests that pytest runs); this turns each run of doctest lines
into a fenced ``pycon`` block and each ``::`` literal block into a fenced block, so that the
Markdown renderer shows them as code rather than as quotes and paragraphs."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc):`~?([^`]+)`")


def markdown_of(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            block = []
            while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
                block.append(lines[i][len(indent) :])
                i += 1
            out += [indent + "```pycon", *(indent + b for b in block), indent + "```"]
            continue
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            out.append(line.rstrip()[:-1] if not line.rstrip().endswith(" ::") else line.rstrip()[:-3])
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block = []
            base = None
            while i < len(lines) and (not lines[i].strip() or (lines[i][: len(lines[i]) - len(lines[i].lstrip())])):
                if lines[i].strip():
                    here = len(lines[i]) - len(lines[i].lstrip())
                    base = here if base is None else min(base, here)
                block.append(lines[i])
                i += 1
            if block:
                while block and not block[-1].strip():
                    block.pop()
                out += ["", "```", *(b[base or 0 :] for b in block), "```", ""]
            continue
        out.append(ROLE.sub(r"`\1`", line))
        i += 1
    return "\n".join(out)


class DoctestsAsCode(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
