"""verl 0.9.1 and OpenRLHF 0.11.2 running their own reward code on RubriQ's reward.

Both are installed by ``make setup`` from requirements/nodeps.lock, without their GPU
dependencies (which their reward paths do not import).  Every test goes through the frameworks'
own code: verl's Hydra config (the lines of docs/integrations.md), ``get_custom_reward_fn`` (a
package, a file path, ``file://``), the reward loop's ``RewardLoopWorker`` -> ``load_reward_manager``
-> ``run_single`` (the naive manager and RubriQ's batching manager), ``RewardLoopManager`` on a
local Ray cluster, the legacy ``BatchRewardManager`` and ``PrimeRewardManager``, ``main_eval``'s
``process_item``; OpenRLHF's ``PromptDataset`` (the labels), ``SingleTurnAgentExecutor`` (its file
loader and ``execute()``) and the experience its rollout builds from the answer.  Each reward is
compared with RubriQ's in-process score of the same text (tests/serve_helpers.reference).

Stand-ins, where a framework needs a GPU: OpenRLHF's ``execute()`` generates with a vLLM engine;
here an engine that returns a given answer's tokens.  OpenRLHF's ``samples_generator`` imports
vLLM, so its ``_process_response_into_experience`` is compiled from the installed wheel's source.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("verl")
pytest.importorskip("openrlhf")

from tests.serve_helpers import (  # noqa: E402
    MIXED,
    QFT2,
    REWRITE,
    ROOT,
    Server,
    VirtualClock,
    differences,
    free_port,
    reference,
)
from tests.verl_helpers import compose, data_proto, docs_blocks, overrides_of  # noqa: E402

VERL, OPENRLHF = "0.9.1", "0.11.2"
DIMENSIONS = ("clifford", "tcount", "hardware", "fidelity", "efficiency")
CONVERSATIONAL = (
    'Sure! Here is a 2-qubit QFT:\n\n```qasm\nOPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[1];\n'
    "cu1(pi/2) q[0],q[1];\nh q[0];\nswap q[0],q[1];\n```\n\nThe final swap restores the qubit order."
)
GARBAGE = "}}{{ qreg;; \u2603 <html> OPENQASM 9 \x07 ```"
CASES = [
    *MIXED,
    ("conversational", CONVERSATIONAL, QFT2),
    ("empty", "", QFT2),
    ("garbage", GARBAGE, QFT2),
]
"""(what it is, response, target spec): the mixed batch of the server tests, a chat answer with a
fenced circuit, an empty response, garbage."""
SMALL = [c for c in CASES if c[0] in ("correct", "wrong", "rewrite, fewer T", "conversational", "empty", "garbage")]
"""The cases without sandboxed Python, for the paths that fork a process per item."""

_REFERENCES: dict[tuple[str, str], dict] = {}


def ref(completion: str, spec: str) -> dict:
    if (completion, spec) not in _REFERENCES:
        _REFERENCES[completion, spec] = reference(completion, spec)
    return _REFERENCES[completion, spec]


def verl_row(completion: str, spec: str) -> dict:
    """What RubriQ's verl functions must answer for a response: the in-process reference."""
    r = ref(completion, spec)
    return {"score": r["reward"], **r["scores"], "acc": float(r["correct"]), "parsed": float(r["parsed"])}


def test_the_pinned_versions_are_installed():
    assert importlib.metadata.version("verl") == VERL
    assert importlib.metadata.version("openrlhf") == OPENRLHF


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """The embedded SmolLM2 tokenizer, saved where verl's config can name it
    (``actor_rollout_ref.model.path``); every case survives its encode/decode round trip, so
    the text verl and OpenRLHF decode is the text scored by the reference."""
    from rubriq.models import load_tokenizer

    tok = load_tokenizer("embedded")
    folder = tmp_path_factory.mktemp("tokenizer")
    tok.save_pretrained(folder)
    tok.path = str(folder)
    for _, completion, _ in CASES:
        assert (
            tok.decode(tok(completion, add_special_tokens=False)["input_ids"], skip_special_tokens=True) == completion
        )
    return tok


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with Server("--workers", "1", log=tmp_path_factory.mktemp("s") / "log") as s:
        yield s


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    for name in ("RUBRIQ_URL", "RUBRIQ_API_KEY", "RUBRIQ_CONFIG", "RUBRIQ_WORKERS", "RUBRIQ_PATIENCE"):
        monkeypatch.delenv(name, raising=False)


