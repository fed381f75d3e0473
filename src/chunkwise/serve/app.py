"""The FastAPI application: routes, the request guard (framing, Host, key, content type,
origin, size), the body reader (size, byte budget, deadline, valid Unicode) and errors."""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from chunkwise.llm.base import LLM, Completion
from chunkwise.serve.errors import ApiError, excerpt
from chunkwise.serve.limits import LOOPBACK, Limits
from chunkwise.serve.responses import ChunkWriter, whole
from chunkwise.serve.scheduling import ByteBudget, Job, Scheduler, ServerStats
from chunkwise.serve.schemas import GenerationCall, check_window, parse_chat, parse_completions

log = logging.getLogger(__name__)

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _error_response(e: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    merged = {**(e.headers or {}), **(headers or {})}
    return JSONResponse(e.payload(), status_code=e.status, headers=merged or None)


def key_matches(header: str | None, key: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer KEY``, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    ok = hmac.compare_digest(given.strip().encode("utf-8"), key.encode("utf-8"))
    return ok and scheme.lower() == "bearer"


Origin = tuple[str, str, int]  # (scheme, host, port) of a web page
_ANY_ADDRESS = frozenset({"0.0.0.0", "::", ""})


@dataclass(frozen=True)
class Access:
    """Which ``Host`` names the server answers to and which web pages (``Origin``) it trusts.

    ``hosts`` None answers any Host. ``origins`` are the server's own (exact scheme, host and
    port); a page on one of ``origin_hosts`` is trusted on any port."""

    hosts: frozenset[str] | None
    origins: frozenset[Origin]
    origin_hosts: frozenset[str] = frozenset()

    @classmethod
    def for_bind(cls, host: str, port: int, allowed_hosts: Iterable[str] = ()) -> Access:
        """The policy of a server bound at ``host:port``. Bound to loopback, it answers only
        to the loopback names (and ``allowed_hosts``): a DNS-rebinding page, whose Host is its
        own name, is refused. Bound beyond loopback (``0.0.0.0``, a LAN address), where an API
        key is required anyway, it answers to any Host unless ``allowed_hosts`` names them
        (``*`` in them: any). Its own pages are ``http://NAME:PORT`` for the bound names (the
        loopback names for loopback and ``0.0.0.0``); pages on ``allowed_hosts`` are trusted."""
        extra = frozenset(h.strip().strip("[]").lower() for h in allowed_hosts if h.strip())
        bound = host.strip("[]").lower()
        own = LOOPBACK if bound in LOOPBACK | _ANY_ADDRESS else frozenset({bound})
        hosts = None if "*" in extra or not (extra or bound in LOOPBACK) else own | extra
        return cls(hosts, own_origins(own, port), extra - {"*"})


class Guard:
    """Refuses, before any route runs: a request framed both by Content-Length and by
    Transfer-Encoding (400: behind a proxy that reads the other header, the two would disagree
    on where the request ends), a ``Host`` this server does not answer to (403: a DNS-rebinding
    page names its own host; see :class:`Access`), a missing or wrong API key (401, on
    every route), a body that is not JSON (415; a browser's cross-site "simple" POST is
    ``text/plain``), a browser request from a page of another origin (403: its ``Origin``; only
    the server's own origins, and pages on allowed hosts, are trusted) and a declared
    Content-Length over the limit (413). There is no CORS: browsers never get leave to read
    answers across sites."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str | None,
        limits: Limits,
        access: Access,
    ):
        self.app = app
        self.api_key = api_key
        self.limits = limits
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self._check(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        headers = dict(error.headers or {})
        if error.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        if error.status == 413 or error.code == "ambiguous_framing":
            headers["Connection"] = "close"
            declared = Headers(scope=scope).get("content-length") or "0"
            if error.code == "ambiguous_framing" or int(declared) <= self.limits.drain_body_bytes:
                await drain(receive, self.limits.drain_body_bytes)
        await _error_response(error, headers)(scope, receive, send)

    def _check(self, scope: Scope) -> ApiError | None:
        headers = Headers(scope=scope)
        error = self._check_framing(scope, headers) or self._check_host(headers)
        if error is not None:
            return error
        if self.api_key is not None and not key_matches(headers.get("authorization"), self.api_key):
            return ApiError(
                401,
                "a valid API key is required: send 'Authorization: Bearer KEY'",
                code="invalid_api_key",
            )
        body = scope["method"] in _BODY_METHODS
        media = (headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        if body and media != "application/json":
            return ApiError(
                415,
                f"the request body must be JSON (Content-Type: application/json), "
                f"got {media or 'no Content-Type'!r}",
                code="unsupported_media_type",
            )
        origin = headers.get("origin")
        if origin is not None and not self._trusted(origin):
            return ApiError(
                403, f"requests from web pages at {origin[:100]!r} are refused", code="forbidden"
            )
        declared = headers.get("content-length")
        if body and declared is not None and int(declared) > self.limits.max_body_bytes:
            return _too_large(self.limits)
        return None

    @staticmethod
    def _check_framing(scope: Scope, headers: Headers) -> ApiError | None:
        names = {name for name, _ in scope["headers"]}
        if b"content-length" in names and b"transfer-encoding" in names:
            return ApiError(
                400,
                "the request has both Content-Length and Transfer-Encoding headers; send one "
                "(a proxy and this server could disagree on where the body ends)",
                code="ambiguous_framing",
            )
        declared = headers.get("content-length")
        if declared is not None and not declared.isdigit():  # h11 refuses these already
            return ApiError(400, f"bad Content-Length {declared[:40]!r}")
        return None

    def _check_host(self, headers: Headers) -> ApiError | None:
        hosts = self.access.hosts
        if hosts is None:
            return None
        value = headers.get("host")
        if value is None:
            return ApiError(400, "a Host header is required", code="invalid_host")
        name = host_name(value)
        if name is None or name not in hosts:
            return ApiError(
                403,
                f"this server does not answer to the host {value[:100]!r} (it answers to "
                f"{', '.join(sorted(hosts))}; `chunkwise serve --allowed-host NAME` adds "
                "a name)",
                code="host_not_allowed",
            )
        return None

    def _trusted(self, origin: str) -> bool:
        key = origin_key(origin)
        a = self.access
        return key is not None and (key in a.origins or key[1] in a.origin_hosts)


_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\[\]:/@?#\s]+)(?::[0-9]{1,5})?")


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header (``[::1]:8000`` -> ``::1``), lowercased; None if it is
    not a plain ``host[:port]``."""
    m = _HOST.fullmatch(value.strip())
    return m.group(1).strip("[]").lower() if m else None


def origin_key(origin: str) -> Origin | None:
    """``(scheme, host, port)`` of an ``Origin`` header, default ports filled in; None for
    ``null`` or anything that is not ``http(s)://host[:port]``."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def own_origins(names: frozenset[str], port: int) -> frozenset[Origin]:
    """The origins of the server's own pages: ``http://NAME:PORT`` for each name it binds."""
    return frozenset(("http", n.lower(), port) for n in names)


def _too_large(limits: Limits) -> ApiError:
    return ApiError(
        413,
        f"the request body is larger than this server's limit of {limits.max_body_bytes:,} bytes",
        code="request_too_large",
    )


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode_body(raw: bytes) -> dict[str, Any]:
    """A JSON object from ``raw``; ApiError 400 for anything else (deep nesting, and strings
    with a lone surrogate, which no answer could carry as UTF-8, included)."""
    try:
        body = json.loads(raw, parse_constant=_no_constants)
    except RecursionError:
        raise ApiError(400, "the request body is JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not UTF-8 text") from None
    except ValueError as e:
        raise ApiError(400, f"the request body is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    where = lone_surrogate(body)
    if where is not None:
        raise ApiError(
            400,
            f"the request body's {where} holds a lone UTF-16 surrogate (such as \\ud800 "
            "without its pair), which is not text: send valid Unicode",
            param=where.split("[", 1)[0].split(".", 1)[0] or None,
            code="invalid_unicode",
        )
    return body


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: Any) -> str | None:
    """Where in a decoded JSON value the first string (or key) holding a lone surrogate is, as
    ``messages[0].content``; None if there is none. Iterative: nesting depth is the client's."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return _path(path) or "top level"
        elif isinstance(v, dict):
            for k, x in v.items():
                step = (f".{k}" if k.isidentifier() else f"[{excerpt(k)}]",)
                if _SURROGATE.search(k):
                    return _path(path + step)
                if isinstance(x, (str, dict, list)):
                    stack.append((x, path + step))
        elif isinstance(v, list):
            stack.extend(
                (x, (*path, f"[{i}]")) for i, x in enumerate(v) if isinstance(x, (str, dict, list))
            )
    return None


def _path(steps: tuple[str, ...]) -> str:
    return "".join(steps).lstrip(".")


#: the longest a refused body is read and discarded for (``Limits.drain_body_bytes``)
DRAIN_SECONDS = 5.0


async def drain(receive: Receive, max_bytes: int, seen: int = 0) -> None:
    """Read and discard the rest of a request body, up to ``max_bytes`` in all (``seen``
    already read) and ``DRAIN_SECONDS``, so that the error sent next reaches a client that is
    still uploading (a close with unread data is a reset)."""
    with anyio.move_on_after(DRAIN_SECONDS):
        while seen <= max_bytes:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


async def read_json(request: Request, limits: Limits, held: Held) -> dict[str, Any]:
    """The request's JSON body, counted against the byte budget as it arrives (``held``);
    413 past ``max_body_bytes``, 429 past the budget, 408 past ``body_timeout_s``."""
    chunks, size = [], 0
    with anyio.move_on_after(limits.body_timeout_s) as timer:
        async for chunk in _body(request):
            size += len(chunk)
            if size > limits.max_body_bytes:
                await drain(request.receive, limits.drain_body_bytes, size)
                raise _too_large(limits)
            try:
                held.take(len(chunk))
            except ApiError as e:
                await drain(request.receive, limits.drain_body_bytes, size)
                e.headers = {**(e.headers or {}), "Connection": "close"}
                raise
            chunks.append(chunk)
    if timer.cancelled_caught:
        raise ApiError(
            408,
            f"the request body did not arrive within {limits.body_timeout_s:g} s "
            f"({size:,} bytes came)",
            code="request_timeout",
            headers={"Connection": "close"},
        )
    if not size:
        raise ApiError(400, "a JSON body is required")
    return await anyio.to_thread.run_sync(decode_body, b"".join(chunks))


async def _body(request: Request) -> AsyncIterator[bytes]:
    try:
        async for chunk in request.stream():
            yield chunk
    except ClientDisconnect:
        raise _ClientGone from None


class Held:
    """The bytes one request holds of the server's budget; :meth:`release` gives them back."""

    def __init__(self, budget: ByteBudget):
        self.budget = budget
        self.n = 0

    def take(self, n: int) -> None:
        self.budget.take(n)
        self.n += n

    def release(self) -> None:
        n, self.n = self.n, 0
        if n:
            self.budget.give(n)


class _ClientGone(Exception):
    pass


async def _client_gone(request: Request) -> None:
    """Returns once the client has hung up (the body is read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class _JobStream(StreamingResponse):
    """An SSE response that runs ``on_close`` however it ends (even if never iterated)."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None]):
        super().__init__(
            content, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()


class Generation:
    """Serves one generation route: parse, queue, wait (or stream), answer."""

    def __init__(
        self,
        llm: LLM,
        model: str,
        scheduler: Scheduler,
        stats: ServerStats,
        limits: Limits,
        parse: Callable[..., GenerationCall],
    ):
        self.llm, self.model, self.scheduler = llm, model, scheduler
        self.stats, self.limits, self.parse = stats, limits, parse

    async def __call__(self, request: Request) -> Response:
        self.stats.enter(request.url.path)
        held = Held(self.scheduler.budget)
        streaming = False
        try:
            body = await read_json(request, self.limits, held)
            call = self._parse(body)
            job = Job(
                call.requests(),
                asyncio.get_running_loop(),
                admit=functools.partial(check_window, call, self.llm),
            )
            self.scheduler.submit(job)
            gone = asyncio.ensure_future(_client_gone(request))
            try:
                await self._next(job, gone)  # admitted: the prompt fits
                if call.stream:
                    streaming = True
                    return _JobStream(self._stream(job, call), on_close=self._closer(job, held))
                results: dict[int, Completion] = {}
                while len(results) < len(job.requests):
                    results.update(await self._next(job, gone))
                return JSONResponse(whole(call, self.model, results))
            finally:
                gone.cancel()
                if not streaming:
                    self.scheduler.cancel(job)  # a no-op once it finished
        except _ClientGone:
            return Response(status_code=499)
        finally:
            if not streaming:
                held.release()
                self.stats.leave()

    def _parse(self, body: dict[str, Any]) -> GenerationCall:
        try:
            return self.parse(body, self.llm, self.model, self.limits)
        except ApiError:
            raise
        except Exception as e:  # a bug, or a backend failing on input: keep the connection
            log.exception("parsing a request failed")
            raise ApiError(500, f"internal error: {type(e).__name__}: {e}") from None

    async def _next(self, job: Job, gone: asyncio.Future) -> list[tuple[int, Completion]]:
        """The next results of ``job``; raises its error, or _ClientGone."""
        getter = asyncio.ensure_future(job.events.get())
        await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not getter.done():
            getter.cancel()
            self.scheduler.cancel(job)
            raise _ClientGone
        event = getter.result()
        if event[0] == "error":
            raise event[1]
        return event[1] if event[0] == "done" else []

    def _closer(self, job: Job, held: Held) -> Callable[[], None]:
        def close() -> None:
            self.scheduler.cancel(job)  # a no-op once it finished
            held.release()
            self.stats.leave()

        return close

    async def _stream(self, job: Job, call: GenerationCall) -> AsyncIterator[bytes]:
        """SSE events; Starlette stops iterating when the client hangs up."""
        writer = ChunkWriter(call, self.model)
        results: dict[int, Completion] = {}
        while len(results) < len(job.requests):
            event = await job.events.get()
            if event[0] == "error":
                yield writer.error(event[1].payload())
                break
            for i, c in sorted(event[1], key=lambda x: x[0]):
                results[i] = c
                for chunk in writer.choice(i, c):
                    yield chunk
        else:
            if call.include_usage:
                yield writer.usage(results)
        yield writer.done()


def create_app(
    llm: LLM,
    *,
    model: str,
    scheduler: Scheduler,
    stats: ServerStats,
    limits: Limits,
    api_key: str | None,
    access: Access,
) -> FastAPI:
    """``access``: the Host names answered and the web pages trusted (:class:`Access`)."""
    app = FastAPI(title="chunkwise", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, api_key=api_key, limits=limits, access=access)
    created = int(time.time())

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return _error_response(e, {"Connection": "close"} if e.status in (408, 413) else None)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        message = (
            f"no route {request.method} {request.url.path}"
            if e.status_code in (404, 405)
            else str(e.detail)
        )
        return _error_response(ApiError(e.status_code, message))

    @app.exception_handler(Exception)
    async def _bug(request: Request, e: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return _error_response(ApiError(500, f"internal error: {type(e).__name__}"))

    async def models(request: Request) -> JSONResponse:
        card = {
            "id": model,
            "object": "model",
            "created": created,
            "owned_by": "chunkwise",
            "max_model_len": llm.context_window,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    def route(parse: Callable[..., GenerationCall]) -> Callable[[Request], Any]:
        generation = Generation(llm, model, scheduler, stats, limits, parse)

        async def endpoint(request: Request) -> Response:
            return await generation(request)

        return endpoint

    completions, chat = route(parse_completions), route(parse_chat)
    for prefix in ("/v1", ""):  # the /v1 prefix is optional
        app.add_api_route(f"{prefix}/models", models, methods=["GET"])
        app.add_api_route(f"{prefix}/health", health, methods=["GET"])
        app.add_api_route(f"{prefix}/completions", completions, methods=["POST"])
        app.add_api_route(f"{prefix}/chat/completions", chat, methods=["POST"])
    return app
