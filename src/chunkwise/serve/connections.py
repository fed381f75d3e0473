"""Connection-level bounds uvicorn's h11 protocol lacks: a cap on open connections, enforced as
each is accepted, and a deadline for the request line and headers.

uvicorn closes a keep-alive connection that stays idle, but not one that sends part of a
request head and stops (the idle timer is cancelled by the first byte), nor one that never
sends anything: fifty such clients held their sockets for as long as they liked. Its
``limit_concurrency`` answers requests past the limit, but only once their headers arrive,
so it does not bound the sockets held open either.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from chunkwise.serve.errors import ApiError
from chunkwise.serve.limits import Limits


def raw_error(error: ApiError, reason: str) -> bytes:
    """A whole HTTP/1.1 error response that closes the connection, as bytes to write
    directly (where no request cycle exists to answer through)."""
    body = json.dumps(error.payload()).encode("utf-8")
    head = (
        f"HTTP/1.1 {error.status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus: a connection past ``max_connections`` is answered 503 and
    closed as it is accepted; a request head (line and headers) must arrive within
    ``head_timeout_s`` of the connection opening or of its first byte after a response, or the
    connection is closed (with 408 when part of a head came). Build one with :func:`protocol`.
    """

    max_connections: int = Limits.max_connections
    head_timeout_s: float = Limits.head_timeout_s

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = len(self.connections) > self.max_connections
        if self._refused:
            error = ApiError(
                503,
                f"the server has {self.max_connections} connections open, its limit; retry later",
                code="too_many_connections",
            )
            transport.write(raw_error(error, "Service Unavailable"))
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._head_timer is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of a new request head
        super().data_received(data)

    def on_response_complete(self) -> None:
        self._disarm()  # the idle keep-alive timer takes over until the next byte
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return  # the head arrived: the request runs on its own clock
        partial, _ = self.conn.trailing_data
        if partial:
            error = ApiError(
                408,
                f"the request line and headers did not arrive within {self.head_timeout_s:g} s",
                code="request_timeout",
            )
            self.transport.write(raw_error(error, "Request Timeout"))
        self.transport.close()


def protocol(limits: Limits) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` class with ``limits``' bounds (uvicorn's ``http=``)."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"max_connections": limits.max_connections, "head_timeout_s": limits.head_timeout_s},
    )
