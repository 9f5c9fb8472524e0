"""The package layers: text -> circuit -> scores -> reward -> policy, lower layers never
importing higher ones, no import circles, and each shared concept defined once.

Every ``import rubriq.X`` / ``from rubriq.X import`` in ``rubriq/`` counts, at module level or
inside a function (a lazy import is still a dependency), ``TYPE_CHECKING`` imports too.  A
package may never use a layer above its own; packages of one layer may use each other, one way
only (the package graph has no circle), and no files import each other in a loop.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
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
        "redaction",
    },  # the core: gates, facts, T-count, backends; utilities
    {"extract", "sim", "targets", "rubric"},  # text -> circuit, fidelity, targets, dimensions
    {"evaluator"},  # the public scoring API
    {"serve"},  # the scoring service (HTTP, Ray Serve) over the public API
    {"suites", "baselines", "data"},  # circuit collections, compiler baselines, datasets
    # LMs, metrics/reports, TRL's reward functions (over evaluation's batch metrics, below training),
    # TRL glue, devices; one way within the layer: models <- evaluation <- reward <- training
    {"models", "evaluation", "reward", "training", "hardware"},
    {"studies", "app", "integrations"},  # experiments, the app, RL-framework adapters (+ client)
    {"cli", "__main__"},  # the command line (rubriq/cli/, one module per command group; python -m rubriq)
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


# -- circles -------------------------------------------------------------------------------------
KNOWN_CIRCLES: list[set[str]] = []  # none left: any circle fails the test below


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def module_graph() -> dict[str, set[str]]:
    """Module -> the RubriQ modules it imports.  ``from pkg import name`` depends on the module
    ``pkg.name`` when that is a module (a submodule import), else on ``pkg`` itself; the parent
    packages an import initializes on the way are not counted (every submodule would otherwise
    form a circle with a package ``__init__`` that imports it)."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for name in names:
                target = owner(name) if name.startswith("rubriq.") else None
                if target and target != module and target != "rubriq":
                    graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one node
    (Tarjan's algorithm; iterative, the graph has hundreds of nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_circles_finds_a_loop_and_only_a_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert circles(graph) == [{"a", "b", "c"}]
    assert circles({"x": {"y"}, "y": set()}) == []


def test_no_files_import_each_other_in_a_loop():
    found = circles(module_graph())
    new = [c for c in found if c not in KNOWN_CIRCLES]
    assert not new, "import circles (each a set of modules that import each other in a loop):\n" + "\n".join(
        " <-> ".join(sorted(c)) for c in new
    )
    gone = [c for c in KNOWN_CIRCLES if c not in found]
    assert not gone, f"these circles are gone: delete them from KNOWN_CIRCLES: {gone}"


def test_no_packages_import_each_other():
    """Within a layer imports go one way: the package graph has no circle either (a circle of
    packages hides an arrow back up, e.g. targets -> rubric -> targets)."""
    graph: dict[str, set[str]] = {}
    for _file, pkg, target in imports():
        graph.setdefault(pkg, set())
        if target != pkg:
            graph[pkg].add(target)
    found = circles(graph)
    assert not found, "packages that import each other: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


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
        (
            "F_avg = (d F_process + 1) / (d + 1)",
            r"\s*def average_fidelity\b|.*\(\s*\w+\s*\*\s*\w+\s*\+\s*1\s*\)\s*/\s*\(\s*\w+\s*\+\s*1\s*\)"
            r"|.*\+\s*inv_d\s*\)\s*/\s*\(\s*1\s*\+\s*inv_d",
        ),
        (
            "correct: F_avg >= 1 - eps",
            r"\s*def meets_threshold\b|.*\b(f|f_avg|fid|average_fidelity)\s*>=\s*[\w.]*(threshold|THRESHOLD|1 - eps)\b",
        ),
        # the number itself is fidelity.correct_threshold's default (rubriq/config.py, below sim/)
        ("eps = 0.01 (correct: F_avg >= 1 - eps)", r"\s*\w*(EPS|CORRECT_THRESHOLD)\s*(:[^=]*)?=\s*[^=]"),
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


def test_every_test_name_is_used_once():
    """No two test functions share a name, in one module (the second would hide the first) or
    across tests/ (``-k name`` and a report's name would be ambiguous)."""
    where: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                where.setdefault(node.name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    shared = {name: places for name, places in where.items() if len(places) > 1}
    assert not shared, f"tests that share a name: {shared}"


def test_every_sleep_in_the_tests_says_what_it_paces():
    """No test waits a fixed time and then asserts what should have happened by then: a test waits
    on an event (a condition polled with a deadline, a barrier, a log line), and each sleep left in
    tests/ paces such a poll, or is code that hangs on purpose, and says so in a comment on its
    line (``# paces ...``)."""
    unexplained = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\btime\.sleep\b", line) and "# paces" not in line
    ]
    assert not unexplained, f"a time.sleep without '# paces ...' on its line: {unexplained}"
