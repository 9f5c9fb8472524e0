"""Sandbox integrity (issue #25): no job sees another job's data, no bytes a completion writes can
crash or impersonate the sandbox, and a busy pool never turns into a wrong (cached) reward.

Every attack below passes the AST pre-filter of the time the issue was filed: ``os``, the
builtins and the worker's own objects are reached through a running generator's frame
(``gi_frame.f_back.f_globals``).  Each runs with the pre-filter on (it must now refuse the frame
walk) and off (the kernel layers and the process design must hold on their own), as root and,
through ``test_the_corpus_holds_as_an_unprivileged_user`` in tests/test_hostile.py, as nobody.
After each attack the worker that ran it must still be alive and the next honest completion must
get exactly the reward that the same circuit gets as QASM (scored without any sandbox).
"""

from __future__ import annotations

import json
import os
import random
import re
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubriq.config import BudgetConfig, ExtractionConfig, RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.extract.sandbox import get_pool
from rubriq.extract.sandbox import pool as pool_module
from rubriq.extract.sandbox.guard import GuardError, check_code
from tests.test_hostile import _idle_sandbox_processes, _stray_processes, _zygote_pids

TIME_SCALE = float(os.environ.get("RUBRIQ_TEST_TIME_SCALE", "1"))
"""Scales the time limits on a machine whose CPUs another job holds (default 1)."""
PY_TIMEOUT = 3.0 * TIME_SCALE
PREFILTER = pytest.mark.parametrize("prefilter", [True, False], ids=["prefilter", "no-prefilter"])

# The frame walk of the issue: a running generator's frame -> its caller (the completion's module
# frame) -> the worker's frames, whose globals hold ``os`` and whose builtins are unrestricted.
REACH = """from qiskit import QuantumCircuit
def walker():
    yield walker_gen.gi_frame.f_back
walker_gen = walker()
frame = next(walker_gen)
while frame is not None and 'os' not in frame.f_globals:
    frame = frame.f_back
os = frame.f_globals['os']
bi = frame.f_builtins
imp = bi['_' + '_import_' + '_']
"""
# Writes DATA to every descriptor the completion still has (its result pipe among them), then
# leaves without the worker's own result line.
WRITE_ALL = """
for fd in range(3, 64):
    try:
        os.write(fd, DATA)
    except OSError:
        pass
os.kill(os.getpid(), 9)
"""
QFT3 = (
    "from qiskit import QuantumCircuit\nimport numpy as np\nqc = QuantumCircuit(3)\nqc.h(2)\n"
    "qc.cp(np.pi / 2, 1, 2)\nqc.cp(np.pi / 4, 0, 2)\nqc.h(1)\nqc.cp(np.pi / 2, 0, 1)\nqc.h(0)\nqc.swap(0, 2)\n"
)
QFT3_QASM = (
    'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nh q[2];\ncp(pi/2) q[1],q[2];\ncp(pi/4) q[0],q[2];\n'
    "h q[1];\ncp(pi/2) q[0],q[1];\nh q[0];\nswap q[0],q[2];\n"
)


def _config(prefilter: bool, timeout: float = PY_TIMEOUT) -> RubricConfig:
    return RubricConfig(
        extraction=ExtractionConfig(python_timeout_s=timeout, python_prefilter=prefilter),
        budget=BudgetConfig(time_s=max(20.0 * TIME_SCALE, 2 * timeout)),
    )


def _evaluator(prefilter: bool, timeout: float = PY_TIMEOUT, cache_size: int = 4096) -> RubriQEvaluator:
    return RubriQEvaluator(
        target_algorithm="qft", num_qubits=3, config=_config(prefilter, timeout), cache_size=cache_size
    )


def _fenced(code: str) -> str:
    return "```python\n" + code + "\n```"


@pytest.fixture(scope="module")
def honest_reward() -> float:
    """QFT-3 scored from QASM in this process: no sandbox involved."""
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=3, config=_config(True)).evaluate(QFT3_QASM)
    assert result.error is None and result.reward > 0.5, result.error
    return result.reward


