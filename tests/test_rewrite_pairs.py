"""Remedy 2 of issue 52: SFT answers that name each cancelled gate pair before the circuit
(``answer_format: pairs``, rubriq/data/rewrites.py).  The named positions are checked against the
prompt's own text, the named edits against Qiskit's Operator (the input with exactly those edits
is the answer's circuit), the scores of an answer with the comment lines against those without
it (through the scoring the studies use), the default format against the rows the generator
wrote before the option existed, and the configs of the remedy against the study's."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qiskit import QuantumCircuit, qasm2
from qiskit.quantum_info import Operator

from rubriq.data.rewrites import RewriteGeneratorSpec, generate, partial_rewrite, small_rewrite_rows

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "configs" / "studies"
LINE = re.compile(r"// (cancel|merge) (\d+) (t|tdg) q\[(\d+)\] \+ (\d+) (t|tdg)(?: -> (s|sdg))?")
"""A comment line of the pairs format, as the module docstring describes it (written here from
the docstring, not imported)."""
FAST = {"optimum": False, "target_t_best": False}
PARTIAL = RewriteGeneratorSpec(
    count=10, qubits=(2, 3), core_gates=(3, 6), redundancies=(1, 3), seed=7, answers=3, keep_probability=0.5, **FAST
)
"""Partial rewrites (some answers keep a redundancy, some are copies) of every kind."""
PLANTED = RewriteGeneratorSpec(
    count=10, qubits=(2, 3, 4), core_gates=(3, 6), redundancies=(1, 3), seed=2, answers=1, keep_probability=0.0,
    copies=False, **FAST,
)  # fmt: skip
"""The SFT corpus's kind of answer: every planted redundancy removed."""
# sha256 of json.dumps(small_rewrite_rows(PARTIAL, style="minimal"), sort_keys=True) as the
# generator wrote it before answer_format existed (commit dd0a2fa)
PARTIAL_ROWS_SHA256 = "45b4665cb02fdf415c221911bc7bafcfc920a0a0118bc5949ec799507566172c"


def _pairs(spec: RewriteGeneratorSpec) -> RewriteGeneratorSpec:
    return dataclasses.replace(spec, answer_format="pairs")


def _prompt_circuit(row: dict) -> str:
    """The circuit the prompt shows (its ```qasm block)."""
    text = row["prompt"][-1]["content"]
    match = re.search(r"```qasm\n(.*?)```", text, re.S)
    assert match, text
    return match.group(1)


def _gate_statements(qasm: str) -> list[str]:
    """The gate statements of an OpenQASM 2.0 text, in order (header, include, qreg, comments out)."""
    lines = [line.strip() for line in qasm.splitlines()]
    return [s for s in lines if s and not s.startswith(("OPENQASM", "include", "qreg", "creg", "//"))]


def _parsed_lines(answer: str) -> list[tuple]:
    """(verb, position 1, gate 1, qubit, position 2, gate 2, Clifford) of each comment line; every
    comment line must match the format and come before the circuit."""
    lines = answer.splitlines()
    comments = [line for line in lines if line.startswith("//")]
    assert lines[: len(comments)] == comments, "the comment lines come first"
    out = []
    for line in comments:
        m = LINE.fullmatch(line)
        assert m, line
        out.append((m[1], int(m[2]), m[3], int(m[4]), int(m[5]), m[6], m[7]))
    return out


def _hand_t(statements: list[str]) -> int:
    return sum(1 for s in statements if s.split()[0] in ("t", "tdg"))


def _apply_named_edits(prompt_qasm: str, answer: str) -> str:
    """The prompt's circuit with the answer's named edits made by hand: for each line, gate A
    becomes the named Clifford (or goes, for ``cancel``) and gate B goes."""
    statements = _gate_statements(prompt_qasm)
    header = [s for s in prompt_qasm.splitlines() if s.strip().startswith(("OPENQASM", "include", "qreg"))]
    edited: list[str | None] = list(statements)
    for verb, a, _, q, b, _, clifford in _parsed_lines(answer):
        edited[a - 1] = None if verb == "cancel" else f"{clifford} q[{q}];"
        edited[b - 1] = None
    return "\n".join(header + [s for s in edited if s is not None]) + "\n"


