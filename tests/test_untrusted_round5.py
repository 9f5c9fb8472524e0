"""Untrusted input, round 5 (issue 49): each finding through the evaluator and, for 1-4, through a
real ``rubriq serve`` on 127.0.0.1 that the tests start and stop.

1. hardware qubits ``$N`` and 2. classical bits are bounded before the parser allocates anything:
   one bound on every size a QASM text declares or references (``error_type="limit"``), the
   same in-process, in the server and through the adapters; a completion of at most 100 bytes
   cannot raise the scoring process's peak RSS by 100 MB; a parse that outlives the evaluation's
   deadline ends as ``budget``;
3. no transient result (``budget``) is cached, by ``evaluate``, ``results``, ``submit``, the
   server or the remote client's cache: the same text is scored again;
4. every malformed request is a 4xx with a one-line reason, never a 500 or a traceback (a
   hypothesis fuzz over the request schema, bounded in examples);
5. the pre-filter refuses every deserialization entry point reachable from the allowed modules
   (derived by a walk), and bytes literals get the checks string literals get;
minor: a deadline check between fenced blocks; RLIMIT_SIGPENDING per job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rubriq.budget import BudgetExceeded, Deadline
from rubriq.config import BudgetConfig, ExtractionConfig, RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.evaluator.batch import BatchScorer
from rubriq.extract import cascade
from rubriq.extract import qasm as qasm_module
from rubriq.extract.qasm import QASMError, load_qasm
from rubriq.extract.sandbox import pool as pool_module

ROOT = Path(__file__).resolve().parents[1]
TIME_SCALE = float(os.environ.get("RUBRIQ_TEST_TIME_SCALE", "1"))
QFT3_SPEC = '{"algorithm": "qft", "do_swaps": true, "inverse": false, "num_qubits": 3}'
QFT3_QASM = (
    'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nh q[2];\ncp(pi/2) q[1],q[2];\ncp(pi/4) q[0],q[2];\n'
    "h q[1];\ncp(pi/2) q[0],q[1];\nh q[0];\nswap q[0],q[2];\n"
)
QFT3_PY = (
    "```python\nfrom qiskit import QuantumCircuit\nimport numpy as np\nqc = QuantumCircuit(3)\nqc.h(2)\n"
    "qc.cp(np.pi / 2, 1, 2)\nqc.cp(np.pi / 4, 0, 2)\nqc.h(1)\nqc.cp(np.pi / 2, 0, 1)\nqc.h(0)\nqc.swap(0, 2)\n```"
)
SPINNER = "```python\nfrom qiskit import QuantumCircuit\nqc = QuantumCircuit(1)\nwhile True:\n    pass\n```"
"""Runs until its sandbox deadline: a ``budget`` result on any machine."""

# -- findings 1 and 2: sizes ---------------------------------------------------------------------
H3 = 'OPENQASM 3.0; include "stdgates.inc"; '
H2 = 'OPENQASM 2.0; include "qelib1.inc"; '
SHORT_ATTACKS = {
    "hardware qubit $1500000": H3 + "h $1500000;",
    "creg c[3000000]": H2 + "qreg q[3]; creg c[3000000]; h q[0];",
    "bit[3000000]": H3 + "qubit[3] q; bit[3000000] c; h q[0];",
    "bit[300000] with an initialiser": H3 + 'qubit[2] q; bit[300000] c = "0";',
    "measurement target c[2000000]": H3 + "qubit[1] q; bit[1] c; c[2000000] = measure q[0];",
    "nested loops (16.7M statements)": "OPENQASM 3.0; qubit q; for i in [0:4095] { for j in [0:4095] { h q; } }",
    "broadcast in a loop": "OPENQASM 3.0; qubit[64] q; for i in [0:4095] { h q; }",
    "register range 0:2000000": H3 + "qubit[2] q; h q[0:2000000];",
}
"""Completions of at most 100 bytes that, before round 5, made the importer allocate up to GBs
(or spend minutes: the nested loops were 84 s and 1.6 GB)."""


def test_the_short_attacks_are_short():
    assert all(len(text.encode()) <= 100 for text in SHORT_ATTACKS.values()), {
        k: len(v) for k, v in SHORT_ATTACKS.items()
    }


@pytest.fixture(scope="module")
def qft3_reward() -> float:
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=3).evaluate(QFT3_QASM)
    assert result.error is None and result.reward > 0.5, result.error
    return result.reward


@pytest.mark.parametrize("case", sorted(SHORT_ATTACKS))
def test_every_declared_or_referenced_size_is_bounded_before_parsing(case, monkeypatch):
    """Each short attack is ``error_type="limit"`` with the cap it passed named, and the parser
    is never called (the bound holds before anything is allocated)."""
    calls = []
    real = qasm_module._parse
    monkeypatch.setattr(qasm_module, "_parse", lambda *a: calls.append(a) or real(*a))
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=3).evaluate(SHORT_ATTACKS[case])
    assert result.reward == 0.0 and result.error_type == "limit", result.to_dict()
    assert "cap" in result.error or "larger than" in result.error, result.error
    assert calls == [], f"the parser ran on {case!r}"


def test_honest_programs_within_the_caps_score_as_before(qft3_reward):
    """Classical registers, measurements and hardware qubits that honest programs use keep their
    exact reward (the QFT-3 written three ways scores what the plain QASM scores)."""
    evaluator = RubriQEvaluator(target_algorithm="qft", num_qubits=3)
    measured = QFT3_QASM + "creg c[3];\nmeasure q -> c;\n"
    hardware = (
        H3 + "h $2; cp(pi/2) $1, $2; cp(pi/4) $0, $2; h $1; cp(pi/2) $0, $1; h $0; swap $0, $2; bit[3] c; "
        "c[0] = measure $0;"
    )
    looped = H3 + "qubit[3] q; bit[3] c; h q[2]; cp(pi/2) q[1], q[2]; cp(pi/4) q[0], q[2]; h q[1]; "
    looped += "cp(pi/2) q[0], q[1]; h q[0]; swap q[0], q[2]; for i in [0:2] { c[i] = measure q[i]; }"
    for text in (measured, hardware, looped):
        result = evaluator.evaluate(text)
        assert result.error is None, result.error
        assert result.reward == pytest.approx(qft3_reward, abs=1e-12)


def test_each_bound_is_a_setting_with_a_default():
    """The caps are extraction settings: at the edge a program loads, one past it is ``limit``."""
    defaults = ExtractionConfig()
    assert (defaults.max_qubits, defaults.max_clbits, defaults.max_gates) == (64, 1024, 200_000)

    def error_type(text: str, **caps: int) -> str | None:
        cfg = RubricConfig(extraction=ExtractionConfig(**caps))
        return RubriQEvaluator(target_algorithm="qft", num_qubits=1, config=cfg).evaluate(text).error_type

    assert error_type(H3 + "h $3;", max_qubits=4) is None
    assert error_type(H3 + "h $4;", max_qubits=4) == "limit"
    assert error_type(H2 + "qreg q[1]; creg c[8]; h q[0];", max_clbits=8) is None
    assert error_type(H2 + "qreg q[1]; creg c[9]; h q[0];", max_clbits=8) == "limit"
    assert error_type(H3 + "qubit[1] q; bit[9] c; h q[0];", max_clbits=8) == "limit"
    broadcast = H2 + "qreg q[8]; " + "h q; " * 10  # 10 statements + 10 broadcasts of 8 (+ the declaration)
    assert error_type(broadcast, max_gates=100) is None
    assert error_type(broadcast, max_gates=80) == "limit"


def test_a_size_computed_by_an_expression_is_refused():
    """A register size that is not an integer literal cannot be bounded before parsing."""
    with pytest.raises(QASMError, match="integer literal"):
        load_qasm(H3 + "const uint n = 3000000; bit[n] c;")
    with pytest.raises(QASMError, match="integer literal"):
        load_qasm(H3 + "qubit[2*32] q;")


_SPIN_UNTIL = threading.Event()


def _endless_parse(*_args):
    """A parse that never ends by itself (bounded here by the test: 60 s, or the event)."""
    end = time.monotonic() + 60
    while not _SPIN_UNTIL.is_set() and time.monotonic() < end:
        pass
    raise RuntimeError("the parse was not stopped at the deadline")


def test_a_parse_that_outlives_the_budget_ends_as_budget(monkeypatch):
    """The evaluation's deadline holds while the parser runs (Qiskit's OpenQASM 3 importer is
    pure Python and takes no deadline): the parse is stopped and the result is ``budget``."""
    monkeypatch.setattr(qasm_module, "_parse", _endless_parse)
    cfg = RubricConfig(budget=BudgetConfig(time_s=1.0))
    evaluator = RubriQEvaluator(target_algorithm="qft", num_qubits=1, config=cfg)
    box: list = []
    worker = threading.Thread(target=lambda: box.append(evaluator.evaluate(H3 + "qubit q; h q;")), daemon=True)
    _SPIN_UNTIL.clear()
    worker.start()
    worker.join(30 * TIME_SCALE)
    _SPIN_UNTIL.set()
    worker.join(60)
    assert box, "evaluate did not return"
    assert box[0].error_type == "budget" and "QASM parsing" in box[0].error, box[0].to_dict()


def test_a_passed_deadline_stops_before_parsing_and_leaves_nothing_pending(qft3_reward):
    """A 60 KB OpenQASM 3 program under a deadline that has passed: BudgetExceeded before the
    parser starts; afterwards nothing is pending in the thread, and the next parse (without a
    deadline) and score are exact."""
    big = H3 + "qubit[8] q;\n" + "".join(f"rz(0.{i}) q[{i % 8}];\n" for i in range(3600))
    with pytest.raises(BudgetExceeded, match="QASM parsing"):
        load_qasm(big, deadline=Deadline(0.0))
    assert load_qasm(big, deadline=Deadline(600)).size() == 3600
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=3).evaluate(QFT3_QASM)
    assert result.reward == pytest.approx(qft3_reward, abs=1e-12)


PEAK_SCRIPT = """
import json, sys
from rubriq.evaluator import RubriQEvaluator
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
attacks, honest = json.load(sys.stdin)
ev = RubriQEvaluator(target_algorithm="qft", num_qubits=3)
warm = ev.evaluate(honest)
assert warm.error is None, warm.error
before = hwm()
out = {}
for name, text in attacks.items():
    r = ev.evaluate(text)
    out[name] = [r.error_type, hwm() - before]
