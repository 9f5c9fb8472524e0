"""The adapters beyond what tests/test_frameworks.py runs through verl's and OpenRLHF's own code:
verl's batch form through a real server, ground truths as a parquet row holds them, OpenRLHF
queries that hold part of their prompt or none, TRL's reward functions and a real GRPO step
through a server (TRL's metric names), the backends, the client's patience and fork safety.
Every value is compared with the in-process evaluator."""

from __future__ import annotations

import json
import os
import pickle
from collections import defaultdict

import numpy as np
import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from tests.serve_helpers import (  # noqa: E402
    MIXED,
    QFT2,
    QFT2_QASM,
    QFT3,
    QFT3_QASM,
    REWRITE,
    ROOT,
    Server,
    differences,
    reference,
)

KEY = "integration-key-0123456789"
DIMENSIONS = ("clifford", "tcount", "hardware", "fidelity", "efficiency")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with Server("--workers", "1", env={"RUBRIQ_API_KEY": KEY}, log=tmp_path_factory.mktemp("s") / "log") as s:
        yield s


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    for name in ("RUBRIQ_URL", "RUBRIQ_API_KEY", "RUBRIQ_CONFIG", "RUBRIQ_WORKERS"):
        monkeypatch.delenv(name, raising=False)


def expected(completion: str, spec: str) -> dict:
    ref = reference(completion, spec)
    return {"score": ref["reward"], **ref["scores"], "acc": float(ref["correct"]), "parsed": float(ref["parsed"])}


# -- verl -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "server"])
def test_verl_batch_form_as_the_batch_reward_manager_calls_it(server, remote):
    from rubriq.integrations.verl import compute_score_batch

    n = len(MIXED)
    data_sources = np.array(["rubriq"] * n, dtype=object)  # data.non_tensor_batch["data_source"]
    ground_truths = [{"ground_truth": spec}["ground_truth"] for _, _, spec in MIXED]
    extras = [{"rollout_reward_scores": {}} for _ in range(n)]
    reward_kwargs = {"url": server.url, "api_key": KEY} if remote else {}
    scores = compute_score_batch(
        data_sources=data_sources,
        solution_strs=[c for _, c, _ in MIXED],
        ground_truths=ground_truths,
        extra_infos=extras,
        **reward_kwargs,
    )
    # what BatchRewardManager.__call__ does with the answer
    reward_extra_info = defaultdict(list)
    rewards = []
    for score in scores:
        rewards.append(score["score"])
        for key, value in score.items():
            reward_extra_info[key].append(value)
    assert all(len(v) == n for v in reward_extra_info.values())
    assert all(np.asarray(v).dtype == np.float64 for v in reward_extra_info.values())
    for (_, completion, spec), score in zip(MIXED, scores, strict=True):
        assert not differences(score, expected(completion, spec))


def test_verl_ground_truth_from_a_parquet_row():
    """A dataset row stores the spec as reward_model.ground_truth (a string); verl may hand it
    over as a numpy string; a dict spec works too."""
    from rubriq.integrations.verl import compute_score

    completion, spec = MIXED[0][1], MIXED[0][2]
    want = expected(completion, spec)
    for ground_truth in (np.str_(spec), json.loads(spec)):
        assert not differences(compute_score("rubriq", completion, ground_truth), want)


# -- OpenRLHF ------------------------------------------------------------------------------------
PROMPT = (
    "<|im_start|>system\nYou write OpenQASM.<|im_end|>\n<|im_start|>user\n{task}<|im_end|>\n<|im_start|>assistant\n"
)


