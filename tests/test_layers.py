"""The package layers (issue #15): text -> circuit -> scores -> reward -> policy, lower layers
never importing higher ones, and each shared concept defined once.

Every ``import rubriq.X`` / ``from rubriq.X import`` in ``rubriq/`` counts, at module level or
inside a function (a lazy import is still a dependency).  Packages of one layer may use each
other; a package may never use a layer above its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rubriq"

LAYERS = [
    {
        "circuit",
        "config",
        "budget",
        "progress",
        "cache",
        "tables",
        "options",
    },  # the core: gates, facts, backends; utilities
    {"extract", "sim", "targets", "rubric"},  # text -> circuit, fidelity, targets, dimensions
    {"evaluator"},  # the public scoring API
    {"serve"},  # the scoring service (HTTP, Ray Serve) over the public API
    {"data", "baselines"},  # datasets, compiler baselines
    {"training", "evaluation", "hardware"},  # TRL glue, metrics/reports, devices
    {"studies", "app", "integrations"},  # experiments, the app, RL-framework adapters (+ client)
    {"cli"},  # the command line (rubriq/cli/, one module per command group)
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _package(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if rel.parts else ""


def imports() -> list[tuple[str, str, str]]:
    """(importing file, its package, imported package) for every rubriq import in rubriq/."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0] == "rubriq" and len(parts) > 1:
                    out.append((str(path.relative_to(ROOT)), _package(path), parts[1]))
    return out


def test_every_package_has_a_layer():
    packages = {_package(p) for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    packages.discard("__init__")
    assert packages - set(LAYER_OF) == set(), "a new package needs a layer in tests/test_layers.py"


def test_no_package_imports_a_layer_above_it():
    upward = [
        f"{file}: {pkg} (layer {LAYER_OF[pkg]}) imports {target} (layer {LAYER_OF[target]})"
        for file, pkg, target in imports()
        if target in LAYER_OF and pkg in LAYER_OF and LAYER_OF[target] > LAYER_OF[pkg]
    ]
    assert not upward, "\n".join(upward)


def _definitions(pattern: str) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(pattern, line):
                found.append(f"{path.relative_to(ROOT)}:{number}")
    return found


@pytest.mark.parametrize(
    "concept,pattern",
    [
        ("is_correct (F_avg >= the correctness threshold)", r"\s*def is_correct\b"),
        ("compression C = T0/T", r"\s*def compression\b"),
        (
            "the dimension names",
            r".*\(\s*\"clifford\",\s*\"tcount\",\s*\"hardware\",\s*\"fidelity\",\s*\"efficiency\"\s*\)",
        ),
        ("the stripped (non-unitary) instructions", r".*\{\s*\"measure\",\s*\"reset\""),
        ("the LRU cache", r".*popitem\(last=False\)"),
        ("the canonical-ops cap of trusted circuits", r"\s*TRUSTED_MAX_GATES\s*=|.*max_gates=10\*\*"),
        ("markdown tables", r'.*(\|---\||"---\||"---:")'),
        ("number formatting", r"\s*def (fmt|_fmt|_f|format_number|format_ci)\b|.*fmt = lambda"),
        ("Qiskit's standard-gate table", r".*get_standard_gate_name_mapping\(\)"),
    ],
)
def test_each_concept_is_defined_once(concept, pattern):
    found = _definitions(pattern)
    files = {place.rsplit(":", 1)[0] for place in found}
    assert len(files) == 1, f"{concept}: defined in {len(files)} modules: {found}"
