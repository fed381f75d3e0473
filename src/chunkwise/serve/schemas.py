"""Request bodies of ``/v1/completions`` and ``/v1/chat/completions``, checked field by field.

Everything a client sends is validated here, before any work is queued: types, ranges
(finite temperature, ``top_p`` in (0, 1], ``max_tokens`` within the context window), the caps of
:class:`~chunkwise.serve.limits.Limits`, and the model name. Errors name the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from chunkwise.llm.base import LLM, GenerationParams, Message, Prompt, Request
from chunkwise.serve.errors import ApiError, excerpt
from chunkwise.serve.limits import Limits

#: OpenAI's defaults for ``max_tokens`` when a client leaves it out
COMPLETIONS_MAX_TOKENS = 16
CHAT_MAX_TOKENS = 256
MAX_STOP_STRINGS = 16
MAX_LOGPROBS = 20
SEED_RANGE = (0, 2**63 - 1)


@dataclass(frozen=True)
class GenerationCall:
    """One validated request: its distinct prompts, ``n`` choices each, and how to decode."""

    chat: bool
    prompts: list[Prompt]
    n: int
    params: GenerationParams
    stream: bool
    include_usage: bool
    #: completions: top-logprob count asked for; chat: 0 when ``logprobs: true``; else None
    logprobs: int | None
    #: whether the client set ``max_tokens``; if not, each prompt gets what room is left
    explicit_max: bool = True

    def requests(self) -> list[Request]:
        """Backend requests, prompt-major: choice ``j`` of prompt ``i`` is ``i * n + j``."""
        return [Request(p, self.params) for p in self.prompts for _ in range(self.n)]


def _bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def _int(body: dict, key: str, default: int | None, lo: int, hi: int) -> int | None:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(f"'{key}' must be an integer, got {excerpt(v)}", key)
    if not lo <= v <= hi:
        raise _bad(f"'{key}' must be between {lo} and {hi}, got {v}", key)
    return v


def _float(body: dict, key: str, default: float, lo: float, hi: float, lo_open: bool) -> float:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(f"'{key}' must be a number, got {excerpt(v)}", key)
    interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
    try:
        v = float(v)  # an integer of 400 digits does not fit a float
    except OverflowError:
        raise _bad(
            f"'{key}' must be a finite number in {interval}, got {excerpt(v)}", key
        ) from None
    low_ok = v > lo if lo_open else v >= lo
    if not math.isfinite(v) or not low_ok or v > hi:
        raise _bad(f"'{key}' must be a finite number in {interval}, got {v}", key)
    return v


def _bool(body: dict, key: str) -> bool:
    v = body.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise _bad(f"'{key}' must be true or false, got {excerpt(v)}", key)
    return v


def _stop(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if (
        not isinstance(stop, list)
        or len(stop) > MAX_STOP_STRINGS
        or not all(isinstance(s, str) for s in stop)
    ):
        raise _bad(
            f"'stop' must be a string or a list of at most {MAX_STOP_STRINGS} strings, "
            f"got {excerpt(stop)}",
            "stop",
        )
    return tuple(stop)


def _stream_options(body: dict, stream: bool) -> bool:
    opts = body.get("stream_options")
    if opts is None:
        return False
    if not isinstance(opts, dict):
        raise _bad(f"'stream_options' must be an object, got {excerpt(opts)}", "stream_options")
    if not stream:
        raise _bad("'stream_options' is only allowed with 'stream': true", "stream_options")
    return _bool(opts, "include_usage")


def check_model(body: dict, served: str) -> None:
    model = body.get("model")
    if model is None:
        return  # as vLLM does: the one served model
    if not isinstance(model, str):
        raise _bad(f"'model' must be a string, got {excerpt(model)}", "model")
    if model != served:
        raise ApiError(
            404,
            f"the model {excerpt(model)} does not exist; this server serves {served!r}",
            param="model",
            code="model_not_found",
        )


def _explicit_max(body: dict) -> bool:
    return body.get("max_tokens") is not None or body.get("max_completion_tokens") is not None


def _params(body: dict, llm: LLM, default_max: int, logprobs: bool) -> GenerationParams:
    window = llm.context_window
    max_tokens = _int(body, "max_tokens", None, 1, window)
    if max_tokens is None:
        max_tokens = _int(body, "max_completion_tokens", default_max, 1, window)
    seed = _int(body, "seed", None, *SEED_RANGE)
    return GenerationParams(
        max_new_tokens=min(max_tokens or default_max, window),
        temperature=_float(body, "temperature", 1.0, 0.0, 100.0, lo_open=False),
        top_p=_float(body, "top_p", 1.0, 0.0, 1.0, lo_open=True),
        stop=_stop(body),
        seed=seed,
        logprobs=logprobs,
    )


def _char_bound(text: str, llm: LLM, limits: Limits, param: str) -> None:
    most = llm.context_window * limits.chars_per_token
    if len(text) > most:
        raise _bad(
            f"the {param} has {len(text):,} characters, more than a {llm.context_window}-token "
            f"context can hold (this server refuses over {limits.chars_per_token} characters "
            "per token of context)",
            param,
            "context_length_exceeded",
        )


def _is_ids(x: Any) -> bool:
    return (
        isinstance(x, list)
        and bool(x)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in x)
    )


def _prompts(body: dict, llm: LLM, limits: Limits) -> list[Prompt]:
    prompt = body.get("prompt")
    if isinstance(prompt, str) or _is_ids(prompt):
        prompt = [prompt]
    if not isinstance(prompt, list) or not prompt:
        raise _bad("'prompt' is required: a string or a list of strings", "prompt")
    if len(prompt) > limits.max_prompts:
        raise _bad(
            f"'prompt' holds {len(prompt)} prompts; this server takes at most "
            f"{limits.max_prompts} per request",
            "prompt",
        )
    out: list[Prompt] = []
    for p in prompt:
        if _is_ids(p):
            if len(p) > llm.context_window:
                raise _bad(
                    f"a prompt has {len(p)} token ids, more than the {llm.context_window}-token "
                    "context",
                    "prompt",
                    "context_length_exceeded",
                )
            try:
                p = llm.decode(p)
            except NotImplementedError:
                raise _bad("this model takes text prompts, not token ids", "prompt") from None
            except (IndexError, ValueError, OverflowError, TypeError):
                raise _bad("'prompt' holds token ids outside the vocabulary", "prompt") from None
        if not isinstance(p, str):
            raise _bad(
                f"'prompt' items must be strings or token id lists, got {excerpt(p)}", "prompt"
            )
        _char_bound(p, llm, limits, "prompt")
        out.append(p)
    return out


def _messages(body: dict, llm: LLM, limits: Limits) -> list[Message]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' is required: a non-empty list of {role, content}", "messages")
    if len(messages) > limits.max_messages:
        raise _bad(f"at most {limits.max_messages} messages per request", "messages")
    clean: list[Message] = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"each message needs a 'role' and a 'content', got {excerpt(m)}", "messages")
        content = m.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            parts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    raise _bad(f"unsupported message content {excerpt(part)}", "messages")
                if not isinstance(part.get("text"), str):
                    raise _bad(f"unsupported message content {excerpt(part)}", "messages")
                parts.append(part["text"])
            content = "".join(parts)
        if not isinstance(content, str):
            raise _bad(f"message content must be text, got {excerpt(content)}", "messages")
        clean.append({"role": m["role"], "content": content})
    _char_bound("".join(m["content"] for m in clean), llm, limits, "messages")
    return clean


def _n(body: dict, limits: Limits, prompts: int) -> int:
    n = _int(body, "n", 1, 1, limits.max_n)
    assert n is not None
    if prompts * n > limits.max_choices:
        raise _bad(
            f"{prompts} prompts x n={n} asks for {prompts * n} completions; this server "
            f"takes at most {limits.max_choices} per request",
            "n",
        )
    return n


def parse_completions(body: dict, llm: LLM, served: str, limits: Limits) -> GenerationCall:
    check_model(body, served)
    if _bool(body, "echo"):
        raise _bad("'echo' is not supported by this server", "echo")
    lp = _int(body, "logprobs", None, 0, MAX_LOGPROBS)
    stream = _bool(body, "stream")
    include_usage = _stream_options(body, stream)
    params = _params(body, llm, COMPLETIONS_MAX_TOKENS, logprobs=lp is not None)
    prompts = _prompts(body, llm, limits)
    n = _n(body, limits, len(prompts))
    return GenerationCall(False, prompts, n, params, stream, include_usage, lp, _explicit_max(body))


def parse_chat(body: dict, llm: LLM, served: str, limits: Limits) -> GenerationCall:
    check_model(body, served)
    want_lp = _bool(body, "logprobs")
    _int(body, "top_logprobs", None, 0, MAX_LOGPROBS)
    stream = _bool(body, "stream")
    include_usage = _stream_options(body, stream)
    params = _params(body, llm, CHAT_MAX_TOKENS, logprobs=want_lp)
    messages = _messages(body, llm, limits)
    n = _n(body, limits, 1)
    lp = 0 if want_lp else None
    return GenerationCall(
        True, [messages], n, params, stream, include_usage, lp, _explicit_max(body)
    )


def check_window(call: GenerationCall, llm: LLM) -> list[Request]:
    """The backend requests of ``call``, once each prompt is known to fit: its tokens plus
    ``max_tokens`` within the context window (400 otherwise; a left-out ``max_tokens`` shrinks
    to the room left, as vLLM does). It counts with the backend's tokenizer, so it runs on the
    thread that owns the backend."""
    window, want = llm.context_window, call.params.max_new_tokens
    param = "messages" if call.chat else "prompt"
    out = []
    for i, p in enumerate(call.prompts):
        have = llm.prompt_tokens(p)
        params = call.params
        if not call.explicit_max and have < window:
            params = params.with_(max_new_tokens=min(want, window - have))
        if have + params.max_new_tokens > window:
            which = f"prompt {i}" if len(call.prompts) > 1 else "the prompt"
            raise _bad(
                f"this model's context window is {window} tokens; {which} has {have} tokens "
                f"and max_tokens asks for {params.max_new_tokens} more "
                f"({have + params.max_new_tokens} in all)",
                param,
                "context_length_exceeded",
            )
        out.extend(Request(p, params) for _ in range(call.n))
    return out