def _assert_next_honest_is_exact(prefilter: bool, honest_reward: float) -> None:
    after = _evaluator(prefilter, cache_size=0).evaluate(_fenced(QFT3))
    assert after.error is None and after.sandbox == {"missing": {}}, after.to_dict()
    assert after.reward == pytest.approx(honest_reward, abs=1e-12)


def _alive_zygotes() -> set[int]:
    get_pool().ensure_started()
    return _zygote_pids()


def _assert_zygotes_survived(before: set[int]) -> None:
    after = _zygote_pids()
    assert before <= after, f"the worker(s) {sorted(before - after)} died or were retired"


def _assert_nothing_left_behind() -> None:
    deadline = time.monotonic() + 60  # a bound on a wait, not a speed check: exits early when clean
    while (stray := _stray_processes(_zygote_pids())) and time.monotonic() < deadline:
        time.sleep(0.1)  # paces the poll for stray processes to exit (the deadline bounds it)
    assert not stray, f"processes left behind: {stray}"


def _wait_for_jobs(n: int, threads: list[threading.Thread]) -> None:
    """Until the sandbox pool runs ``n`` jobs at once, or every thread that would start one is done
    (a pre-filtered completion never runs): the moment a test sends its next completion, instead
    of a pause after which the jobs were (on a loaded machine, were not yet) running."""
    deadline = time.monotonic() + 60 * TIME_SCALE
    while get_pool()._running < n and any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        time.sleep(0.01)  # paces the poll of the pool's running jobs (the deadline bounds it)


def _assert_refused_or(result, prefilter: bool, *, ran: str | None = None) -> None:
    assert result.reward == 0.0 and result.error_type is not None, result.to_dict()
    if prefilter:
        assert "pre-filter" in result.error, result.error
    elif ran is not None:
        assert ran in result.error, result.error


# -- 1. no job reads another job's data --------------------------------------------------------
STEAL_REPLY = (
    REACH
    + """
f, found = frame, None
while f is not None:
    for name in ('reply', 'job', 'result'):
        value = f.f_locals.get(name)
        if isinstance(value, dict) and isinstance(value.get('result'), dict) and 'circuit' in value['result']:
            found = value['result']['circuit']
    f = f.f_back
if found is None:
    raise RuntimeError('no previous result in any frame')
from qiskit.circuit.library import get_standard_gate_name_mapping
gates = get_standard_gate_name_mapping()
qc = QuantumCircuit(found['num_qubits'])
for name, qubits, params in found['ops']:
    qc.append(gates[name].base_class(*params) if params else gates[name], qubits)
"""
)


@PREFILTER
def test_a_job_cannot_rebuild_the_previous_jobs_circuit_from_the_workers_frames(prefilter, honest_reward):
    """Issue #25, case 1: the worker's frames held the previous job's reply, so a completion that
    walked f_back to it scored exactly as the previous completion."""
    evaluator = _evaluator(prefilter, cache_size=0)
    first = evaluator.evaluate(_fenced(QFT3))
    assert first.reward == pytest.approx(honest_reward, abs=1e-12)
    stolen = evaluator.evaluate(_fenced(STEAL_REPLY))
    _assert_refused_or(stolen, prefilter, ran="no previous result in any frame")


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _unmatching(text: str) -> str:
    """A regex for ``text`` whose own source does not match it (``ZQ[X]...``), so that the
    scanner's code does not find its own needle."""
    return re.escape(text[:2]) + "[" + re.escape(text[2]) + "]" + re.escape(text[3:])