def _check_answer(row: dict, answer: str, plain: str) -> int:
    """Every named position holds the named gate in the prompt's circuit, the answer's circuit is
    ``plain`` (the circuit format's answer) after the comment lines, and the input with the named
    edits is equivalent to the input and to the answer's circuit with the same T-count as the
    answer: the named pairs are exactly what was removed.  Returns the number of lines."""
    prompt_qasm = _prompt_circuit(row)
    statements = _gate_statements(prompt_qasm)
    named = _parsed_lines(answer)
    assert answer.endswith(plain) and answer[: len(answer) - len(plain)].count("\n") == len(named)
    for verb, a, first, q, b, second, clifford in named:
        assert a < b and statements[a - 1] == f"{first} q[{q}];", (a, statements)
        assert statements[b - 1] == f"{second} q[{q}];", (b, statements)
        expected = {("t", "tdg"): None, ("tdg", "t"): None, ("t", "t"): "s", ("tdg", "tdg"): "sdg"}[(first, second)]
        assert (verb, clifford) == (("cancel", None) if expected is None else ("merge", expected))
    positions = [p for line in named for p in (line[1], line[4])]
    assert len(set(positions)) == len(positions), "each gate named once"
    assert [line[1] for line in named] == sorted(line[1] for line in named), "lines in circuit order"
    edited = _apply_named_edits(prompt_qasm, answer)
    reference = Operator(QuantumCircuit.from_qasm_str(prompt_qasm))
    answer_circuit = QuantumCircuit.from_qasm_str(plain)
    assert Operator(QuantumCircuit.from_qasm_str(edited)).equiv(Operator(answer_circuit))
    assert Operator(answer_circuit).equiv(reference)
    assert _hand_t(_gate_statements(edited)) == _hand_t(_gate_statements(plain)) == _hand_t(statements) - 2 * len(named)
    return len(named)


def test_the_default_format_writes_the_rows_it_wrote_before_the_option():
    rows = small_rewrite_rows(PARTIAL, style="minimal")
    assert hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest() == PARTIAL_ROWS_SHA256
    assert small_rewrite_rows(dataclasses.replace(PARTIAL, answer_format="circuit"), style="minimal") == rows
    # the answers as the generator wrote them: partial_rewrite's circuits, drawn in turn from sft_seed 0
    rng = np.random.default_rng(0)
    expected = [[qasm2.dumps(partial_rewrite(task, rng, 0.5)) for _ in range(3)] for task in generate(PARTIAL)]
    assert [r["sft_answers"] for r in rows] == expected
    assert not any("//" in a for r in rows for a in r["sft_answers"])


@pytest.mark.parametrize("spec", [PARTIAL, PLANTED], ids=["partial", "planted"])
def test_pairs_change_only_the_sft_answers_and_name_exactly_the_removed_gates(spec):
    plain_rows = small_rewrite_rows(spec, style="minimal")
    pairs_rows = small_rewrite_rows(_pairs(spec), style="minimal")
    assert len(pairs_rows) == len(plain_rows)
    kinds, counts = set(), []
    for plain, pairs in zip(plain_rows, pairs_rows, strict=True):
        assert {k: v for k, v in pairs.items() if k != "sft_answers"} == {
            k: v for k, v in plain.items() if k != "sft_answers"
        }
        kinds |= set(json.loads(plain["planted"]))
        for answer, plain_answer in zip(pairs["sft_answers"], plain["sft_answers"], strict=True):
            counts.append(_check_answer(pairs, answer, plain_answer))
    assert kinds == {"adjacent", "commuting", "parity"}
    if spec is PARTIAL:  # kept redundancies are not named: some answers name fewer than planted, copies none
        assert 0 in counts and max(counts) >= 2
    else:
        assert all(c >= 1 for c in counts)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), keep=st.sampled_from([0.0, 0.5]), qubits=st.sampled_from([(2,), (3,), (4,)]))
