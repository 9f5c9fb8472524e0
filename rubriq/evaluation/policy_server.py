"""A local policy behind an OpenAI-compatible chat API: ``GET /v1/models`` and
``POST /v1/chat/completions`` (``messages``, ``n``, ``temperature``, ``top_p``, ``max_tokens`` /
``max_completion_tokens``, ``seed``; token ``usage`` in the response), on FastAPI + uvicorn.

What it is for: a real HTTP server, started and stopped on 127.0.0.1 by the tests, that speaks
the same API as vLLM, llama.cpp's server or a hosted provider, so that ``--endpoint`` is tested
end to end with the ``openai`` client on a machine that cannot build llama.cpp in every setup;
and the leaderboard's check that a policy scores the same locally and through an endpoint
(docs/endpoints.md).  It samples with :func:`rubriq.evaluation.sampling.generate`, one request
at a time (a lock: the model is not shared between threads), so it is a test and comparison
server, not a production one (use vLLM or llama.cpp for that).

    python -m rubriq.evaluation.policy_server --model runs/quickstart/train/final --port 8000
    rubriq evaluate --endpoint http://127.0.0.1:8000/v1 --model policy --dataset ... --out ...

:func:`make_app` takes any ``respond(messages, n, sampling) -> [text, ...]`` (the tests give
scripted ones) and an optional ``on_answer`` hook called with each answered request.
"""

import argparse
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Respond = Callable[[list[dict], int, dict[str, Any]], list[str]]
"""``respond(messages, n, sampling)``: ``n`` completions of the chat ``messages``; ``sampling``
has ``temperature``, ``top_p``, ``max_tokens`` and ``seed``."""


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    """An error in the OpenAI API's shape (what the ``openai`` client reads the message from)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def make_app(
    respond: Respond,
    served_name: str = "policy",
    api_key: str | None = None,
    count_tokens: Callable[[str], int] | None = None,
    count_prompt: Callable[[list[dict]], int] | None = None,
    on_answer: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
):
    """The FastAPI app serving ``respond`` as the model ``served_name``; ``api_key``: the bearer
    token required (401 otherwise); ``count_tokens`` / ``count_prompt``: token counts for the
    response's ``usage`` (default: whitespace-separated words); ``on_answer(request, response)``
    after each answered completion request."""
    # no `from __future__ import annotations` in this module: FastAPI reads the handlers'
    # annotations (Request) as objects
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI(title=f"RubriQ policy server ({served_name})")
    count = count_tokens or (lambda text: len(text.split()))
    prompt_count = count_prompt or (lambda messages: sum(count(str(m.get("content", ""))) for m in messages))
    lock = threading.Lock()

    def refused(request: Request) -> JSONResponse | None:
        if api_key is None:
            return None
        if request.headers.get("authorization", "") != f"Bearer {api_key}":
            return JSONResponse(
                error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"), status_code=401
            )
        return None

    @app.get("/v1/models")
    def models(request: Request):
        if (denied := refused(request)) is not None:
            return denied
        return {"object": "list", "data": [{"id": served_name, "object": "model", "created": 0, "owned_by": "rubriq"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        if (denied := refused(request)) is not None:
            return denied
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse(error_body("the body is not JSON"), status_code=400)
        if body.get("model") != served_name:
            return JSONResponse(
                error_body(f"The model `{body.get('model')}` does not exist.", code="model_not_found"), status_code=404
            )
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return JSONResponse(error_body("messages: a non-empty list of chat messages"), status_code=400)
        n = body.get("n") or 1
        if not isinstance(n, int) or not 1 <= n <= 128:
            return JSONResponse(error_body("n: an integer in 1..128"), status_code=400)
        sampling = {
            "temperature": float(body.get("temperature", 1.0)),
            "top_p": float(body.get("top_p", 1.0)),
            "max_tokens": int(body.get("max_completion_tokens") or body.get("max_tokens") or 256),
            "seed": int(body.get("seed") or 0),
        }
        if body.get("top_k") is not None:  # vLLM's extra parameter (EndpointPolicy sends it when set)
            sampling["top_k"] = int(body["top_k"])
        if body.get("stream"):
            return JSONResponse(error_body("stream is not supported by this server"), status_code=400)

        def work() -> list[str]:
            with lock:
                return respond(messages, n, sampling)

        import anyio

        texts = await anyio.to_thread.run_sync(work)
        completion_tokens = sum(count(t) for t in texts)
        prompt_tokens = prompt_count(messages)
        response = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served_name,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                for i, t in enumerate(texts)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if on_answer is not None:
            on_answer(body, response)
        return response

    return app


def local_responder(model: str) -> tuple[Respond, Callable[[str], int], Callable[[list[dict]], int]]:
    """``respond`` for a RubriQ policy (``embedded``, ``tiny``, a model or adapter folder):
    :func:`~rubriq.evaluation.sampling.generate` on one prompt, ``n`` samples, seeded; and its
    tokenizer's counts for the usage."""
    from rubriq.evaluation.evaluate import load_policy
    from rubriq.evaluation.sampling import LocalPolicy
    from rubriq.models.sampling import SamplingSpec

    tokenizer, model_ = load_policy(model)

    def respond(messages: list[dict], n: int, sampling: dict[str, Any]) -> list[str]:
        temperature = sampling["temperature"]
        spec = SamplingSpec(
            temperature=temperature,
            top_p=sampling["top_p"],
            top_k=sampling.get("top_k"),
            samples=n if temperature > 0 else 1,
            max_new_tokens=sampling["max_tokens"],
            seed=sampling["seed"],
        )
        records = LocalPolicy(tokenizer, model_, batch_size=max(n, 1)).generate(
            [{"id": "request", "prompt": messages}], spec, progress=False
        )
        texts = [r.text for r in records]
        return texts * n if temperature == 0 else texts  # greedy: n copies of the one completion

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_prompt(messages: list[dict]) -> int:
        return len(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))

    return respond, count, count_prompt


def main(argv: list[str] | None = None) -> int:
    """``python -m rubriq.evaluation.policy_server``: serve a policy on 127.0.0.1 until stopped."""
    import uvicorn

    parser = argparse.ArgumentParser(
        prog="python -m rubriq.evaluation.policy_server", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--model", default="embedded", help="embedded, tiny, or a model / adapter folder")
    parser.add_argument("--served-name", default="policy", help="the model name clients ask for (default: policy)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key-env", default=None, help="require the key in this environment variable")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    respond, count, count_prompt = local_responder(args.model)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    app = make_app(respond, args.served_name, key, count, count_prompt)
    log.info("serving %s as %r on http://%s:%d/v1", args.model, args.served_name, args.host, args.port)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
