"""Standard decoding: instruction + document + question in one prompt.

When the prompt would not fit the window, the document's tokens are truncated in the middle
(first and last halves kept, as InfiniteBench does), with room reserved for the instruction,
the question and the output; with ``Query.truncation == "official"`` the whole prompt is cut
as InfiniteBench's scripts cut it instead. A query that carries its benchmark's whole prompt
(``Query.frame``) is sent as that prompt.
"""

from __future__ import annotations

from chunkwise.errors import BadInput
from chunkwise.llm import LLM, GenerationParams, Request
from chunkwise.prompts import prompt_set
from chunkwise.strategies.base import Answer, Query, Stats, Strategy, TraceEvent, register
from chunkwise.strategies.protocol import parse_record
from chunkwise.text import chunk_budget, middle_truncate


@register
class Standard(Strategy):
    """Options (``--strategy-args k=v``):

    prompts             auto | chat | base  (auto: chat when the model has a chat template)
    temperature         decoding temperature (0 = greedy)
    max_new_tokens      cap on the answer's new tokens (0 = the prompt set's per-task default)
    """

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
            if query.frame is not None:  # the benchmark's own whole prompt, sent as it is
                return query.frame[0] + doc + query.frame[1]
            return (
                t["prompt"]
                .format(
                    document=doc, question=question, answer_prefix=query.answer_prefix or "Answer:"
                )
                .strip()
            )

        window = self.effective_window(llm)
        kept: list[list[int]] | None = [[0, len(document)]]
        if query.truncation == "official":
            prompt, cut = official_truncate(render(document), llm, window)
            room = window
            kept = kept if not cut else None  # cut in token ids: no character spans
        else:
            room = chunk_budget(
                window, llm.prompt_tokens(llm.as_prompt(render(""))), 0, params.max_new_tokens
            )
            doc, cut = middle_truncate(document, llm, room)
            prompt = render(doc)
            if cut:
                kept = kept_spans(document, doc)
        stats = Stats(
            extra={
                "document_truncated": cut,
                "document_budget": room,
                "prompt_kind": kind,
                "prompt_version": "benchmark" if query.frame is not None else t["version"],
            }
        )
        out = self.call(llm, [Request(llm.as_prompt(prompt), params)], stats)[0]
        text = out.text.strip()
        if kind == "chat":
            parsed = parse_record(text, answer_only=True).answer
            text = parsed if parsed else text
        trace = [
            TraceEvent(
                "generate",
                [],
                # kept: the document's characters the prompt holds (the evidence audit)
                {"raw": out.text, "kept": kept},
                out.prompt_tokens,
                out.completion_tokens,
                out.latency_s,
            )
        ]
        return Answer(text, trace, stats)


#: what :func:`~chunkwise.text.middle_truncate` puts between the halves it keeps
CUT_MARKER = "\n...\n"


def kept_spans(document: str, cut: str) -> list[list[int]]:
    """The character spans of ``document`` that its middle-truncated form ``cut`` (head,
    :data:`CUT_MARKER`, tail) keeps; where a kept edge could be told apart from the marker in
    two ways, the smaller head is reported (never more kept than was)."""
    if not cut:
        return []
    tail = 0
    for a, b in zip(reversed(document), reversed(cut), strict=False):
        if a != b:
            break
        tail += 1
    tail = min(tail, len(cut) - len(CUT_MARKER))
    head = len(cut) - len(CUT_MARKER) - tail
    if head < 0 or document[:head] != cut[:head]:  # not a middle cut: nothing is claimed
        return []
    spans = [[0, head]] if head else []
    if tail:
        spans.append([len(document) - tail, len(document)])
    return spans


def official_truncate(prompt: str, llm: LLM, limit: int) -> tuple[str, bool]:
    """InfiniteBench's truncation: the whole prompt's token ids, when more than ``limit``,
    become ``ids[:limit // 2] + ids[-limit // 2:]``, decoded back to text (no marker)."""
    try:
        ids = llm.encode(prompt)
    except NotImplementedError:
        raise BadInput(
            "truncation=official cuts token ids, and this model exposes none (an openai spec "
            "needs ?tokenizer=...); use truncation=document"
        ) from None
    if len(ids) <= limit:
        return prompt, False
    return llm.decode(ids[: limit // 2] + ids[-limit // 2 :]), True
