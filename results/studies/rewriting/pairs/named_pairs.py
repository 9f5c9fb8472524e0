"""Remedy 2 diagnostic: do the pairs warm-start's samples name real pairs?

    python results/studies/rewriting/pairs/named_pairs.py RECORDS.jsonl SPLIT.jsonl

For each scored sample (RECORDS: an evaluation's records; SPLIT: the dataset split its prompts
come from: the validation split is committed as results/studies/rewriting/pilot/rft/data/validation.jsonl,
byte for byte the one `rubriq study sft-curve` builds), sorted by its outcome (rewrite_outcome: reduction / copy / wrong): whether its comment
lines parse, whether every named gate is the gate at the named position of the input, and whether
the input with the named edits keeps the input's unitary (valid pairs). It reuses the checks of
tests/test_rewrite_pairs.py (which prove the corpus's own answers valid: on the gold answers of
split sft every sample is "valid pairs"). Run from the repository's top."""
import json, re, sys
from collections import Counter
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator
sys.path.insert(0, ".")
from tests.test_rewrite_pairs import _gate_statements, _apply_named_edits, _parsed_lines, _prompt_circuit
from rubriq.studies.analysis import rewrite_outcome

rows = {json.loads(l)["id"]: json.loads(l) for l in open(sys.argv[2])}
recs = [json.loads(l) for l in open(sys.argv[1])]
c = Counter()
for r in recs:
    out = rewrite_outcome(r)
    text = r["text"]
    m = re.search(r"```(?:qasm)?\n(.*?)```", text, re.S)
    answer = (m.group(1) if m else text).strip("\n")
    row = rows[r["prompt_id"]]
    prompt = _prompt_circuit(row)
    st = _gate_statements(prompt)
    try:
        named = _parsed_lines(answer)
    except AssertionError:
        c["unparsed lines", out] += 1; continue
    ok_pos = all(0 < a <= len(st) and 0 < b <= len(st) and st[a-1] == f"{g1} q[{q}];" and st[b-1] == f"{g2} q[{q}];" for _, a, g1, q, b, g2, _ in named)
    if not ok_pos:
        c["names gates not at those positions", out] += 1; continue
    try:
        edited = _apply_named_edits(prompt, answer)
        valid = Operator(QuantumCircuit.from_qasm_str(edited)).equiv(Operator(QuantumCircuit.from_qasm_str(prompt)))
    except Exception:
        c["edits not applicable", out] += 1; continue
    c[("valid pairs" if valid else "invalid pairs (edits change the unitary)"), out] += 1
for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
    print(v, k)
