"""A fault-injecting, OpenAI-like loopback server for client tests (a helper, not a test file).

Each incoming request takes its behaviour from a script: first from the queue for its prompt
(``per_prompt``), else from the shared queue (``script``), else ``default``. Behaviours:

=============  =================================================================================
 ``ok``         a well-formed completion (``reply(prompt)``, default ``"echo: <prompt>"``)
 ``500``        HTTP 500 (also ``502``, ``503``)
 ``429``        HTTP 429, too many requests
 ``400``        HTTP 400 with an OpenAI-style error body (also ``404``)
 ``401-echo``   HTTP 401 whose message repeats the Authorization header it got (a careless server)
 ``delay``      wait ``delay_s`` (longer than the client's timeout), then answer ``ok``
 ``malformed``  HTTP 200 with a body that is not JSON
 ``no-choices`` HTTP 200 with JSON lacking ``choices``
 ``truncated``  HTTP 200 whose body stops half-way (Content-Length promises more), then hangs up
 ``drop``       close the connection without answering
=============  =================================================================================

Every request is recorded in :attr:`FaultServer.log` (path, prompt, action, body) so tests
assert attempt counts rather than timings. ``gate=K`` lets requests through in waves of ``K``:
each waits until the last of its wave has arrived (or ``gate_timeout_s`` passes). A client that
keeps exactly ``K`` requests in flight never waits for the timeout, and its concurrency shows
in :attr:`FaultServer.max_in_flight` without any sleeping in the test. ``port``: a fixed port
(0: any free one), so a test can bring a "restarted" server up where the old one was.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ACTIONS = frozenset(
    {
        "ok",
        "500",
        "502",
        "503",
        "429",
        "400",
        "404",
        "401-echo",
        "delay",
        "malformed",
        "no-choices",
        "truncated",
        "drop",
    }
)


@dataclass
class Hit:
    path: str
    prompt: str
    action: str
    body: dict


def _prompt_of(body: dict) -> str:
    if isinstance(body.get("prompt"), str):
        return body["prompt"]
    messages = body.get("messages") or []
    return str(messages[-1].get("content", "")) if messages else ""


class FaultServer:
    def __init__(
        self,
        script: Iterable[str] = (),
        *,
        per_prompt: dict[str, Iterable[str]] | None = None,
        default: str = "ok",
        delay_s: float = 30.0,
        gate: int = 0,
        gate_timeout_s: float = 5.0,
        reply: Callable[[str], str] | None = None,
        usage: bool = True,
        port: int = 0,
    ):
        self.script = deque(script)
        self.per_prompt = {k: deque(v) for k, v in (per_prompt or {}).items()}
        for a in [*self.script, *(a for q in self.per_prompt.values() for a in q), default]:
            if a not in ACTIONS:
                raise ValueError(f"unknown action {a!r}; known: {sorted(ACTIONS)}")
        self.default = default
        self.delay_s = delay_s
        self.gate = gate
        self.gate_timeout_s = gate_timeout_s
        self.reply = reply or (lambda p: f"echo: {p}")
        self.usage = usage
        self.log: list[Hit] = []
        #: Authorization headers received (tests check a key was sent, never print them)
        self.auth: list[str | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._httpd.daemon_threads = True
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def attempts(self, prompt: str | None = None) -> int:
        """Requests received (for one prompt, or all)."""
        with self._cond:
            return sum(1 for h in self.log if prompt is None or h.prompt == prompt)

    def _next_action(self, prompt: str) -> str:
        q = self.per_prompt.get(prompt)
        if q:
            return q.popleft()
        if self.script:
            return self.script.popleft()
        return self.default

    def _arrive(self, path: str, body: dict, auth: str | None) -> str:
        prompt = _prompt_of(body)
        with self._cond:
            action = self._next_action(prompt)
            self.log.append(Hit(path, prompt, action, body))
            self.auth.append(auth)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._cond.notify_all()
            if self.gate:  # requests pass in waves of `gate`: all of a wave wait for its last
                wave_full = (len(self.log) - 1) // self.gate * self.gate + self.gate
                self._cond.wait_for(lambda: len(self.log) >= wave_full, timeout=self.gate_timeout_s)
        return action

    def _leave(self) -> None:
        with self._cond:
            self.in_flight -= 1

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._thread.join(timeout=10)
        self._httpd.server_close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ok_payload(path: str, text: str, body: dict, usage: bool = True) -> dict[str, Any]:
    chat = path.rstrip("/").endswith("/chat/completions")
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    payload = {
        "id": "fault-1",
        "object": "chat.completion" if chat else "text_completion",
        "model": body.get("model", ""),
        "choices": [choice],
    }
    if usage:
        payload["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    return payload


def _handler_for(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so a fault never leaks into the next request
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, data: bytes, *, declared: int | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(declared if declared is not None else len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _json(self, status: int, payload: dict) -> None:
            self._send(status, json.dumps(payload).encode())

        def do_GET(self) -> None:
            self._json(200, {"object": "list", "data": [{"id": "fault", "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            action = server._arrive(self.path, body, self.headers.get("Authorization"))
            try:
                self._act(action, body)
            except OSError:
                pass  # the client gave up (its timeout) and closed the connection
            finally:
                server._leave()

        def _act(self, action: str, body: dict) -> None:
            prompt = _prompt_of(body)
            if action == "delay":
                if server._stop.wait(server.delay_s):
                    return
                action = "ok"
            if action == "ok":
                self._json(200, _ok_payload(self.path, server.reply(prompt), body, server.usage))
            elif action in {"500", "502", "503", "429", "400", "404"}:
                status = int(action)
                self._json(status, {"error": {"message": f"injected {status}", "code": status}})
            elif action == "401-echo":
                got = self.headers.get("Authorization")
                self._json(401, {"error": {"message": f"bad credentials: {got}", "code": 401}})
            elif action == "malformed":
                self._send(200, b'{"choices": [{"text": "unterminated')
            elif action == "no-choices":
                self._json(200, {"object": "text_completion", "usage": {}})
            elif action == "truncated":
                data = json.dumps(
                    _ok_payload(self.path, server.reply(prompt), body, server.usage)
                ).encode()
                self._send(200, data[: len(data) // 2], declared=len(data))
                self.close_connection = True
            elif action == "drop":
                self.close_connection = True
                self.connection.close()

    return Handler
