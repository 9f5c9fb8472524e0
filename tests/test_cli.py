"""The command line as a new user meets it.

- docs/cli.md's command blocks (which hold every command of the README), run in order as written
  (the tiny random model stands in for the embedded one; the few arguments added to keep a
  command small are listed next to it);
- every bad input the issue lists: one line naming the flag, exit code 2, no traceback, and
  nothing slow (model, dataset, compiler, emulator) started;
- the tables at 80 columns, exit codes, --version / -h, movable model folders.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from rubriq import __version__
from rubriq.cli import main
from tests.conftest import SHARED_SUITE
from tests.tiny import tiny_build, tiny_quickstart

ROOT = Path(__file__).resolve().parents[1]
WALKED = ROOT / "docs" / "cli.md"
QFT4 = ROOT / "rubriq" / "examples" / "qft4_textbook.qasm"

TINY_QUICKSTART = tiny_quickstart(tiny_build(qft_sizes=[2, 3], fractions=[0.0, 0.4]))


def run(argv: list[str], capsys, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    """``rubriq ARGV`` in this process, as the console script runs it: (exit code, stdout, stderr)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- the walk-through of docs/cli.md -------------------------------------------------------------------
def documented_commands(doc: Path = WALKED) -> list[str]:
    """Every `rubriq ...` / `python ... rubriq` / `accelerate ...` line of ``doc``'s bash blocks,
    continuation lines joined, comments and [optional] parts removed."""
    text = doc.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s#.*$", "", line)
            line = re.sub(r"\s\[[^\]]*\]", "", line)
            line = " ".join(line.split())
            if line.startswith(("rubriq ", "python -m rubriq", "python rubriq/", "accelerate ")):
                out.append(line)
    return out


# Not run here, with the reason (each is tested elsewhere at a small size).
NOT_RUN = {
    "rubriq study demo": "samples the committed 135M policies for minutes; tests/test_demo.py runs the demo "
    "end to end on a tiny policy",
    "rubriq study convergence configs/studies/learning_cpu.yaml": "hours of CPU; tests/test_study.py runs the study with the tiny model",
    "python rubriq/training/train_rubriq.py --rubriq_config configs/rubriq_grpo.yaml": "the paper's 7B model; tests/test_train_entry.py runs the entry point with the tiny model",
    "accelerate launch --num_processes 4 rubriq/training/train_rubriq.py --rubriq_config configs/rubriq_grpo.yaml": "4 GPUs; tests/test_multiprocess.py runs 2 CPU processes through accelerate",
    "rubriq train run configs/variants/sparse_ppo.yaml": "the paper's 7B model; PPO is run by test_multiprocess.py",
    "rubriq evaluate --endpoint http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-Coder-7B-Instruct --dataset "
    "data/prompts --samples 4 --temperature 0.8 --out runs/eval-qwen": "needs a vLLM server; tests/test_endpoint.py "
    "runs evaluate --endpoint against a server on 127.0.0.1",
    'rubriq synthesize "Synthesize a 4-qubit QFT circuit" --endpoint URL --model NAME -n 8': "needs a server; "
    "tests/test_endpoint.py runs synthesize --endpoint against one on 127.0.0.1",
    "rubriq app --endpoint URL --model NAME": "serves until stopped; tests/test_endpoint.py drives the "
    "Synthesize tab's handler over an endpoint",
}