def test_named_pairs_hold_over_seeds(seed, keep, qubits):
    spec = RewriteGeneratorSpec(
        count=3, qubits=qubits, core_gates=(3, 8), redundancies=(1, 4), seed=seed, answers=2, keep_probability=keep,
        **FAST,
    )  # fmt: skip
    plain_rows = small_rewrite_rows(spec, style="compact", sft_seed=seed)
    pairs_rows = small_rewrite_rows(_pairs(spec), style="compact", sft_seed=seed)
    for plain, pairs in zip(plain_rows, pairs_rows, strict=True):
        assert pairs["prompt"] == plain["prompt"]
        for answer, plain_answer in zip(pairs["sft_answers"], plain["sft_answers"], strict=True):
            _check_answer(pairs, answer, plain_answer)


def test_a_parity_pair_names_its_t_gates_inside_the_cx_sandwiches():
    from rubriq.data.rewrites import Planted, SmallRewrite

    task = SmallRewrite("hand", 2)
    sandwich = [("cx", (0, 1)), ("t", (1,)), ("cx", (0, 1)), ("cx", (0, 1)), ("t", (1,)), ("cx", (0, 1))]
    task.pieces = [
        ("gate", ("h", (0,))),
        ("planted", Planted("parity", sandwich, [("cx", (0, 1)), ("s", (1,)), ("cx", (0, 1))])),
        ("planted", Planted("adjacent", [("tdg", (0,)), ("t", (0,))], [])),
    ]
    assert task.pair_lines(set()) == ["// merge 3 t q[1] + 6 t -> s", "// cancel 8 tdg q[0] + 9 t"]
    assert task.pair_lines({0}) == ["// cancel 8 tdg q[0] + 9 t"]
    assert task.pair_lines() == [] and task.answer(None, "pairs") == task.qasm()
    lines = "// merge 3 t q[1] + 6 t -> s\n// cancel 8 tdg q[0] + 9 t\n"
    assert task.answer(set(), "pairs") == lines + task.qasm(set())
    with pytest.raises(ValueError, match="answer_format"):
        task.answer(set(), "prose")


def test_a_bad_answer_format_is_a_clear_config_error():
    from rubriq.config import ConfigError, from_dict

    with pytest.raises(ValueError, match="answer_format"):
        RewriteGeneratorSpec(answer_format="prose")
    with pytest.raises(ConfigError, match="answer_format"):
        from_dict(RewriteGeneratorSpec, {"answer_format": "prose"})
    assert from_dict(RewriteGeneratorSpec, {"answer_format": "pairs"}).answer_format == "pairs"


