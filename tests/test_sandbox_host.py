"""What a job can reach of its host (sandbox round 4): no host file, no stall of the zygote, a
bound on its tasks, and a pre-filter that reads every identifier the grammar can hold.

Each attack runs with the pre-filter on and off, as root here and as ``nobody`` through
``test_the_corpus_holds_as_an_unprivileged_user`` (tests/test_hostile.py), which also creates the
canaries of this file for that run (``nobody`` cannot write into the repository).  Every attack
was reproduced on the design before (the numbers are in SECURITY.md); after each, the next
honest completion must get exactly the reward the same circuit gets as QASM.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from rubriq.config import BudgetConfig, ExtractionConfig, RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.extract.sandbox import guard
from rubriq.extract.sandbox.guard import GuardError, check_code
from rubriq.extract.sandbox.layers import TASKS_PER_JOB
from tests.test_sandbox_integrity import (
    PREFILTER,
    QFT3,
    QFT3_QASM,
    REACH,
    WRITE_ALL,
    _alive_zygotes,
    _assert_next_honest_is_exact,
    _assert_nothing_left_behind,
    _assert_refused_or,
    _assert_zygotes_survived,
    _config,
    _evaluator,
    _fenced,
    _wait_for_jobs,
)

TIME_SCALE = float(os.environ.get("RUBRIQ_TEST_TIME_SCALE", "1"))
REPO = Path(__file__).resolve().parents[1]
CANARY_TEXT = "RUBRIQ-CANARY-4f1c9"
CANARIES_ENV = "RUBRIQ_TEST_CANARIES"
"""JSON {name: path} of canaries made by the root run for the ``nobody`` run."""
X0_QASM = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nx q[0];\n'


def make_canaries(tag: str) -> dict[str, Path]:
    """World-readable canaries where a job must not reach them: the project's runs/ (where
    training writes its records), results/, the repository itself and /var/tmp; plus a stored
    record of a QFT-3 completion with its reward (the plagiarism case)."""
    places = {
        "runs": REPO / "runs" / f"canary-{tag}" / "records.jsonl",
        "results": REPO / "results" / f"canary-{tag}.jsonl",
        "repository": REPO / f"canary-{tag}.txt",
        "var_tmp": Path("/var/tmp") / f"rubriq-canary-{tag}.txt",
    }
    for path in places.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(CANARY_TEXT + "\n")
        os.chmod(path, 0o644)
    record = REPO / "runs" / f"canary-{tag}" / "best.jsonl"
    best = RubriQEvaluator(target_algorithm="qft", num_qubits=3).evaluate(QFT3_QASM)
    record.write_text(json.dumps({"target": "qft", "num_qubits": 3, "reward": best.reward, "completion": QFT3_QASM}))
    os.chmod(record, 0o644)
    os.chmod(record.parent, 0o755)
    places["record"] = record
    return places


def remove_canaries(places: dict[str, Path]) -> None:
    for path in places.values():
        path.unlink(missing_ok=True)
    for path in places.values():
        if path.parent.name.startswith("canary-"):
            try:
                path.parent.rmdir()
            except OSError:
                pass


@pytest.fixture(scope="module")
def canaries():
    given = os.environ.get(CANARIES_ENV)
    if given:  # the nobody run: made by the root run
        yield {k: Path(v) for k, v in json.loads(given).items()}
        return
    places = make_canaries(f"{os.getpid()}")
    try:
        yield places
    finally:
        remove_canaries(places)


def _may_list() -> set[str]:
    """What a job's / may list here: its skeleton, the top folders of the interpreter's paths and
    of the repository (RubriQ's package), and those of the system libraries."""

    tops = {Path(p).resolve().parts[1] for p in (sys.prefix, sys.base_prefix, str(REPO))}
    return {"dev", "proc", "tmp", "usr", "lib", "lib64"} | tops


def _reward_of(qasm: str) -> float:
    """The reward of a QASM circuit for QFT-3, scored in this process (no sandbox)."""
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=3, config=_config(True)).evaluate(qasm)
    assert result.error is None, result.error
    return result.reward


@pytest.fixture(scope="module")
def honest_reward() -> float:
    return _reward_of(QFT3_QASM)


