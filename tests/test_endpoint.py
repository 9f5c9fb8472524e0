"""``--endpoint``: evaluate, synthesize and the app over a real OpenAI-compatible HTTP server on
127.0.0.1 (tests/openai_server.py: RubriQ's policy server with a scripted responder and injected
faults; tests/test_llamacpp.py runs llama.cpp's server, opt-in), through the ``openai`` client.

The scripted server answers each prompt's even samples with its reference circuit and odd ones
with no circuit, so the metrics are known by hand: correct rate 1/2, pass@2 = 1.  Counts and
texts are checked against the server's own log of what it received and answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("fastapi")

from tests.openai_server import ServerThread, build_app, free_socket, prompt_hash, read_log  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Four held-out prompts (QFT-2, three 2-qubit basis encodings; compact OpenQASM 2 prompts)
    and the server's answers: the reference for even samples, no circuit for odd ones."""
    from rubriq.data.prompts import PromptSpec, save_splits, synthesis_rows
    from rubriq.training.sft import reference_completion

    spec = PromptSpec(
        qft_sizes=(2,),
        qpe_sizes=(),
        hamiltonian_sizes=(),
        encoding_sizes=(2,),
        encoding_seeds=(0, 1, 2, 3, 4, 5),
        encodings=("basis_encoding",),
        formats=("qasm2",),
        prompt_style="compact",
    )
    rows = synthesis_rows(spec)
    assert len(rows) == 4
    folder = tmp_path_factory.mktemp("endpoint") / "data"
    save_splits({"test": rows}, folder)
    answers = {r["prompt"][-1]["content"]: [reference_completion(r), "I cannot write that circuit."] for r in rows}
    return folder, rows, answers


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    from rubriq.cli import main

    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def evaluate_args(url: str, dataset: Path, out: Path, *extra: str, samples: int = 2) -> list[str]:
    return [
        "evaluate",
        "--endpoint",
        url,
        "--model",
        "policy",
        "--dataset",
        str(dataset),
        "--samples",
        str(samples),
        "--temperature",
        "0.8",
        "--max-new-tokens",
        "64",
        "--out",
        str(out),
        "--retries",
        "2",
        "--timeout",
        "30",
        *extra,
    ]


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_evaluate_over_the_server_matches_what_the_server_sent(dataset, tmp_path, capsys):
    folder, rows, answers = dataset
    log = tmp_path / "server.jsonl"
    with ServerThread(build_app(answers, log)) as server:
        code, out, err = run_cli(evaluate_args(server.url, folder, tmp_path / "eval", "--concurrency", "3"), capsys)
        assert code == 0, err
        answered = read_log(log, "answered")
        # n honoured: one request per prompt, each with both samples
        assert len(answered) == len(rows) and all(a["n"] == 2 and a["choices"] == 2 for a in answered)
        assert {a["top_p"] for a in answered} == {0.95}  # evaluate's default nucleus
        summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
        # a rerun requests nothing: every completion comes from the cache
        code, out2, err = run_cli(evaluate_args(server.url, folder, tmp_path / "eval"), capsys)
        assert code == 0, err
        assert len(read_log(log, "received")) == len(rows)
        # --top-p reaches the request (a study sampled at top_p 1 is reproduced at top_p 1), and
        # the summary records it
        code, _, err = run_cli(evaluate_args(server.url, folder, tmp_path / "eval-p1", "--top-p", "1"), capsys)
        assert code == 0, err
        nucleus = read_log(log, "answered")[len(answered) :]
        assert len(nucleus) == len(rows) and {a["top_p"] for a in nucleus} == {1.0}
        assert json.loads((tmp_path / "eval-p1" / "summary.json").read_text())["request"]["top_p"] == 1.0
    from rubriq.evaluation.sampling import load_records

    records = load_records(tmp_path / "eval" / "records.jsonl")
    by_prompt = {a["prompt"]: a["texts"] for a in answered}
    for r in records:
        row = next(x for x in rows if x["id"] == r.prompt_id)
        assert r.text == by_prompt[prompt_hash(row["prompt"])][r.sample]
    s = summary["overall"]
    assert s["completions"] == 2 * len(rows)
    assert s["correct_rate"] == pytest.approx(0.5) and s["pass@2"] == pytest.approx(1.0)
    assert s["parse_rate"] == pytest.approx(0.5)
    usage = summary["usage"]
    assert usage["prompt_tokens"] == sum(a["usage"]["prompt_tokens"] for a in answered)
    assert usage["completion_tokens"] == sum(a["usage"]["completion_tokens"] for a in answered)
    assert usage["requests"] == len(rows) and usage["from_cache"] == 0
    assert summary["request"]["model"] == "policy" and summary["endpoint"]["endpoint"] == server.url
    assert "tokens (prompt + completion)" in out
    rerun = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert rerun["usage"]["from_cache"] == 2 * len(rows) and rerun["usage"]["requests"] == 0
    assert rerun["overall"] == s and rerun["usage"]["prompt_tokens"] == usage["prompt_tokens"]


