"""The checks every request passes before any route runs: :class:`Guard`, an ASGI middleware,
refuses bad framing, a Host not answered, a missing or wrong API key, a body that is not JSON,
a page of another origin and a declared body over the limit, answering each with
:func:`error_response` (the one way an :class:`~chunkwise.serve.errors.ApiError` becomes an
HTTP answer)."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from chunkwise.serve.access import Access, host_name, key_matches, origin_key
from chunkwise.serve.body import drain, too_large
from chunkwise.serve.errors import ApiError
from chunkwise.serve.limits import Limits

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def error_response(e: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    """``e`` as an OpenAI-shaped JSON answer, its own headers merged with ``headers``."""
    merged = {**(e.headers or {}), **(headers or {})}
    return JSONResponse(e.payload(), status_code=e.status, headers=merged or None)


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
        await error_response(error, headers)(scope, receive, send)

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
            return too_large(self.limits)
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