# README command -> (arguments the test adds to keep it small, exit code, texts the output must hold)
WALK = {
    "rubriq score rubriq/examples/llm_completion.txt --target qft --qubits 4": ([], 0, ["CORRECT", "reward"]),
    "rubriq score - --target qpe --qubits 4 -p phase=0.375 --json < rubriq/examples/qft4_textbook.qasm": (
        [],
        0,
        ['"correct": false', '"reward"'],
    ),
    "rubriq score rubriq/examples/qft4_textbook.qasm --target circuit --target-qasm rubriq/examples/qft4_textbook.qasm": (
        [],
        0,
        ["CORRECT: F_avg = 1.000000"],
    ),
    "rubriq score rubriq/examples/qft4_textbook.qasm --target qft --qubits 4 --config configs/rubric_default.yaml": (
        [],
        0,
        ["CORRECT", "0.6979"],
    ),
    "rubriq targets": ([], 0, ["basis_encoding", "trotter_steps", "q[k]"]),
    "rubriq score rubriq/examples/bell_psi_minus.qasm --target bell --param which=psi-": (
        [],
        0,
        ["CORRECT: F_avg = 1"],
    ),
    "rubriq score rubriq/examples/bell_psi_minus.qasm --target stabilizer_state --qubits 2 --param "
    '\'stabilizers=["-XX", "-ZZ"]\'': ([], 0, ["CORRECT: F_avg = 1"]),
    "rubriq doctor": ([], 0, ["seccomp"]),
    # the network is not used: the suite comes from the local copy, as a user behind a firewall gets it
    "rubriq data fetch tcount-suite": (["--from", "SUITE"], 0, ["35 of 35 files written", "SHA-256 checked"]),
    "rubriq data build --out data/": ([], 0, ["prompts", "rewrite-tcount"]),
    "rubriq baselines --suite tcount --out results/baselines/tcount": (
        ["--limit", "2", "--max-t0", "30", "--methods", "qiskit,pyzx", "--workers", "1"],
        0,
        ["wrote"],
    ),
    # the tiny random model stands in for the committed warm-start (its folder is not copied in)
    "rubriq optimize rubriq/examples/rewrites/small3.qasm --model results/studies/rewriting/warm_start -n 4 "
    "--then pyzx --out runs/optimize/small3.qasm": (
        ["--model", "tiny", "--max-new-tokens", "8", "-n", "2"],
        0,
        ["T0 = 6", "policy+pyzx", "*best*", "wrote runs/optimize/small3.qasm and runs/optimize/small3.json"],
    ),
    "rubriq data build --from-qasm rubriq/examples/rewrites --policy results/studies/rewriting/warm_start "
    "--out runs/mine": (["--policy", "tiny"], 0, ["2 rewrite prompts (full style)", "small3"]),
    "rubriq evaluate --model results/studies/rewriting/warm_start --dataset runs/mine --samples 4 --temperature 0.8 "
    "--top-p 1 --out runs/eval-mine": (
        ["--model", "tiny", "--max-new-tokens", "8"],
        0,
        ["correct, T < T0 (reduction)", "gap to PyZX closed", "wrote"],
    ),
    "rubriq quickstart": (["--config", "TINY"], 0, ["report:", "rubriq synthesize"]),
    "rubriq train run configs/rubriq_grpo.yaml --launcher accelerate --num-processes 4 --accelerate-config "
    "configs/accelerate/deepspeed_zero2.yaml --dry-run": ([], 0, ["config ok", "accelerate launch"]),
    "rubriq train variants --out configs/variants": ([], 0, ["sparse_ppo"]),
    "rubriq evaluate --model runs/quickstart/train/final --dataset runs/quickstart/data --split test --samples 4 "
    "--temperature 0.8 --baselines qiskit,pyzx --out runs/eval": (
        ["--max-new-tokens", "8"],
        0,
        ["pass@4", "compiler baselines", "wrote"],
    ),
    "rubriq report runs/quickstart runs/eval --out runs/report --target-metric compression --target-value 3.3": (
        [],
        0,
        ["report.md"],
    ),
    # a random tiny model writes no correct circuit: the documented exit code 1 and its message
    'rubriq synthesize "Synthesize a 4-qubit QFT circuit with few T gates" --model runs/quickstart/train/final -n 16 '
    "--optimize --show-all": (
        ["--max-new-tokens", "8", "-n", "3"],
        1,
        ["compact qasm2 prompt", "3 candidates", "no functionally correct circuit"],
    ),
    "rubriq hardware backends": ([], 0, ["ibm_nighthawk", "ionq_aria"]),
    "python -m rubriq.hardware.submit_ibm_ionq --circuits rubriq/examples/hardware --backend ibm_eagle": (
        ["--shots", "256"],
        0,
        ["KL", "wrote"],
    ),
    "rubriq hardware run rubriq/examples/hardware --backend ibm_heron --backend ionq_forte --dry-run": (
        [],
        0,
        ["ionq_forte", "ghz4", "nothing sent"],
    ),
}


# Without a copy of the suite (a clone with no ../shared): what the same commands do instead
WITHOUT_SUITE = {
    "rubriq data fetch tcount-suite": None,  # needs the network or a copy: not run
    "rubriq data build --out data/": (
        [],
        0,
        ["prompts", "skipped collection tcount", "rubriq data fetch tcount-suite"],
    ),
    "rubriq baselines --suite tcount --out results/baselines/tcount": (
        [],
        2,
        ["error: the T-count suite is not fetched", "rubriq data fetch tcount-suite"],
    ),
}


