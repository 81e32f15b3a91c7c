"""A small OpenAI-compatible chat server on 127.0.0.1 for tests (a real HTTP server, fake model).

Usage::

    from openai_server import FakeOpenAIServer

    with FakeOpenAIServer(action="down") as server:          # replies "<action>down</action>"
        agent = OpenAIAgent("fake", server.url)               # server.url == "http://127.0.0.1:PORT/v1"
        ...
        server.fail_next(2, status=500)                       # the next 2 requests get HTTP 500
        server.delay_s = 0.2                                  # every reply waits 0.2 s
        assert server.request_count == 3 and server.max_in_flight <= 4

or the pytest fixture ``openai_server`` (import it into a test module, or into conftest.py).

Endpoints:
    ``POST /v1/chat/completions``: replies ``<action>X</action>``, ``X = action(messages)`` (a
    string or a callable over the request's ``messages``; a callable returning ``None`` gives
    ``"content": null``). "Tokens" are the UTF-8 bytes of the reply, so ``max_tokens`` cuts the
    reply at that many bytes with ``finish_reason: "length"``. ``logprobs: true`` adds
    ``logprobs.content[i].logprob = -(i % 7) / 10``; ``return_token_ids: true`` (vLLM) adds
    ``choices[0].token_ids`` and top-level ``prompt_token_ids`` (bytes of the last message).
    ``GET /v1/models`` lists the one model.

Tool calls: with :attr:`tool_calls` set (``tool_calls(messages, tools)`` returning a list of
``{"name", "arguments"}``, or ``None`` for a plain reply), a request that carries ``tools``
gets them back as ``message.tool_calls`` (ids ``call_<request>_<k>``, arguments as a JSON
string, ``content: null``, ``finish_reason: "tool_calls"``), the way vLLM with a tool parser and
OpenAI answer. A request without ``tools`` gets the plain reply. With :attr:`reject_tools` the
server is one without tool support: a request with ``tools`` gets HTTP 400 (vLLM's answer when
it runs without ``--enable-auto-tool-choice``).

Test controls (thread-safe): :meth:`fail_next`, :meth:`malformed_next`, :attr:`delay_s`;
observations: :attr:`requests` (JSON bodies, in arrival order), :attr:`request_count`,
:attr:`max_in_flight`, :meth:`reset_stats`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest

__all__ = ["FakeOpenAIServer", "openai_server"]

Action = str | Callable[[list[dict[str, Any]]], "str | None"]
ToolCalls = Callable[[list[dict[str, Any]], list[dict[str, Any]]], "list[dict[str, Any]] | None"]


class FakeOpenAIServer:
    """OpenAI-compatible chat-completions server in a background thread.

    Args:
        action: what goes between ``<action>`` tags: a fixed string, or ``action(messages)``.
        model: the model name reported by ``/v1/models`` and in replies.
    """

    def __init__(self, action: Action = "noop", *, model: str = "fake-model") -> None:
        self.action: Action = action
        self.model = model
        self.delay_s = 0.0
        self.tool_calls: ToolCalls | None = None
        self.reject_tools = False
        self.requests: list[dict[str, Any]] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._faults: deque[tuple[str, int, float | None]] = deque()  # (kind, status, retry_after)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """API root to give an agent as ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        if self._httpd is None:
            raise RuntimeError("the fake server is not running; use it as a context manager or call start().")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeOpenAIServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps stop() (and so each test's teardown) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port (idempotent)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- controls ------------------------------------------------------------------------------

    def fail_next(self, n: int, status: int = 500, *, retry_after: float | None = None) -> None:
        """Answer the next ``n`` chat requests with HTTP ``status`` (and ``Retry-After`` if given)."""
        with self._lock:
            self._faults.extend(("status", status, retry_after) for _ in range(n))

    def malformed_next(self, n: int) -> None:
        """Answer the next ``n`` chat requests with HTTP 200 and a body that is not JSON."""
        with self._lock:
            self._faults.extend(("malformed", 200, None) for _ in range(n))

    @property
    def request_count(self) -> int:
        """Chat requests received so far (failed ones included)."""
        with self._lock:
            return len(self.requests)

    def reset_stats(self) -> None:
        """Forget recorded requests, the in-flight peak and pending faults."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0
            self._faults.clear()

    # -- request handling (called from handler threads) ----------------------------------------

    def _enter(self, body: dict[str, Any]) -> tuple[str, int, float | None] | None:
        with self._lock:
            self.requests.append(body)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._faults.popleft() if self._faults else None

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _tool_reply(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The reply carrying ``tool_calls``, or ``None`` when the request gets a plain reply."""
        tools = body.get("tools")
        if self.tool_calls is None or not tools:
            return None
        calls = self.tool_calls(body.get("messages") or [], tools)
        if calls is None:
            return None
        number = len(self.requests)
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{number}_{k}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))},
                }
                for k, call in enumerate(calls)
            ],
        }
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        tool_reply = self._tool_reply(body)
        if tool_reply is not None:
            return tool_reply
        messages = body.get("messages") or []
        action = self.action(messages) if callable(self.action) else self.action
        content: str | None = None if action is None else f"<action>{action}</action>"
        tokens = list((content or "").encode())
        finish = "stop"
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and len(tokens) > max_tokens:
            tokens = tokens[:max_tokens]
            content = bytes(tokens).decode(errors="ignore")
            finish = "length"
        prompt = list(str(messages[-1].get("content", "")).encode()) if messages else []
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish,
        }
        reply: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(tokens),
                "total_tokens": len(prompt) + len(tokens),
            },
        }
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": chr(t), "logprob": -(i % 7) / 10, "bytes": [t], "top_logprobs": []}
                    for i, t in enumerate(tokens)
                ]
            }
        if body.get("return_token_ids"):
            choice["token_ids"] = tokens
            reply["prompt_token_ids"] = prompt
        return reply


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up before the reply (a timeout under test, or a slow machine) is
        # expected; anything else still prints its traceback.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAIServer
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers; every reply sets Content-Length
    # Headers and body go out in two writes; with Nagle's algorithm on a kept-alive connection the
    # second waits for the client's delayed ACK (about 40 ms on Linux) on every request.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            data = {"object": "list", "data": [{"id": self.owner.model, "object": "model", "owned_by": "envgym"}]}
            self._send(200, json.dumps(data).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, b'{"error": {"message": "request body is not JSON"}}')
            return
        owner = self.owner
        fault = owner._enter(body)
        try:
            if owner.delay_s:
                time.sleep(owner.delay_s)
            if fault is None and owner.reject_tools and body.get("tools"):
                status, headers = 400, {}
                payload = b'{"error": {"message": "\\"auto\\" tool choice requires --enable-auto-tool-choice"}}'
            elif fault is not None and fault[0] == "malformed":
                status, payload, headers = 200, b'{"choices": [ this is not json', {}
            elif fault is not None:
                _, status, retry_after = fault
                headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
                payload = json.dumps({"error": {"message": f"injected failure {status}", "code": status}}).encode()
            else:
                status, payload, headers = 200, json.dumps(owner._reply(body)).encode(), {}
        finally:
            # Leave before replying: once the client reads the reply it may send its next request,
            # which must not be counted together with this one.
            owner._leave()
        self._send(status, payload, headers)


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A running :class:`FakeOpenAIServer` (action ``"noop"``; set ``server.action`` per test)."""
    with FakeOpenAIServer() as server:
        yield server
