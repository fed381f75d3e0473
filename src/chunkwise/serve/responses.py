"""OpenAI-shaped bodies: whole responses, and the chunks of a streamed (SSE) response."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from chunkwise.llm.base import Completion
from chunkwise.serve.schemas import GenerationCall


def new_id(call: GenerationCall) -> str:
    return f"{'chatcmpl' if call.chat else 'cmpl'}-{uuid.uuid4().hex}"


def usage(call: GenerationCall, results: dict[int, Completion]) -> dict[str, int]:
    """Each prompt counted once, however many choices it has."""
    p = sum(
        results[i * call.n].prompt_tokens for i in range(len(call.prompts)) if i * call.n in results
    )
    c = sum(x.completion_tokens for x in results.values())
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _tokens(c: Completion) -> list[str]:
    assert c.token_logprobs is not None
    return c.tokens or [""] * len(c.token_logprobs)


def completion_logprobs(call: GenerationCall, c: Completion) -> dict[str, Any] | None:
    if call.logprobs is None or c.token_logprobs is None:
        return None
    tokens = _tokens(c)
    offsets, pos = [], 0
    for t in tokens:
        offsets.append(pos)
        pos += len(t)
    return {
        "tokens": tokens,
        "token_logprobs": c.token_logprobs,
        "top_logprobs": [{t: v} for t, v in zip(tokens, c.token_logprobs, strict=True)]
        if call.logprobs > 0
        else None,
        "text_offset": offsets,
    }


def chat_logprobs(call: GenerationCall, c: Completion) -> dict[str, Any] | None:
    if call.logprobs is None or c.token_logprobs is None:
        return None
    return {
        "content": [
            {"token": t, "logprob": v, "bytes": list(t.encode("utf-8")), "top_logprobs": []}
            for t, v in zip(_tokens(c), c.token_logprobs, strict=True)
        ]
    }


def _choice(call: GenerationCall, i: int, c: Completion) -> dict[str, Any]:
    tail = {"finish_reason": c.finish_reason, "stop_reason": c.stop_reason}  # as vLLM reports
    if call.chat:
        return {
            "index": i,
            "message": {"role": "assistant", "content": c.text},
            "logprobs": chat_logprobs(call, c),
            **tail,
        }
    return {"index": i, "text": c.text, "logprobs": completion_logprobs(call, c), **tail}


def whole(call: GenerationCall, model: str, results: dict[int, Completion]) -> dict[str, Any]:
    return {
        "id": new_id(call),
        "object": "chat.completion" if call.chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [_choice(call, i, results[i]) for i in range(len(results))],
        "usage": usage(call, results),
    }


class ChunkWriter:
    """The ``data: ...`` events of one streamed response."""

    def __init__(self, call: GenerationCall, model: str):
        self.call = call
        self.head = {
            "id": new_id(call),
            "object": "chat.completion.chunk" if call.chat else "text_completion",
            "created": int(time.time()),
            "model": model,
        }

    def _event(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        body = {**self.head, "choices": choices, **extra}
        if self.call.include_usage and "usage" not in extra:
            body["usage"] = None
        return b"data: " + json.dumps(body).encode("utf-8") + b"\n\n"

    def choice(self, i: int, c: Completion) -> list[bytes]:
        """The events for choice ``i``: its text, then how it finished."""
        tail = {"finish_reason": c.finish_reason, "stop_reason": c.stop_reason}
        if not self.call.chat:
            lp = completion_logprobs(self.call, c)
            return [self._event([{"index": i, "text": c.text, "logprobs": lp, **tail}])]
        delta = {"role": "assistant", "content": c.text}
        lp = chat_logprobs(self.call, c)
        return [
            self._event([{"index": i, "delta": delta, "logprobs": lp, "finish_reason": None}]),
            self._event([{"index": i, "delta": {}, "logprobs": None, **tail}]),
        ]

    def usage(self, results: dict[int, Completion]) -> bytes:
        return self._event([], usage=usage(self.call, results))

    @staticmethod
    def error(payload: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(payload).encode("utf-8") + b"\n\n"

    @staticmethod
    def done() -> bytes:
        return b"data: [DONE]\n\n"