def test_comment_lines_change_no_score_and_a_commented_copy_is_still_a_copy():
    """Fenced answers with and without the comment lines, and the input itself with comment lines
    before it (a copy), scored as the studies score samples (``rubriq.evaluation.sampling.score``:
    the BatchScorer over RubriQEvaluator), under the default rubric and the pilots' rubric: the
    same parse, T-count, fidelities, scores and reward; the comment lines parse where they stand;
    the outcomes as ``rewrite_outcome`` reads them (a commented copy is a copy)."""
    from rubriq.config import ExtractionConfig, RubricConfig, from_dict
    from rubriq.evaluation.records import Record
    from rubriq.evaluation.sampling import score
    from rubriq.extract.cascade import extract, fenced_block
    from rubriq.extract.qasm import load_qasm
    from rubriq.studies.analysis import rewrite_copies, rewrite_outcome
    from rubriq.training.sft import reference_completion

    rows = small_rewrite_rows(_pairs(dataclasses.replace(PLANTED, count=3, qubits=(2, 3))), style="minimal")
    plain_rows = small_rewrite_rows(dataclasses.replace(PLANTED, count=3, qubits=(2, 3)), style="minimal")
    records, kinds = [], []
    for row, plain in zip(rows, plain_rows, strict=True):
        answer, plain_answer = row["sft_answers"][0], plain["sft_answers"][0]
        comments = answer[: len(answer) - len(plain_answer)]
        source = json.loads(row["target"])["qasm"]
        texts = {
            "pairs": reference_completion(row, answer),  # the SFT completion, as the warm-start learns it
            "plain": reference_completion(plain, plain_answer),
            "copy_pairs": reference_completion(row, comments + source),
            "copy_plain": reference_completion(row, source),
        }
        # the comment lines before the header parse: the whole block, and the cascade from the header
        body = texts["pairs"].split("\n", 1)[1].rsplit("```", 1)[0]
        assert body.startswith("// ") and Operator(load_qasm(body)).equiv(Operator(qasm2.loads(plain_answer)))
        assert Operator(qasm2.loads(body)).equiv(Operator(qasm2.loads(plain_answer)))
        assert Operator(fenced_block(texts["pairs"], ExtractionConfig())).equiv(Operator(qasm2.loads(body)))
        assert extract(texts["pairs"]).strategy == "direct_qasm"
        for kind, text in texts.items():
            records.append(Record.of_row(row, text, len(records)))
            kinds.append(kind)
    rubrics = [RubricConfig(), from_dict(RubricConfig, {"tcount": {"mode": "relative"}, "fidelity_gating": "correct"})]
    for rubric in rubrics:
        scored = score(records, rubric, progress=False)
        by_kind: dict[str, list] = {}
        for kind, record in zip(kinds, scored, strict=True):
            by_kind.setdefault(kind, []).append(record)
        for with_lines, without in (("pairs", "plain"), ("copy_pairs", "copy_plain")):
            for a, b in zip(by_kind[with_lines], by_kind[without], strict=True):
                ra, rb = a["result"], b["result"]
                assert ra["parsed"] and rb["parsed"], (ra, rb)
                for key in ("t_count", "process_fidelity", "average_fidelity", "scores", "reward", "num_gates"):
                    assert ra[key] == rb[key], (key, ra[key], rb[key])
        for record in by_kind["pairs"]:  # independent references: Qiskit's Operator and hand T-counts
            source = json.loads(str(record["target"]))["qasm"]
            body = record["text"].split("\n", 1)[1].rsplit("```", 1)[0]
            assert Operator(qasm2.loads(body)).equiv(Operator(qasm2.loads(source)))
            assert record["result"]["average_fidelity"] == pytest.approx(1.0, abs=1e-9)
            assert record["result"]["t_count"] == _hand_t(_gate_statements(body)) < record["t0"]
        outcomes = [rewrite_outcome(r) for r in scored]
        assert [o for o, k in zip(outcomes, kinds, strict=True) if k in ("pairs", "plain")] == ["reduction"] * 6
        assert [o for o, k in zip(outcomes, kinds, strict=True) if k.startswith("copy")] == ["copy"] * 6
        assert rewrite_copies(scored) == {"correct": 12, "copies": 6, "fewer_t": 6}


def _train(name: str) -> dict:
    from rubriq.config import load_with_base

    return load_with_base(STUDIES / name)


