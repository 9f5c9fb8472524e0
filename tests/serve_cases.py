"""The bad-input table of ``rubriq serve``: each case, the status it must get and the field its
message must start with.  tests/test_serve.py checks every case against a real server (started
with --max-items 16 --max-body-mb 1 --max-completion-kb 64); benchmarks/bench_serve.py prints the
table with the server's actual messages into benchmarks/results/serve.md."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

QFT2 = '{"algorithm": "qft", "do_swaps": true, "inverse": false, "num_qubits": 2}'
OK = {"completion": "OPENQASM 2.0; qreg q[2];", "target": QFT2}


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


@dataclass(frozen=True)
class Case:
    name: str
    body: bytes | None
    status: int
    field: str
    method: str = "POST"
    path: str = "/v1/score"
    key: bool = True
    headers: dict = field(default_factory=dict)

    def send(self, url: str, key: str):
        import httpx

        headers = {"content-type": "application/json", **self.headers}
        if self.key:
            headers["Authorization"] = f"Bearer {key}"
        return httpx.request(self.method, url + self.path, content=self.body, headers=headers, timeout=60)


BAD_INPUTS = [
    Case("not JSON", b"{items: [", 400, "body"),
    Case("not UTF-8", b'{"items": "\xff\xfe"}', 400, "body"),
    Case("a list, not an object", b"[]", 422, "body"),
    Case("unknown top-level field", _json({"itemz": [OK]}), 422, "body"),
    Case("no items", _json({}), 422, "items"),
    Case("items not a list", _json({"items": OK}), 422, "items"),
    Case("items empty", _json({"items": []}), 422, "items"),
    Case("more items than --max-items", _json({"items": [OK] * 17}), 413, "items"),
    Case("an item not an object", _json({"items": [OK, "x"]}), 422, "items[1]"),
    Case("an item with an unknown field", _json({"items": [{**OK, "prompt": "p"}]}), 422, "items[0]"),
    Case("completion missing", _json({"items": [{"target": QFT2}]}), 422, "items[0].completion"),
    Case("completion not a string", _json({"items": [{**OK, "completion": 42}]}), 422, "items[0].completion"),
    Case("target missing", _json({"items": [{"completion": "x"}]}), 422, "items[0].target"),
    Case(
        "target: JSON string that does not parse", _json({"items": [{**OK, "target": "{qft"}]}), 422, "items[0].target"
    ),
    Case("target without algorithm", _json({"items": [{**OK, "target": {"num_qubits": 2}}]}), 422, "items[0].target"),
    Case(
        "unknown target",
        _json({"items": [OK, {**OK, "target": {"algorithm": "qftt", "num_qubits": 2}}]}),
        422,
        "items[1].target",
    ),
    Case(
        "qubits out of range",
        _json({"items": [{**OK, "target": {"algorithm": "qft", "num_qubits": 0}}]}),
        422,
        "items[0].target",
    ),
    Case(
        "unknown target parameter",
        _json({"items": [{**OK, "target": {"algorithm": "qft", "num_qubits": 2, "phase": 1}}]}),
        422,
        "items[0].target",
    ),
    Case(
        "completion above the cap", _json({"items": [{**OK, "completion": "x" * 100_000}]}), 413, "items[0].completion"
    ),
    Case("body above --max-body-mb", _json({"items": [{**OK, "completion": "x" * 1_200_000}]}), 413, "body"),
    Case("rubric not an object", _json({"items": [OK], "rubric": [1]}), 422, "rubric"),
    Case(
        "rubric sets a server-only section",
        _json({"items": [OK], "rubric": {"extraction": {"allow_python": True}}}),
        422,
        "rubric.extraction",
    ),
    Case(
        "rubric with an unknown weight", _json({"items": [OK], "rubric": {"weights": {"fidelty": 1.0}}}), 422, "rubric"
    ),
    Case("no API key", _json({"items": [OK]}), 401, "Authorization", key=False),
    Case("wrong method", None, 405, "", method="GET"),
    Case("unknown route", None, 404, "", method="GET", path="/v1/scores"),
]
