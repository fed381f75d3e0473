"""The OpenAI-compatible wire format: the request body for one :class:`Request`, the
:class:`Completion` read back from a response, the ``MODEL@URL`` target, and the three ways an
attempt can fail (worth another try, the server refused the connection, or final).

:mod:`chunkwise.llm.openai_compat` sends and retries; this module only says what goes over the
wire and what comes back.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from chunkwise.errors import BadInput
from chunkwise.llm.base import Completion, FinishReason, Prompt, Request, apply_stop

DEFAULT_URL = "https://api.openai.com/v1"

FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "stop_sequence": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "error": "error",
}


class Retry(Exception):
    """One attempt failed in a way worth another try."""


class Refused(Retry):
    """Nothing accepted the connection: the server is down (or restarting)."""


class Fatal(Exception):
    """One attempt failed in a way that another try would not fix."""


def excerpt(text: object, n: int = 60) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def prompt_excerpt(prompt: Prompt) -> str:
    if isinstance(prompt, str):
        return excerpt(prompt)
    users = [m.get("content", "") for m in prompt if m.get("role") == "user"]
    return excerpt(users[-1] if users else (prompt[-1].get("content", "") if prompt else ""))


def request_body(
    model: str, base_url: str, api: str, req: Request
) -> tuple[str, dict[str, Any], bool]:
    """The URL, JSON body and whether it is a chat call, for one request."""
    p = req.params
    chat = req.is_chat or api == "chat"
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": p.max_new_tokens,
        "temperature": p.temperature,
        "top_p": p.top_p,
    }
    if p.stop:
        body["stop"] = list(p.stop)
    if p.seed is not None:
        body["seed"] = p.seed
    if chat:
        prompt = req.prompt
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        body["messages"] = list(messages)
        if p.logprobs:
            body["logprobs"] = True
        return f"{base_url}/chat/completions", body, True
    body["prompt"] = req.prompt
    if p.logprobs:
        body["logprobs"] = 1
    return f"{base_url}/completions", body, False


def parse_response(resp: Any, req: Request, chat: bool, latency: float) -> Completion:
    """A 2xx response as a :class:`Completion`; :class:`Retry` when its body is not the JSON
    the API promises."""
    try:
        data = resp.json()
        choice = data["choices"][0]
        text = (choice["message"].get("content") or "") if chat else choice["text"]
        if not isinstance(text, str):
            raise TypeError(f"completion text is {type(text).__name__}, not str")
        logprobs = choice_logprobs(choice.get("logprobs"), chat) if req.params.logprobs else None
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise Retry(f"malformed response body ({type(e).__name__}: {e})") from None
    finish = FINISH.get(str(choice.get("finish_reason") or "stop"), "stop")
    # vLLM (and chunkwise.serve) name the stop string that ended the text
    stop_reason = choice.get("stop_reason")
    stop_reason = stop_reason if isinstance(stop_reason, str) else None
    # servers strip stop strings themselves; cut again in case one did not
    cut, hit = apply_stop(text, req.params.stop)
    tokens, token_logprobs = logprobs if logprobs else (None, None)
    if hit:
        stop_reason = min((s for s in req.params.stop if s and s in text), key=text.find)
        text, finish = cut, "stop"
        if tokens is not None and token_logprobs is not None:
            tokens, token_logprobs = trim_tokens(tokens, token_logprobs, len(text))
    # -1: not reported; counted afterwards in the caller's thread (loading a tokenizer
    # here would stall every other request on the event loop)
    prompt_tokens = usage.get("prompt_tokens")
    completion_tokens = usage.get("completion_tokens")
    out = Completion(
        text=text,
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else -1,
        completion_tokens=completion_tokens
        if isinstance(completion_tokens, int) and not hit
        else -1,
        finish_reason=finish,
        latency_s=latency,
        token_logprobs=token_logprobs,
        tokens=tokens,
    )
    if stop_reason is not None and hasattr(out, "stop_reason"):
        out.stop_reason = stop_reason
    return out


def choice_logprobs(lp: Any, chat: bool) -> tuple[list[str], list[float]] | None:
    """(tokens, log-probabilities) from a choice's ``logprobs``; ``None`` when absent."""
    if not lp:
        return None
    if chat:
        items = lp.get("content") or []
        tokens = [str(it["token"]) for it in items]
        values = [it["logprob"] for it in items]
    else:
        tokens = [str(t) for t in lp["tokens"]]
        values = lp["token_logprobs"]
    if len(tokens) != len(values):
        raise ValueError(f"{len(tokens)} logprob tokens but {len(values)} values")
    return tokens, [float(v) if v is not None else 0.0 for v in values]


def trim_tokens(
    tokens: list[str], values: list[float], n_chars: int
) -> tuple[list[str], list[float]]:
    """Keep the tokens that start before character ``n_chars`` of the text."""
    pos, keep = 0, 0
    for tok in tokens:
        if pos >= n_chars:
            break
        pos += len(tok)
        keep += 1
    return tokens[:keep], values[:keep]


def split_target(target: str, raw: str = "") -> tuple[str, str]:
    """``MODEL@URL`` -> (model, url); no ``@http`` -> (target, the OpenAI API URL)."""
    for scheme in ("@http://", "@https://"):
        i = target.rfind(scheme)
        if i != -1:
            model, url = target[:i], target[i + 1 :]
            break
    else:
        if "@" in target:
            raise BadInput(
                f"model spec {raw or target!r}: the part after '@' must be an http(s) URL, "
                "e.g. openai:MODEL@http://127.0.0.1:8000/v1"
            )
        model, url = target, DEFAULT_URL
    if not model:
        raise BadInput(f"model spec {raw or target!r}: no model name before '@'")
    if not urlsplit(url).hostname:
        raise BadInput(f"model spec {raw or target!r}: URL {url!r} has no host")
    return model, url.rstrip("/")
