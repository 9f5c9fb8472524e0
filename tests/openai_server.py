"""The tests' OpenAI-compatible server: :func:`rubriq.evaluation.policy_server.make_app` with a
scripted responder and injected faults, on 127.0.0.1, in a thread (:class:`ServerThread`) or a
process that can be killed (``python tests/openai_server.py CONFIG.json``).

The scripted responder answers a prompt (found by its last message's content in ``answers``)
with ``answers[content][k % len(answers[content])]`` for sample k, where a request with seed s
and n choices covers samples s, s + 1, ... (the client's seed convention, base seed 0).  Every
request received and every request answered is appended to ``log`` (JSONL) *before* the
response is returned, so the tests count what the server saw.

Faults (the ``faults`` mapping): ``fail_first``: status codes for the first chat requests
(``retry_after``: the Retry-After header sent with them); ``n``: ``"ignore"`` (one choice,
whatever n) or ``"reject"`` (400 for n > 1); ``die_after``: the process exits (``os._exit``) on
the chat request after that many answered ones; ``max_completion_tokens``: 400 for
``max_tokens`` (as OpenAI's newer models do); ``echo_key``: the 401 message quotes the key it got.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any


def prompt_hash(messages: list[dict]) -> str:
    """The server-side identity of a prompt (its messages as canonical JSON)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


def build_app(
    answers: dict[str, list[str]],
    log: str | Path,
    served_name: str = "policy",
    api_key: str | None = None,
    faults: dict[str, Any] | None = None,
):
    from fastapi.responses import JSONResponse

    from rubriq.evaluation.policy_server import error_body, make_app

    faults = dict(faults or {})
    log = Path(log)
    lock = threading.Lock()
    state = {"chat": 0, "answered": 0}

    def write(entry: dict) -> None:
        with lock, open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**entry, "time": time.time()}) + "\n")
            fh.flush()

    def respond(messages: list[dict], n: int, sampling: dict) -> list[str]:
        options = answers.get(messages[-1]["content"], ["no circuit here"])
        count = 1 if faults.get("n") == "ignore" else n
        return [options[(sampling["seed"] + i) % len(options)] for i in range(count)]

    def on_answer(body: dict, response: dict) -> None:
        with lock:
            state["answered"] += 1
        write(
            {
                "event": "answered",
                "prompt": prompt_hash(body["messages"]),
                "seed": body.get("seed"),
                "n": body.get("n", 1),
                "top_p": body.get("top_p"),
                "choices": len(response["choices"]),
                "usage": response["usage"],
                "texts": [c["message"]["content"] for c in response["choices"]],
            }
        )

    app = make_app(respond, served_name, None, on_answer=on_answer)

    @app.middleware("http")
    async def faults_first(request, call_next):
        if request.url.path.endswith("/chat/completions"):
            body = json.loads(await request.body() or b"{}")
            with lock:
                state["chat"] += 1
                number = state["chat"]
                answered = state["answered"]
            write(
                {
                    "event": "received",
                    "prompt": prompt_hash(body.get("messages") or []),
                    "number": number,
                    "seed": body.get("seed"),
                    "n": body.get("n", 1),
                    "model": body.get("model"),
                }
            )
            if faults.get("die_after") is not None and answered >= faults["die_after"]:
                os._exit(17)  # killed mid-run: no response, the connection drops
            codes = faults.get("fail_first") or []
            if number <= len(codes):
                headers = {"retry-after": str(faults["retry_after"])} if "retry_after" in faults else {}
                return JSONResponse(
                    error_body(f"injected {codes[number - 1]}", "rate_limit_error"),
                    status_code=codes[number - 1],
                    headers=headers,
                )
            if faults.get("n") == "reject" and (body.get("n") or 1) > 1:
                return JSONResponse(error_body("n > 1 is not supported"), status_code=400)
            if faults.get("max_completion_tokens") and "max_tokens" in body:
                return JSONResponse(
                    error_body(
                        "Unsupported parameter: 'max_tokens' is not supported with this "
                        "model. Use 'max_completion_tokens' instead."
                    ),
                    status_code=400,
                )
        if api_key is not None and request.headers.get("authorization", "") != f"Bearer {api_key}":
            got = request.headers.get("authorization", "")
            message = f"Incorrect API key provided: {got}" if faults.get("echo_key") else "Incorrect API key provided."
            return JSONResponse(error_body(message, code="invalid_api_key"), status_code=401)
        return await call_next(request)

    return app


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class ServerThread:
    """An app served by uvicorn in a daemon thread on a free 127.0.0.1 port (``url``)."""

    def __init__(self, app) -> None:
        import uvicorn

        self.sock = free_socket()
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)  # paces the poll for the server to start (the deadline bounds it)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def read_log(path: str | Path, event: str) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e["event"] == event]


def main(config_path: str) -> None:
    """Serve the app of a JSON config (answers, log, faults, port) until killed."""
    import uvicorn

    config = json.loads(Path(config_path).read_text())
    app = build_app(
        config["answers"],
        config["log"],
        config.get("served_name", "policy"),
        config.get("api_key"),
        config.get("faults"),
    )
    uvicorn.run(app, host="127.0.0.1", port=int(config["port"]), log_level="warning", lifespan="off")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main(sys.argv[1])
