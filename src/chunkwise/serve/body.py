"""Reading a request's body: :func:`read_json` takes it as it arrives, counted against the
size limit, the server's byte budget (:class:`Held`) and the body deadline, and
:func:`decode_body` turns it into a JSON object of valid Unicode; every refusal is an
:class:`~chunkwise.serve.errors.ApiError`, and a client that hangs up mid-body raises
:class:`ClientGone`. :func:`drain` discards what is left of a refused body."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import Request
from starlette.requests import ClientDisconnect
from starlette.types import Receive

from chunkwise.serve.errors import ApiError, excerpt
from chunkwise.serve.limits import Limits
from chunkwise.serve.scheduling import ByteBudget


class ClientGone(Exception):
    """The client hung up before its answer was sent."""


def too_large(limits: Limits) -> ApiError:
    """The 413 for a body over ``limits.max_body_bytes``."""
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
                raise too_large(limits)
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
        raise ClientGone from None


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