# -- verl -----------------------------------------------------------------------------------------
def reward_loop(config, data):
    """verl's RewardLoopWorker (the reward loop's Ray actor class, here in this process) scoring a
    batch as RewardLoopManager asks it to: ``compute_score_batch`` -> ``run_single`` per row."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker(config)
    return worker.loop.run_until_complete(worker.compute_score_batch(data)), worker


def check_outputs(outputs, cases):
    assert len(outputs) == len(cases)
    for (label, completion, spec), out in zip(cases, outputs, strict=True):
        want = verl_row(completion, spec)
        assert out["reward_score"] == pytest.approx(want["score"], abs=1e-12), label
        assert not differences(dict(out["reward_extra_info"]), want), label


def test_verl_loads_the_reward_from_a_package_a_file_path_and_a_file_url(tokenizer):
    """get_custom_reward_fn with each path form verl takes; a file loaded by path hands over the
    package's own function (which pickles by reference); main_eval's positional call."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    import rubriq.integrations.verl as module

    file = module.__file__
    for path in ("pkg://rubriq.integrations.verl", file, f"file://{file}"):
        fn = get_custom_reward_fn(compose([f"reward.custom_reward_function.path={path}"]))
        assert fn.args[0] is module.compute_score, path  # verl's partial(_call_with_kwargs, raw_fn, kwargs)
        out = fn(data_source="rubriq", solution_str=CONVERSATIONAL, ground_truth=QFT2, extra_info=None)
        assert not differences(dict(out), verl_row(CONVERSATIONAL, QFT2))
        assert not differences(dict(fn("rubriq", MIXED[0][1], QFT2)), verl_row(MIXED[0][1], QFT2))


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "server"])
def test_verl_reward_loop_naive_manager(tokenizer, server, remote):
    """The current reward loop with compute_score (load_reward_manager -> naive run_single), every
    case, with and without extra_info."""
    overrides = [
        f"actor_rollout_ref.model.path={tokenizer.path}",
        "reward.custom_reward_function.path=pkg://rubriq.integrations.verl",
        "reward.custom_reward_function.name=compute_score",
    ]
    if remote:
        overrides.append(f"+reward.custom_reward_function.reward_kwargs.url={server.url}")
    config = compose(overrides)
    outputs, worker = reward_loop(config, data_proto(tokenizer, [(c, s) for _, c, s in CASES]))
    assert type(worker.reward_manager).__name__ == "NaiveRewardManager"
    check_outputs(outputs, CASES)
    outputs, _ = reward_loop(config, data_proto(tokenizer, [(c, s) for _, c, s in SMALL], extra_info=False))
    check_outputs(outputs, SMALL)


def verl_docs_recipes() -> list[tuple[str, list[str]]]:
    blocks = docs_blocks("verl")
    assert blocks, "docs/integrations.md has no verl config blocks"
    for label, _ in blocks:  # every recipe says which verl it is for and how far it was tested
        assert "tested with verl" in label or "composed with verl" in label, label
    return [(label, overrides_of(block)) for label, block in blocks if f"tested with verl {VERL}" in label]


def test_docs_verl_recipes_compose_with_verls_config_and_score(tokenizer, server):
    """Every verl block of docs/integrations.md marked as tested with the pinned verl, composed
    with verl's own Hydra config as main_ppo / main_eval would: the reward is RubriQ's, and
    RubriQ's reward manager scores the batch in one call."""
    recipes = verl_docs_recipes()
    values = [o.split("=", 1)[1] for _, overrides in recipes for o in overrides]
    assert {"compute_score", "RubriQRewardManager", "compute_score_float"} <= set(values)
    ran = 0
    for label, overrides in recipes:
        overrides = [o.split("=")[0] + "=" + server.url if o.split("=")[0].endswith(".url") else o for o in overrides]
        if any("compute_score_float" in o for o in overrides):  # main_eval's config
            check_main_eval(compose(overrides, "evaluation"))
            ran += 1
            continue
        config = compose([f"actor_rollout_ref.model.path={tokenizer.path}", *overrides])
        outputs, worker = reward_loop(config, data_proto(tokenizer, [(c, s) for _, c, s in CASES]))
        check_outputs(outputs, CASES)
        if "reward.reward_manager.name=RubriQRewardManager" in overrides:
            assert type(worker.reward_manager).__name__ == "RubriQRewardManager"
            assert worker.reward_manager.batches.sizes == [len(CASES)], label  # one scoring call for the batch
        ran += 1
    assert ran == len(recipes) >= 3


