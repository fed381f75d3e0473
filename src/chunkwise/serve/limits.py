"""What requests may ask of the server, one by one and all together; anything beyond is
refused before it runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the names a loopback-bound server answers to (Host header) and trusts as origins
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class Limits:
    #: bytes of request body (413 beyond; checked on Content-Length and while reading)
    max_body_bytes: int = 16 * 1024 * 1024
    #: after refusing a body as too large, read and discard up to this many bytes of it (for
    #: at most ``DRAIN_SECONDS``): a client still sending it then reads the 413, where closing
    #: on unread data would reset the connection and lose the response
    drain_body_bytes: int = 128 * 1024 * 1024
    #: choices per prompt (``n``)
    max_n: int = 16
    #: prompts in one ``/v1/completions`` request (a list prompt)
    max_prompts: int = 256
    #: prompts x ``n`` in one request
    max_choices: int = 1024
    #: messages in one chat request
    max_messages: int = 4096
    #: requests queued or running at once (429 beyond)
    max_queued: int = 1024
    #: request-body bytes held at once by requests being read, queued or running (429 beyond):
    #: without it, ``max_queued`` bodies of ``max_body_bytes`` each could hold 16 GiB
    max_queued_bytes: int = 256 * 1024 * 1024
    #: open connections at once: one past it is answered 503 and closed as it is accepted
    #: (uvicorn's ``limit_concurrency`` refuses requests too, from the same number)
    max_connections: int = 512
    #: seconds a client has to send a whole request line and headers, from connecting or
    #: from its first byte after a response (408 and closed beyond; stops slow-header floods)
    head_timeout_s: float = 10.0
    #: seconds an idle keep-alive connection stays open between requests (longer than the
    #: 5 s that httpx-based clients keep idle connections, so they close first)
    keep_alive_s: float = 30.0
    #: seconds a client has to send the whole body once its headers arrived (408 beyond)
    body_timeout_s: float = 60.0
    #: a prompt longer than this many characters per token of context cannot fit, whatever
    #: the tokenizer: refused without counting its tokens (counting megabytes takes seconds)
    chars_per_token: int = 64

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if name.endswith("_s"):
                number = isinstance(value, (int, float)) and not isinstance(value, bool)
                if not number or not math.isfinite(value) or value <= 0:
                    raise ValueError(f"limit {name} must be a positive number, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {name} must be a positive integer, got {value!r}")
        if self.max_queued_bytes < self.max_body_bytes:
            raise ValueError(
                f"limit max_queued_bytes ({self.max_queued_bytes:,}) must be at least "
                f"max_body_bytes ({self.max_body_bytes:,}): a largest body could never be taken"
            )
