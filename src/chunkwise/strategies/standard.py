"""Standard decoding: instruction + document + question in one prompt.

When the prompt would not fit the window, the document's tokens are truncated in the middle
(first and last halves kept, as InfiniteBench does), with room reserved for the instruction,
the question and the output.
"""

from __future__ import annotations

from chunkwise.llm import LLM, GenerationParams, Request
from chunkwise.prompts import prompt_set
from chunkwise.strategies.base import Answer, Query, Stats, Strategy, TraceEvent, register
from chunkwise.strategies.protocol import parse_record
from chunkwise.text import chunk_budget, middle_truncate


@register
class Standard(Strategy):
    """Options: ``prompts`` auto | chat | base; ``temperature``; ``max_new_tokens`` (0 = the
    prompt set's per-task default)."""

    name = "standard"

    def __init__(
        self,
        window: int | None = None,
        prompts: str = "auto",
        temperature: float = 0.0,
        max_new_tokens: int = 0,
    ):
        super().__init__(window)
        self.prompts = prompts
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    def run(self, document: str, query: Query, llm: LLM) -> Answer:
        kind = self.prompts if self.prompts != "auto" else ("chat" if llm.chat else "base")
        t = prompt_set("standard", kind, query.task)
        question = query.render()
        params = GenerationParams(
            max_new_tokens=self.max_new_tokens
            or query.max_answer_tokens
            or int(t["max_new_tokens"]),
            temperature=self.temperature,
            stop=tuple(t.get("stop", [])),
        )

        def render(doc: str) -> str:
            return (
                t["prompt"]
                .format(
                    document=doc, question=question, answer_prefix=query.answer_prefix or "Answer:"
                )
                .strip()
            )

        window = self.effective_window(llm)
        room = chunk_budget(
            window, llm.prompt_tokens(llm.as_prompt(render(""))), 0, params.max_new_tokens
        )
        doc, cut = middle_truncate(document, llm, room)
        stats = Stats(
            extra={
                "document_truncated": cut,
                "document_budget": room,
                "prompt_kind": kind,
                "prompt_version": t["version"],
            }
        )
        out = self.call(llm, [Request(llm.as_prompt(render(doc)), params)], stats)[0]
        text = out.text.strip()
        if kind == "chat":
            parsed = parse_record(text, answer_only=True).answer
            text = parsed if parsed else text
        trace = [
            TraceEvent(
                "generate",
                [],
                {"raw": out.text},
                out.prompt_tokens,
                out.completion_tokens,
                out.latency_s,
            )
        ]
        return Answer(text, trace, stats)