def check_main_eval(config):
    """main_eval's own process_item (a Ray task's function, called here) on two responses of one
    prompt: the mean R."""
    from verl.trainer.main_eval import process_item

    responses = [MIXED[0][1], CONVERSATIONAL, "no circuit"]
    source, mean = process_item._function(config, "rubriq", responses, {"ground_truth": QFT2})
    assert source == "rubriq"
    assert mean == pytest.approx(sum(ref(r, QFT2)["reward"] for r in responses) / len(responses), abs=1e-12)


def test_verl_legacy_batch_recipe_in_verls_batch_reward_manager(tokenizer):
    """The docs' verl 0.5-0.6 lines: in the pinned verl they leave the reward unset (the trap the
    docs describe); migrated as verl 0.7-0.8's main_ppo did, they load the file and run verl's
    BatchRewardManager, one compute_score_batch call for the batch."""
    from verl.experimental.reward_loop import migrate_legacy_reward_impl
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager import get_reward_manager_cls

    ((label, block),) = [b for b in docs_blocks("verl") if "0.5-0.6" in b[0]]
    config = compose(overrides_of(block))
    assert config.reward.custom_reward_function.path is None  # verl 0.9's main_ppo does not read them
    config = migrate_legacy_reward_impl(config)
    manager_cls = get_reward_manager_cls(config.reward.reward_manager.name)
    assert manager_cls.__name__ == "BatchRewardManager"
    calls = []
    fn = get_custom_reward_fn(config)

    def counted(**kwargs):
        calls.append(len(kwargs["solution_strs"]))
        return fn(**kwargs)

    manager = manager_cls(tokenizer=tokenizer, num_examine=0, compute_score=counted, reward_fn_key="data_source")
    out = manager(data_proto(tokenizer, [(c, s) for _, c, s in CASES]), return_dict=True)
    assert calls == [len(CASES)]
    rewards = out["reward_tensor"].sum(-1).tolist()
    for i, (name, completion, spec) in enumerate(CASES):
        want = verl_row(completion, spec)
        assert rewards[i] == pytest.approx(want["score"], abs=1e-6), name  # float32 tensor
        assert {k: out["reward_extra_info"][k][i] for k in want} == pytest.approx(want, abs=1e-12), name


def test_verl_ground_truth_that_is_not_a_spec_names_the_field(tokenizer):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    for manager in (
        ["reward.custom_reward_function.path=pkg://rubriq.integrations.verl"],
        [
            "reward.reward_manager.source=importlib",
            "reward.reward_manager.module.path=pkg://rubriq.integrations.verl_manager",
            "reward.reward_manager.name=RubriQRewardManager",
        ],
    ):
        worker = RewardLoopWorker(compose([f"actor_rollout_ref.model.path={tokenizer.path}", *manager]))
        for bad in ("", "qft", '{"num_qubits": 2}'):
            with pytest.raises(ValueError, match=r"reward_model\.ground_truth: got .* target spec"):
                worker.loop.run_until_complete(worker.compute_score_batch(data_proto(tokenizer, [(MIXED[0][1], bad)])))


