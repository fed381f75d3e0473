"""Raw HTTP/1.1 over a socket, for server tests where a client library would fix the headers
(duplicate framing headers, a foreign Host, half-sent requests). Import as ``http_raw``."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # lower-cased names; a repeated header keeps its last value
    body: bytes
    closed: bool  # the server closed the connection after it

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    method: str,
    path: str,
    *,
    host: str | None = "127.0.0.1",
    headers: dict[str, str] | list[tuple[str, str]] = (),  # type: ignore[assignment]
    body: bytes | None = None,
    length: bool = True,
) -> bytes:
    """The bytes of one request; ``length`` adds a Content-Length for ``body``."""
    lines = [f"{method} {path} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    items = headers.items() if isinstance(headers, dict) else headers
    lines += [f"{k}: {v}" for k, v in items]
    if body is not None and length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def read_reply(sock: socket.socket, *, head_only: bool = False) -> Reply:
    """The final response from ``sock``, interim ``1xx`` ones skipped (Content-Length, chunked
    or read-to-close; ``head_only`` for the answer to a HEAD request); raises ConnectionError
    if the server closes before a whole head arrives."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            part = sock.recv(65536)
            if not part:
                raise ConnectionError(f"closed before a response head; got {buf[:200]!r}")
            buf += part
        head, _, buf = buf.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        if status >= 200:
            break
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body, closed = _body(sock, buf, headers, head_only or status in (204, 304))
    return Reply(status, headers, body, closed)


def _body(
    sock: socket.socket, rest: bytes, headers: dict[str, str], empty: bool
) -> tuple[bytes, bool]:
    if empty:
        return b"", False
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            part = sock.recv(65536)
            if not part:
                raise ConnectionError(f"closed mid-body; got {rest[:200]!r}")
            rest += part
        return rest[:n], False
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return _chunked(sock, rest)[0], False
    while part := sock.recv(65536):  # read to close
        rest += part
    return rest, True


def _chunked(sock: socket.socket, buf: bytes) -> tuple[bytes, bytes]:
    body = b""
    while True:
        while b"\r\n" not in buf:
            buf += _more(sock)
        size_line, _, buf = buf.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        while len(buf) < size + 2:
            buf += _more(sock)
        body, buf = body + buf[:size], buf[size + 2 :]
        if size == 0:
            return body, buf


def _more(sock: socket.socket) -> bytes:
    part = sock.recv(65536)
    if not part:
        raise ConnectionError("closed mid-chunk")
    return part


def closed_by_peer(sock: socket.socket) -> bool:
    """Reads what is left; True once the server has closed (EOF or reset)."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    return True


def exchange(port: int, data: bytes, timeout: float = 30) -> Reply:
    """Sends ``data`` on a new connection and reads one response; notes whether the server
    then closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        reply = read_reply(s)
        if not reply.closed and reply.headers.get("connection", "").lower() == "close":
            reply.closed = closed_by_peer(s)
        return reply
