"""How a policy is sampled is declared once (rubriq/models/sampling.py): the spec's fields are
settings nowhere else, the command line derives its options from them, both policies implement
one interface, and the records that predate the spec keep their layout."""

import ast
import inspect
import json
from pathlib import Path

import pytest

from rubriq.models.sampling import FIELDS, Policy, SamplingSpec

ROOT = Path(__file__).resolve().parents[1]


def test_sampling_fields_are_declared_as_settings_once():
    """No class but SamplingSpec declares temperature or top_p as a field (a decoding
    plan, resolved from a transformers call, is not a setting), and no command declares them as
    its own options: they come from the spec (``typer_options(SamplingSpec, ...)``)."""
    allowed = {"SamplingSpec", "DecodePlan"}
    found = []
    for path in sorted((ROOT / "rubriq").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name not in allowed:
                for item in node.body:
                    target = getattr(item, "target", None)
                    if isinstance(item, ast.AnnAssign) and isinstance(target, ast.Name):
                        if target.id in ("temperature", "top_p"):  # top_k: also the hardware's k best
                            found.append(f"{path.relative_to(ROOT)}:{item.lineno} {node.name}.{target.id}")
            if isinstance(node, ast.FunctionDef) and path.parent.name == "cli":
                for arg in node.args.args + node.args.kwonlyargs:
                    if arg.arg in ("temperature", "top_p", "top_k", "max_new_tokens"):
                        found.append(f"{path.relative_to(ROOT)}:{arg.lineno} {node.name}({arg.arg})")
    assert not found, f"declared outside SamplingSpec: {found}"


def test_the_commands_derive_their_sampling_options_from_the_spec():
    from rubriq.cli.evaluate import evaluate
    from rubriq.cli.optimize import optimize
    from rubriq.cli.synthesize import synthesize

    def defaults(command) -> dict:
        params = inspect.signature(command).parameters
        assert set(FIELDS) <= set(params), f"{command.__name__} lacks {set(FIELDS) - set(params)}"
        return {name: params[name].default.default for name in FIELDS}

    assert defaults(evaluate) == {**SamplingSpec().to_dict(), "top_p": 0.95, "max_new_tokens": 512}
    assert defaults(synthesize)["samples"] == 16 and defaults(synthesize)["temperature"] == 0.8
    assert defaults(optimize)["samples"] == 8 and defaults(optimize)["max_new_tokens"] == 0
    params = inspect.signature(evaluate).parameters
    assert params["samples"].default.param_decls == ("--samples", "-n")


def test_both_policies_implement_the_policy_interface(tmp_path):
    from rubriq.evaluation.endpoint import EndpointPolicy
    from rubriq.evaluation.sampling import LocalPolicy, as_policy
    from rubriq.evaluation.settings import EndpointSettings

    local = as_policy(("tokenizer", "model"), batch_size=4)
    assert isinstance(local, LocalPolicy) and local.batch_size == 4 and isinstance(local, Policy)
    remote = EndpointPolicy(EndpointSettings(endpoint="http://127.0.0.1:9/v1"), "m", tmp_path / "c.jsonl")
    assert isinstance(remote, Policy) and as_policy(remote) is remote
    for cls in (LocalPolicy, EndpointPolicy):
        params = inspect.signature(cls.generate).parameters
        assert list(params)[:3] == ["self", "rows", "spec"], cls


def test_spec_checks_and_generate_keywords():
    with pytest.raises(ValueError, match="unknown sampling key 'temp'"):
        SamplingSpec().replace(temp=1.0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingSpec(temperature=1.0, top_p=0.0).validate()
    spec = SamplingSpec(temperature=0.7, top_k=20, max_new_tokens=9)
    assert spec.generate_kwargs() == {
        "do_sample": True,
        "max_new_tokens": 9,
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": 20,
    }
    assert SamplingSpec().generate_kwargs() == {"do_sample": False, "max_new_tokens": 256}


def test_a_study_records_its_settings_in_the_committed_layout():
    """summary.json's "study" (and study.json) keep the flat layout they had before the spec:
    the same keys in the same order as the committed pilot summary."""
    from rubriq.studies.settings import StudySettings

    committed = json.loads((ROOT / "results/studies/rewriting/pilot/base/summary.json").read_text())["study"]
    record = StudySettings.from_yaml(ROOT / "configs/studies/rewriting_pilot.yaml").to_record()
    assert list(record) == list(committed)
    assert {k: record[k] for k in ("samples", "temperature", "top_p", "max_new_tokens")} == {
        k: committed[k] for k in ("samples", "temperature", "top_p", "max_new_tokens")
    }


def test_the_study_temperature_is_the_training_one_unless_the_study_says_otherwise():
    from rubriq.studies.settings import StudySettings, held_out_sampling
    from rubriq.training.config import TrainSettings

    study = StudySettings.from_yaml(ROOT / "configs/studies/rewriting_cpu.yaml")
    train = TrainSettings.from_yaml(study.train_config)
    spec = study.held_out_sampling(train)
    assert (
        (spec.temperature, spec.top_p, spec.max_new_tokens)
        == (0.8, 1.0, 192)
        == (
            train.sampling().temperature,
            train.sampling().top_p,
            train.sampling().max_new_tokens,
        )
    )
    assert spec.samples == 8 and spec.top_k is None
    own = held_out_sampling(study.sampling.replace(temperature=0.5), train)
    assert own.temperature == 0.5 and own.top_p == 1.0


def test_the_samplers_take_the_spec_as_it_is_not_read_back_from_the_warpers():
    """Handed the spec, decode_plan's temperature, top-k and top-p are the spec's (top-k unset:
    the resolved generation config's), the same plan transformers' own warpers describe; keywords
    that are not the spec's (greedy against a sampling spec) are left to generate."""
    import torch
    import transformers

    from rubriq.models.decoding import decode_plan

    config = transformers.LlamaConfig(
        vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(1, 50, (2, 5))
    for spec in (
        SamplingSpec(temperature=0.7, top_p=0.9, max_new_tokens=4),
        SamplingSpec(temperature=1.3, top_p=1.0, top_k=7, max_new_tokens=4),
        SamplingSpec(max_new_tokens=4),
    ):
        kwargs = {**spec.generate_kwargs(), "pad_token_id": 0}
        given, read_back = decode_plan(model, ids, kwargs, spec), decode_plan(model, ids, kwargs)
        assert given is not None and read_back is not None
        assert (given.temperature, given.top_k, given.top_p) == (
            read_back.temperature,
            read_back.top_k,
            read_back.top_p,
        )
        if not spec.greedy:
            assert (given.temperature, given.top_p) == (spec.temperature, spec.top_p)
    sampled = SamplingSpec(temperature=0.7, max_new_tokens=4)
    assert (
        decode_plan(model, ids, {**SamplingSpec(max_new_tokens=4).generate_kwargs(), "pad_token_id": 0}, sampled)
        is None
    )
