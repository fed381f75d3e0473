"""Prompt sets of the tree strategies and one question's LLM calls, counted by kind."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.llm import LLM, Completion, GenerationParams, Request
from chunkwise.prompts import prompt_set
from chunkwise.strategies.base import Stats, Strategy, TraceEvent

CALL_KINDS = ("toc", "classify", "decompose", "summarize", "answer")


def _line_clean(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


@dataclass
class Prompts:
    kind: str
    templates: dict[str, Any]

    def render(self, name: str, **values: str) -> str:
        values.setdefault("answer_prefix", "Answer:")
        return _line_clean(self.templates[name].format(**values))

    def params(self, stage: str, temperature: float = 0.0, **changes: Any) -> GenerationParams:
        p = GenerationParams(
            max_new_tokens=int(self.templates[f"{stage}_max_new_tokens"]),
            temperature=temperature,
            stop=tuple(self.templates.get(f"{stage}_stop", [])),
        )
        return p.with_(**changes) if changes else p


def load_prompts(strategy: str, llm: LLM, family: str, kind: str = "auto") -> Prompts:
    kind = kind if kind != "auto" else ("chat" if llm.chat else "base")
    if kind not in ("chat", "base"):
        raise BadInput(f"prompts={kind!r}; valid: auto, chat, base")
    return Prompts(kind, prompt_set(strategy, kind, family))


class TreeRun:
    """LLM calls of one question, counted by kind, with their trace events."""

    def __init__(self, llm: LLM, stats: Stats, trace: list[TraceEvent]):
        self.llm = llm
        self.stats = stats
        self.trace = trace
        kinds = stats.extra.setdefault("llm_calls_by_kind", {})
        for k in CALL_KINDS:
            kinds.setdefault(k, 0)
        self.by_kind: dict[str, int] = kinds
        self.tokens_by_kind: dict[str, int] = stats.extra.setdefault("tokens_by_kind", {})

    def request(self, text: str, params: GenerationParams) -> Request:
        return Request(self.llm.as_prompt(text), params)

    def call(
        self,
        kind: str,
        prompts: Sequence[str],
        params: GenerationParams,
        inputs: Sequence[list[Any]] | None = None,
        layer: int = 0,
    ) -> list[Completion]:
        """One wave of calls of one kind; every call is counted and traced."""
        if not prompts:
            return []
        outs = Strategy.call(self.llm, [self.request(p, params) for p in prompts], self.stats)
        self.by_kind[kind] = self.by_kind.get(kind, 0) + len(outs)
        self.tokens_by_kind[kind] = self.tokens_by_kind.get(kind, 0) + sum(
            o.prompt_tokens + o.completion_tokens for o in outs
        )
        for i, out in enumerate(outs):
            self.trace.append(
                TraceEvent(
                    kind,
                    list(inputs[i]) if inputs is not None else [],
                    {"raw": out.text},
                    out.prompt_tokens,
                    out.completion_tokens,
                    out.latency_s,
                    layer,
                )
            )
        return outs

    def prompt_tokens(self, text: str) -> int:
        return self.llm.prompt_tokens(self.llm.as_prompt(text))


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0