def test_every_documented_command_is_walked_or_excused():
    commands = documented_commands()
    assert set(commands) == set(WALK) | set(NOT_RUN), (
        f"docs/cli.md commands not in the walk-through: {sorted(set(commands) - set(WALK) - set(NOT_RUN))}; "
        f"walk-through commands gone from docs/cli.md: {sorted((set(WALK) | set(NOT_RUN)) - set(commands))}"
    )
    readme = documented_commands(ROOT / "README.md")
    assert readme and set(readme) <= set(commands), (
        f"README commands missing from docs/cli.md: {set(readme) - set(commands)}"
    )


@pytest.mark.parametrize("with_suite", [True, False], ids=["with-suite-copy", "fresh-clone"])
def test_walkthrough(with_suite, tmp_path, monkeypatch, capsys):
    """Each command of docs/cli.md, in order, from a fresh folder (examples and configs copied
    in, an empty RubriQ cache), exits with its documented code and output. With a local copy of
    the T-count suite, `rubriq data fetch tcount-suite --from DIR` puts it in the cache and the
    suite's commands find it there; without one (a fresh clone), they skip it or fail in one line
    naming the fetch command. The fresh-clone run stops after the suite's commands."""
    if with_suite and not SHARED_SUITE.is_dir():
        pytest.skip(f"no local copy of the T-count suite at {SHARED_SUITE}")
    import shlex

    work = tmp_path / "work"
    work.mkdir()
    (work / "rubriq").mkdir()
    shutil.copytree(ROOT / "rubriq" / "examples", work / "rubriq" / "examples")
    shutil.copytree(ROOT / "configs", work / "configs")
    (work / "tiny.yaml").write_text(yaml.safe_dump(TINY_QUICKSTART))
    monkeypatch.chdir(work)
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "80")
    from rubriq.hardware import submit_ibm_ionq

    ran = []
    commands = documented_commands()
    if not with_suite:
        commands = commands[: commands.index("rubriq baselines --suite tcount --out results/baselines/tcount") + 1]
    for command in commands:
        if command in NOT_RUN:
            continue
        walk = WALK[command] if with_suite else WITHOUT_SUITE.get(command, WALK[command])
        if walk is None:
            continue
        extra, expected_code, expected = walk
        argv = shlex.split(command)
        stdin = None
        if "<" in argv:
            i = argv.index("<")
            stdin, argv = Path(argv[i + 1]).read_text(), argv[:i]
        argv += [{"TINY": str(work / "tiny.yaml"), "SUITE": str(SHARED_SUITE)}.get(a, a) for a in extra]
        if argv[0] == "python":
            capsys.readouterr()
            code = submit_ibm_ionq.main(argv[3:])
            out, err = capsys.readouterr()
        else:
            code, out, err = run(argv[1:], capsys, stdin, monkeypatch)
        text = out + err
        assert code == expected_code, f"{command}: exit {code}\n{text[-3000:]}"
        assert "Traceback" not in text, f"{command}\n{text[-3000:]}"
        flat = " ".join(text.split())  # rich wraps at 80 columns wherever a path's length puts the break
        for snippet in expected:
            assert " ".join(snippet.split()) in flat, f"{command}: {snippet!r} not in\n{text[-3000:]}"
        if argv[0] != "python" and "--json" not in argv:  # commands to copy (rubriq ..., accelerate ...) stay whole
            wide = [
                x for x in out.splitlines() if len(x) > 80 and not x.lstrip().startswith(("rubriq ", "accelerate "))
            ]
            assert not wide, f"{command}: lines over 80 columns: {wide}"
        ran.append(command)
        if command == "rubriq quickstart":
            # per-step dicts of the trainer stay off the console (metrics.jsonl has them)
            assert "'loss':" not in text and "{'" not in text
    assert (work / "data" / "prompts" / "test.jsonl").is_file()
    assert (work / "data" / "rewrite-tcount" / "test.jsonl").is_file() == with_suite
    if not with_suite:
        assert not (tmp_path / "cache" / "tcount_suite").exists() and not (work / "results").exists()
        return
    assert "rubriq quickstart" in ran and len(ran) == len(WALK)
    assert (tmp_path / "cache" / "tcount_suite" / "hwb8.qasm").is_file()  # where the fetch put it

    # the outputs the README names
    assert (work / "runs" / "quickstart" / "report.md").is_file()
    assert (work / "runs" / "eval" / "records.jsonl").is_file()
    report = (work / "runs" / "report" / "report.md").read_text()
    order = [report.index(f"quickstart: {p}") for p in ("before sft", "after sft", "after grpo")]
    assert order == sorted(order), "report phases are not in time order"
    assert "pass@4" in report and "compiler baselines on the same targets" in report
    summary = json.loads((work / "runs" / "eval" / "summary.json").read_text())
    assert "pass@4" in summary["overall"] and summary["by_dataset"].keys() == {"synthesis"}
    assert (work / "runs" / "hardware" / "results.json").is_file()  # submit's default output: runs/
    assert not (work / "results" / "hardware").exists()

    # the trained model folder says what it is, and moves
    final = work / "runs" / "quickstart" / "train" / "final"
    info = json.loads((final / "rubriq_policy.json").read_text())
    assert info["prompt_style"] == "compact" and info["formats"] == ["qasm2"]
    assert json.loads((final / "adapter_config.json").read_text())["base_model_name_or_path"] == "../sft/model"
    card = (final / "README.md").read_text()
    assert "[None]" not in card and "tiny random Llama" in card
    moved = tmp_path / "moved"
    shutil.move(str(work / "runs" / "quickstart"), moved)
    from rubriq.evaluation.evaluate import load_policy

    tokenizer, model = load_policy(str(moved / "train" / "final"))
    assert model.peft_config and tokenizer is not None


