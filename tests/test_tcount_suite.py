"""``rubriq data fetch tcount-suite``: the pinned suite, every file checked against the committed
manifest, from a local copy (``--from``), over HTTP from a server on 127.0.0.1 (``--base-url``)
or a ``file://`` mirror; a second run does nothing; commands find the fetched copy by default
and without it fail in one line that names the fetch command.  No test uses the network."""

from __future__ import annotations

import csv
import functools
import hashlib
import http.server
import json
import re
import stat
import threading
from pathlib import Path

import pytest

from rubriq.cli import main
from rubriq.suites import PUBLISHED_TCOUNTS, SuiteMismatch, fetch_tcount_suite, load_tcount_suite, manifest
from rubriq.suites.tcount import MANIFEST_PATH
from tests.conftest import SHARED, SHARED_SUITE

REPO = Path(__file__).resolve().parents[1]
needs_copy = pytest.mark.skipif(not SHARED_SUITE.is_dir(), reason=f"no local copy of the suite at {SHARED_SUITE}")


def run(argv, capsys):
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- the manifest ------------------------------------------------------------------------------------
def test_manifest_pins_a_commit_of_pyzx_and_hashes_every_file():
    data = json.loads(MANIFEST_PATH.read_text())
    spec = manifest()
    assert spec.repository == "zxcalc/pyzx" and spec.path == "circuits/feyn_bench/qasm"
    assert re.fullmatch(r"[0-9a-f]{40}", spec.ref), "a commit, never a branch such as master"
    assert len(spec.files) == 35 and all(re.fullmatch(r"[0-9a-f]{64}", d) for d, _ in spec.files.values())
    assert set(data["files"]) == set(spec.files)
    url = spec.url("gf2^4_mult.qasm")
    assert url == f"https://raw.githubusercontent.com/zxcalc/pyzx/{spec.ref}/circuits/feyn_bench/qasm/gf2%5E4_mult.qasm"


@needs_copy
def test_manifest_hashes_are_those_of_the_local_copy():
    """Recomputed here with hashlib from the copy beside the checkout (an independent reading)."""
    files = sorted(SHARED_SUITE.glob("*.qasm"))
    assert {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size) for p in files} == manifest().files


def test_the_repository_holds_no_circuit_file_of_the_suite():
    names = set(manifest().files)
    tracked = [p for p in REPO.rglob("*.qasm") if p.name in names and ".venv" not in p.parts]
    assert not tracked, f"the suite's circuit files must not be copied into the repository: {tracked}"


@needs_copy
def test_published_table_is_the_one_we_were_given_with_its_sources():
    shared = SHARED / "benchmarks" / "published_tcounts.csv"
    assert PUBLISHED_TCOUNTS.read_text() == shared.read_text()
    rows = list(csv.DictReader(open(PUBLISHED_TCOUNTS, encoding="utf-8")))
    assert {Path(n).stem for n in manifest().files} <= {r["circuit"] for r in rows}
    sources = PUBLISHED_TCOUNTS.with_suffix(".md").read_text()
    for column in rows[0]:
        assert f"`{column}`" in sources, column


# Ancilla-free counts of AlphaTensor-Quantum's Table 1 (Ruiz et al., Nature Machine Intelligence 7, 374
# (2025)) whose compiled circuit has as many qubits as the original, typed here from the paper, not
# from the data file under test
ATQ_TABLE1_ANCILLA_FREE = {
    "gf2^4_mult": 39,
    "gf2^5_mult": 59,
    "gf2^6_mult": 77,
    "gf2^7_mult": 104,
    "gf2^8_mult": 123,
    "gf2^9_mult": 161,
    "gf2^10_mult": 196,
    "mod5_4": 7,
}


