"""The one LLM interface every part of chunkwise talks to.

A backend turns a batch of :class:`Request` into the same number of :class:`Completion`,
in order. Backends choose their own concurrency (batched forward passes, async HTTP with a
bound); callers always hand over whole waves of work so that they can.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from chunkwise.errors import BadParams

#: {"role", "content"}; a trailing assistant message may add "prefix": True (continue it)
Message = dict[str, Any]
Prompt = str | list[Message]
FinishReason = Literal["stop", "length", "error"]


@dataclass(frozen=True)
class GenerationParams:
    """Decoding settings for one request. ``temperature == 0`` means greedy."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: bool = False

    def __post_init__(self) -> None:
        # the one place decoding settings are checked, whatever took them (CLI flags, strategy
        # options, server requests); BadParams is a ValueError and a one-line BadInput
        if self.max_new_tokens < 1:
            raise BadParams(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise BadParams(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise BadParams(f"top_p must be in (0, 1], got {self.top_p}")
        object.__setattr__(self, "stop", tuple(self.stop))

    def with_(self, **changes: object) -> GenerationParams:
        return replace(self, **changes)  # type: ignore[arg-type]


def template_kwargs(messages: Sequence[Message]) -> dict[str, bool]:
    """How ``apply_chat_template`` renders ``messages`` for generation: a new assistant turn,
    or, when the last message is a reply to go on with (``LLM.continue_reply`` marks it
    ``prefix``, the convention of DeepSeek's and Mistral's APIs), the end of that one. A plain
    trailing assistant message still gets a new turn, as OpenAI's API gives it."""
    if messages and messages[-1]["role"] == "assistant" and messages[-1].get("prefix"):
        return {"add_generation_prompt": False, "continue_final_message": True}
    return {"add_generation_prompt": True}


@dataclass(frozen=True)
class Request:
    """A prompt (plain text, or chat messages) and how to decode it."""

    prompt: Prompt
    params: GenerationParams = field(default_factory=GenerationParams)

    @property
    def is_chat(self) -> bool:
        return not isinstance(self.prompt, str)


@dataclass
class Completion:
    """What a backend returns for one request.

    The stop-string contract, the same on every backend: when generation ends on one of the
    request's stop strings, ``text`` ends right *before* it (the stop string is not part of
    the text), ``finish_reason`` is ``"stop"`` and ``stop_reason`` is that stop string.
    Otherwise ``stop_reason`` is ``None`` (an end-of-sequence token, the length limit).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    latency_s: float
    token_logprobs: list[float] | None = None
    tokens: list[str] | None = None
    #: the stop string that ended generation, when the backend can tell
    stop_reason: str | None = None

    def mean_token_prob(self, start_char: int = 0, end_char: int | None = None) -> float | None:
        """Mean probability of the generated tokens overlapping ``text[start_char:end_char]``.

        ``None`` when the backend gave no log-probabilities.
        """
        if self.token_logprobs is None or not self.token_logprobs:
            return None
        if self.tokens is None:
            picked = self.token_logprobs
        else:
            end_char = len(self.text) if end_char is None else end_char
            picked, pos = [], 0
            for tok, lp in zip(self.tokens, self.token_logprobs, strict=False):
                tok_end = pos + len(tok)
                if tok_end > start_char and pos < end_char:
                    picked.append(lp)
                pos = tok_end
            if not picked:
                return None
        return sum(math.exp(lp) for lp in picked) / len(picked)


class LLM(abc.ABC):
    """Abstract backend. Subclasses implement :meth:`_generate` and :meth:`count_tokens`."""

    #: the spec string this backend was loaded from, e.g. ``hf:default``
    spec: str = ""
    #: whether prompts should be chat messages (chat-tuned model with a template)
    chat: bool = False

    @property
    @abc.abstractmethod
    def context_window(self) -> int:
        """Maximum prompt + completion tokens the model accepts."""

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model's tokenizer (no special tokens)."""

    @abc.abstractmethod
    def _generate(self, requests: Sequence[Request]) -> list[Completion]: ...

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        """Complete every request; the output is in the same order as the input."""
        requests = list(requests)
        if not requests:
            return []
        out = self._generate(requests)
        if len(out) != len(requests):  # pragma: no cover - a backend bug
            raise RuntimeError(f"{type(self).__name__} returned {len(out)} of {len(requests)}")
        return out

    def complete(self, prompt: Prompt, **params: object) -> Completion:
        """Convenience: one prompt, keyword decoding params."""
        return self.generate([Request(prompt, GenerationParams(**params))])[0]  # type: ignore[arg-type]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of every token of ``text``; backends without a tokenizer fall back
        to an approximate word-piece split."""
        from chunkwise.text.tokens import WordPieceCounter

        return WordPieceCounter().token_offsets(text)

    # Token-id helpers: backends with a real tokenizer override these so that the chunker and
    # middle truncation can cut exactly at token boundaries.
    def encode(self, text: str) -> list[int]:
        raise NotImplementedError(f"{type(self).__name__} exposes no token ids")

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError(f"{type(self).__name__} exposes no token ids")

    def as_prompt(self, text: str) -> Prompt:
        """``text`` as this model should receive it: one user message for chat models, the
        plain completion prompt for base models."""
        return [{"role": "user", "content": text}] if self.chat else text

    #: whether the backend can continue a reply: a chat prompt whose last message is the
    #: assistant's (``continue_reply``) is decoded from the end of that message, not answered
    #: in a new turn. Plain prompts always continue, being text.
    continues_replies: bool = False

    def continue_reply(self, prompt: Prompt, partial: str) -> Prompt:
        """``prompt`` with the start of the model's reply, ``partial``, already written: the
        model's next tokens continue it. A plain prompt just gets the text appended."""
        if isinstance(prompt, str):
            return prompt + partial
        return [*prompt, {"role": "assistant", "content": partial, "prefix": True}]

    def prompt_tokens(self, prompt: Prompt) -> int:
        """Tokens a whole prompt takes, chat template included where one applies."""
        if isinstance(prompt, str):
            return self.count_tokens(prompt)
        # Without a template we cannot know exactly; role headers cost a few tokens each.
        return sum(self.count_tokens(m["content"]) + 4 for m in prompt)

    def close(self) -> None:
        """Release resources (threads, sessions). Safe to call twice."""

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def find_stop(text: str, stop: Sequence[str]) -> tuple[int, str | None]:
    """Position and value of the earliest stop string in ``text`` (len(text), None if none)."""
    cut, hit = len(text), None
    for s in stop:
        if s:
            i = text.find(s)
            if i != -1 and i < cut:
                cut, hit = i, s
    return cut, hit


def apply_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` at the earliest stop string. Returns (text, whether a stop was hit)."""
    cut, hit = find_stop(text, stop)
    return text[:cut], hit is not None