# -- 1. the pre-filter reads every identifier of the grammar ---------------------------------------
MATCH_BYPASS = (
    "from qiskit import QuantumCircuit\nO = QuantumCircuit.mro()[-1]\n"
    "match QuantumCircuit.h:\n    case O(__globals__=g):\n        pass\n"
    "b = g['_' * 2 + 'builtins' + '_' * 2]\nos = b['_' * 2 + 'import' + '_' * 2]('os')\n"
    "raise RuntimeError('ran: ' + ' '.join(sorted(os.listdir('/'))))\n"
)


@PREFILTER
def test_the_match_class_pattern_bypass_is_refused(prefilter, honest_reward):
    """Round 4, finding 1: ``case O(__globals__=g)`` read any attribute, since the keyword names
    of a class pattern (MatchClass.kwd_attrs) are bare strings the pre-filter never looked at;
    from there ``__import__`` gave os.  With the pre-filter on it is refused; off, it runs and
    sees only the minimal root."""
    with pytest.raises(GuardError, match="__globals__"):
        check_code(MATCH_BYPASS)
    result = _evaluator(prefilter).evaluate(_fenced(MATCH_BYPASS))
    _assert_refused_or(result, prefilter, ran="ran: ")
    if not prefilter:
        listed = set(result.error.split("ran: ", 1)[1].split(";")[0].split())
        assert listed <= _may_list() and "etc" not in listed, listed
    _assert_next_honest_is_exact(prefilter, honest_reward)


FORBIDDEN = "__globals__"


def _signature(node_type: type) -> list[tuple[str, str]]:
    head = (node_type.__doc__ or "").strip().split("\n")[0]
    inside = head[head.index("(") + 1 : head.rindex(")")] if "(" in head else ""
    return [tuple(part.strip().rsplit(" ", 1)) for part in inside.split(",") if part.strip()]  # type: ignore[misc]


def _placeholder(kind: str):
    """A minimal value of an ASDL type (what ``ast.unparse`` needs to print the node)."""
    base, many, optional = kind.rstrip("?*"), kind.endswith("*"), kind.endswith("?")
    make = {
        "expr": lambda: ast.Name("x", ast.Load()),
        "stmt": ast.Pass,
        "identifier": lambda: "x",
        "int": lambda: 0,
        "constant": lambda: 1,
        "expr_context": ast.Load,
        "operator": ast.Add,
        "unaryop": ast.USub,
        "boolop": ast.And,
        "cmpop": ast.Eq,
        "arguments": lambda: ast.arguments([], [], None, [], [], None, []),
        "arg": lambda: ast.arg("x"),
        "keyword": lambda: ast.keyword("x", ast.Name("x", ast.Load())),
        "alias": lambda: ast.alias("x"),
        "withitem": lambda: ast.withitem(ast.Name("x", ast.Load())),
        "pattern": ast.MatchAs,
        "match_case": lambda: ast.match_case(ast.MatchAs(), body=[ast.Pass()]),
        "excepthandler": lambda: ast.ExceptHandler(None, None, [ast.Pass()]),
        "comprehension": lambda: ast.comprehension(ast.Name("x", ast.Store()), ast.Name("y", ast.Load()), [], 0),
    }.get(base)
    if make is None or (optional and base not in ("expr", "identifier")):
        return [] if many else None
    if many:
        return [make()] if base in ("stmt", "match_case", "alias", "withitem") else []
    return make()


def _node_with(node_type: type, field: str) -> ast.AST:
    values = {}
    for kind, name in _signature(node_type):
        values[name] = ([FORBIDDEN] if kind.endswith("*") else FORBIDDEN) if name == field else _placeholder(kind)
    node = node_type(**values)
    if isinstance(node, ast.MatchClass):  # one sub-pattern per keyword
        node.kwd_patterns = [ast.MatchAs() for _ in node.kwd_attrs]
    return node