def test_records_have_the_local_shape_and_report_mixes_both(dataset, tmp_path, capsys):
    pytest.importorskip("transformers")
    folder, rows, answers = dataset
    with ServerThread(build_app(answers, tmp_path / "log.jsonl")) as server:
        code, _, err = run_cli(
            evaluate_args(server.url, folder, tmp_path / "remote", "--price-per-1m-tokens", "2.5"), capsys
        )
        assert code == 0, err
    code, _, err = run_cli(
        [
            "evaluate",
            "--model",
            "tiny",
            "--dataset",
            str(folder),
            "--max-new-tokens",
            "4",
            "--out",
            str(tmp_path / "local"),
        ],
        capsys,
    )
    assert code == 0, err
    remote = [json.loads(x) for x in (tmp_path / "remote" / "records.jsonl").read_text().splitlines()]
    local = [json.loads(x) for x in (tmp_path / "local" / "records.jsonl").read_text().splitlines()]
    assert {tuple(sorted(r)) for r in remote} == {tuple(sorted(r)) for r in local}
    assert {tuple(sorted(r["result"])) for r in remote} == {tuple(sorted(r["result"])) for r in local}
    remote_summary = json.loads((tmp_path / "remote" / "summary.json").read_text())
    local_summary = json.loads((tmp_path / "local" / "summary.json").read_text())
    assert set(local_summary) <= set(remote_summary)
    u = remote_summary["usage"]
    assert u["cost_usd"] == pytest.approx(u["total_tokens"] * 2.5 / 1e6)
    code, out, err = run_cli(
        ["report", str(tmp_path / "local"), str(tmp_path / "remote"), "--out", str(tmp_path / "r")], capsys
    )
    assert code == 0, err
    md = (tmp_path / "r" / "report.md").read_text()
    assert "local" in md and "remote" in md


@pytest.mark.parametrize("mode", ["ignore", "reject"])
def test_a_server_without_n_gets_one_request_per_sample(dataset, tmp_path, capsys, mode):
    folder, rows, answers = dataset
    log = tmp_path / "server.jsonl"
    with ServerThread(build_app(answers, log, faults={"n": mode})) as server:
        code, _, err = run_cli(evaluate_args(server.url, folder, tmp_path / "eval", "--samples", "3"), capsys)
        assert code == 0, err
    answered = read_log(log, "answered")
    seen = sorted((a["prompt"], a["seed"] + i) for a in answered for i in range(a["choices"]))
    # every (prompt, sample) answered once; single-sample requests carry seed + k (distinct draws)
    assert seen == sorted((prompt_hash(r["prompt"]), k) for r in rows for k in range(3))
    s = json.loads((tmp_path / "eval" / "summary.json").read_text())["overall"]
    assert s["correct_rate"] == pytest.approx(2 / 3)  # samples 0 and 2 of 3 are the reference


def test_429_twice_then_answers_honouring_retry_after(dataset, tmp_path, capsys):
    folder, rows, answers = dataset
    log = tmp_path / "server.jsonl"
    faults = {"fail_first": [429, 429], "retry_after": 1}
    with ServerThread(build_app(answers, log, faults=faults)) as server:
        code, _, err = run_cli(
            evaluate_args(server.url, folder, tmp_path / "eval", "--concurrency", "1", "--max-prompts", "2"), capsys
        )
        assert code == 0, err
    received = read_log(log, "received")
    assert len(received) == 2 + 2  # two refused, then one request per prompt
    assert received[0]["prompt"] == received[1]["prompt"] == received[2]["prompt"]
    # Retry-After: 1 honoured (the client's own backoff would wait 0.5 s, then 1 s, less jitter)
    assert received[1]["time"] - received[0]["time"] >= 0.95
    assert received[2]["time"] - received[1]["time"] >= 0.95
    usage = json.loads((tmp_path / "eval" / "summary.json").read_text())["usage"]
    assert usage["retries"] == 2 and usage["requests"] == 2