SCAN = (
    REACH
    + """
re = imp('re')
ctypes = imp('ctypes')
time = imp('time')
time.sleep(WAIT_S)  # paces the scan: the honest completion runs in the meantime (hostile-first)
own = OWN_MARKER
patterns = {name: re.compile(p) for name, p in PATTERNS.items()}
counts = dict.fromkeys(patterns, 0)
regions, total = [], 0
for line in bi['open']('/proc/self/smaps').read().splitlines():
    parts = line.split()
    if '-' in parts[0] and len(parts) >= 5:
        regions.append([parts[0], parts[1], 0])
    elif parts[0] == 'Rss:':
        regions[-1][2] = int(parts[1])
for span, perms, rss in regions:
    if not perms.startswith('rw') or rss == 0:
        continue
    lo, hi = (int(x, 16) for x in span.split('-'))
    pos = lo
    while pos < hi:
        step = min(hi - pos, 1 << 22)
        chunk = ctypes.string_at(pos, min(step + 64, hi - pos))
        total += len(chunk)
        for name, p in patterns.items():
            counts[name] += len(p.findall(chunk))
        pos += step
raise RuntimeError('scan ' + ' '.join(f'{k}={v}' for k, v in counts.items()) + f' bytes={total}')
"""
)


@PREFILTER
@pytest.mark.parametrize("order", ["honest-first", "hostile-first"])
def test_no_job_finds_any_byte_of_another_jobs_text_circuit_or_nonce_in_its_memory(
    prefilter, order, honest_reward, monkeypatch
):
    """Issue #25, case 1: job B reads its whole writable memory (/proc/self/smaps regions, read
    directly: /proc/self/mem belongs to root once the child changed its ids) for job A's text (a
    random marker in a comment), A's circuit (a random angle, as text and as an IEEE double) and
    any nonce (the pool's nonces are made recognisable for this test): A honest and B hostile,
    with A finished before B starts and with A running while B waits.  B's own marker must be
    found (the scan works)."""
    rng = random.Random()
    marker, own = "ZQX" + _digits(rng, 20), "ZQY" + _digits(rng, 20)
    angle = rng.uniform(0.1, 0.9)
    monkeypatch.setattr(pool_module.secrets, "token_hex", lambda n=16: "ZQN" + _digits(rng, 2 * n - 3))
    patterns = {
        "own": _unmatching(own).encode(),
        "text": _unmatching(marker).encode(),
        "angle": _unmatching(repr(angle)).encode(),
        "double": "".join(f"\\x{b:02x}" for b in struct.pack("<d", angle)).encode(),
        "nonce": rb"ZQ[N][0-9]{29}",
    }
    honest = f"{QFT3}# {marker}\nqc.rz({angle!r}, 0)\n"
    scanner = (
        SCAN.replace("WAIT_S", str(1.5 * TIME_SCALE) if order == "hostile-first" else "0")
        .replace("OWN_MARKER", repr(own))
        .replace("PATTERNS", repr(patterns))
    )
    evaluator = _evaluator(prefilter, timeout=30.0 * TIME_SCALE, cache_size=0)
    if order == "honest-first":
        assert evaluator.evaluate(_fenced(honest)).error is None
        result = evaluator.evaluate(_fenced(scanner))
    else:
        box: dict = {}
        thread = threading.Thread(target=lambda: box.setdefault("r", evaluator.evaluate(_fenced(scanner))))
        thread.start()
        _wait_for_jobs(1, [thread])  # the scanner runs (or was pre-filtered): the honest one comes after
        assert evaluator.evaluate(_fenced(honest)).error is None
        thread.join(60 * TIME_SCALE)
        result = box["r"]
    _assert_refused_or(result, prefilter)
    if not prefilter:
        found = dict(re.findall(r"(\w+)=(\d+)", result.error.split("scan ", 1)[-1]))
        assert int(found.get("bytes", 0)) > 1 << 20 and int(found["own"]) >= 1, result.error
        assert {k: int(found[k]) for k in ("text", "angle", "double", "nonce")} == dict.fromkeys(
            ("text", "angle", "double", "nonce"), 0
        ), result.error
    _assert_next_honest_is_exact(prefilter, honest_reward)


# -- 2.-4. the worker survives any bytes a completion writes; only the sandbox reports itself -----
def _write_attack(data_expr: str) -> str:
    return REACH + f"DATA = {data_expr}\n" + WRITE_ALL


