"""What one request may ask of the server; anything beyond is refused before it runs."""

from __future__ import annotations

from dataclasses import dataclass


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
    #: a prompt longer than this many characters per token of context cannot fit, whatever
    #: the tokenizer: refused without counting its tokens (counting megabytes takes seconds)
    chars_per_token: int = 64

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {name} must be a positive integer, got {value!r}")