def test_verl_reward_loop_waits_through_an_outage_of_the_scoring_server(tokenizer, tmp_path, monkeypatch):
    """The reward worker waits for ``rubriq serve`` to come (back) up (patience, default 600 s);
    with RUBRIQ_PATIENCE set short, a server that stays down ends the batch with
    RubriQUnavailable naming the setting, after about that long."""
    from rubriq.integrations import backend as backend_module
    from rubriq.serve import client as client_module
    from rubriq.serve.client import DEFAULT_PATIENCE, RubriQUnavailable

    assert DEFAULT_PATIENCE >= 300  # a restart of the service fits
    s = Server("--workers", "1", log=tmp_path / "log")
    config = compose(
        [
            f"actor_rollout_ref.model.path={tokenizer.path}",
            "reward.custom_reward_function.path=pkg://rubriq.integrations.verl",
            f"+reward.custom_reward_function.reward_kwargs.url={s.url}",
        ]
    )
    out: dict = {}
    thread = threading.Thread(
        target=lambda: out.setdefault(
            "outputs", reward_loop(config, data_proto(tokenizer, [(c, t) for _, c, t in SMALL]))[0]
        )
    )
    thread.start()  # the server is not up yet
    deadline = time.monotonic() + 120
    while not any(
        getattr(b, "client", None) and b.client.url == s.url and b.client.stats["retries"]
        for b in list(backend_module._BACKENDS.values())
    ):
        assert time.monotonic() < deadline and thread.is_alive(), "the reward worker did not wait for the server"
        time.sleep(0.05)  # paces the poll of the client's retry count (the deadline bounds it)
    try:
        s.start()
        thread.join(timeout=240)
        assert not thread.is_alive()
    finally:
        s.stop()
    check_outputs(out["outputs"], SMALL)

    down = compose(
        [
            f"actor_rollout_ref.model.path={tokenizer.path}",
            "reward.custom_reward_function.path=pkg://rubriq.integrations.verl",
            f"+reward.custom_reward_function.reward_kwargs.url=http://127.0.0.1:{free_port()}",
        ]
    )
    monkeypatch.setenv("RUBRIQ_PATIENCE", "2")  # read when the reward worker builds its client
    clock = VirtualClock()  # the client's waits, counted without waiting
    monkeypatch.setattr(client_module, "time", clock)
    with pytest.raises(RubriQUnavailable, match=r"over 2.0 s .* waits 2 s .*RUBRIQ_PATIENCE"):
        reward_loop(down, data_proto(tokenizer, [(MIXED[0][1], QFT2)]))
    assert clock.now == pytest.approx(2.0) and len(clock.sleeps) >= 2


@pytest.mark.timeout(900)  # a fresh interpreter, 64 forked scorers, a Ray cluster: minutes on a loaded machine
def test_verl_prime_manager_and_the_reward_loop_manager_on_local_ray(tokenizer, tmp_path):
    """In a fresh interpreter (tests/verl_process_check.py):

    - PrimeRewardManager scores in a forked process pool and takes ``float(result[0])`` of an
      answer that is not a number, setting the whole batch to 0 when that fails: compute_score,
      loaded by file path (so it must pickle to reach the pool), gives R;
    - verl's RewardLoopManager (RewardLoopWorker actors on a local Ray cluster) with the docs'
      RubriQRewardManager lines, in-process in each reward worker: each row's reward as verl's
      trainer reads it from rm_scores, and the reward_extra_info arrays.
    """
    import rubriq.integrations.verl as module

    ((_, manager),) = [r for r in verl_docs_recipes() if "reward.reward_manager.name=RubriQRewardManager" in r[1]]
    request = {
        "tokenizer": tokenizer.path,
        "items": [[c, s] for _, c, s in SMALL],
        "prime": [
            f"reward.custom_reward_function.path={module.__file__}",
            "reward.custom_reward_function.name=compute_score",
        ],
        "ray": ["reward.num_workers=1", *(o for o in manager if ".url=" not in o)],
    }
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    with open(tmp_path / "log", "wb") as log:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.verl_process_check",
                str(tmp_path / "request.json"),
                str(tmp_path / "out.json"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            timeout=840,
        )
    assert done.returncode == 0, (tmp_path / "log").read_text(errors="replace")[-3000:]
    result = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    want = [verl_row(c, s) for _, c, s in SMALL]
    assert sum(w["score"] for w in want) > 2  # not all zeros
    assert result["prime"] == pytest.approx([w["score"] for w in want], abs=1e-6)  # float32 tensors
    assert result["ray"] == pytest.approx([w["score"] for w in want], abs=1e-6)
    for i, (name, _, _) in enumerate(SMALL):
        assert {k: result["ray_extra"][k][i] for k in want[i]} == pytest.approx(want[i], abs=1e-12), name


# -- OpenRLHF --------------------------------------------------------------------------------------
class AnswerEngine:
    """Stands in for OpenRLHF's vLLM engine: "generates" the given answer (its tokens and the end
    of turn), at most ``max_tokens`` of them."""

    def __init__(self, tokenizer, answer: str) -> None:
        self.tokenizer = tokenizer
        self.ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        self.prompt_ids: list[int] = []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        self.prompt_ids = list(prompt_token_ids)
        ids = self.ids[: sampling_params.max_tokens]
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)])


def sampling_params(max_tokens=None):
    return SimpleNamespace(max_tokens=max_tokens, logprobs=None)