DEEP = {
    "depth-100000": "('{\"x\": ' + '[' * 100000 + ']' * 100000 + '}\\n').encode()",
    "depth-985": "('{\"error\": \"e\", \"x\": ' + '[' * 985 + ']' * 985 + '}\\n').encode()",
    "depth-985-in-circuit": (
        '(\'{"circuit": {"num_qubits": 1, "ops": [["h", [0], []]], "x": \' + \'[\' * 985 + \']\' * 985 + \'}}\\n\')'
        ".encode()"
    ),
}


@PREFILTER
@pytest.mark.parametrize("case", list(DEEP))
def test_deeply_nested_json_on_the_result_pipe_is_that_jobs_own_parse_error(prefilter, case, honest_reward):
    """Issue #25, case 2: a 100,000-deep line crashed the worker (RecursionError); at depth 985
    the worker survived but the parent's frame reader raised and retired a healthy worker."""
    before = _alive_zygotes()
    result = _evaluator(prefilter).evaluate(_fenced(_write_attack(DEEP[case])))
    _assert_refused_or(result, prefilter, ran="malformed")
    assert result.error_type == "parse" and "Traceback" not in result.error, result.to_dict()
    _assert_zygotes_survived(before)
    _assert_next_honest_is_exact(prefilter, honest_reward)


FORGED = {
    "setup-error-200k": "('{\"setup_error\": \"isolation incomplete: seccomp: ' + 'x' * 200000 + '\"}\\n').encode()",
    "facts-then-setup-error": (
        '(\'{"facts": {}, "missing": {}}\\n{"setup_error": "isolation incomplete: seccomp: \' + \'x\' * 200000'
        " + '\"}\\n').encode()"
    ),
    "status-sandbox": '(\'{"status": "sandbox", "error": "\' + \'x\' * 200000 + \'"}\\n\').encode()',
    "error-200k": "('{\"error\": \"isolation incomplete: seccomp: ' + 'x' * 200000 + '\"}\\n').encode()",
}


@PREFILTER
@pytest.mark.parametrize("case", list(FORGED))
def test_a_completion_cannot_forge_a_sandbox_failure(prefilter, case, honest_reward):
    """Issue #25, case 3: a completion's own {"setup_error": ...} line was reported as
    error_type="sandbox" with its 200,246-character text.  Whatever the completion writes is at
    most a parse error of its own, with at most 300 characters of its text (SECURITY.md)."""
    before = _alive_zygotes()
    result = _evaluator(prefilter).evaluate(_fenced(_write_attack(FORGED[case])))
    _assert_refused_or(result, prefilter)
    assert result.error_type == "parse", result.to_dict()
    assert result.error.count("x") <= 300 and len(result.error) < 1000, len(result.error)
    _assert_zygotes_survived(before)
    _assert_next_honest_is_exact(prefilter, honest_reward)


@PREFILTER
@pytest.mark.parametrize("key", ["setup_error", "error"])
def test_a_line_that_grows_when_reencoded_stays_that_jobs_error(prefilter, key, honest_reward):
    """Issue #25, case 4: 450,000 'e-acute' (2 bytes each, 6 once JSON-escaped) in a setup_error
    line became a 2.7 MB frame that the parent refused by killing the worker."""
    before = _alive_zygotes()
    attack = _write_attack(f"('{{\"{key}\": \"' + '\\u00e9' * 450000 + '\"}}\\n').encode()")
    result = _evaluator(prefilter).evaluate(_fenced(attack))
    _assert_refused_or(result, prefilter)
    assert result.error_type == "parse" and len(result.error) < 1000, result.to_dict()
    _assert_zygotes_survived(before)
    _assert_next_honest_is_exact(prefilter, honest_reward)


# -- 5. busy is not broken -------------------------------------------------------------------------
SPINNER = "from qiskit import QuantumCircuit\nx = bytearray(700 * 2**20)\nwhile True:\n    pass\n"


