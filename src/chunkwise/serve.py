"""A small OpenAI-compatible HTTP server over any chunkwise backend.

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions``, ``GET /v1/models`` and
``GET /health`` (the ``/v1`` prefix is optional). Answers are OpenAI-shaped JSON with ``usage``,
and ``logprobs`` when asked for and the backend gives them. No streaming, no authentication:
it is meant for loopback use (tests, and sharing one loaded model between local processes).

Requests that arrive together are micro-batched: one worker thread owns the backend, takes
the first waiting request, gathers whatever else arrives within a short window (or is already
queued) and hands the lot to one ``llm.generate`` call. The backend is thus only ever used from
one thread, and batching backends (hf, vllm) get whole batches.

From Python::

    with serve_in_thread(llm) as base_url:           # "http://127.0.0.1:PORT/v1"
        remote = load_llm(f"openai:default@{base_url}")

    with OpenAIServer(llm) as server:                 # server.port, server.base_url, server.stats
        ...

From the shell: ``chunkwise serve --model hf:default --port 8000``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chunkwise.llm.base import LLM, Completion, GenerationParams, Request

log = logging.getLogger(__name__)

#: OpenAI's defaults for fields a client leaves out
COMPLETIONS_MAX_TOKENS = 16
CHAT_MAX_TOKENS = 256
MAX_BODY_BYTES = 64 * 1024 * 1024


class ApiError(Exception):
    """An error answered to the client as OpenAI-shaped JSON."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass
class ServerStats:
    """What the server saw; tests assert on it. Read fields under ``lock`` when it matters."""

    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    #: the most recent request paths and batch sizes (bounded: a server may run for weeks)
    paths: deque[str] = field(default_factory=lambda: deque(maxlen=10_000))
    batch_sizes: deque[int] = field(default_factory=lambda: deque(maxlen=10_000))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def enter(self, path: str) -> None:
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.paths.append(path)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


class _Batcher:
    """Owns the backend: one worker thread runs micro-batches of queued requests."""

    _STOP = object()

    def __init__(self, llm: LLM, stats: ServerStats, window_s: float, max_batch: int):
        self.llm = llm
        self.stats = stats
        self.window_s = window_s
        self.max_batch = max_batch
        self.queue: queue.Queue[Any] = queue.Queue()
        self.closed = False
        self.thread = threading.Thread(
            target=self._work, name="chunkwise-serve-batcher", daemon=True
        )
        self.thread.start()

    def submit(self, requests: list[Request]) -> list[Future]:
        if self.closed:
            raise ApiError(503, "the server is shutting down", "server_error")
        futures = []
        for r in requests:
            f: Future = Future()
            self.queue.put((r, f))
            futures.append(f)
        return futures

    def _collect(self, first: Any) -> list[tuple[Request, Future]]:
        batch = [first]
        deadline = time.monotonic() + self.window_s
        while len(batch) < self.max_batch:
            try:
                item = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is self._STOP:
                self.queue.put(item)  # seen again by the outer loop
                break
            batch.append(item)
        return batch

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            if item is self._STOP:
                break
            batch = [(r, f) for r, f in self._collect(item) if f.set_running_or_notify_cancel()]
            if not batch:
                continue
            with self.stats.lock:
                self.stats.batch_sizes.append(len(batch))
            try:
                outs = self.llm.generate([r for r, _ in batch])
            except Exception as e:
                if len(batch) == 1:
                    batch[0][1].set_exception(e)
                    continue
                # one bad request must not fail its neighbours: retry them one by one
                log.debug("batch of %d failed (%s); retrying one by one", len(batch), e)
                for r, f in batch:
                    try:
                        f.set_result(self.llm.generate([r])[0])
                    except Exception as e1:
                        f.set_exception(e1)
                continue
            for (_, f), c in zip(batch, outs, strict=True):
                f.set_result(c)
        self._drain()

    def _drain(self) -> None:
        """Fail whatever is still queued."""
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is not self._STOP and item[1].set_running_or_notify_cancel():
                item[1].set_exception(ApiError(503, "the server is shutting down", "server_error"))

    def close(self) -> None:
        self.closed = True
        self.queue.put(self._STOP)
        self.thread.join(timeout=60)
        if not self.thread.is_alive():
            self._drain()  # anything submitted while the worker was stopping


# -- request parsing ------------------------------------------------------------------------
def _num(body: dict, key: str, default: Any, kind: type) -> Any:
    v = body.get(key)
    if v is None:
        return default
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or (kind is int and not isinstance(v, int))
    ):
        raise ApiError(
            400, f"'{key}' must be {'an integer' if kind is int else 'a number'}, got {v!r}"
        )
    return kind(v)


