"""Convert the model outputs published with Yu, Saini et al., "Fine-Tuning Large Language Models
on Quantum Optimization Problems for Circuit Generation" (arXiv:2504.11109), repository
github.com/benyucong/quantum-code-generation, into this corpus's JSONL format.

    .venv/bin/python benchmarks/llm_outputs/fetch_yucong.py [--repo PATH_OF_A_CLONE]

The repository states no license, so its texts are NOT committed here: this script writes
``benchmarks/llm_outputs/local/yucong-*.jsonl`` (git-ignored) from a local clone (``git clone
https://github.com/benyucong/quantum-code-generation``) or, without ``--repo``, by downloading
the two files over HTTPS.  Sources: ``code/evaluation/out/quantum-circuit-qubo-3B_label_data.csv``
(column ``generated_circuit``: OpenQASM 3 written by their fine-tuned 3B model) and
``code/evaluation/out/quantum_ciruits_validated.json`` (field ``generated_circuit``, raw
answers with their "Answer:" prefixes).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = {
    "yucong-qubo-3b-labelled": "code/evaluation/out/quantum-circuit-qubo-3B_label_data.csv",
    "yucong-qubo-3b-validated": "code/evaluation/out/quantum_ciruits_validated.json",
}
RAW = "https://raw.githubusercontent.com/benyucong/quantum-code-generation/{rev}/{path}"
REVS = {"yucong-qubo-3b-labelled": "main", "yucong-qubo-3b-validated": "e55d9a2"}  # the JSON was removed later


def read(path: str, repo: Path | None, rev: str = "main") -> str:
    if repo is not None:
        if (repo / path).is_file():
            return (repo / path).read_text(encoding="utf-8")
        # a bare mirror: the file at HEAD, or as it was before the commit that removed it
        git = ["git", "--git-dir", str(repo)]
        shown = subprocess.run([*git, "show", f"HEAD:{path}"], capture_output=True, text=True)
        if shown.returncode == 0:
            return shown.stdout
        commits = subprocess.run(
            [*git, "log", "--format=%H", "--all", "--", path], check=True, capture_output=True, text=True
        ).stdout.split()
        for commit in commits:  # newest first: the last version that still had the file
            shown = subprocess.run([*git, "show", f"{commit}:{path}"], capture_output=True, text=True)
            if shown.returncode == 0 and shown.stdout.strip():
                return shown.stdout
        raise FileNotFoundError(f"{path} is in no commit of {repo}")
    with urllib.request.urlopen(RAW.format(rev=rev, path=path), timeout=60) as response:  # noqa: S310 (fixed https URL)
        return response.read().decode("utf-8")


def texts(name: str, content: str) -> list[str]:
    if content.lstrip().startswith("["):
        return [item["generated_circuit"] for item in json.loads(content) if item.get("generated_circuit")]
    csv.field_size_limit(10**8)
    return [row["generated_circuit"] for row in csv.DictReader(io.StringIO(content)) if row.get("generated_circuit")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, help="a clone (or bare mirror) of benyucong/quantum-code-generation")
    args = parser.parse_args()
    out = HERE / "local"
    out.mkdir(exist_ok=True)
    for name, path in FILES.items():
        items = texts(name, read(path, args.repo, REVS[name]))
        with (out / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
            for text in items:
                fh.write(
                    json.dumps(
                        {
                            "source": name,
                            "model": "fine-tuned Qwen2.5-3B (arXiv:2504.11109)",
                            "format": "qasm3",
                            "text": text,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
        print(f"{name}: {len(items)} texts -> {out / (name + '.jsonl')}")


if __name__ == "__main__":
    main()