def _as_source(node: ast.AST) -> str:
    """``node`` in a module where the grammar allows it, as source text."""
    x = ast.Name("x", ast.Load())
    if isinstance(node, ast.stmt):
        body = [node]
    elif isinstance(node, ast.expr):
        body = [ast.Expr(node)]
    elif isinstance(node, ast.MatchStar):
        body = [ast.Match(x, [ast.match_case(ast.MatchSequence([node]), body=[ast.Pass()])])]
    elif isinstance(node, ast.pattern):
        body = [ast.Match(x, [ast.match_case(node, body=[ast.Pass()])])]
    elif isinstance(node, ast.arg):
        args = ast.arguments([], [node], None, [], [], None, [])
        body = [ast.FunctionDef("f", args, [ast.Pass()], [], None)]
    elif isinstance(node, ast.keyword):
        body = [ast.Expr(ast.Call(x, [], [node]))]
    elif isinstance(node, ast.alias):
        body = [ast.ImportFrom("qiskit", [node], 0)]
    elif isinstance(node, ast.excepthandler):
        body = [ast.Try([ast.Pass()], [node], [], [])]
    else:
        raise TypeError(f"no context for {type(node).__name__}")
    return ast.unparse(ast.fix_missing_locations(ast.Module(body, [])))


def _node_types_with_identifiers() -> list[tuple[type, str]]:
    found = []
    for name in sorted(dir(ast)):
        node_type = getattr(ast, name)
        if not (isinstance(node_type, type) and issubclass(node_type, ast.AST)) or node_type is ast.AST:
            continue
        if (node_type.__doc__ or "").startswith("Deprecated"):  # ast.Num, ast.Str, ...: aliases of Constant
            continue
        fields = guard.identifier_fields(node_type)
        assert fields is not None, f"ast.{name} has no readable signature"
        found += [(node_type, field) for field in fields]
    return found


IDENTIFIER_FIELDS = _node_types_with_identifiers()


def test_the_grammar_has_identifier_fields_and_the_table_names_each():
    """The walk below is generated from this Python's ``ast`` module: it finds the identifier
    fields the issue names (and every other one), and each has a role in the pre-filter."""
    names = {f"{t.__name__}.{f}" for t, f in IDENTIFIER_FIELDS}
    assert {"Attribute.attr", "MatchClass.kwd_attrs", "keyword.arg", "alias.name", "Global.names"} <= names
    unknown = sorted(n for n in names if tuple(n.split(".")) not in guard.IDENTIFIER_ROLES)
    assert not unknown, f"identifier fields without a role in guard.IDENTIFIER_ROLES: {unknown}"


@pytest.mark.parametrize("node_type,field", IDENTIFIER_FIELDS, ids=[f"{t.__name__}.{f}" for t, f in IDENTIFIER_FIELDS])
def test_every_identifier_field_of_the_grammar_goes_through_the_check(node_type, field):
    """For every AST node type with an identifier field: a node holding ``__globals__`` in that
    field, printed as source and given to the pre-filter, is refused, and the refusal names the
    identifier (the check saw that field, not a neighbour)."""
    node = _node_with(node_type, field)
    with pytest.raises(GuardError, match=FORBIDDEN):
        guard._check_identifiers(node)
    source = _as_source(node)
    assert FORBIDDEN in source
    with pytest.raises(GuardError) as refused:
        check_code(source)
    assert FORBIDDEN in str(refused.value) or "not valid Python" in str(refused.value), (source, refused.value)
    if "not valid Python" in str(refused.value):  # a placement the parser refuses (e.g. nonlocal at top level)
        pytest.skip(f"{source!r} is not valid Python; the node-level check above saw the field")


def test_a_node_type_the_prefilter_does_not_know_is_refused():
    """A node a new Python version adds (here: made up) is refused, not skipped: an identifier
    field without a role, or a node class without a readable signature."""

    class Label(ast.stmt):
        """Label(identifier name)"""

        _fields = ("name",)

    class Opaque(ast.expr):
        _fields = ("value",)

    with pytest.raises(GuardError, match="Label.name is unknown"):
        guard._check_identifiers(Label(name="harmless"))
    with pytest.raises(GuardError, match="Opaque nodes are unknown"):
        guard._check_identifiers(Opaque(value=1))


def test_a_class_pattern_with_positional_patterns_is_refused():
    """``case C(x)`` reads the attribute C.__match_args__ names: a run-time string."""
    with pytest.raises(GuardError, match="positional"):
        check_code("match v:\n    case C(x):\n        pass\n")