print(json.dumps({"before_mb": before, "results": out}))
"""


def _load_note() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} on {os.cpu_count()} CPUs"


def test_a_100_byte_completion_cannot_raise_the_peak_rss_by_100_mb():
    """Peak RSS (VmHWM) of a fresh scoring process, after an honest completion warmed it up, rises
    by less than 100 MB over every short attack (before: 1.3 GB for ``h $1500000;``)."""
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT],
        input=json.dumps([SHORT_ATTACKS, QFT3_QASM]),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    grown = {name: round(mb, 1) for name, (_, mb) in report["results"].items()}
    assert max(grown.values()) < 100, (
        f"peak RSS growth (MB) over {report['before_mb']:.0f} MB: {grown} ({_load_note()})"
    )
    assert {name: kind for name, (kind, _) in report["results"].items()} == dict.fromkeys(SHORT_ATTACKS, "limit")


# -- finding 3: no transient result cached -----------------------------------------------------------
def _swap_pool(pool):
    saved = (pool_module._POOL, pool_module._POOL_PID)
    pool_module._POOL, pool_module._POOL_PID = pool, os.getpid()
    return saved


def _spin_config(timeout: float) -> RubricConfig:
    return RubricConfig(
        extraction=ExtractionConfig(python_timeout_s=timeout), budget=BudgetConfig(time_s=max(20.0, 2 * timeout))
    )


@pytest.mark.parametrize("path", ["submit", "results", "evaluate"])
def test_a_budget_result_is_not_cached_and_the_same_text_is_scored_again(path, qft3_reward):
    """A sandbox with room for one job: while a spinner holds it, an honest QFT-3 in Python waits
    its whole time (``budget``); once the spinner is done the same text, on the same scorer, is
    scored again and gets the exact reward of its QASM twin.  Before: ``submit`` stored the
    budget result and answered it for that text from then on."""
    small = pool_module.SandboxPool(1, max_jobs=1)
    saved = _swap_pool(small)
    scorer = BatchScorer(_spin_config(1.5 * TIME_SCALE), workers=1)

    def score():
        if path == "submit":
            return scorer.submit(QFT3_PY, QFT3_SPEC).result(timeout=120)
        if path == "results":
            return scorer.results([QFT3_PY], [QFT3_SPEC])[0]
        return scorer.evaluator(QFT3_SPEC).evaluate(QFT3_PY)

    try:
        small.ensure_started()
        spinner = RubriQEvaluator(target_algorithm="qft", num_qubits=1, config=_spin_config(4.0 * TIME_SCALE))
        spin = threading.Thread(target=lambda: spinner.evaluate(SPINNER))
        spin.start()
        deadline = time.monotonic() + 60  # a bound on the wait, not a speed check
        while small._running < 1 and time.monotonic() < deadline:
            time.sleep(0.02)  # paces the poll for the spinner to occupy the one worker (the deadline bounds the wait)
        assert small._running == 1
        waited = score()
        assert waited.error_type == "budget", waited.to_dict()
        spin.join(60 * TIME_SCALE)
        assert not spin.is_alive()
        again = score()
        assert again.error is None, again.to_dict()
        assert again.reward == pytest.approx(qft3_reward, abs=1e-12)
    finally:
        scorer.close()
        small.close()
        pool_module._POOL, pool_module._POOL_PID = saved


# -- through the server (findings 1-4) -----------------------------------------------------------
httpx = pytest.importorskip("httpx")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from tests.serve_helpers import Server

    folder = tmp_path_factory.mktemp("round5")
    config = folder / "rubric.yaml"
    config.write_text(f"extraction:\n  python_timeout_s: {2.0 * TIME_SCALE}\n")
    with Server("--workers", "1", "--max-body-mb", "2", "--config", str(config), log=folder / "server.log") as s:
        yield s


def _post(server, body, timeout: float = 300):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        server.url + "/v1/score", content=content, headers={"content-type": "application/json"}, timeout=timeout
    )


def _hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_the_server_bounds_sizes_like_the_evaluator_and_so_do_the_adapters(server):
    """Every short attack through ``rubriq serve`` (one scoring thread: the server process scores):
    ``limit``, the answer equal to in-process scoring and to both adapters' (in-process and
    remote backends), and the server's peak RSS grows by less than 100 MB."""
    from rubriq.integrations.backend import LocalBackend, RemoteBackend
    from tests.serve_helpers import differences, reference

    warm = _post(server, {"items": [{"completion": QFT3_QASM, "target": QFT3_SPEC}]})
    assert warm.status_code == 200 and warm.json()["results"][0]["error"] is None
    before = _hwm_mb(server.proc.pid)
    texts = list(SHORT_ATTACKS.values())
    answer = _post(server, {"items": [{"completion": t, "target": QFT3_SPEC} for t in texts]})
    grown = _hwm_mb(server.proc.pid) - before
    assert answer.status_code == 200, answer.text
    served = answer.json()["results"]
    assert grown < 100, f"server peak RSS +{grown:.0f} MB over {before:.0f} MB ({_load_note()})"
    local, remote = LocalBackend(), RemoteBackend(server.url)
    try:
        for via in (local.score(texts, [QFT3_SPEC] * len(texts)), remote.score(texts, [QFT3_SPEC] * len(texts))):
            assert via == served
    finally:
        local.close()
        remote.close()
    for text, result in zip(texts, served, strict=True):
        assert result["error_type"] == "limit" and result["reward"] == 0.0, result
        assert differences(result, reference(text, QFT3_SPEC)) == []


