"""``rubriq data build --from-qasm DIR`` + ``rubriq evaluate`` on a folder of 5 circuits (issue 48):
the rewrite outcomes and the gap to PyZX closed, checked against a hand count.

The circuits are small enough to count by hand (T0, the fewest T gates, each answer's T):

| file | circuit | T0 | fewest T | the scripted answer | outcome | gap closed |
|---|---|---|---|---|---|---|
| a | t t | 2 | 0 (= s) | s | correct, T 0 < 2 | (2-0)/(2-0) = 1 |
| b | t h t t | 3 | 1 (t h s) | the input verbatim | copy | 0 |
| c | t t h t t h t | 5 | 1 (s h s h t) | s h t t h t (T 3) | correct, T 3 < 5 | (5-3)/(5-1) = 0.5 |
| d | h t h t | 2 | 2 | h t h | wrong | 0 |
| e | cx; t q1; cx; cx; t q1; cx | 2 | 0 (cx; s q1; cx) | no circuit | wrong | 0 |

so the rates are 2/5 reductions, 1/5 copies, 2/5 wrong, and gap_closed = 1.5 / 5 = 0.3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("fastapi")

from tests.openai_server import ServerThread, build_app  # noqa: E402

HEAD = 'OPENQASM 2.0;\ninclude "qelib1.inc";\n'


def program(n: int, *gates: str) -> str:
    return HEAD + f"qreg q[{n}];\n" + "".join(f"{g};\n" for g in gates)


CIRCUITS = {
    "a": (program(1, "t q[0]", "t q[0]"), 2, 0, program(1, "s q[0]")),
    "b": (program(1, "t q[0]", "h q[0]", "t q[0]", "t q[0]"), 3, 1, None),  # None: the input verbatim
    "c": (
        program(1, "t q[0]", "t q[0]", "h q[0]", "t q[0]", "t q[0]", "h q[0]", "t q[0]"),
        5,
        1,
        program(1, "s q[0]", "h q[0]", "t q[0]", "t q[0]", "h q[0]", "t q[0]"),
    ),
    "d": (program(1, "h q[0]", "t q[0]", "h q[0]", "t q[0]"), 2, 2, program(1, "h q[0]", "t q[0]", "h q[0]")),
    "e": (
        program(2, "cx q[0],q[1]", "t q[1]", "cx q[0],q[1]", "cx q[0],q[1]", "t q[1]", "cx q[0],q[1]"),
        2,
        0,
        "I cannot improve this circuit.",
    ),
}


def run_cli(args: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    from rubriq.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    code = main(args)
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), " ".join(err.split())


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)


def test_build_then_evaluate_matches_the_hand_count(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "circuits"
    folder.mkdir()
    for name, (text, *_rest) in CIRCUITS.items():
        (folder / f"{name}.qasm").write_text(text)
    data = tmp_path / "mine"
    code, out, err = run_cli(
        ["data", "build", "--from-qasm", str(folder), "--out", str(data), "--prompt-style", "compact"],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert "5 rewrite prompts (compact style)" in out
    rows = [json.loads(line) for line in (data / "test.jsonl").read_text().splitlines()]
    assert [r["name"] for r in rows] == list(CIRCUITS)
    for r in rows:
        _, t0, fewest, _ = CIRCUITS[r["name"]]
        assert (r["t0"], r["t_pyzx"]) == (t0, fewest), r["name"]  # PyZX reaches the hand optimum here
        assert json.loads(r["target"]).get("t_best") == fewest
        assert r["prompt"][0]["role"] == "user"  # the compact style: one user message
    answers = {}
    for r in rows:
        text, _, _, answer = CIRCUITS[r["name"]]
        spec_qasm = json.loads(r["target"])["qasm"]
        answers[r["prompt"][-1]["content"]] = [f"```qasm\n{answer if answer is not None else spec_qasm}\n```"]
    with ServerThread(build_app(answers, tmp_path / "server.jsonl")) as server:
        args = ["evaluate", "--endpoint", server.url, "--model", "policy", "--dataset", str(data)]
        code, out, err = run_cli(
            [*args, "--max-new-tokens", "64", "--out", str(tmp_path / "eval")], capsys, monkeypatch
        )
    assert code == 0, err
    assert "correct, T < T0 (reduction) 0.40" in out
    assert "correct copy of the input 0.20" in out
    assert "wrong (not correct) 0.40" in out
    assert "gap to PyZX closed 0.30" in out
    rewrite = json.loads((tmp_path / "eval" / "summary.json").read_text())["rewrite"]
    assert rewrite["samples"] == rewrite["prompts"] == rewrite["gap_samples"] == 5
    assert rewrite["correct_reduction_rate"] == pytest.approx(2 / 5)
    assert rewrite["copy_rate"] == pytest.approx(1 / 5)
    assert rewrite["wrong_rate"] == pytest.approx(2 / 5)
    assert rewrite["gap_closed"] == pytest.approx((1 + 0 + 0.5 + 0 + 0) / 5)
    lo, hi = rewrite["intervals"]["gap_closed"]
    assert lo < 0.3 < hi


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"ok.qasm": program(1, "t q[0]"), "bad.qasm": program(1, "t q[0]", "cx q[0]")}, "bad.qasm, line 5"),
        (
            {"ok.qasm": program(1, "t q[0]"), "m.qasm": HEAD + "qreg q[1];\ncreg c[1];\nmeasure q[0] -> c[0];\n"},
            "m.qasm, line 5",
        ),
        ({"empty.qasm": ""}, "empty.qasm is empty"),
        ({"notes.txt": "no circuits here"}, "holds no .qasm file"),
    ],
)
def test_bad_files_name_the_file_and_line_and_write_nothing(files, expected, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "circuits"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    code, out, err = run_cli(["data", "build", "--from-qasm", str(folder), "--out", "mine"], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: --from-qasm: ") and expected in err, err
    assert not Path("mine").exists()


def test_from_qasm_flags(tmp_path, capsys, monkeypatch):
    code, _, err = run_cli(["data", "build", "--policy", "tiny"], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: --policy: goes with --from-qasm")
    code, _, err = run_cli(["data", "build", "--from-qasm", "nowhere"], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: --from-qasm: no folder nowhere")
    (tmp_path / "c").mkdir()
    code, _, err = run_cli(["data", "build", "--from-qasm", "c", "--small"], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: --from-qasm: takes no --small")