WALK = """
import builtins, collections, importlib, json, sys, types
from rubriq.extract.sandbox import guard, zygote
for name in zygote.PRELOADED + zygote.OPTIONAL_PRELOADED + ("qiskit_ibm_runtime.fake_provider",):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
danger = {id(getattr(builtins, n)): "builtins." + n for n in DANGEROUS_BUILTINS}
found = collections.defaultdict(list)
seen = set()
queue = collections.deque((sys.modules[m], m, 0) for m in STARTS if m in sys.modules)
while queue:
    obj, path, depth = queue.popleft()
    if id(obj) in seen or depth >= DEPTH:
        continue
    seen.add(id(obj))
    try:
        names = dir(obj)
    except Exception:
        continue
    for name in names:
        try:
            guard.check_identifier(name, "attribute")
            value = getattr(obj, name)
        except Exception:
            continue
        if id(value) in danger:
            found[danger[id(value)]].append(path + "." + name)
        elif isinstance(value, types.ModuleType) and value.__name__.split(".")[0] in DANGEROUS_MODULES:
            found[value.__name__].append(path + "." + name)
        else:
            queue.append((value, path + "." + name, depth + 1))
print(json.dumps({"objects": len(seen), "found": {k: v[:3] for k, v in found.items()}}))
"""
DANGEROUS_MODULES = {
    "os", "sys", "posix", "subprocess", "ctypes", "_ctypes", "importlib", "builtins", "io", "_io", "pathlib",
    "shutil", "socket", "inspect", "types", "gc", "code", "codeop", "runpy", "pickle", "marshal", "copyreg",
    "typing", "string", "operator", "six", "stevedore", "multiprocessing", "threading", "_thread", "signal",
    "mmap", "fcntl", "resource", "pty", "tempfile", "glob", "zipimport", "pkgutil", "sysconfig", "site",
    "asyncio", "select", "selectors", "http", "urllib", "socketserver", "xmlrpc", "requests", "tkinter",
}  # fmt: skip
"""Modules that run code, touch files or processes, or read attributes and evaluate text by a
run-time string (typing.get_type_hints, string.Formatter.get_field, operator.attrgetter, six.exec_)."""
DANGEROUS_BUILTINS = ("eval", "exec", "compile", "open", "getattr", "setattr", "vars", "globals", "__import__")