def test_the_pairs_training_config_is_the_studys_with_only_the_sft_answer_format_changed():
    base, pairs = _train("rewriting_train.yaml"), _train("rewriting_train_pairs.yaml")
    assert pairs["output_dir"] == "runs/studies/rewriting_pairs"
    assert pairs["data"]["dataset"] == "runs/studies/rewriting_pairs/data"
    extra = pairs["data"]["build"]["extra_splits"]
    assert list(extra) == list(base["data"]["build"]["extra_splits"])  # drawn in the same order
    assert extra["sft"] == {**base["data"]["build"]["extra_splits"]["sft"], "answer_format": "pairs"}
    changed = {"output_dir": pairs["output_dir"], "data": {**base["data"], "dataset": pairs["data"]["dataset"]}}
    changed["data"]["build"] = {**base["data"]["build"], "extra_splits": {**base["data"]["build"]["extra_splits"]}}
    changed["data"]["build"]["extra_splits"]["sft"] = extra["sft"]
    assert pairs == {**base, **changed}


def test_the_pairs_build_draws_every_split_as_the_studys_build():
    """Both configs' ``data.build`` built with fewer circuits (and no PyZX optimum, for time),
    through ``build_splits``: every split holds the same rows, the sft split the same rows but
    for its answers, whose circuits are the same."""
    from rubriq.data.prompts import build_splits

    def small(build: dict) -> dict:
        build = json.loads(json.dumps(build))
        build["small_rewrites"] = [{**s, "count": 12, **FAST} for s in build["small_rewrites"]]
        for name, spec in build["extra_splits"].items():
            build["extra_splits"][name] = {**spec, "count": 6 if name != "sft" else 20, **FAST}
        return build

    base = build_splits(small(_train("rewriting_train.yaml")["data"]["build"]))
    pairs = build_splits(small(_train("rewriting_train_pairs.yaml")["data"]["build"]))
    assert list(pairs) == list(base) and {"train", "test", "hard", "sft", "validation"} <= set(base)
    for name in base:
        if name != "sft":
            assert pairs[name] == base[name], name
    assert len(pairs["sft"]) == len(base["sft"]) == 20
    for p, b in zip(pairs["sft"], base["sft"], strict=True):
        assert {k: v for k, v in p.items() if k != "sft_answers"} == {k: v for k, v in b.items() if k != "sft_answers"}
        assert _check_answer(p, p["sft_answers"][0], b["sft_answers"][0]) >= 1


def test_the_remedys_warm_start_and_pilot_configs():
    from rubriq.studies.settings import StudySettings
    from rubriq.studies.sft_curve import SftCurveSettings
    from rubriq.training.config import TrainSettings

    curve = SftCurveSettings.from_yaml(STUDIES / "rewriting_warm_start_pairs.yaml")
    first = SftCurveSettings.from_yaml(STUDIES / "rewriting_warm_start.yaml")
    assert curve.train_config == str(STUDIES / "rewriting_train_pairs.yaml")
    assert curve.eval_splits == ("validation",) and curve.output_dir == "runs/studies/rewriting_pairs"
    assert (curve.eval_at, curve.goal_reduction, curve.goal_wrong) == (first.eval_at, 0.25, 0.40)
    settings = TrainSettings.from_yaml(curve.train_config)
    assert settings.output_dir == curve.output_dir and settings.sft.split == "sft"
    assert "validation" in _train("rewriting_train_pairs.yaml")["data"]["build"]["extra_splits"]

    pilot = StudySettings.from_yaml(STUDIES / "rewriting_pilot_pairs.yaml")
    third = StudySettings.from_yaml(STUDIES / "rewriting_pilot_lr3e-4.yaml")
    # where `rubriq study sft-curve --keep results/studies/rewriting/pairs` keeps the warm-start's adapter
    assert pilot.warm_start_model == str(
        (ROOT / "results" / "studies" / "rewriting" / "pairs" / "warm_start").resolve()
    )
    assert pilot.results_dir == "results/studies/rewriting/pilot/pairs"
    assert pilot.output_dir not in (third.output_dir, curve.output_dir)
    same = {"warm_start_model", "results_dir", "output_dir"}
    assert {k: v for k, v in dataclasses.asdict(pilot).items() if k not in same} == {
        k: v for k, v in dataclasses.asdict(third).items() if k not in same
    }
    assert pilot.split == "validation"