def _counters(server) -> tuple[int, float]:
    scored = httpx.get(server.url + "/health", timeout=30).json()["scored"]
    metrics = httpx.get(server.url + "/metrics", timeout=30).text
    hits = sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("rubriq_cache_hits_total"))
    return scored, hits


def test_the_server_and_the_remote_client_score_a_budget_result_again(server):
    """A completion that runs until its deadline is ``budget`` each time it is sent: the server
    scores it again (its count of scored items grows, its cache hits do not) and the TRL adapter
    over the server asks again (one more request), where before both answered the first budget
    result from their caches."""
    from rubriq.reward import RemoteRubricRewards

    text = SPINNER + "\n<!-- round 5: server -->"
    first_scored, first_hits = _counters(server)
    for attempt in (1, 2):
        answer = _post(server, {"items": [{"completion": text, "target": QFT3_SPEC}]})
        assert answer.status_code == 200 and answer.json()["results"][0]["error_type"] == "budget", answer.text
        scored, hits = _counters(server)
        assert (scored - first_scored, hits - first_hits) == (attempt, 0)
    rewards = RemoteRubricRewards(server.url)
    try:
        text = SPINNER + "\n<!-- round 5: client -->"
        assert rewards.client.max_items > 0  # asked once (GET /health), before the count starts
        for _ in range(2):
            sent = rewards.client.stats["requests"]
            result = rewards.results([text], [QFT3_SPEC])[0]
            assert result.error_type == "budget"
            assert rewards.client.stats["requests"] == sent + 1, "the budget answer was taken from the client's cache"
    finally:
        rewards.close()