def test_openrlhf_never_scores_the_prompts_circuit():
    """A rewrite prompt shows the target circuit: a response without a circuit scores 0, a query
    holding only the prompt's tail scores what follows it, and a query that holds no part of
    its prompt stops the run rather than be scored whole."""
    from rubriq.integrations.openrlhf import StopTraining, reward_func

    qasm = json.loads(REWRITE)["qasm"]
    prompt = PROMPT.format(task="Rewrite with fewer T gates:\n" + qasm)
    out = reward_func([prompt + "I do not know.<|im_end|>"], [prompt], [REWRITE])
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["parsed"].tolist() == [0.0]
    tail = prompt[len(prompt) // 2 :]  # what a truncated prompt leaves: its end, the circuit's last lines
    out = reward_func([tail + "I do not know.<|im_end|>"], [prompt], [REWRITE])
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["prompt_truncated"].tolist() == [1.0]
    answer = MIXED[6][1]
    out = reward_func([tail + answer + "<|im_end|>"], [prompt], [REWRITE])
    assert out["rewards"].tolist() == pytest.approx([reference(answer, REWRITE)["reward"]], abs=1e-6)
    with pytest.raises(StopTraining, match="cannot be told from the prompt"):
        reward_func(["tokenizer round trip changed it: " + qasm], [prompt], [REWRITE])


# -- TRL -----------------------------------------------------------------------------------------
def test_trl_remote_reward_functions_equal_the_in_process_ones(server):
    from rubriq.reward import RemoteRubricRewards, RubricRewards

    local, remote = RubricRewards(), RemoteRubricRewards(server.url, KEY)
    try:
        assert [f.__name__ for f in remote.functions()] == [f.__name__ for f in local.functions()]
        assert remote.weights() == local.weights()
        prompts = [[{"role": "user", "content": f"p{i % 2}"}] for i in range(len(MIXED))]
        completions = [[{"role": "assistant", "content": c}] for _, c, _ in MIXED]  # conversational dataset
        target = [spec for _, _, spec in MIXED]
        logged: dict[str, dict] = {"local": {}, "remote": {}}
        for name, rewards in (("local", local), ("remote", remote)):
            for f in rewards.functions():
                values = f(
                    prompts=prompts,
                    completions=completions,
                    target=target,
                    log_metric=lambda k, v, name=name: logged[name].__setitem__(k, v),
                )
                logged[name][f"rewards/{f.__name__}"] = values
        timing = "timing/reward_s"  # the first function scored the batch (no cache hit): time passed
        assert logged["local"].pop(timing) > 0 and logged["remote"].pop(timing) > 0
        assert not differences(logged["remote"], logged["local"])
        requests = remote.client.stats["requests"]
        remote.functions()[2](prompts=prompts, completions=completions, target=target)
        assert remote.client.stats["requests"] == requests  # six functions, one batch: answered from the cache
        clone = pickle.loads(pickle.dumps(remote.functions()[0]))  # reward functions cross processes
        assert (
            clone(prompts=prompts[:1], completions=completions[:1], target=target[:1])
            == logged["local"]["rewards/total"][:1]
        )
    finally:
        local.close()
        remote.close()


def test_remote_and_local_backends_answer_alike(server):
    from rubriq.integrations.backend import LocalBackend, RemoteBackend

    texts, specs = [c for _, c, _ in MIXED], [t for _, _, t in MIXED]
    local, remote = LocalBackend(), RemoteBackend(server.url, KEY)
    try:
        for a, b in zip(local.score(texts, specs), remote.score(texts, specs), strict=True):
            assert not differences(a, b)
    finally:
        local.close()
        remote.close()


def test_backend_from_the_environment(server, monkeypatch):
    from rubriq.integrations import backend as backend_module

    monkeypatch.setattr(backend_module, "_BACKENDS", {})
    assert isinstance(backend_module.backend(), backend_module.LocalBackend)
    monkeypatch.setenv("RUBRIQ_URL", server.url)
    monkeypatch.setenv("RUBRIQ_API_KEY", KEY)
    chosen = backend_module.backend()
    assert isinstance(chosen, backend_module.RemoteBackend) and chosen.client.url == server.url
    assert "integration-key" not in repr(chosen.client)
    assert chosen.score([MIXED[0][1]], [QFT2])[0]["correct"]


def test_trl_grpo_step_logs_the_remote_rewards_as_trl_names_them(server, tmp_path, monkeypatch):
    """A real GRPO step (TRL of requirements.lock) with RemoteRubricRewards: TRL logs each
    function as rewards/<name>/mean and /std (the names docs/integrations.md gives: R as total,
    each dimension) and the seconds spent waiting for the server as timing/reward_s."""
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.models import load_tokenizer, tiny_model
    from rubriq.reward import RemoteRubricRewards
    from rubriq.training.grpo import build_grpo_trainer
    from tests.tiny import CPU

    rows = synthesis_rows(
        PromptSpec(qft_sizes=(2,), qpe_sizes=(), hamiltonian_sizes=(), encoding_sizes=(), formats=("qasm2",))
    )
    tokenizer = load_tokenizer("embedded")
    rewards = RemoteRubricRewards(server.url, KEY)
    try:
        trainer = build_grpo_trainer(
            tiny_model(tokenizer),
            tokenizer,
            rows,
            rewards,
            grpo_args=dict(
                output_dir=str(tmp_path / "out"),
                per_device_train_batch_size=2,
                num_generations=2,
                max_completion_length=8,
                max_steps=1,
                logging_steps=1,
                save_strategy="no",
                seed=0,
                **CPU,
            ),
            lora=dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        )
        trainer.train()
    finally:
        rewards.close()
    logged = trainer.state.log_history[0]
    for name in ("total", *DIMENSIONS):
        assert f"rewards/{name}/mean" in logged and f"rewards/{name}/std" in logged
    assert logged["reward"] == pytest.approx(logged["rewards/total/mean"])  # TRL's reward is R
    assert logged["timing/reward_s"] > 0
    docs = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    trl_section = docs.split("## TRL", 1)[1].split("\n## ", 1)[0]
    assert "`rewards/<name>/mean`" in trl_section and "`rewards/<name>/std`" in trl_section
    assert "`timing/reward_s`" in trl_section


# -- the client: patience, fork safety ------------------------------------------------------------
def test_client_patience_is_a_setting_and_its_end_says_so(monkeypatch):
    """The client retries an unavailable server for its patience (RUBRIQ_PATIENCE or
    patience=), then raises RubriQUnavailable naming the setting; the default outlasts a
    restart of the service.  Its waits are counted on a virtual clock: exactly the patience,
    in pauses that grow from the backoff."""
    from rubriq.serve import client as client_module
    from rubriq.serve.client import DEFAULT_PATIENCE, RubriQClient, RubriQUnavailable
    from tests.serve_helpers import VirtualClock, free_port

    assert DEFAULT_PATIENCE >= 300
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert RubriQClient(url).patience == DEFAULT_PATIENCE
    monkeypatch.setenv("RUBRIQ_PATIENCE", "1.5")
    client = RubriQClient(url, backoff=0.1)
    assert client.patience == 1.5
    clock = VirtualClock()
    monkeypatch.setattr(client_module, "time", clock)
    with pytest.raises(RubriQUnavailable, match=r"over 1.5 s .* waits 1.5 s \(patience=, or RUBRIQ_PATIENCE"):
        client.score([QFT2_QASM], [QFT2])
    assert clock.now == pytest.approx(1.5) and client.stats["retries"] == len(clock.sleeps) >= 2
    assert 0.08 <= clock.sleeps[0] <= 0.12 and clock.sleeps[1] > clock.sleeps[0]  # backoff 0.1 s, doubling (+-20%)
    with pytest.raises(RubriQUnavailable, match="after 1 tries"):
        RubriQClient(url, patience=0).score([QFT2_QASM], [QFT2])
    monkeypatch.setenv("RUBRIQ_PATIENCE", "ten minutes")
    with pytest.raises(ValueError, match="RUBRIQ_PATIENCE: seconds"):
        RubriQClient(url)


_PARENT_CLIENT = None


def _score_in_child(url: str) -> tuple[int, int, int, int, float, float]:
    """In a forked child: the adapters' backend and a client made by the parent, each used here."""
    from rubriq.integrations.backend import backend

    chosen = backend(url, KEY)
    via_backend = chosen.score([QFT2_QASM], [QFT2])[0]["reward"]
    via_client = _PARENT_CLIENT.score([QFT3_QASM], [QFT3])[0]["reward"]
    return os.getpid(), id(chosen), id(chosen.client.http), id(_PARENT_CLIENT.http), via_backend, via_client


def test_remote_backend_and_client_are_fork_safe_in_a_process_pool(server, monkeypatch):
    """After the parent scored through the server, the children of a forked process pool build
    their own backend and connections (the parent's open connection, shared, garbled requests);
    every answer is right, the parent's included."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from rubriq.integrations import backend as backend_module
    from rubriq.serve.client import RubriQClient

    monkeypatch.setattr(backend_module, "_BACKENDS", {})
    global _PARENT_CLIENT
    _PARENT_CLIENT = RubriQClient(server.url, KEY)
    parent = backend_module.backend(server.url, KEY)
    want2, want3 = reference(QFT2_QASM, QFT2)["reward"], reference(QFT3_QASM, QFT3)["reward"]
    assert parent.score([QFT2_QASM], [QFT2])[0]["reward"] == pytest.approx(want2, abs=1e-12)
    assert _PARENT_CLIENT.score([QFT3_QASM], [QFT3])[0]["reward"] == pytest.approx(want3, abs=1e-12)
    try:
        with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("fork")) as pool:
            answers = list(pool.map(_score_in_child, [server.url] * 12))
    finally:
        _PARENT_CLIENT.close()
    assert len({pid for pid, *_ in answers}) >= 2
    for _, backend_id, http_id, client_http_id, via_backend, via_client in answers:
        assert backend_id != id(parent) and http_id != id(parent.client.http)
        assert client_http_id != id(_PARENT_CLIENT._http)
        assert via_backend == pytest.approx(want2, abs=1e-12) and via_client == pytest.approx(want3, abs=1e-12)
    assert parent.score([QFT3_QASM], [QFT3])[0]["reward"] == pytest.approx(want3, abs=1e-12)