def test_data_build_collections_are_checked_before_anything_is_written(tmp_path, capsys):
    code, out, err = run(["data", "build", "--out", str(tmp_path / "d"), "--collections", "tcount,nope"], capsys)
    assert code == 2 and "--collections" in err and "nope" in err
    assert not (tmp_path / "d").exists()


# -- bad input -------------------------------------------------------------------------------------
BAD = [
    (["synthesize", "a 2-qubit QFT", "-n", "0"], "--samples"),
    (["synthesize", "a 2-qubit QFT", "-n", "-4"], "--samples"),
    (["synthesize", "a 2-qubit QFT", "--format", "cobol"], "--format"),
    (["synthesize", "a 2-qubit QFT", "--max-new-tokens", "-1"], "--max-new-tokens"),
    (["synthesize", "a poem about qubits"], "SPEC"),
    (["synthesize", "a 2-qubit QFT", "--model", "no/such/folder"], "--model"),
    (["synthesize", "a 2-qubit QFT", "--model", "FILE"], "--model"),
    (["score", "QFT4", "--target", "circuit", "--target-qasm", "BINARY"], "--target-qasm"),
    (["score", "QFT4", "--target", "circuit", "--target-qasm", "DIR"], "--target-qasm"),
    (["score", "QFT4", "--target", "circuit"], "--target-qasm"),
    (["score", "DIR", "--target", "qft", "--qubits", "3"], "FILE"),
    (["score", "BINARY", "--target", "qft", "--qubits", "3"], "FILE"),
    (["score", "QFT4", "--target", "nope", "--qubits", "3"], "--target"),
    (["score", "QFT4", "--target", "qft", "--qubits", "0"], "--qubits"),
    (["score", "QFT4", "--target", "qft"], "--qubits"),
    (["score", "QFT4", "--target", "qft", "--qubits", "40"], "--qubits"),
    (["synthesize", "x", "--target", "qpe"], "--qubits"),
    (["synthesize", "a 40-qubit QFT"], "the number of qubits"),
    (["score", "QFT4", "--target", "qft", "--qubits", "abc"], "--qubits"),
    (["score", "QFT4", "--target", "qft", "--qubits", "3", "-p", "inverse"], "--param"),
    (["score", "QFT4", "--target", "qft", "-n", "3"], "-n"),
    (["hardware", "run", "QFT4", "--backend", "ibm_nosuch"], "--backend"),
    (["hardware", "run", "EMPTY"], "empty"),
    (["hardware", "run", "BINARY"], "not a text file"),
    (["hardware", "run", "NOCIRCUIT"], "no circuit"),
    (["hardware", "run", "BADJSONL"], "line 2"),
    (["hardware", "run", "QFT4", "--shots", "0"], "--shots"),
    (["hardware", "run", "QFT4", "--top-k", "-1"], "--top-k"),
    (["hardware", "run", "QFT4", "--threshold", "-1"], "--threshold"),
    (["baselines", "--limit", "-1"], "--limit"),
    (["baselines", "--max-t0", "-5"], "--max-t0"),
    (["baselines", "--methods", "qiskit,magic"], "--methods"),
    (["baselines", "--suite", "nope"], "--suite"),
    (["baselines", "--route-timeout", "0"], "--route-timeout"),
    (["train", "run", "CONFIG", "--num-processes", "-2"], "--num-processes"),
    (["train", "run", "CONFIG", "--launcher", "slurm"], "--launcher"),
    (["train", "run", "CONFIG", "--max-steps", "0"], "--max-steps"),
    (["train", "run", "missing.yaml"], "missing.yaml"),
    (["quickstart", "--max-steps", "-3"], "--max-steps"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--max-prompts", "-5"], "--max-prompts"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--samples", "4"], "--samples"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--samples", "-1"], "--samples"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--temperature", "-1"], "--temperature"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--temperature", "0.8", "--top-p", "0"], "--top-p"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--temperature", "0.8", "--top-p", "1.5"], "--top-p"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--baselines", "magic"], "--baselines"),
    (["evaluate", "--model", "tiny", "--dataset", "DATA", "--split", "nope"], "--split"),
    (["evaluate", "--model", "tiny", "--dataset", "NOWHERE"], "--dataset"),
    (["evaluate", "--model", "no/such/folder", "--dataset", "DATA"], "--model"),
    (["evaluate", "--model", "DIR", "--dataset", "DATA"], "not a model folder"),
    (["report", "NOWHERE"], "DIR"),
    (["app", "--port", "0"], "--port"),
    (["data", "build", "--suite-dir", "NOWHERE"], "--suite-dir"),
    (["nosuchcommand"], "nosuchcommand"),
]