MALFORMED = {
    "200,000 [": b"[" * 200_000,
    "200,000 { in items": b'{"items": ' + b'{"a": ' * 200_000,
    "a deep target string": json.dumps({"items": [{"completion": "x", "target": "[" * 100_000}]}).encode(),
    "a deep target object": b'{"items": [{"completion": "x", "target": {"algorithm": "qft", "p": '
    + b"[" * 5000
    + b"]" * 5000
    + b"}}]}",
    "a deep rubric": b'{"items": [{"completion": "x", "target": {"algorithm": "qft", "num_qubits": 2}}], '
    b'"rubric": {"weights": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
    "NaN qubits": b'{"items": [{"completion": "x", "target": {"algorithm": "qft", "num_qubits": NaN}}]}',
    "an integer of 5000 digits": b'{"items": [{"completion": "x", "target": {"algorithm": "qft", "num_qubits": '
    + b"9" * 5000
    + b"}}]}",
    "1e308 qubits": b'{"items": [{"completion": "x", "target": {"algorithm": "qft", "num_qubits": 1e308}}]}',
    "UTF-16": json.dumps({"items": []}).encode("utf-16"),
    "a multi-line algorithm name": json.dumps(
        {"items": [{"completion": "x", "target": {"algorithm": "q\nf\nt" * 1000}}]}
    ).encode(),
    "a rubric weight of the wrong type": json.dumps(
        {"items": [{"completion": "x", "target": QFT3_SPEC}], "rubric": {"weights": {"clifford": [1]}}}
    ).encode(),
}