def openrlhf_rows(tokenizer, cases, label_key="target"):
    """(prompt, label) pairs as OpenRLHF's PromptDataset makes them from ``rubriq data build``-like
    rows (chat-message prompt, target column) with --data.input_key prompt
    --data.apply_chat_template --data.label_key ``label_key``."""
    from openrlhf.datasets.prompts_dataset import PromptDataset

    rows = [
        {"prompt": [{"role": "user", "content": f"Task {i}: write the circuit in OpenQASM 2.0."}], "target": spec}
        for i, (_, _, spec) in enumerate(cases)
    ]
    args = SimpleNamespace(data=SimpleNamespace(input_key="prompt", label_key=label_key, apply_chat_template=True))
    dataset = PromptDataset(rows, tokenizer, SimpleNamespace(args=args, is_rank_0=lambda: True))
    return [dataset[i][1:3] for i in range(len(dataset))]


def reward_file() -> str:
    import rubriq.integrations.openrlhf as module

    return module.__file__


def process_response_into_experience():
    """OpenRLHF's SamplesGenerator._process_response_into_experience, compiled from the installed
    wheel (its module imports vLLM)."""
    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience

    (path,) = [f for f in importlib.metadata.files("openrlhf") if str(f).endswith("ppo_utils/samples_generator.py")]
    source = Path(path.locate()).read_text(encoding="utf-8")
    (cls,) = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "SamplesGenerator"]
    (fn,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_process_response_into_experience"]
    namespace = {"torch": torch, "Experience": Experience}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path.locate()), "exec"), namespace)  # noqa: S102
    return namespace["_process_response_into_experience"]


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "server"])
def test_openrlhf_loader_execute_and_experience(tokenizer, server, remote, monkeypatch):
    """OpenRLHF's --reward.remote_url file loader and SingleTurnAgentExecutor.execute(), one query
    at a time as its rollout calls it, for every case; the Experience its rollout builds from the
    answer carries RubriQ's reward; a whole batch in one call (older OpenRLHF) too."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from rubriq.integrations import backend as backend_module
    from rubriq.integrations.openrlhf import reward_func

    if remote:  # OpenRLHF passes no options: the Ray job's env_vars select the server
        monkeypatch.setenv("RUBRIQ_URL", server.url)
        monkeypatch.setattr(backend_module, "_BACKENDS", {})
    executor = SingleTurnAgentExecutor(remote_rm_url=reward_file())
    assert executor.reward_func is reward_func  # the file hands over the package's function
    experience_of = process_response_into_experience()
    queries, prompts, labels = [], [], []
    for (name, completion, spec), (prompt, label) in zip(CASES, openrlhf_rows(tokenizer, CASES), strict=True):
        assert label == spec
        engine = AnswerEngine(tokenizer, completion)
        out = asyncio.run(executor.execute(prompt, label, sampling_params(), 4096, tokenizer, engine))
        want = ref(completion, spec)
        assert out["reward"].item() == pytest.approx(want["reward"], abs=1e-6), name  # float32 tensors
        assert out["scores"].item() == pytest.approx(want["reward"], abs=1e-6), name
        for dim in DIMENSIONS:
            assert out["extra_logs"][dim].item() == pytest.approx(want["scores"][dim], abs=1e-6), name
        assert out["extra_logs"]["correct"].item() == float(want["correct"])
        assert out["extra_logs"]["prompt_truncated"].item() == 0.0
        experience = experience_of(None, out, max_len=4096)
        assert experience.rewards.item() == pytest.approx(want["reward"], abs=1e-6), name
        assert experience.info["fidelity"].item() == pytest.approx(want["scores"]["fidelity"], abs=1e-6)
        queries.append(tokenizer.decode(out["observation_tokens"], skip_special_tokens=False))
        prompts.append(prompt)
        labels.append(label)
    whole = reward_func(queries, prompts, labels)
    assert whole["rewards"].tolist() == pytest.approx([ref(c, t)["reward"] for _, c, t in CASES], abs=1e-6)


@pytest.mark.parametrize(
    ("label_key", "bad"),
    [(None, None), ("target", "qft-4"), ("target", '{"num_qubits": 4}'), ("target", '["qft"]')],
    ids=["no --data.label_key", "not JSON", "no algorithm", "not an object"],
)
def test_openrlhf_missing_or_malformed_label_stops_the_run(tokenizer, label_key, bad):
    """Without --data.label_key OpenRLHF's dataset passes "" as every label; a label that is no
    target spec stops the run at the first call, with the flag and a spec in the message
    (execute() would turn an Exception into a missing reward and train on)."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from rubriq.integrations.openrlhf import StopTraining

    cases = [("bad label", MIXED[0][1], bad if bad is not None else QFT2)]
    ((prompt, label),) = openrlhf_rows(tokenizer, cases, label_key=label_key)
    assert label == ("" if label_key is None else bad)
    executor = SingleTurnAgentExecutor(remote_rm_url=reward_file())
    with pytest.raises(StopTraining, match=r"--data\.label_key target.*\{\"algorithm\": \"qft\"") as info:
        asyncio.run(
            executor.execute(prompt, label, sampling_params(), 4096, tokenizer, AnswerEngine(tokenizer, MIXED[0][1]))
        )
    assert not isinstance(info.value, Exception)
    if label_key is None:
        assert "OpenRLHF passes '' when --data.label_key is not set" in str(info.value)


