"""The verl, OpenRLHF and TRL adapters, called with each framework's own argument shapes (the
keyword calls of verl's reward managers, OpenRLHF's positional batch call and its
experience-building, TRL's reward-function keywords), in-process and through a real server:
the same values either way, equal to the in-process evaluator.

verl and OpenRLHF themselves are not installed here (their dependency trees, GPU wheels
included, do not install on this CPU machine in reasonable time): the calls below reproduce
their documented signatures and the way their current sources call the function and read the
answer (verl: ``verl/experimental/reward_loop/reward_manager/naive.py``, ``verl/workers/
reward_manager/batch.py``; OpenRLHF: ``openrlhf/utils/agent.py``, ``openrlhf/trainer/
ppo_utils/samples_generator.py``)."""

from __future__ import annotations

import json
import pickle
from collections import defaultdict

import numpy as np
import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from tests.serve_helpers import MIXED, QFT2, REWRITE, Server, differences, reference  # noqa: E402

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
def test_verl_compute_score_as_the_reward_loop_calls_it(server, remote):
    from rubriq.integrations.verl import KEYS, compute_score

    kwargs = {"url": server.url, "api_key": KEY} if remote else {}  # verl's reward_kwargs
    for _, completion, spec in MIXED:
        extra_info = {"index": 3, "num_turns": None, "rollout_reward_scores": {}}  # as the naive manager fills it
        out = compute_score(
            data_source="rubriq_qft", solution_str=completion, ground_truth=spec, extra_info=extra_info, **kwargs
        )
        assert set(out) == set(KEYS) and all(isinstance(v, float) for v in out.values())
        assert not differences(out, expected(completion, spec))


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


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "server"])
def test_openrlhf_reward_func_as_the_single_turn_executor_calls_it(server, remote, monkeypatch):
    import torch

    from rubriq.integrations import backend as backend_module
    from rubriq.integrations.openrlhf import reward_func

    if remote:  # OpenRLHF passes no options: the Ray job's env_vars select the server
        monkeypatch.setenv("RUBRIQ_URL", server.url)
        monkeypatch.setenv("RUBRIQ_API_KEY", KEY)
        monkeypatch.setattr(backend_module, "_BACKENDS", {})
    prompts = [PROMPT.format(task=f"task {i}") for i in range(len(MIXED))]
    queries = [p + c + "<|im_end|>" for p, (_, c, _) in zip(prompts, MIXED, strict=True)]  # decode(..., False)
    labels = [spec for _, _, spec in MIXED]
    for i, (_, completion, spec) in enumerate(MIXED):
        info = reward_func(queries[i : i + 1], prompts[i : i + 1], labels[i : i + 1])  # batch_size = 1
        # SingleTurnAgentExecutor.execute + _process_response_into_experience
        reward_val, score_val = info.get("rewards"), info.get("scores")
        rewards = torch.tensor([reward_val])
        scores = torch.tensor([score_val])
        logs = {
            k: torch.tensor([v.flatten()[0].item() if isinstance(v, torch.Tensor) else v])
            for k, v in info["extra_logs"].items()
        }
        want = reference(completion, spec)
        assert rewards.flatten()[0].item() == pytest.approx(want["reward"], abs=1e-6)  # float32 tensors
        assert scores.flatten()[0].item() == pytest.approx(want["reward"], abs=1e-6)
        for name in DIMENSIONS:
            assert logs[name].item() == pytest.approx(want["scores"][name], abs=1e-6)
        assert logs["correct"].item() == float(want["correct"])
    whole = reward_func(queries, prompts, labels)  # a whole batch at once (older OpenRLHF)
    assert whole["rewards"].shape == (len(MIXED),)
    assert whole["rewards"].tolist() == pytest.approx([reference(c, t)["reward"] for _, c, t in MIXED], abs=1e-6)


def test_openrlhf_never_scores_the_prompts_circuit():
    """A rewrite prompt shows the target circuit: a response without a circuit scores 0, and a
    query that does not contain its prompt is unparsed rather than scored whole."""
    from rubriq.integrations.openrlhf import reward_func

    qasm = json.loads(REWRITE)["qasm"]
    prompt = PROMPT.format(task="Rewrite with fewer T gates:\n" + qasm)
    out = reward_func([prompt + "I do not know.<|im_end|>"], [prompt], [REWRITE])
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["parsed"].tolist() == [0.0]
    out = reward_func(["tokenizer round trip changed it: " + qasm], [prompt], [REWRITE])
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["parsed"].tolist() == [0.0]


# -- TRL -----------------------------------------------------------------------------------------
def test_trl_remote_reward_functions_equal_the_in_process_ones(server):
    from rubriq.integrations.trl import RemoteRubricRewards
    from rubriq.training.rewards import RubricRewards

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
        timing = "timing/reward_s"
        assert logged["local"].pop(timing) >= 0 and logged["remote"].pop(timing) >= 0
        assert not differences(logged["remote"], logged["local"])
        requests = remote.client.stats["requests"]
        remote.functions()[2](prompts=prompts, completions=completions, target=target)
        assert remote.client.stats["requests"] == requests  # five functions, one batch: answered from the cache
        clone = pickle.loads(pickle.dumps(remote.functions()[0]))  # reward functions cross processes
        assert (
            clone(prompts=prompts[:1], completions=completions[:1], target=target[:1])
            == logged["local"]["rewards/clifford"][:1]
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