def _assert_4xx_one_line(response, what) -> None:
    assert 400 <= response.status_code < 500, (what, response.status_code, response.text[:300])
    error = response.json()["error"]
    assert "\n" not in error and len(error) <= 400 and "Traceback" not in error, (what, error)


def test_every_malformed_request_is_a_4xx_with_a_one_line_reason(server):
    """Deep nesting (body, target string and object, rubric), NaN, oversized integers, UTF-16,
    values of the wrong type: a 4xx naming the field in one line, no 500 and no traceback in
    the server's log (before: RecursionError, a 500 and a logged traceback per request)."""
    for what, body in MALFORMED.items():
        _assert_4xx_one_line(_post(server, body, timeout=60), what)
    assert "Traceback" not in server.log() and "internal error" not in server.log()


def test_fuzz_the_request_schema_never_gives_a_500(server):
    """Hypothesis over the request schema (valid and broken items, targets, rubrics, and raw
    bytes), bounded in examples: every answer is 200 or a 4xx with a one-line reason, and the
    server logs no traceback."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from rubriq.serve.protocol import REQUEST_SECTIONS
    from rubriq.targets import TARGETS

    leaf = (
        st.none()
        | st.booleans()
        | st.integers(-(10**6), 10**6)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12)
    )
    anything = st.recursive(
        leaf,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=12,
    )
    params = sorted({p for cls in TARGETS.values() for p in cls.parameters})
    target = st.fixed_dictionaries(
        {"algorithm": st.sampled_from(sorted(TARGETS)) | st.text(max_size=8)},
        optional={
            "num_qubits": st.integers(-2, 6) | anything,
            **{p: st.integers(-3, 3) | st.floats(-2, 2) | anything for p in params[:12]},
        },
    )
    target = target | target.map(json.dumps) | anything
    item = st.fixed_dictionaries(
        {"completion": st.text(max_size=60) | anything, "target": target}, optional={"extra": anything}
    )
    section = st.sampled_from([*REQUEST_SECTIONS, "extraction", "budget"]) | st.text(max_size=6)
    rubric = st.dictionaries(
        section, st.dictionaries(st.text(max_size=10), anything, max_size=3) | anything, max_size=3
    )
    request = st.fixed_dictionaries({"items": st.lists(item, max_size=3) | anything}, optional={"rubric": rubric})
    body = (
        (request | anything).map(lambda d: json.dumps(d).encode())
        | st.binary(max_size=64)
        | st.integers(1, 50_000).map(lambda n: b'{"items": ' + b"[" * n)
    )

    @settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(body)
    def check(raw: bytes) -> None:
        response = _post(server, raw, timeout=120)
        if response.status_code != 200:
            _assert_4xx_one_line(response, raw[:200])

    check()
    assert "Traceback" not in server.log() and "internal error" not in server.log()


# -- minor ---------------------------------------------------------------------------------------
def test_fenced_blocks_share_the_evaluation_deadline(monkeypatch):
    """Eight QASM blocks, the first of which uses up the evaluation's time: the extraction stops
    before the second (before: every block was parsed, one after another, past the budget)."""
    deadline = Deadline(600)
    parsed = []

    def slow_block(body, *args):
        parsed.append(body)
        deadline.end = time.monotonic()  # this block took the rest of the budget
        raise QASMError("no circuit here")

    monkeypatch.setattr(cascade, "load_qasm", slow_block)
    text = "".join(f"```qasm\nOPENQASM 2.0; qreg q[1]; h q[0]; // block {i}\n```\n" for i in range(8))
    text = "Here:\n" + text  # no header at the start: the fenced blocks are what is tried
    with pytest.raises(BudgetExceeded):
        cascade.fenced_block(text, ExtractionConfig(), deadline)
    assert len(parsed) == 1, f"{len(parsed)} blocks parsed past the deadline"


def test_a_job_may_queue_only_its_own_few_signals():
    """RLIMIT_SIGPENDING is set per job (before: the host's, 96,369 signals queued by one job)."""
    import resource

    code = (
        "```python\nfrom qiskit import QuantumCircuit\nimport resource\n"
        "raise ValueError('SIGPENDING=%d' % resource.getrlimit(resource.RLIMIT_SIGPENDING)[0])\n```"
    )
    cfg = RubricConfig(extraction=ExtractionConfig(python_prefilter=False))
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=1, config=cfg).evaluate(code)
    assert "SIGPENDING=" in (result.error or ""), result.error
    in_job = int(result.error.split("SIGPENDING=")[1].split(";")[0].split()[0])
    host = resource.getrlimit(resource.RLIMIT_SIGPENDING)[0]
    assert 0 < in_job <= 1024 and (host == resource.RLIM_INFINITY or in_job < host), (in_job, host)
    from rubriq.extract.sandbox.layers import SIGNALS_PER_JOB

    assert in_job == SIGNALS_PER_JOB