@pytest.fixture
def no_slow_work(monkeypatch):
    """Anything slow that a bad argument must never reach fails the test."""

    def slow(*args, **kwargs):
        raise AssertionError("slow work started before the arguments were checked")

    for target in (
        "rubriq.evaluation.evaluate.load_policy",
        "rubriq.models.load_model",
        "rubriq.models.load_tokenizer",
        "rubriq.hardware.emulate.emulate",
        "rubriq.hardware.transpile.transpile_for",
        "rubriq.baselines.runner.run_suite",
        "rubriq.data.load_collection",
        "rubriq.training.quickstart.run",
        "rubriq.evaluation.evaluate.run_evaluation",
        "rubriq.evaluation.synthesize.synthesize",
        "rubriq.training.config.TrainSettings.from_yaml",
        "rubriq.data.build_all",
    ):
        monkeypatch.setattr(target, slow)


@pytest.mark.parametrize("argv,flag", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_naming_the_flag(argv, flag, tmp_path, capsys, monkeypatch, no_slow_work):
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.jsonl").write_text(
        json.dumps({"id": "x", "prompt": [{"role": "user", "content": "QFT"}], "target": "{}"}) + "\n"
    )
    files = {
        "QFT4": QFT4,
        "DIR": tmp_path,
        "NOWHERE": tmp_path / "nowhere",
        "DATA": data,
        "CONFIG": ROOT / "configs" / "quickstart_cpu.yaml",
    }
    for name, content in (
        ("BINARY", b"\x00\xff\xfeOPENQASM"),
        ("EMPTY", b""),
        ("NOCIRCUIT", b"hello, no circuit"),
        ("BADJSONL", b'{"prompt_id": "p", "text": "x"}\nnot json\n'),
        ("FILE", b"a file"),
    ):
        path = tmp_path / (name.lower() + (".jsonl" if name == "BADJSONL" else ".txt"))
        path.write_bytes(content)
        files[name] = path
    argv = [str(files[a]) if a in files else a for a in argv]
    code, out, err = run(argv, capsys)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert flag in lines[0], err
    assert "Traceback" not in out + err