@PREFILTER
def test_two_spinners_do_not_starve_an_honest_concurrent_completion(prefilter, honest_reward):
    """Issue #25, case 5: two completions that allocate 700 MB and spin, then an honest QFT-3
    0.05 s later on the same evaluator: the honest one got reward 0, error_type="sandbox" ("no
    sandbox worker became free") and that result was cached for its text.  It must get its
    exact reward, or a budget error that is not cached and succeeds on retry."""
    evaluator = _evaluator(prefilter)
    results: dict[str, object] = {}
    spinners = [
        threading.Thread(
            target=lambda i=i: results.setdefault(f"spin{i}", evaluator.evaluate(_fenced(SPINNER + f"# {i}")))
        )
        for i in range(2)
    ]
    for t in spinners:
        t.start()
    _wait_for_jobs(2, spinners)  # both spinners hold their slots (or were pre-filtered)
    honest = evaluator.evaluate(_fenced(QFT3))
    for t in spinners:
        t.join(60 * TIME_SCALE)
    if honest.error_type == "budget":
        assert _fenced(QFT3) not in evaluator._cache
        honest = evaluator.evaluate(_fenced(QFT3))
    assert honest.error is None, honest.to_dict()
    assert honest.reward == pytest.approx(honest_reward, abs=1e-12)
    for i in range(2):  # the spinners ran out of their own time: a budget error, not cached either
        spin = results[f"spin{i}"]
        assert spin.reward == 0.0 and spin.error_type == "budget", spin.to_dict()  # type: ignore[attr-defined]


def _swap_pool(pool):
    saved = (pool_module._POOL, pool_module._POOL_PID)
    pool_module._POOL, pool_module._POOL_PID = pool, os.getpid()
    return saved


def test_waiting_for_a_worker_is_a_budget_error_that_is_not_cached(honest_reward):
    """A pool with room for one job: while a spinner (4 s) holds it, an honest completion (1.5 s)
    waits its whole time and gets error_type="budget" (not "sandbox"); nothing is cached, and the
    same text on the same evaluator gets its exact reward once the spinner is done."""
    small = pool_module.SandboxPool(1, max_jobs=1)
    saved = _swap_pool(small)
    try:
        small.ensure_started()
        spin = threading.Thread(target=lambda: _evaluator(True, timeout=4.0 * TIME_SCALE).evaluate(_fenced(SPINNER)))
        spin.start()
        deadline = time.monotonic() + 60  # a bound on the wait, not a speed check
        while small._running < 1 and time.monotonic() < deadline:  # the spinner holds the one slot
            time.sleep(0.02)  # paces the poll of the slot (the deadline bounds it)
        assert small._running == 1
        evaluator = _evaluator(True, timeout=1.5 * TIME_SCALE)
        waited = evaluator.evaluate(_fenced(QFT3))
        assert waited.error_type == "budget" and "waiting" in waited.error, waited.to_dict()
        assert _fenced(QFT3) not in evaluator._cache
        spin.join(30 * TIME_SCALE)
        again = evaluator.evaluate(_fenced(QFT3))
        assert again.error is None and again.reward == pytest.approx(honest_reward, abs=1e-12)
        assert evaluator.stats["text_cache_hits"] == 0
    finally:
        small.close()
        pool_module._POOL, pool_module._POOL_PID = saved


def test_a_sandbox_failure_is_not_cached(honest_reward):
    """A worker that cannot start gives error_type="sandbox"; once the sandbox works again the
    same text on the same evaluator is scored (the failure was not remembered for that text)."""
    import sys

    broken = pool_module.SandboxPool(1, command=(sys.executable, "-c", "raise SystemExit('no')"), startup_timeout=30)
    saved = _swap_pool(broken)
    evaluator = _evaluator(True)
    try:
        failed = evaluator.evaluate(_fenced(QFT3))
        assert failed.error_type == "sandbox", failed.to_dict()
    finally:
        broken.close()
        pool_module._POOL, pool_module._POOL_PID = saved
    assert _fenced(QFT3) not in evaluator._cache
    again = evaluator.evaluate(_fenced(QFT3))
    assert again.error is None and again.reward == pytest.approx(honest_reward, abs=1e-12)