def test_no_dangerous_module_is_reachable_through_names_the_prefilter_admits():
    """A generated walk (breadth first, 4 attributes deep, in a fresh interpreter with the
    zygote's imports) from every allowed import through every attribute name the pre-filter
    admits: none leads to a module that runs code, touches the system or reads attributes by a
    run-time string, or to eval/exec/open/getattr.  Round 4 found qiskit.qasm3.typing
    (get_type_hints evaluates string annotations: any code), qiskit.qasm2.export.string
    (Formatter.get_field reads any attribute) and numpy's operator; they are refused by name now.
    (Attribute names only: what a call, an index or an iteration returns is not walked.)"""
    import subprocess

    script = (
        WALK.replace("DANGEROUS_BUILTINS", repr(DANGEROUS_BUILTINS))
        .replace("DANGEROUS_MODULES", repr(sorted(DANGEROUS_MODULES)))
        .replace("STARTS", repr([*guard.ALLOWED_MODULES, *guard.ALLOWED_SUBPACKAGES]))
        .replace("DEPTH", "4")
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600 * TIME_SCALE, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    walked = json.loads(proc.stdout.strip().splitlines()[-1])
    assert walked["objects"] > 10_000, walked["objects"]  # the walk went somewhere
    assert walked["found"] == {}, walked["found"]


MODULE_BYPASSES = {
    "typing.get_type_hints": "from qiskit import QuantumCircuit\nfrom qiskit import qasm3\n"
    "k = '_' * 2 + 'import' + '_' * 2\ndef f(x: (k + \"('os').getcwd()\")):\n    pass\n"
    "hints = qasm3.typing.get_type_hints(f)\n",
    "string.Formatter": "from qiskit import QuantumCircuit\nfrom qiskit.qasm2 import export\n"
    "g = export.string.Formatter().get_field('0.' + '_' * 2 + 'globals' + '_' * 2, [QuantumCircuit.h], {})\n",
    "operator.attrgetter": "import numpy as np\nget = np.ma.core.operator.attrgetter('_' * 2 + 'class' + '_' * 2)\n",
}


@pytest.mark.parametrize("code", list(MODULE_BYPASSES.values()), ids=list(MODULE_BYPASSES))
def test_modules_that_read_attributes_by_a_runtime_string_are_refused(code):
    """Round 4: two more ways past the pre-filter, found by the walk below: typing.get_type_hints
    evaluates a string annotation built at run time (any code); string.Formatter().get_field
    reads any attribute (the globals of a qiskit function)."""
    with pytest.raises(GuardError, match="a module reachable through another one"):
        check_code(code)


HONEST = [
    QFT3,
    "from qiskit import QuantumCircuit\nqc = QuantumCircuit(3)\nfor _ in range(3):\n    qc.h(_)\n",
    "from qiskit import QuantumCircuit, transpile\nqc = QuantumCircuit(2)\nqc.cx(0, 1)\n"
    "out = transpile(qc, basis_gates=['cx', 'rz', 'sx', 'x'], optimization_level=1)\n",
    "from qiskit import QuantumCircuit\ndef build(n: int = 2, name='bell'):\n    qc = QuantumCircuit(n, name=name)\n"
    "    qc.h(0)\n    return qc\n",
    "from qiskit import QuantumCircuit\nkind = 'h'\nqc = QuantumCircuit(1)\nmatch kind:\n    case 'h':\n"
    "        qc.h(0)\n    case {'gate': g, **rest}:\n        pass\n    case [a, *others]:\n        pass\n",
    "from qiskit import QuantumCircuit\nclass Layer:\n    def __init__(self, n):\n        self.n = n\n"
    "qc = QuantumCircuit(Layer(2).n)\nprint(f'{qc.num_qubits:>4d} qubits')\n",
]


@pytest.mark.parametrize("code", HONEST, ids=range(len(HONEST)))
def test_the_prefilter_still_accepts_honest_circuit_code(code):
    check_code(code)


# -- 2. a job sees no host file ---------------------------------------------------------------------
def _reader(path: Path, how: str) -> str:
    read = {
        "open": f"data = open({str(path)!r}).read()",
        "numpy.fromfile": f"data = bytes(np.fromfile({str(path)!r}, dtype=np.uint8)).decode()",
    }[how]
    return (
        "from qiskit import QuantumCircuit\nimport numpy as np\n"
        f"try:\n    {read}\nexcept OSError as exc:\n    data = 'unreadable: ' + exc.strerror\n"
        "raise RuntimeError('got ' + data)\n"
    )


@PREFILTER
@pytest.mark.parametrize("how", ["open", "numpy.fromfile"])
@pytest.mark.parametrize("where", ["runs", "results", "repository", "var_tmp"])
def test_a_world_readable_canary_of_the_host_is_unreadable_from_a_job(canaries, prefilter, how, where):
    """Round 4, finding 2: a canary written 0644 into the project's runs/ was read back by a
    job (pre-filter off, and through the match bypass with it on; numpy.fromfile passed the
    pre-filter).  Now no host file outside the minimal root exists in a job's view."""
    path = canaries[where]
    assert path.read_text().strip() == CANARY_TEXT  # it is there, readable by this (unsandboxed) process
    result = _evaluator(prefilter).evaluate(_fenced(_reader(path, how)))
    assert CANARY_TEXT not in (result.error or ""), result.to_dict()
    assert result.reward == 0.0 and result.error_type is not None, result.to_dict()
    if not (prefilter and how == "open"):  # else the pre-filter refuses open() by name
        assert "got unreadable: No such file or directory" in result.error, result.error


PLAGIARISE = """from qiskit import QuantumCircuit
import numpy as np
qc = None
paths = [RECORD]
GLOB
for path in paths:
    try:
        text = bytes(np.fromfile(path, dtype=np.uint8)).decode()
        body = text.split('"completion": "', 1)[1].rsplit('"', 1)[0]
        found = QuantumCircuit.from_qasm_str(body.replace('\\\\n', '\\n').replace('\\\\"', '"'))
    except Exception:
        continue
    if found.num_qubits == 3:
        qc = found
        break
if qc is None:
    qc = QuantumCircuit(3)
    qc.x(0)
"""
GLOB = """import glob
for pattern in ('runs/**/*.jsonl', 'results/**/*.jsonl'):
    paths += glob.glob(REPO + '/' + pattern, recursive=True)
"""


@PREFILTER
def test_a_completion_that_copies_a_stored_record_scores_what_it_builds_itself(canaries, prefilter):
    """Round 4, reward plagiarism: a completion that builds nothing itself found the best stored
    record for its target under runs/ or results/ and scored exactly that record's reward.  Now
    it finds nothing and scores what it builds (X on q[0]), not the record's QFT-3."""
    record = canaries["record"]
    stored = json.loads(record.read_text())
    code = PLAGIARISE.replace("RECORD", repr(str(record)))
    code = code.replace("GLOB", "" if prefilter else GLOB.replace("REPO", repr(str(REPO))))
    if prefilter:
        check_code(code)  # it passes the pre-filter: only the file layer stops it
    result = _evaluator(prefilter, cache_size=0).evaluate(_fenced(code))
    assert result.error is None, result.to_dict()
    own = RubriQEvaluator(target_algorithm="qft", num_qubits=3, config=_config(True)).evaluate(X0_QASM)
    assert result.reward == pytest.approx(own.reward, abs=1e-12)  # before: exactly the record's reward
    assert result.process_fidelity == pytest.approx(own.process_fidelity, abs=1e-12) and own.process_fidelity < 0.5
    assert stored["reward"] - result.reward > 0.05


@PREFILTER
def test_a_job_lists_only_its_minimal_root(prefilter):
    """No listing of the host's top-level folders, no host file, no host mount: the job's / holds
    the top-level folders of the interpreter's paths and dev, proc, tmp; its working directory is
    its empty /tmp; /proc/self/mountinfo lists only mounts under those folders."""
    probe = (
        REACH
        + "root = sorted(os.listdir('/'))\n"
        + "mounts = [l.split()[4] for l in bi['open']('/proc/self/mountinfo').read().splitlines()]\n"
        + "tops = sorted({m.split('/')[1] for m in mounts})\n"
        + "etc = os.path.exists('/etc/passwd')\n"
        + "raise RuntimeError(f'view root={root} tops={tops} cwd={os.getcwd()} {os.listdir(\".\")} etc={etc}')\n"
    )
    result = _evaluator(prefilter).evaluate(_fenced(probe))
    _assert_refused_or(result, prefilter, ran="view ")
    if prefilter:
        return
    view = result.error.split("view ", 1)[1]
    root = set(ast.literal_eval(re.search(r"root=(\[.*?\])", view).group(1)))
    tops = set(ast.literal_eval(re.search(r"tops=(\[.*?\])", view).group(1)))
    assert {"dev", "proc", "tmp"} <= root <= _may_list() and tops <= root | {""}, view
    host = {p.name for p in Path("/").iterdir()}
    assert {"etc", "sys"} <= host - root, view  # these the host has, the job does not
    # The job's /tmp is its own: empty, except where an import folder lives under the host's /tmp
    # (a CI clone made by mktemp) and is re-exposed there, which lists that path's first folder.
    from rubriq.extract.sandbox.rootfs import import_trees

    cwd = re.search(r"cwd=(\S+) (\[.*?\]) etc=(\w+)", view)
    assert cwd and cwd.group(1) == "/tmp" and cwd.group(3) == "False", view
    parts = [Path(p).parts for p in [*import_trees(), str(REPO.resolve())]]
    may = {p[2] for p in parts if len(p) > 2 and p[1] == "tmp"}
    assert set(ast.literal_eval(cwd.group(2))) <= may, view


# -- 3. a result line cannot stall the zygote --------------------------------------------------------
ESCAPED_QUOTES = "(b'\"' + b'\\\\\"' * 499_990 + b'\\n')"
"""``"`` and then ``\\"`` 499,990 times: an unterminated string of escaped quotes, 1 MB (just
under the 1,000,000 bytes a result may have)."""


def test_the_result_parser_is_linear_on_escaped_quotes():
    """Round 4, finding 3: the bounded parser stripped strings with a regex that was quadratic on
    this line (10 KB 0.7 s, 20 KB 2.8 s, 80 KB 78 s; 1 MB would take hours).  The unterminated
    1 MB line now costs about what the same line closed as a valid result costs (one linear pass
    each; the absolute times are in benchmarks/bench_sandbox.py)."""
    from rubriq.extract.sandbox.protocol import parse_result

    def seconds(line: bytes, expected: tuple) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            assert parse_result(line) == expected
            best = min(best, time.perf_counter() - start)
        return best

    pairs = 499_990
    quotes = seconds(b'"' + b'\\"' * pairs + b"\n", (None, "the result line is not JSON (JSONDecodeError)"))
    closed = seconds(b'{"error": "' + b'\\"' * (pairs - 6) + b'"}\n', ({"error": '"' * 300}, None))
    assert quotes < 5 * max(closed, 1e-3), (quotes, closed)


@PREFILTER
def test_a_1mb_escaped_quote_line_beside_an_honest_completion(prefilter, honest_reward):
    """Round 4, finding 3: a 120 KB line held the zygote's interpreter lock for minutes; an honest
    QFT-3 sent 0.5 s later got reward 0 (``sandbox``, 39.5 s) and the zygote was retired.  A 1 MB
    line is now that job's own parse error, the honest completion beside it (sent once the attack
    runs) gets its exact reward, and the zygote lives."""
    before = _alive_zygotes()
    evaluator = _evaluator(prefilter, cache_size=0)
    box: dict = {}
    attack = REACH + f"DATA = {ESCAPED_QUOTES}\n" + WRITE_ALL
    thread = threading.Thread(target=lambda: box.setdefault("attack", evaluator.evaluate(_fenced(attack))))
    thread.start()
    _wait_for_jobs(1, [thread])  # the attack runs (or was pre-filtered): the honest one comes beside it
    honest = evaluator.evaluate(_fenced(QFT3))
    thread.join(60 * TIME_SCALE)
    assert honest.error is None and honest.reward == pytest.approx(honest_reward, abs=1e-12), honest.to_dict()
    _assert_refused_or(box["attack"], prefilter, ran="malformed")
    assert box["attack"].error_type == "parse", box["attack"].to_dict()
    _assert_zygotes_survived(before)


# -- 4. a bound on every job's tasks ------------------------------------------------------------------
RAW_CLONE = """from qiskit import QuantumCircuit
import ctypes, mmap
# fn(flags, stack): mov eax, 56 (clone); syscall; test rax, rax; jz child; ret
# child: lea rdi, [rip + 11]; xor esi, esi; mov eax, 35 (nanosleep); syscall; jmp child; then {1000 s, 0}
code = bytes.fromhex("b8380000000f054885c07401c3" "488d3d0b00000031f6b8230000000f05ebee")
code += (1000).to_bytes(8, "little") + bytes(8)
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
# The threads run this page: keep it mapped until the job ends (when the job's namespace was freed
# the page went with it, and a thread scheduled late, under load, jumped into nothing: a crash)
ctypes.keep = page
fn = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_ulong, ctypes.c_ulong)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
THREAD = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000  # VM FS FILES SIGHAND THREAD SYSVSEM
process = fn(17, 0)  # SIGCHLD only: a new process
made = 0
while made < 20000 and fn(THREAD, 0) > 0:
    made += 1
raise RuntimeError(f"threads={made} process={process}")
"""


@PREFILTER
def test_raw_clone_threads_are_bounded_per_job(prefilter, honest_reward):
    """Round 4, finding 4: raw clone(CLONE_THREAD) threads need no address space each; as
    ``nobody`` one job made 20,000 in 0.57 s (pid_max 32,768).  RLIMIT_NPROC, counted per user
    namespace (Linux >= 5.14), now bounds each job to TASKS_PER_JOB tasks as root and as an
    ordinary user; two jobs at once get the same bound each (it is per job, not per uid), and a
    new process is refused outright (seccomp)."""
    evaluator = _evaluator(prefilter, timeout=10 * TIME_SCALE, cache_size=0)
    results: list = []
    jobs = [
        threading.Thread(target=lambda i=i: results.append(evaluator.evaluate(_fenced(RAW_CLONE + f"# {i}"))))
        for i in range(2)
    ]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(60 * TIME_SCALE)
    assert len(results) == 2
    for result in results:
        _assert_refused_or(result, prefilter, ran="threads=")
        if not prefilter:
            found = dict(re.findall(r"(\w+)=(-?\d+)", result.error))
            # S, I and K are three of the job's tasks
            assert 0 < int(found["threads"]) <= TASKS_PER_JOB - 3, result.error
            assert int(found["process"]) < 0, result.error  # -EPERM
    _assert_nothing_left_behind()
    _assert_next_honest_is_exact(prefilter, honest_reward)


# -- 5. the payload check's own error; one sandbox time budget per completion --------------------------
@PREFILTER
def test_an_out_of_range_angle_is_the_payload_checks_own_error(prefilter, honest_reward):
    """Round 4, finding 5: an int angle of 10**400 failed with OverflowError ("int too large to
    convert to float") instead of the payload check's own error."""
    line = '(\'{"circuit": {"num_qubits": 1, "ops": [["rz", [0], [\' + "1" + "0" * 400 + \']]]}}\\n\').encode()'
    before = _alive_zygotes()
    result = _evaluator(prefilter).evaluate(_fenced(REACH + f"DATA = {line}\n" + WRITE_ALL))
    _assert_refused_or(result, prefilter, ran="rejected circuit description: bad parameters")
    assert "OverflowError" not in result.error and "too large to convert" not in result.error
    _assert_zygotes_survived(before)
    _assert_next_honest_is_exact(prefilter, honest_reward)


def test_out_of_range_numbers_in_a_payload():
    from rubriq.extract.serialize import PayloadError, payload_to_circuit

    for params in ([10**400], [-(10**309)], [float("inf")], [True], ["1"]):
        with pytest.raises(PayloadError, match="bad parameters"):
            payload_to_circuit({"num_qubits": 1, "ops": [["rz", [0], params]]})
    with pytest.raises(PayloadError, match="bad qubits"):
        payload_to_circuit({"num_qubits": 1, "ops": [["x", [10**400], []]]})
    assert payload_to_circuit({"num_qubits": 1, "ops": [["rz", [0], [10**300]]]}).data[0].operation.params == [1e300]


def test_the_python_blocks_of_one_completion_share_one_sandbox_budget():
    """Round 4, finding 5: each fenced block got the whole python_timeout_s, so a completion of
    several spinning blocks held the sandbox for up to the 30 s evaluation budget.  Now the first
    spinner takes the completion's python_timeout_s and the later blocks (and the whole-text
    attempt) get nothing: they do not start."""
    spinner = _fenced("from qiskit import QuantumCircuit\nwhile True:\n    pass\n")
    cfg = RubricConfig(
        extraction=ExtractionConfig(python_timeout_s=1.5 * TIME_SCALE, python_prefilter=True),
        budget=BudgetConfig(time_s=60 * TIME_SCALE),
    )
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=3, config=cfg, cache_size=0).evaluate(
        "\n".join([spinner] * 3)
    )
    assert result.error_type == "budget" and result.reward == 0.0, result.to_dict()
    assert "block 1 (python): timed out" in result.error, result.error
    for block in (2, 3):
        assert f"block {block} (python): no sandbox time left for this completion" in result.error, result.error


# -- records RubriQ writes ---------------------------------------------------------------------------
def test_records_are_created_readable_by_their_owner_only(tmp_path):
    """Stored completions and their rewards are the plagiarism case's loot: the record writers
    create them 0600 (training's metrics, evaluation's records, the endpoint's cache)."""
    from rubriq.evaluation.sampling import save_records
    from rubriq.training.callbacks import append_jsonl

    append_jsonl(tmp_path / "metrics.jsonl", {"reward": 0.5})
    save_records([], tmp_path / "records.jsonl")
    for name in ("metrics.jsonl", "records.jsonl"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