def test_internal_errors_have_no_traceback_unless_verbose(monkeypatch, capsys):
    def boom(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("rubriq.cli.scoring.check_target", boom)  # a bug inside a command
    code, out, err = run(["score", str(QFT4), "--target", "qft"], capsys)
    assert code == 1 and "internal: ZeroDivisionError: a bug" in err and "Traceback" not in err
    code, out, err = run(["--verbose", "score", str(QFT4), "--target", "qft"], capsys)
    assert code == 1 and "Traceback" in err


# -- output --------------------------------------------------------------------------------------------
def test_tables_fit_80_columns_and_keep_every_name_whole(monkeypatch, capsys):
    from rubriq.circuit.backends import CATALOG
    from rubriq.targets import TARGETS

    monkeypatch.setenv("COLUMNS", "80")
    for argv, names in (
        (["hardware", "backends"], list(CATALOG)),
        (["targets"], list(TARGETS) + [p for c in TARGETS.values() for p in c.parameters]),
    ):
        code, out, err = run(argv, capsys)
        assert code == 0, err
        assert max(len(line) for line in out.splitlines()) <= 80, out
        assert "…" not in out
        words = set(re.findall(r"[A-Za-z_0-9]+", out))
        missing = [n for n in names if n not in words]
        assert not missing, f"{argv}: cut or lost: {missing}\n{out}"
    assert "q[k]" in out  # rich markup must not eat [k]


def test_score_exit_codes_and_correctness_line(capsys, monkeypatch):
    code, out, _ = run(["score", str(QFT4), "--target", "qft", "--qubits", "4"], capsys)
    assert code == 0 and "CORRECT: F_avg = 1.000000 >= 0.99" in out
    code, out, _ = run(["score", "-", "--target", "qft", "--qubits", "4"], capsys, "I cannot do that.", monkeypatch)
    assert code == 1 and "not scored (parse error)" in out
    three = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nh q[0];\n'
    code, out, err = run(["score", "-", "--target", "qft", "--qubits", "4"], capsys, three, monkeypatch)
    assert code == 0 and "NOT CORRECT" in out and "warning: the circuit has 3 qubits, the target 4" in err


def test_version_help_and_metavars(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"rubriq {__version__}"
    import typer.main

    from rubriq.cli import app

    def commands(group, prefix):
        for name, cmd in getattr(group, "commands", {}).items():
            yield prefix + [name]
            yield from commands(cmd, prefix + [name])

    root = typer.main.get_command(app)
    for path in commands(root, []):
        code, out, err = run(path + ["-h"], capsys)
        assert code == 0, (path, err)
        assert "<str>" not in out and "<int>" not in out and "list[" not in out and "{" not in out, (path, out)


def test_train_entry_accepts_both_spellings_of_max_steps(capsys):
    from rubriq.training.train_rubriq import main as train_main

    config = str(ROOT / "configs" / "quickstart_cpu.yaml")
    for flag in ("--max_steps", "--max-steps"):
        with pytest.raises(SystemExit) as stop:
            train_main(["--rubriq_config", config, flag, "0"])
        assert stop.value.code == 2 and "--max_steps must be >= 1" in capsys.readouterr().err


def test_progress_logs_a_line_per_step_without_a_terminal(caplog):
    import logging

    from rubriq.progress import progress

    with caplog.at_level(logging.INFO, logger="rubriq.progress"):
        with progress("scoring", total=3) as bar:  # pytest's stderr is not a terminal
            for _ in range(3):
                bar.advance(1)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:4] == ["scoring: 0/3", "scoring: 1/3", "scoring: 2/3", "scoring: 3/3"]
    assert lines[-1].startswith("scoring: done (3 in")


def test_options_are_declared_once_for_typer_and_argparse(capsys):
    """The hardware pipeline's and the training run's options live on dataclasses; the typer
    command and the paper's argparse entry point both derive every flag (and its help) from them."""
    import dataclasses

    from rubriq.hardware import submit_ibm_ionq
    from rubriq.hardware.options import HardwareOptions
    from rubriq.training import train_rubriq
    from rubriq.training.launch import LaunchSettings, RunOptions

    def argparse_help(entry) -> str:
        with pytest.raises(SystemExit):
            entry(["-h"])
        return capsys.readouterr().out

    for options, typer_argv, entry in (
        (HardwareOptions, ["hardware", "run", "-h"], submit_ibm_ionq.main),
        (RunOptions, ["train", "run", "-h"], train_rubriq.main),
    ):
        code, typer_help, _ = run(typer_argv, capsys)
        assert code == 0
        parsed_help = argparse_help(entry)
        for f in dataclasses.fields(options):
            flag = "--" + f.name.replace("_", "-")
            assert flag in typer_help and flag in parsed_help, (options.__name__, flag)
            first_words = " ".join(f.metadata["help"].split()[:3])
            assert first_words in " ".join(typer_help.split()), (flag, first_words)
    code, launch_help, _ = run(["train", "run", "-h"], capsys)
    for f in dataclasses.fields(LaunchSettings):
        assert "--" + f.name.replace("_", "-") in launch_help
