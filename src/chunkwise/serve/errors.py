"""Errors answered to the client in OpenAI's shape: ``{"error": {message, type, param, code}}``."""

from __future__ import annotations

import reprlib
from typing import Any

from chunkwise.redact import redact

#: OpenAI's ``error.type`` for each status this server answers with
_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


class ApiError(Exception):
    """An error answered as OpenAI-shaped JSON with HTTP status ``status`` (and ``headers``,
    e.g. ``Retry-After`` or ``Connection: close``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code
        self.headers = headers

    @property
    def kind(self) -> str:
        return _TYPES.get(
            self.status, "invalid_request_error" if self.status < 500 else "server_error"
        )

    def payload(self) -> dict[str, Any]:
        """The body answered; its message never carries a URL's user info or a secret query
        parameter (a backend's error may name the upstream URL it failed to reach)."""
        return {
            "error": {
                "message": redact(str(self)),
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 3, 60, 60, 4, 4


def excerpt(value: object) -> str:
    """A short ``repr`` for error messages: a request may hold megabytes, or deep nesting."""
    return _REPR.repr(value)