def _params(body: dict, default_max: int, logprobs: bool) -> GenerationParams:
    stop = body.get("stop")
    if stop is None:
        stop = ()
    elif isinstance(stop, str):
        stop = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stop = tuple(stop)
    else:
        raise ApiError(400, f"'stop' must be a string or a list of strings, got {stop!r}")
    max_tokens = _num(body, "max_tokens", None, int)
    if max_tokens is None:
        max_tokens = _num(body, "max_completion_tokens", default_max, int)
    try:
        return GenerationParams(
            max_new_tokens=max_tokens,
            temperature=_num(body, "temperature", 1.0, float),
            top_p=_num(body, "top_p", 1.0, float),
            stop=stop,
            seed=_num(body, "seed", None, int),
            logprobs=logprobs,
        )
    except ValueError as e:
        raise ApiError(400, str(e)) from None


def _common_checks(body: dict) -> int:
    if body.get("stream"):
        raise ApiError(400, "streaming is not supported by this server")
    n = _num(body, "n", 1, int)
    if not 1 <= n <= 64:
        raise ApiError(400, f"'n' must be between 1 and 64, got {n}")
    return n


def _is_ids(x: Any) -> bool:
    return (
        isinstance(x, list)
        and bool(x)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in x)
    )


class _App:
    def __init__(self, llm: LLM, model_name: str, stats: ServerStats, batcher: _Batcher):
        self.llm = llm
        self.model_name = model_name
        self.stats = stats
        self.batcher = batcher
        self.created = int(time.time())

    def _run(self, requests: list[Request]) -> list[Completion]:
        futures = self.batcher.submit(requests)
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except ApiError:
                raise
            except ValueError as e:  # the backend refused the input
                raise ApiError(400, f"{type(e).__name__}: {e}") from None
            except Exception as e:
                log.exception("generation failed")
                raise ApiError(
                    500, f"generation failed: {type(e).__name__}: {e}", "server_error"
                ) from None
        return out

    def _prompts(self, body: dict) -> list[str]:
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            return [prompt]
        if _is_ids(prompt):
            prompt = [prompt]
        if isinstance(prompt, list) and prompt:
            out = []
            for p in prompt:
                if isinstance(p, str):
                    out.append(p)
                elif _is_ids(p):
                    try:
                        out.append(self.llm.decode(p))
                    except NotImplementedError:
                        raise ApiError(
                            400, "this model takes text prompts, not token ids"
                        ) from None
                else:
                    raise ApiError(
                        400, f"'prompt' items must be strings or token id lists, got {p!r}"
                    )
            return out
        raise ApiError(400, "'prompt' is required: a string or a list of strings")

    @staticmethod
    def _usage(cs: list[Completion], prompts: int, n: int) -> dict[str, int]:
        # each prompt counted once, however many choices it has
        p = sum(cs[i * n].prompt_tokens for i in range(prompts))
        c = sum(x.completion_tokens for x in cs)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def completions(self, body: dict) -> dict:
        n = _common_checks(body)
        if body.get("echo"):
            raise ApiError(400, "'echo' is not supported by this server")
        lp = body.get("logprobs")
        if lp is not None and (isinstance(lp, bool) or not isinstance(lp, int) or lp < 0):
            raise ApiError(400, f"'logprobs' must be a non-negative integer, got {lp!r}")
        params = _params(body, COMPLETIONS_MAX_TOKENS, logprobs=lp is not None)
        prompts = self._prompts(body)
        cs = self._run([Request(p, params) for p in prompts for _ in range(n)])
        choices = []
        for i, c in enumerate(cs):
            logprobs = None
            if lp is not None and c.token_logprobs is not None:
                tokens = c.tokens or [""] * len(c.token_logprobs)
                offsets, pos = [], 0
                for t in tokens:
                    offsets.append(pos)
                    pos += len(t)
                logprobs = {
                    "tokens": tokens,
                    "token_logprobs": c.token_logprobs,
                    "top_logprobs": [{t: v} for t, v in zip(tokens, c.token_logprobs, strict=True)]
                    if lp > 0
                    else None,
                    "text_offset": offsets,
                }
            choices.append(
                {
                    "index": i,
                    "text": c.text,
                    "logprobs": logprobs,
                    "finish_reason": c.finish_reason,
                    "stop_reason": getattr(c, "stop_reason", None),  # as vLLM reports it
                }
            )
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": self._usage(cs, len(prompts), n),
        }

    def chat_completions(self, body: dict) -> dict:
        n = _common_checks(body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' is required: a non-empty list of {role, content}")
        clean = []
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ApiError(400, f"each message needs a 'role' and a 'content', got {m!r}")
            content = m.get("content")
            if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
                try:
                    content = "".join(
                        part["text"] for part in content if part.get("type") == "text"
                    )
                except (TypeError, KeyError, AttributeError):
                    raise ApiError(400, f"unsupported message content {content!r}") from None
            if not isinstance(content, str):
                raise ApiError(400, f"message content must be text, got {content!r}")
            clean.append({"role": m["role"], "content": content})
        want_lp = bool(body.get("logprobs"))
        params = _params(body, CHAT_MAX_TOKENS, logprobs=want_lp)
        cs = self._run([Request(clean, params) for _ in range(n)])
        choices = []
        for i, c in enumerate(cs):
            logprobs = None
            if want_lp and c.token_logprobs is not None:
                tokens = c.tokens or [""] * len(c.token_logprobs)
                logprobs = {
                    "content": [
                        {
                            "token": t,
                            "logprob": v,
                            "bytes": list(t.encode("utf-8")),
                            "top_logprobs": [],
                        }
                        for t, v in zip(tokens, c.token_logprobs, strict=True)
                    ]
                }
            choices.append(
                {
                    "index": i,
                    "message": {"role": "assistant", "content": c.text},
                    "logprobs": logprobs,
                    "finish_reason": c.finish_reason,
                    "stop_reason": getattr(c, "stop_reason", None),
                }
            )
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": self._usage(cs, 1, n),
        }

    def models(self) -> dict:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.model_name,
                    "object": "model",
                    "created": self.created,
                    "owned_by": "chunkwise",
                    "max_model_len": self.llm.context_window,
                }
            ],
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    server_version = "chunkwise-serve"
    timeout = 120  # idle keep-alive connections are dropped after this

    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client went away
            self.close_connection = True

    def _error(self, e: ApiError) -> None:
        self._send(e.status, {"error": {"message": str(e), "type": e.kind, "code": e.status}})

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def do_GET(self) -> None:
        route = self._route()
        if route == "/models":
            self._send(200, self.server.app.models())
        elif route in ("/health", ""):
            self._send(200, {"status": "ok"})
        else:
            self._error(ApiError(404, f"no route GET {self.path}", "not_found_error"))

    def do_POST(self) -> None:
        stats = self.server.app.stats
        stats.enter(self.path)
        try:
            self._post()
        finally:
            stats.leave()

    def _post(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY_BYTES:
            self.close_connection = True
            self._error(ApiError(400, "a JSON body with a Content-Length is required"))
            return
        raw = self.rfile.read(length)
        route = self._route()
        app = self.server.app
        try:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                raise ApiError(400, "the request body is not valid JSON") from None
            if not isinstance(body, dict):
                raise ApiError(400, "the request body must be a JSON object")
            if route == "/completions":
                payload = app.completions(body)
            elif route == "/chat/completions":
                payload = app.chat_completions(body)
            else:
                raise ApiError(404, f"no route POST {self.path}", "not_found_error")
        except ApiError as e:
            self._error(e)
            return
        self._send(200, payload)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], app: _App):
        self.app = app
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Wake handler threads blocked on idle keep-alive connections."""
        with self._conns_lock:
            conns = list(self._conns)
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _default_name(llm: LLM) -> str:
    if llm.spec:
        from chunkwise.llm.spec import parse_spec

        try:
            return parse_spec(llm.spec).target
        except Exception:
            return llm.spec
    return "chunkwise"


class OpenAIServer:
    """An OpenAI-compatible server over ``llm``, bound at construction (``port=0``: any free one).

    ``start()`` serves from a background thread; ``serve_forever()`` blocks (the CLI);
    ``close()`` stops serving, drops open connections and stops the batch worker. It does not
    close ``llm``: whoever loaded it owns it.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str | None = None,
        batch_window_s: float = 0.005,
        max_batch: int = 32,
    ):
        self.llm = llm
        self.stats = ServerStats()
        self.model_name = model_name or _default_name(llm)
        self._batcher = _Batcher(llm, self.stats, batch_window_s, max_batch)
        try:
            self._httpd = _HTTPServer(
                (host, port), _App(llm, self.model_name, self.stats, self._batcher)
            )
        except OSError:
            self._batcher.close()
            raise
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> OpenAIServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.1},
                name=f"chunkwise-serve-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.5)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10)
        self._batcher.close()
        self._httpd.drop_connections()
        self._httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def serve_in_thread(llm: LLM, **kwargs: Any) -> Iterator[str]:
    """Serve ``llm`` on 127.0.0.1 (an ephemeral port) for the ``with`` block; yields the base
    URL (``http://127.0.0.1:PORT/v1``). Keyword arguments go to :class:`OpenAIServer`."""
    server = OpenAIServer(llm, **kwargs).start()
    try:
        yield server.base_url
    finally:
        server.close()