def test_persistent_5xx_fails_in_one_line_keeping_what_arrived(dataset, tmp_path, capsys):
    folder, rows, answers = dataset
    faults = {"fail_first": [503] * 100, "retry_after": 0}
    with ServerThread(build_app(answers, tmp_path / "log.jsonl", faults=faults)) as server:
        code, _, err = run_cli(
            evaluate_args(server.url, folder, tmp_path / "eval", "--retries", "1", "--max-prompts", "1"), capsys
        )
    assert code == 2 and err.count("\n") == 1, err
    assert "HTTP 503" in err and "after retries" in err and "0 of 2 new completions saved" in err


def test_killed_server_then_resume_requests_each_sample_once(dataset, tmp_path, capsys):
    """The server dies after answering 2 of 4 prompts; the rerun with --resume, against a new
    server on the same port, requests exactly the missing completions."""
    folder, rows, answers = dataset
    assert len(rows) == 4
    log = tmp_path / "server.jsonl"
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}/v1"

    def start(faults):
        config = tmp_path / "server.json"
        config.write_text(json.dumps({"answers": answers, "log": str(log), "port": port, "faults": faults}))
        proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "openai_server.py"), str(config)], cwd=REPO)
        deadline = time.monotonic() + 300
        import httpx

        while time.monotonic() < deadline:
            try:
                httpx.get(url + "/models", timeout=1)
                return proc
            except httpx.HTTPError:
                assert proc.poll() is None, "the server process exited"
                time.sleep(0.1)  # paces the poll for the server to answer (the deadline bounds it)
        proc.kill()
        raise RuntimeError("the server did not start")

    first = start({"die_after": 2})
    try:
        args = evaluate_args(url, folder, tmp_path / "eval", "--concurrency", "1", "--retries", "1")
        code, _, err = run_cli(args, capsys)
        assert first.wait(30) == 17  # it died mid-run
    finally:
        if first.poll() is None:
            first.kill()
    assert code == 2 and err.count("\n") == 1 and "cannot reach the server" in err, err
    assert "4 of 8 new completions saved" in err
    cache = (tmp_path / "eval" / "completions.jsonl").read_text().splitlines()
    assert len(cache) == 4
    before = read_log(log, "answered")
    log.rename(tmp_path / "first.jsonl")
    second = start({})
    try:
        code, _, err = run_cli(args + ["--resume"], capsys)
    finally:
        second.kill()
        second.wait(30)
    assert code == 0, err
    after = read_log(log, "answered")
    samples = [(a["prompt"], a["seed"] + i) for a in before + after for i in range(a["choices"])]
    assert sorted(samples) == sorted((prompt_hash(r["prompt"]), k) for r in rows for k in range(2))  # each once
    assert len(after) == 2 and len(read_log(log, "received")) == 2
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["usage"]["from_cache"] == 4 and summary["overall"]["completions"] == 8
    assert summary["overall"]["correct_rate"] == pytest.approx(0.5)


def test_resume_without_a_cache_is_an_error(dataset, tmp_path, capsys):
    folder, _, answers = dataset
    with ServerThread(build_app(answers, tmp_path / "log.jsonl")) as server:
        code, _, err = run_cli(evaluate_args(server.url, folder, tmp_path / "eval", "--resume"), capsys)
    assert code == 2 and err.startswith("error: --resume: no completion cache") and err.count("\n") == 1


