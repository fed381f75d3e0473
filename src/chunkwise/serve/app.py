"""The FastAPI application: routes, the request guard (key, content type, size) and errors."""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from chunkwise.llm.base import LLM, Completion
from chunkwise.serve.errors import ApiError
from chunkwise.serve.limits import Limits
from chunkwise.serve.responses import ChunkWriter, whole
from chunkwise.serve.scheduling import Job, Scheduler, ServerStats
from chunkwise.serve.schemas import GenerationCall, check_window, parse_chat, parse_completions

log = logging.getLogger(__name__)

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _error_response(e: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(e.payload(), status_code=e.status, headers=headers)


def key_matches(header: str | None, key: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer KEY``, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    ok = hmac.compare_digest(given.strip().encode("utf-8"), key.encode("utf-8"))
    return ok and scheme.lower() == "bearer"


class Guard:
    """Refuses, before any route runs: a missing or wrong API key (401, on every route), a
    body that is not JSON (415; a browser's cross-site "simple" POST is ``text/plain``), a
    browser request from a page on another host (403: its ``Origin``; this also stops DNS
    rebinding) and a declared Content-Length over the limit (413). There is no CORS: browsers
    never get leave to read answers across sites."""

    def __init__(
        self, app: ASGIApp, *, api_key: str | None, limits: Limits, origin_hosts: frozenset[str]
    ):
        self.app = app
        self.api_key = api_key
        self.limits = limits
        self.origin_hosts = origin_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self._check(scope)
        if error is None:
            await self.app(scope, receive, send)
            return
        headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
        if error.status == 413:
            headers = {"Connection": "close"}
            declared = int(Headers(scope=scope).get("content-length") or 0)
            if declared <= self.limits.drain_body_bytes:
                await drain(receive, self.limits.drain_body_bytes)
        await _error_response(error, headers)(scope, receive, send)

    def _check(self, scope: Scope) -> ApiError | None:
        headers = Headers(scope=scope)
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
        if origin is not None and (urlsplit(origin).hostname or "") not in self.origin_hosts:
            return ApiError(
                403, f"requests from web pages at {origin[:100]!r} are refused", code="forbidden"
            )
        declared = headers.get("content-length")
        if body and declared is not None:
            if not declared.isdigit():
                return ApiError(400, f"bad Content-Length {declared[:40]!r}")
            if int(declared) > self.limits.max_body_bytes:
                return _too_large(self.limits)
        return None


def _too_large(limits: Limits) -> ApiError:
    return ApiError(
        413,
        f"the request body is larger than this server's limit of {limits.max_body_bytes:,} bytes",
        code="request_too_large",
    )


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode_body(raw: bytes) -> dict[str, Any]:
    """A JSON object from ``raw``; ApiError 400 for anything else (deep nesting included)."""
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
    return body


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


async def read_json(request: Request, limits: Limits) -> dict[str, Any]:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            await drain(request.receive, limits.drain_body_bytes, size)
            raise _too_large(limits)
        chunks.append(chunk)
    if not size:
        raise ApiError(400, "a JSON body is required")
    return await anyio.to_thread.run_sync(decode_body, b"".join(chunks))


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
        streaming = False
        try:
            body = await read_json(request, self.limits)
            try:
                call = self.parse(body, self.llm, self.model, self.limits)
            except ApiError:
                raise
            except Exception as e:  # a bug, or a backend failing on input: keep the connection
                log.exception("parsing a request failed")
                raise ApiError(500, f"internal error: {type(e).__name__}: {e}") from None
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
                    return _JobStream(self._stream(job, call), on_close=self._closer(job))
                results: dict[int, Completion] = {}
                while len(results) < len(job.requests):
                    results.update(await self._next(job, gone))
                return JSONResponse(whole(call, self.model, results))
            except _ClientGone:
                return Response(status_code=499)
            finally:
                gone.cancel()
                if not streaming:
                    self.scheduler.cancel(job)  # a no-op once it finished
        finally:
            if not streaming:
                self.stats.leave()

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

    def _closer(self, job: Job) -> Callable[[], None]:
        def close() -> None:
            self.scheduler.cancel(job)  # a no-op once it finished
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
    origin_hosts: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1"}),
) -> FastAPI:
    """``origin_hosts``: the hosts whose web pages may call the API (a browser's ``Origin``)."""
    app = FastAPI(title="chunkwise", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, api_key=api_key, limits=limits, origin_hosts=origin_hosts)
    created = int(time.time())

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return _error_response(e, {"Connection": "close"} if e.status == 413 else None)

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