# -- the pre-filter refuses frame and code introspection ---------------------------------------------
INTROSPECTION = [
    "g = (x for x in [1])\nf = g.gi_frame",
    "def f():\n    yield 1\nc = f().gi_code",
    "import sys\nx = 1",  # already refused (control)
    "f = tb.tb_frame",
    "f = frame.f_back",
    "g = frame.f_globals",
    "l = frame.f_locals",
    "b = frame.f_builtins",
    "c = frame.f_code",
    "c = coro.cr_frame",
    "a = agen.ag_frame",
    "n = tb.tb_next",
    "k = fn.co_consts",
    "y = gen.gi_yieldfrom",
    "w = coro.cr_await",
]


@pytest.mark.parametrize("code", INTROSPECTION)
def test_the_prefilter_refuses_frame_and_code_introspection(code):
    with pytest.raises(GuardError):
        check_code(code)


def test_the_prefilter_still_accepts_a_variable_named_frame():
    check_code(QFT3)
    check_code("from qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nframe = 3\nqc.h(0)\nqc.cx(0, 1)")


# -- fuzz of the result pipe ------------------------------------------------------------------------
def _payloads():
    """What a completion might write on its result pipe: raw bytes, JSON-like documents of the
    worker's own keys with hostile values, deep nesting and large repeats (expanded in the
    child, so the completion's code stays small)."""
    keys = st.sampled_from(["circuit", "error", "setup_error", "facts", "missing", "status", "nonce", "result", "x"])
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=40),
    )
    docs = st.recursive(
        scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(keys, c, max_size=4), max_leaves=12
    )
    as_json = st.builds(lambda d: json.dumps({"k": d}).replace('"k"', '"circuit"', 1).encode() + b"\n", docs)
    top = st.dictionaries(keys, docs, max_size=4).map(lambda d: json.dumps(d).encode() + b"\n")
    raw = st.binary(max_size=300)
    repeat = st.tuples(
        st.binary(max_size=20),
        st.sampled_from([b"[", b'{"a":', b"\\u00e9", b"\xc3\xa9", b"\n", b"9"]),
        st.integers(0, 300_000),
    )
    return st.one_of(
        as_json.map(lambda b: ("bytes", b)),
        top.map(lambda b: ("bytes", b)),
        raw.map(lambda b: ("bytes", b)),
        repeat.map(lambda t: ("repeat", t)),
    )


def _payload_expr(payload) -> str:
    kind, value = payload
    if kind == "bytes":
        return repr(value)
    prefix, unit, count = value
    return f"{prefix!r} + {unit!r} * {count}"


_FUZZ_EVALUATOR: dict = {}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(_payloads())
def test_any_bytes_on_the_result_pipe_leave_the_worker_alive_and_the_next_reward_exact(payload):
    """Hypothesis writes arbitrary bytes on the result pipe (pre-filter off, so the write runs):
    the completion gets reward 0 with a parse error (or its own honestly scored circuit), the
    worker that ran it is not replaced, and the next honest completion is exact."""
    if "ev" not in _FUZZ_EVALUATOR:
        _FUZZ_EVALUATOR["ev"] = _evaluator(False, cache_size=0)
        _FUZZ_EVALUATOR["honest"] = (
            RubriQEvaluator(target_algorithm="qft", num_qubits=3, config=_config(True)).evaluate(QFT3_QASM).reward
        )
    evaluator = _FUZZ_EVALUATOR["ev"]
    before = _alive_zygotes()
    result = evaluator.evaluate(_fenced(_write_attack(_payload_expr(payload))))
    assert result.error_type in (None, "parse"), result.to_dict()
    if result.error_type is not None:
        assert result.reward == 0.0 and len(result.error) < 1000
    _assert_zygotes_survived(before)
    after = evaluator.evaluate(_fenced(QFT3 + f"# {random.random()}"))
    assert after.error is None and after.reward == pytest.approx(_FUZZ_EVALUATOR["honest"], abs=1e-12)
    _assert_nothing_left_behind()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.binary(max_size=2000),
        st.builds(lambda u, n: u * n, st.sampled_from([b"[", b"{", b'{"a":', b"\\"]), st.integers(0, 20000)),
    )
)
def test_the_result_parser_and_the_frame_reader_only_raise_their_own_errors(data):
    """Pure parts of the pipe, on arbitrary bytes: the zygote's result parser never raises and
    keeps at most 300 characters of an error; the parent's frame reader raises only FrameError."""
    from rubriq.extract.sandbox.protocol import FrameError, parse_result, read_frame

    result, why = parse_result(data)
    assert result is None or why is None
    if result is not None:
        assert set(result) in ({"circuit"}, {"error"}) and len(result.get("error", "")) <= 300
        json.dumps(result).encode()  # re-encodable, lone surrogates gone
    r, w = os.pipe()
    try:
        os.write(w, struct.pack(">I", len(data)) + data[:60000])
        os.close(w)
        w = -1
        try:
            frame = read_frame(r, time.monotonic() + 1.0, 1 << 20)
        except FrameError:
            frame = None
        assert frame is None or isinstance(frame, dict)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