def test_best_known_is_never_above_pyzx_and_each_is_a_cited_number():
    """Every suite circuit has a best known ancilla-free count: at most PyZX's published count, the
    minimum of the ancilla-free published columns and ATQ's ancilla-free figures, with each source
    that reached it named and cited; a count with ancillas is only listed when lower, and never as
    the ancilla-free best."""
    from rubriq.suites.best_known import BEST_KNOWN_TCOUNTS, SOURCES, load_best_known

    published = {r["circuit"]: r for r in csv.DictReader(open(PUBLISHED_TCOUNTS, encoding="utf-8"))}
    best = load_best_known()
    assert {Path(n).stem for n in manifest().files} == set(best)
    sources_md = PUBLISHED_TCOUNTS.with_suffix(".md").read_text()
    for column in next(csv.DictReader(open(BEST_KNOWN_TCOUNTS, encoding="utf-8"))):
        assert f"`{column}`" in sources_md, column
    for name, b in best.items():
        row = published[name]
        assert b.t0 == int(row["T0"])
        if row["PyZX"]:
            assert b.best_known <= int(row["PyZX"]), name
        free = {
            c: int(row[c]) for c in ("PyZX", "Tpar", "Nam", "Feynman") if row[c] and not row[c].endswith("*")
        }  # grover_5's T-par count was measured on another input
        if name in ATQ_TABLE1_ANCILLA_FREE:
            free["ATQ_table1"] = ATQ_TABLE1_ANCILLA_FREE[name]
        assert b.best_known == min(free.values()), name
        assert set(b.sources) == {c for c, v in free.items() if v == b.best_known}, name
        gadget = [int(row[c]) for c in ("ATQ_gadgetized", "polytof_gadgetized") if row[c]]
        if b.best_known_ancillas is None:
            assert not gadget or min(gadget) >= b.best_known, name
        else:
            assert b.best_known_ancillas == min(gadget) < b.best_known, name
            assert set(b.ancilla_sources) <= {"ATQ_gadgetized", "polytof_gadgetized"}
        for key in (*b.sources, *b.ancilla_sources):
            assert key in SOURCES and f"`{key}`" in sources_md, key


def test_the_baselines_report_has_the_best_known_columns():
    """The committed report shows best known and PyZX / best known, recomputed from its own CSV."""
    results = REPO / "results" / "baselines" / "tcount"
    rows = list(csv.DictReader(open(results / "baselines.csv", encoding="utf-8")))
    from rubriq.suites.best_known import load_best_known

    best = load_best_known()
    for r in rows:
        assert int(r["published_best_known"]) == best[r["circuit"]].best_known
        assert float(r["pyzx_over_best_known"]) == pytest.approx(
            int(r["T_pyzx"]) / best[r["circuit"]].best_known, abs=1e-4
        )
    md = (results / "baselines.md").read_text()
    assert "| best known | best known (ancillas) |" in md and "| PyZX / best known |" in md


def _copy(folder: Path) -> Path:
    """A writable copy of the local suite (the shared one may be read-only)."""
    folder.mkdir()
    for path in SHARED_SUITE.glob("*.qasm"):
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


# -- --from DIR ------------------------------------------------------------------------------------------
@needs_copy
def test_fetch_from_a_local_copy_then_a_second_run_does_nothing(tmp_path, capsys):
    dest = tmp_path / "suite"
    code, out, err = run(["data", "fetch", "tcount-suite", "--from", str(SHARED_SUITE), "--out", str(dest)], capsys)
    assert code == 0, err
    assert f"T-count suite in {dest}: 35 of 35 files written" in " ".join(out.split())
    assert sorted(p.name for p in dest.iterdir()) == sorted(manifest().files)
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o044 == 0o044 for p in dest.iterdir())  # readable by all
    for name in manifest().files:
        assert (dest / name).read_bytes() == (SHARED_SUITE / name).read_bytes()
    before = {p.name: p.stat().st_mtime_ns for p in dest.iterdir()}
    code, out, err = run(["data", "fetch", "tcount-suite", "--from", str(SHARED_SUITE), "--dest", str(dest)], capsys)
    assert code == 0 and "nothing to do" in out and "verified" in out
    assert {p.name: p.stat().st_mtime_ns for p in dest.iterdir()} == before
    assert len(load_tcount_suite(dest)) == 35