def test_bad_key_unknown_model_and_unreachable_are_one_line_errors(dataset, tmp_path, capsys, monkeypatch):
    folder, _, answers = dataset
    log = tmp_path / "server.jsonl"
    with ServerThread(build_app(answers, log, api_key=SECRET, faults={"echo_key": True})) as server:
        # no key at all
        code, out, err = run_cli(evaluate_args(server.url, folder, tmp_path / "a"), capsys)
        assert code == 2 and err.count("\n") == 1 and "set $OPENAI_API_KEY" in err and "HTTP 401" in err, err
        # a wrong key: refused, and its value is never printed (the server echoes it; redacted)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-42")
        code, out, err = run_cli(evaluate_args(server.url, folder, tmp_path / "b"), capsys)
        assert code == 2 and err.count("\n") == 1 and "was refused" in err, err
        assert "sk-wrong-key-42" not in err + out and "***" in err
        # the right key in another variable, an unknown model
        monkeypatch.setenv("MY_KEY", SECRET)
        args = evaluate_args(server.url, folder, tmp_path / "c", "--api-key-env", "MY_KEY")
        args[args.index("policy")] = "gpt-9"
        code, out, err = run_cli(args, capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith("error: --model:") and "'gpt-9'" in err and "it lists: policy" in err
        assert read_log(log, "answered") == []  # nothing sampled before the errors
        # the right key: it works, and the key is in no file written
        args = evaluate_args(server.url, folder, tmp_path / "d", "--api-key-env", "MY_KEY", "--max-prompts", "1")
        code, out, err = run_cli(args, capsys)
        assert code == 0, err
    for path in (tmp_path / "d").iterdir():
        assert SECRET not in path.read_text()
    assert SECRET not in out + err
    port = free_socket()
    closed = f"http://127.0.0.1:{port.getsockname()[1]}/v1"
    port.close()
    code, _, err = run_cli(evaluate_args(closed, folder, tmp_path / "e", "--retries", "0"), capsys)
    assert code == 2 and err.count("\n") == 1 and "cannot reach the server" in err, err


def test_bad_endpoint_flags_are_usage_errors(dataset, tmp_path, capsys):
    folder, _, _ = dataset
    for extra, flag in (
        (["--concurrency", "0"], "--concurrency"),
        (["--timeout", "0"], "--timeout"),
        (["--price-per-1m-tokens", "-1"], "--price-per-1m-tokens"),
    ):
        code, _, err = run_cli(evaluate_args("http://127.0.0.1:9/v1", folder, tmp_path / "x", *extra), capsys)
        assert code == 2 and flag in err and err.count("\n") == 1, err
    code, _, err = run_cli(evaluate_args("ftp://host/v1", folder, tmp_path / "x"), capsys)
    assert code == 2 and "--endpoint" in err
    code, _, err = run_cli(["evaluate", "--model", "tiny", "--dataset", str(folder), "--resume"], capsys)
    assert code == 2 and "--resume" in err


def test_max_completion_tokens_when_the_server_asks_for_it(dataset, tmp_path, capsys):
    folder, rows, answers = dataset
    log = tmp_path / "server.jsonl"
    with ServerThread(build_app(answers, log, faults={"max_completion_tokens": True})) as server:
        code, _, err = run_cli(evaluate_args(server.url, folder, tmp_path / "eval", "--concurrency", "1"), capsys)
    assert code == 0, err
    assert len(read_log(log, "answered")) == len(rows)
    assert len(read_log(log, "received")) == len(rows) + 1  # one refused request, then the switch


def test_synthesize_over_the_server_reuses_its_cache(tmp_path, capsys):
    from qiskit import qasm2

    from rubriq.targets import make_target

    target = make_target("qft", 2)
    qasm = "```qasm\n" + qasm2.dumps(target.reference_circuit()).strip() + "\n```"
    content = target.prompt("qasm2", "full")[-1]["content"]
    log = tmp_path / "server.jsonl"
    with ServerThread(build_app({content: ["no idea", qasm]}, log)) as server:
        args = ["synthesize", "a 2-qubit QFT", "--endpoint", server.url, "--model", "policy", "-n", "4"]
        code, out, err = run_cli(args + ["--max-new-tokens", "64"], capsys)
        assert code == 0, err
        assert "best of 4 (2 parsed)" in out and "OPENQASM 2.0" in out and "4 requests" not in out
        assert len(read_log(log, "answered")) == 1  # one request, n = 4
        code, out, err = run_cli(args + ["--max-new-tokens", "64"], capsys)
        assert code == 0, err
        assert "4 candidates from the cache" in out and len(read_log(log, "received")) == 1
        code, out, err = run_cli(["synthesize", "a 2-qubit QFT", "--endpoint", server.url], capsys)
        assert code == 2 and "--model" in err


def test_app_synthesize_tab_over_an_endpoint(tmp_path):
    from qiskit import qasm2

    from rubriq.app import load_app_policy
    from rubriq.app.handlers import synthesize_view
    from rubriq.evaluation.endpoint import EndpointError, EndpointPolicy
    from rubriq.evaluation.settings import EndpointSettings
    from rubriq.targets import make_target

    target = make_target("qft", 2)
    qasm = "```qasm\n" + qasm2.dumps(target.reference_circuit()).strip() + "\n```"
    content = target.prompt("qasm2", "full")[-1]["content"]
    log = tmp_path / "server.jsonl"
    with ServerThread(build_app({content: [qasm, "nothing"]}, log)) as server:
        settings = EndpointSettings(endpoint=server.url, cache=str(tmp_path / "c.jsonl"))
        policy = load_app_policy("policy", settings)
        assert isinstance(policy, EndpointPolicy)
        progress = []
        view = synthesize_view(policy, "Synthesize a 2-qubit QFT", n=2, on_batch=lambda d, t: progress.append((d, t)))
        with pytest.raises(EndpointError, match="does not serve 'nope'"):
            load_app_policy("nope", settings)
    assert "2 samples, 1 parsed" in view.summary and "best correct" in view.summary
    assert view.best_qasm.startswith("OPENQASM 2.0") and progress[-1] == (2, 2)
    assert [row[2] for row in view.table] == [True, False]


def test_a_real_policy_behind_the_server_gives_the_local_completions(dataset, tmp_path, capsys):
    """RubriQ's policy server wrapping a (tiny, random) model: greedy completions over HTTP are
    the completions of the same model sampled locally one prompt at a time."""
    pytest.importorskip("transformers")
    from rubriq.evaluation.evaluate import load_policy
    from rubriq.evaluation.policy_server import local_responder, make_app
    from rubriq.evaluation.sampling import generate, load_records
    from tests.openai_server import ServerThread as Thread

    folder, rows, _ = dataset
    respond, count, count_prompt = local_responder("tiny")
    with Thread(make_app(respond, "tiny", None, count, count_prompt)) as server:
        args = evaluate_args(server.url, folder, tmp_path / "eval", "--max-prompts", "2", samples=1)
        args[args.index("policy")] = "tiny"
        args[args.index("0.8")] = "0"
        args[args.index("64")] = "8"
        code, _, err = run_cli(args, capsys)
        assert code == 0, err
    tokenizer, model = load_policy("tiny")
    local = generate(model, tokenizer, rows[:2], max_new_tokens=8, batch_size=1, progress=False)
    remote = load_records(tmp_path / "eval" / "records.jsonl")
    assert [r.text for r in remote] == [r.text for r in local]
    usage = json.loads((tmp_path / "eval" / "summary.json").read_text())["usage"]
    assert usage["completion_tokens"] == sum(count(r.text) for r in local)
    assert usage["prompt_tokens"] == sum(count_prompt(r["prompt"]) for r in rows[:2])


def test_completion_cache_survives_a_torn_line(tmp_path):
    from rubriq.evaluation.endpoint import CompletionCache

    path = tmp_path / "c.jsonl"
    cache = CompletionCache(path)
    cache.add({"key": "a", "text": "one"})
    cache.add({"key": "b", "text": "two"})
    with open(path, "a") as fh:
        fh.write('{"key": "c", "te')  # killed mid-write
    again = CompletionCache(path)
    assert len(again) == 2 and again.get("b")["text"] == "two" and again.get("c") is None
    again.add({"key": "c", "text": "three"})  # appended on a new line after the torn one
    assert CompletionCache(path).get("c")["text"] == "three"


def test_the_key_is_redacted_from_endpoint_errors(monkeypatch):
    from rubriq.evaluation.endpoint import _redact
    from rubriq.evaluation.settings import EndpointSettings

    monkeypatch.setenv("MY_PROVIDER_KEY", "sk-abcdefgh")
    settings = EndpointSettings(endpoint="http://127.0.0.1:1/v1", api_key_env="MY_PROVIDER_KEY")
    assert _redact("Bearer sk-abcdefgh refused", settings) == "Bearer *** refused"
    assert os.environ["MY_PROVIDER_KEY"] not in json.dumps(settings.public())