# -- finding 5: deserialization ------------------------------------------------------------------
def _pickle_exec(code: str) -> bytes:
    """A protocol-0 pickle that calls builtins.exec(code) when loaded (no newline in ``code``)."""
    assert "\n" not in code
    return b"cbuiltins\nexec\n(V" + code.encode() + b"\ntR."


NP_LOAD_BYPASS = (
    "```python\nfrom qiskit import QuantumCircuit\nimport numpy as np\n"
    "class F:\n"
    "    def __init__(self, data):\n"
    "        self.data, self.pos = data, 0\n"
    "    def read(self, n=-1):\n"
    "        n = len(self.data) - self.pos if n is None or n < 0 else n\n"
    "        out = self.data[self.pos : self.pos + n]\n"
    "        self.pos += len(out)\n"
    "        return out\n"
    "    def readline(self, n=-1):\n"
    "        end = self.data.find(b'\\n', self.pos)\n"
    "        end = len(self.data) if end < 0 else end + 1\n"
    "        return self.read(end - self.pos)\n"
    "    def seek(self, pos, whence=0):\n"
    "        self.pos = pos if whence == 0 else self.pos + pos if whence == 1 else len(self.data) + pos\n"
    "        return self.pos\n"
    "    def tell(self):\n"
    "        return self.pos\n"
    "np.load(F(PAYLOAD), allow_pickle=True)\n"
    "raise ValueError('ROOT=' + ROOT)\n```"
)