@needs_copy
def test_fetch_refuses_a_copy_that_differs_and_writes_nothing_of_it(tmp_path, capsys):
    copy = _copy(tmp_path / "copy")
    (copy / "zzz_not_in_the_suite.qasm").write_text("OPENQASM 2.0;")  # extra files are ignored
    text = (copy / "tof_3.qasm").read_text()
    (copy / "tof_3.qasm").write_text(text + "t qubits[0];\n")
    dest = tmp_path / "suite"
    code, out, err = run(["data", "fetch", "tcount-suite", "--from", str(copy), "--out", str(dest)], capsys)
    assert code == 1 and "tof_3.qasm" in err and "not the pinned file" in err and len(err.strip().splitlines()) == 1
    assert not (dest / "tof_3.qasm").exists() and not list(dest.glob("*.part"))
    assert not (dest / "zzz_not_in_the_suite.qasm").exists()
    (copy / "tof_3.qasm").write_text(text)
    (copy / "hwb8.qasm").unlink()
    code, out, err = run(["data", "fetch", "tcount-suite", "--from", str(copy), "--out", str(tmp_path / "s2")], capsys)
    assert code == 1 and "lacks 1 of the suite's 35 files (hwb8.qasm)" in err
    assert not (tmp_path / "s2").exists()  # checked before anything is written


@needs_copy
def test_fetch_never_overwrites_a_changed_file_in_the_destination(tmp_path):
    dest = fetch_tcount_suite(tmp_path / "suite", source=SHARED_SUITE).directory
    (dest / "qft_4.qasm").write_text("// mine\n")
    with pytest.raises(SuiteMismatch, match="qft_4.qasm"):
        fetch_tcount_suite(dest, source=SHARED_SUITE)
    assert (dest / "qft_4.qasm").read_text() == "// mine\n"
    with pytest.raises(SuiteMismatch, match=r"1 differ from the pinned hashes \(qft_4.qasm\).*rubriq data fetch"):
        load_tcount_suite(dest)


# -- downloads: a server on 127.0.0.1 and a file:// mirror ------------------------------------------------
def _mirror(root: Path, files: dict[str, bytes]) -> Path:
    """A folder laid out like raw.githubusercontent.com: /zxcalc/pyzx/<ref>/circuits/feyn_bench/qasm/."""
    spec = manifest()
    folder = root / spec.repository / spec.ref / spec.path
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return root


class _Server:
    """http.server on 127.0.0.1 (a free port), recording request paths; ``fail_after`` requests
    are answered, later ones get 503."""

    def __init__(self, root: Path, fail_after: int | None = None) -> None:
        self.paths: list[str] = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.paths.append(self.path)
                if fail_after is not None and len(server.paths) > fail_after:
                    self.send_error(503, "unavailable")
                    return
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


@needs_copy
def test_download_from_a_local_server_at_the_pinned_commit(tmp_path, capsys):
    spec = manifest()
    root = _mirror(tmp_path / "www", {n: (SHARED_SUITE / n).read_bytes() for n in spec.files})
    dest = tmp_path / "suite"
    with _Server(root) as server:
        code, out, err = run(["data", "fetch", "tcount-suite", "--base-url", server.url, "--out", str(dest)], capsys)
        assert code == 0, err
        assert len(server.paths) == 35
        assert all(p.startswith(f"/zxcalc/pyzx/{spec.ref}/circuits/feyn_bench/qasm/") for p in server.paths)
        code, out, err = run(["data", "fetch", "tcount-suite", "--base-url", server.url, "--out", str(dest)], capsys)
        assert code == 0 and "nothing to do" in out and len(server.paths) == 35  # verified, nothing requested
    assert len(load_tcount_suite(dest)) == 35