@PREFILTER
def test_the_host_kernel_command_line_and_network_devices_are_not_visible(prefilter):
    """Residual channels of issue #25: /proc/cmdline is covered, and the job's minimal root has no
    /sys at all (before: a sysfs of the job's own network namespace, listing only its loopback),
    so neither names the host's boot options or network devices."""
    probe = (
        REACH
        + "cmdline = bi['open']('/proc/cmdline').read()\n"
        + "raise RuntimeError(f'cmdline={len(cmdline)} sys={os.path.exists(\"/sys\")}')\n"
    )
    result = _evaluator(prefilter).evaluate(_fenced(probe))
    _assert_refused_or(result, prefilter, ran="cmdline=0 sys=False")


def test_a_running_job_dies_with_its_worker():
    """A sleeping completion must not outlive its zygote (killed by the parent, e.g. retired).
    Before, the supervisor's PR_SET_PDEATHSIG was cleared when it took the mapped uid (as root),
    so supervisor, init and child kept running after the zygote died."""
    import psutil

    from rubriq.extract.sandbox import PythonExecutionError, SandboxUnavailable, run_python

    pool = get_pool()
    pool.ensure_started()
    box: dict = {}

    def sleeper() -> None:
        try:
            run_python(
                REACH + f"imp('time').sleep({30 * TIME_SCALE})\n",
                ExtractionConfig(python_timeout_s=30 * TIME_SCALE, python_prefilter=False),
            )
        except (PythonExecutionError, SandboxUnavailable) as exc:
            box["error"] = exc

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def job_processes() -> list[int]:
        idle, found = _idle_sandbox_processes(), []
        for z in _zygote_pids():
            try:
                found += [c.pid for c in psutil.Process(z).children(recursive=True) if c.pid not in idle]
            except psutil.NoSuchProcess:
                pass
        return found

    thread = threading.Thread(target=sleeper)
    thread.start()
    deadline = time.monotonic() + 20 * TIME_SCALE
    job: list[int] = []
    while len(job) < 3 and time.monotonic() < deadline:  # S, I and K are up
        time.sleep(0.1)  # paces the poll for the job's processes (the deadline bounds it)
        job = job_processes()
    assert len(job) >= 3, job
    for z in _zygote_pids():
        os.kill(z, 9)
    thread.join(30 * TIME_SCALE)
    assert isinstance(box.get("error"), SandboxUnavailable), box
    deadline = time.monotonic() + 60  # a bound on a wait, not a speed check: exits early when clean
    # running(): a process that exits between the check and the read of its status is not running
    while (alive := [p for p in job if running(p)]) and (time.monotonic() < deadline):
        time.sleep(0.1)  # paces the poll for the job's processes to exit (the deadline bounds it)
    assert not alive, f"the job's processes outlived their zygote: {alive}"