@pytest.mark.parametrize("prefilter", [True, False], ids=["prefilter", "no-prefilter"])
def test_the_numpy_pickle_bypass_is_refused_and_the_kernel_holds_behind_it(prefilter):
    """Round 5's bypass: ``np.load`` of a completion-defined file-like object holding a pickle that
    calls ``builtins.exec``.  With the pre-filter on it is refused before a process is spent
    (before: admitted, and exec ran any code); with it off the exec runs, inside the job only:
    the code it runs lists ``/`` and finds only the job's minimal root."""
    # exec runs in np.load's frame, which catches its exceptions: the code leaves what it found in
    # builtins, where the completion's next line reads it
    payload = _pickle_exec("import os, builtins; builtins.ROOT = ','.join(sorted(os.listdir('/')))")
    text = NP_LOAD_BYPASS.replace("PAYLOAD", repr(payload))
    cfg = RubricConfig(extraction=ExtractionConfig(python_prefilter=prefilter))
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=1, config=cfg).evaluate(text)
    assert result.reward == 0.0
    if prefilter:
        assert "pre-filter" in result.error and "'load'" in result.error, result.error
        assert "ROOT=" not in result.error
    else:
        assert "ROOT=" in result.error, result.error  # the pickle ran: the pre-filter was the only thing in its way
        listed = set(result.error.split("ROOT=")[1].split(";")[0].split()[0].strip("'\",").split(","))
        hidden = {"etc", "home", "var", "boot", "mnt", "srv", "opt", "run", "sys"} & set(os.listdir("/"))
        assert hidden and not listed & hidden, (listed, hidden)  # the job's minimal root, not the host's /


def test_bytes_literals_get_the_checks_string_literals_get():
    from rubriq.extract.sandbox.guard import GuardError, check_code

    for literal in ('"__import__"', 'b"__import__"', 'rb"c__builtin__\\neval"'):
        with pytest.raises(GuardError, match="literals containing '__'"):
            check_code(f"x = {literal}\n")
    check_code('x = b"qubits"\n')  # bytes without dunders are fine


def test_the_deserialization_entry_points_are_derived_by_a_walk(monkeypatch):
    """The walk, on a module of its own: a public function that unpickles two calls away, a
    class whose indexing unmarshals, a helper handed on as a value; and not a function that only
    names pickle in a string, nor a private task handed to a pool."""
    import types as pytypes

    from rubriq.extract.sandbox import guard

    source = """
import marshal
import pickle

def _unpickle(data):
    return pickle.loads(data)

def innocent(data):
    return _unpickle(data)

class Table:
    def __getitem__(self, key):
        return marshal.loads(key)

def via_value(data, loader=None):
    return apply(data, pickle.loads)

def apply(data, f):
    return f(data)

def only_a_name():
    return "pickle.loads"

def pool_task(data):
    return submit(_unpickle, data)

def submit(f, data):
    return None
"""
    module = pytypes.ModuleType("rubriq_round5_fake_allowed")
    exec(compile(source, "<round5>", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(guard, "ALLOWED_MODULES", (module.__name__,))
    monkeypatch.setattr(guard, "ALLOWED_SUBPACKAGES", ())
    found = guard.derive_deserialization_names(depth=2)
    assert set(found) == {"innocent", "Table", "via_value"}, found
    assert found["innocent"] == "rubriq_round5_fake_allowed.innocent"


def test_the_derived_names_cover_numpy_and_qpy_and_spare_what_honest_code_calls():
    """On the installed packages: numpy's load (and with it qpy.load, the same name), qpy's
    binary readers, the Solovay-Kitaev approximations' loader and Weyl's from_bytes are refused;
    the names honest circuit code calls are not."""
    from rubriq.extract.sandbox.guard import GuardError, check_code, deserialization_names

    names = deserialization_names()
    assert {"load", "read_circuit", "from_bytes", "load_basic_approximations"} <= names, sorted(names)
    honest = {"run", "result", "get_counts", "h", "cx", "measure", "measure_all", "transpile", "compose", "append"}
    assert not honest & names, sorted(honest & names)
    for code in (
        "from qiskit import qpy\nc = qpy.load(f)\n",
        "from numpy import load\n",
        "from numpy import *\nx = load(f)\n",
    ):
        with pytest.raises(GuardError, match="deserialization entry point"):
            check_code(code)