def test_openrlhf_truncated_prompt_is_scored_and_counted(tokenizer):
    """A prompt longer than --data.max_len leaves for it: OpenRLHF's execute() keeps its last
    tokens, so the query holds no whole prompt. The answer after the prompt's tail is scored
    against the label's target (never the prompt's circuit) and counted as prompt_truncated; a
    query with no prompt tail at all stops the run naming the prompt length and the flags."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from rubriq.integrations.openrlhf import StopTraining, reward_func

    qasm = json.loads(REWRITE)["qasm"]
    task = "Rewrite this circuit with fewer T gates; keep its unitary.\n" + qasm + "\nExplain nothing. " * 60
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": task}], tokenize=False, add_generation_prompt=True
    )
    length = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    executor = SingleTurnAgentExecutor(remote_rm_url=reward_file())
    answers = [MIXED[6][1], "I cannot do that.", CONVERSATIONAL]
    for answer in answers:
        engine = AnswerEngine(tokenizer, answer)
        out = asyncio.run(executor.execute(prompt, REWRITE, sampling_params(200), length // 2 + 200, tokenizer, engine))
        assert len(engine.prompt_ids) == length // 2  # OpenRLHF cut the prompt to its last tokens
        query = tokenizer.decode(out["observation_tokens"], skip_special_tokens=False)
        assert prompt not in query
        assert out["reward"].item() == pytest.approx(ref(answer, REWRITE)["reward"], abs=1e-6), answer
        assert out["extra_logs"]["prompt_truncated"].item() == 1.0
    assert ref(answers[1], REWRITE)["reward"] == 0.0  # the prompt's own circuit was not scored

    with pytest.raises(StopTraining, match=rf"neither its prompt \({len(prompt)} characters\).*--data\.max_len"):
        reward_func(["a tokenizer round trip changed this text: " + qasm], [prompt], [REWRITE])


def test_openrlhf_outage_stops_the_run_after_the_patience(tokenizer, monkeypatch):
    """A scoring server that stays down past the client's patience stops the run instead of
    giving each sample a missing reward."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from rubriq.integrations import backend as backend_module
    from rubriq.integrations.openrlhf import StopTraining

    monkeypatch.setenv("RUBRIQ_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("RUBRIQ_PATIENCE", "1")
    monkeypatch.setattr(backend_module, "_BACKENDS", {})
    ((prompt, label),) = openrlhf_rows(tokenizer, [("correct", MIXED[0][1], QFT2)])
    executor = SingleTurnAgentExecutor(remote_rm_url=reward_file())
    with pytest.raises(StopTraining, match=r"RubriQUnavailable.*RUBRIQ_PATIENCE"):
        asyncio.run(
            executor.execute(prompt, label, sampling_params(), 4096, tokenizer, AnswerEngine(tokenizer, MIXED[0][1]))
        )


def test_docs_openrlhf_flags_exist_in_the_pinned_cli():
    """Every flag of the docs' OpenRLHF block is one the pinned train_ppo_ray declares."""
    ((label, block),) = docs_blocks("OpenRLHF")
    assert f"tested with OpenRLHF {OPENRLHF}" in label
    (path,) = [f for f in importlib.metadata.files("openrlhf") if str(f).endswith("cli/train_ppo_ray.py")]
    source = Path(path.locate()).read_text(encoding="utf-8")
    command = block.split("python3 -m openrlhf.cli.train_ppo_ray", 1)[1]
    flags = [t for t in command.split() if t.startswith("--")]
    assert {"--reward.remote_url", "--data.label_key"} <= set(flags)
    for flag in flags:
        assert f'"{flag}"' in source, flag