@needs_copy
def test_a_tampered_download_is_refused_and_an_interrupted_one_resumes(tmp_path, capsys):
    spec = manifest()
    files = {n: (SHARED_SUITE / n).read_bytes() for n in spec.files}
    dest = tmp_path / "suite"
    tampered = dict(files, **{"adder_8.qasm": files["adder_8.qasm"] + b"x q[0];\n"})  # the first file in order
    with _Server(_mirror(tmp_path / "bad", tampered)) as server:
        code, out, err = run(["data", "fetch", "tcount-suite", "--base-url", server.url, "--out", str(dest)], capsys)
    assert code == 1 and "adder_8.qasm is not the pinned file" in err and not (dest / "adder_8.qasm").exists()
    with _Server(_mirror(tmp_path / "flaky", files), fail_after=5) as server:
        code, out, err = run(["data", "fetch", "tcount-suite", "--base-url", server.url, "--out", str(dest)], capsys)
        assert code == 1 and "could not download" in err and "--from DIR" in err
    assert len(list(dest.glob("*.qasm"))) == 5 and not list(dest.glob("*.part"))
    with _Server(_mirror(tmp_path / "good", files)) as server:
        code, out, err = run(["data", "fetch", "tcount-suite", "--base-url", server.url, "--out", str(dest)], capsys)
        assert code == 0 and "30 of 35 files written" in " ".join(out.split()) and len(server.paths) == 30


@needs_copy
def test_download_from_a_file_url_mirror(tmp_path):
    root = _mirror(tmp_path / "mirror", {n: (SHARED_SUITE / n).read_bytes() for n in manifest().files})
    done = fetch_tcount_suite(tmp_path / "suite", base_url=root.as_uri())
    assert done.written == 35 and len(load_tcount_suite(done.directory)) == 35


def test_unreachable_network_is_one_line_naming_the_offline_way(tmp_path, capsys):
    # 127.0.0.1, port 9 (discard): nothing listens there on a test machine
    code, out, err = run(
        ["data", "fetch", "tcount-suite", "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path / "s")], capsys
    )
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "could not download http://127.0.0.1:9/zxcalc/pyzx/" in err and "--from DIR" in err


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["data", "fetch", "nope"], "COLLECTION"),
        (["data", "fetch", "tcount-suite", "--from", "NOWHERE"], "--from"),
        (["data", "fetch", "tcount-suite", "--base-url", "ftp://example.org"], "--base-url"),
        (["data", "fetch", "tcount-suite", "--timeout", "0"], "--timeout"),
        (["data", "fetch", "tcount-suite", "--out", "FILE"], "--out"),
    ],
)
def test_fetch_bad_arguments(argv, flag, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    argv = [str(tmp_path / "nowhere") if a == "NOWHERE" else str(tmp_path / "file") if a == "FILE" else a for a in argv]
    code, out, err = run(argv, capsys)
    assert code == 2 and f"error: {flag}:" in err and len(err.strip().splitlines()) == 1


# -- commands that need the suite ------------------------------------------------------------------------
def test_without_the_suite_commands_fail_in_one_line_naming_the_fetch(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "empty-cache"))
    for argv in (
        ["baselines", "--suite", "tcount", "--out", str(tmp_path / "b")],
        ["data", "build", "--out", str(tmp_path / "d"), "--collections", "tcount", "--small"],
    ):
        code, out, err = run(argv, capsys)
        assert code == 2, (argv, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
        assert "the T-count suite is not fetched" in err and "rubriq data fetch tcount-suite" in err
    assert not (tmp_path / "b").exists() and not (tmp_path / "d").exists()


@needs_copy
def test_commands_find_the_fetched_copy_by_default(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    code, out, err = run(["data", "fetch", "tcount-suite", "--from", str(SHARED_SUITE)], capsys)
    # rich wraps at 80 columns, inside a long path too: compare with every break removed
    assert code == 0 and "".join(str(tmp_path / "cache" / "tcount_suite").split()) in "".join(out.split())
    code, out, err = run(["data", "build", "--out", str(tmp_path / "d"), "--small", "--collections", "tcount"], capsys)
    assert code == 0, err
    rows = [json.loads(x) for x in (tmp_path / "d" / "rewrite-tcount" / "train.jsonl").read_text().splitlines()]
    assert rows and {r["collection"] for r in rows} == {"tcount"}
    (tmp_path / "cache" / "tcount_suite" / "hwb6.qasm").unlink()  # an incomplete copy is an error, not a subset
    code, out, err = run(["data", "build", "--out", str(tmp_path / "d2"), "--small", "--collections", "tcount"], capsys)
    assert code == 2 and "1 files missing (hwb6.qasm)" in err and "rubriq data fetch tcount-suite" in err
