"""Chain-of-Agents (Zhang et al., 2024): workers read the chunks one after another, each
rewriting a bounded memory; a manager answers from the last memory alone.

Per document::

    chunks = chunk_document(document, budget)          budget = window - instruction - question
                                                                - memory cap (in) - memory cap (out)
    order  = ordering(chunks, question)                default | dense | chowliu | dfs
    memory = ""
    for i in order:  memory = cap(worker(memory, chunks[i], question))
    answer = manager(memory, question)

The memory cap is hard: the worker's ``max_new_tokens`` is the cap, and its output is measured
again with the model's tokenizer and cut to the cap when it is longer (each cut is counted in
``stats.extra["memory_truncations"]`` and flagged in the trace). Only the final memory reaches
the manager (the paper's footnote: giving the manager every memory, or letting the last worker
answer, did worse).

Two worker modes, chosen by the prompt set (``worker_mode``):

* ``rewrite`` (chat models): the worker writes the whole new memory (the paper's worker).
* ``append`` (base models): the worker answers from the memory so far and its chunk, and its
  answer is appended to the memory; the result is cut to the cap at its head (once the memory
  is full, what was read first stays). A base model answers after "Answer:" reliably but does
  not rewrite notes on instruction (see ``prompts/chain_of_agents/base.yaml``).

Three prompt sets (``prompts``): ``chat`` (instruction-following models), ``base`` (completion
scaffolds, append mode) and ``mr``: rewrite workers phrased as the MapReduce map call, for
a model taught that protocol and nothing else (``hf:default-mr``, ``vllm:default-mr``;
``prompts=auto`` picks it for them). Its worker reads the memory followed by its chunk as one
"part" and restates the facts bearing on the question under ``Extracted Information:``; that
field (generation stops at the rationale) is the new memory. See
``prompts/chain_of_agents/mr.yaml``.

A window counts prompt and completion together, so the chunk budget also reserves the worker's
output (the memory it writes) besides the memory it reads.

:meth:`ChainOfAgents.answer_many` runs several documents' chains in lockstep, one batched
``generate`` per step, which is how benchmarks use a batching backend; each chain is still
strictly sequential.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.llm import LLM, GenerationParams, Request
from chunkwise.prompts import load_text, prompt_set
from chunkwise.strategies.base import (
    Answer,
    Query,
    Stats,
    Strategy,
    TraceEvent,
    check_option,
    register,
)
from chunkwise.strategies.ordering import ORDERINGS, SIMILARITIES, order_chunks
from chunkwise.text import Chunk, chunk_budget, chunk_document

log = logging.getLogger(__name__)


def truncate_tokens(text: str, llm: LLM, max_tokens: int) -> tuple[str, int]:
    """``text`` cut to at most ``max_tokens`` tokens of ``llm``'s tokenizer, at a token
    boundary of the original string. Returns (text, its token count)."""
    n = llm.count_tokens(text)
    if n <= max_tokens:
        return text, n
    offsets = [(s, e) for s, e in llm.token_offsets(text) if e > s]
    keep = min(max_tokens, len(offsets))
    while keep > 0:
        cut = text[: offsets[keep - 1][1]].rstrip()
        m = llm.count_tokens(cut)
        if m <= max_tokens:
            return cut, m
        keep -= 1  # re-tokenising the cut text merged differently: give up one more token
    return "", 0


@dataclass
class _Chain:
    """One document's run through the chain."""

    query: Query
    chunks: list[Chunk]
    order: list[int]
    templates: dict[str, Any]
    kind: str
    stats: Stats
    trace: list[TraceEvent] = field(default_factory=list)
    memory: str = ""
    step: int = 0

    @property
    def done(self) -> bool:
        return self.step >= len(self.order)


@register
class ChainOfAgents(Strategy):
    """Options (all settable with ``--strategy-args k=v``):

    memory_tokens   hard cap on the memory, in model tokens (0: the prompt set's default,
                    512 for chat models, 64 for base models)
    chunk_tokens    cap on chunk size (0: whatever fits the window)
    ordering        default | dense | chowliu | dfs  (see :mod:`.ordering`)
    similarity      dense | bm25 (for every ordering but default)
    embedder        a :func:`chunkwise.embed.get_embedder` name (minilm, hashing, st:PATH)
    prompts         auto | chat | base | mr  (auto: mr for hf/vllm:default-mr/-coa, else chat when
                    the model has a chat template, else base)
    keep_on_empty   when a worker writes nothing, keep the previous memory (true) or pass on
                    nothing (false); an empty memory throws away everything read so far
    temperature     decoding temperature for every call (0 = greedy)
    """

    name = "chain_of_agents"

    def __init__(
        self,
        window: int | None = None,
        memory_tokens: int = 0,
        chunk_tokens: int = 0,
        ordering: str = "default",
        similarity: str = "dense",
        embedder: str = "minilm",
        prompts: str = "auto",
        keep_on_empty: bool = True,
        temperature: float = 0.0,
    ):
        super().__init__(window)
        for opt, value, allowed in (
            ("ordering", ordering, tuple(ORDERINGS)),
            ("similarity", similarity, SIMILARITIES),
            ("prompts", prompts, ("auto", "chat", "base", "mr")),
        ):
            check_option("chain_of_agents", opt, value, choices=allowed)
        check_option("chain_of_agents", "memory_tokens", memory_tokens, minimum=0)
        check_option("chain_of_agents", "chunk_tokens", chunk_tokens, minimum=0)
        self.memory_tokens = memory_tokens
        self.chunk_tokens = chunk_tokens
        self.ordering = ordering
        self.similarity = similarity
        self.embedder = embedder
        self.prompts = prompts
        self.keep_on_empty = keep_on_empty
        self.temperature = temperature

    # -- prompts ----------------------------------------------------------------------------
    def kind(self, llm: LLM) -> str:
        if self.prompts != "auto":
            return self.prompts
        if _is_default_mr(llm):
            return "mr"
        return "chat" if llm.chat else "base"

    def templates(self, kind: str, family: str) -> dict[str, Any]:
        return prompt_set("chain_of_agents", kind, family)

    def memory_cap(self, t: dict[str, Any]) -> int:
        return self.memory_tokens or int(t["memory_tokens"])

    @staticmethod
    def _render(template: str, **values: Any) -> str:
        text = template.format(**values)
        # no trailing spaces: a dangling space before the continuation derails base models
        return "\n".join(line.rstrip() for line in text.splitlines()).strip()

    @staticmethod
    def worker_mode(t: dict[str, Any]) -> str:
        mode = t.get("worker_mode", "rewrite")
        if mode not in ("rewrite", "append"):
            raise BadInput(
                f"prompt set {t.get('version')}: worker_mode {mode!r}; valid: rewrite, append"
            )
        return mode

    @staticmethod
    def _memory_text(t: dict[str, Any], memory: str, empty: str, key: str = "memory_format") -> str:
        """The memory as a prompt shows it: ``empty`` when there is none, else wrapped in the
        prompt set's ``memory_format`` (``manager_memory_format`` for the manager)."""
        memory = memory.strip()
        if not memory:
            return empty
        return str(t.get(key, "{memory}")).format(memory=memory)

    @staticmethod
    def _calibration(t: dict[str, Any]) -> str:
        return load_text(t["calibration_file"]) if t.get("calibration_file") else ""

    def worker_prompt(self, t: dict[str, Any], memory: str, chunk: str, query: Query) -> str:
        cap = self.memory_cap(t)
        empty = "" if self.worker_mode(t) == "append" else t["empty_memory"]
        return self._render(
            t["worker"],
            chunk=chunk,
            memory=self._memory_text(t, memory, empty),
            question=query.render(),
            memory_words=max(1, int(cap * 0.7)),
            hint=t.get("hint", ""),
            calibration=self._calibration(t),
            answer_prefix=query.answer_prefix or "Answer:",
        )

    def manager_prompt(self, t: dict[str, Any], memory: str, query: Query) -> str:
        return self._render(
            t["manager"],
            memory=self._memory_text(
                t, memory, t.get("manager_empty_memory", t["empty_memory"]), "manager_memory_format"
            ),
            question=query.render(),
            hint=t.get("hint", ""),
            calibration=self._calibration(t),
            answer_prefix=query.answer_prefix or "Answer:",
        )

    def worker_max_new_tokens(self, t: dict[str, Any]) -> int:
        """The memory cap plus what the prompt set lets a worker write besides the memory
        (``worker_extra_tokens``, e.g. a field label that is removed)."""
        return self.memory_cap(t) + int(t.get("worker_extra_tokens", 0))

    def _worker_params(self, t: dict[str, Any]) -> GenerationParams:
        return GenerationParams(
            max_new_tokens=self.worker_max_new_tokens(t),
            temperature=self.temperature,
            stop=tuple(t.get("worker_stop", [])),
        )

    def _manager_params(self, t: dict[str, Any], query: Query) -> GenerationParams:
        n = int(t["manager_max_new_tokens"])
        if query.max_answer_tokens:
            n = max(n, query.max_answer_tokens)
        return GenerationParams(
            max_new_tokens=n, temperature=self.temperature, stop=tuple(t.get("manager_stop", []))
        )

    def chunk_budget(self, llm: LLM, t: dict[str, Any], query: Query) -> dict[str, int]:
        """The parts of the window: instruction + question, memory in, memory out, chunk."""
        window = self.effective_window(llm)
        cap = self.memory_cap(t)
        with_q = llm.prompt_tokens(llm.as_prompt(self.worker_prompt(t, "", "", query)))
        question = llm.count_tokens(query.render())
        try:
            budget = chunk_budget(window, with_q, cap, self.worker_max_new_tokens(t))
        except BadInput:
            raise BadInput(
                f"chain_of_agents: no room for a chunk: window {window} - instruction and "
                f"question {with_q} - memory read {cap} - memory written "
                f"{self.worker_max_new_tokens(t)} tokens (and a "
                "16-token margin) leaves nothing; use a larger --context-window, a smaller "
                "memory_tokens or a shorter question"
            ) from None
        if self.chunk_tokens:
            budget = min(budget, self.chunk_tokens)
        return {
            "window": window,
            "instruction_tokens": with_q - question,
            "question_tokens": question,
            "memory_tokens": cap,
            "chunk_budget": budget,
        }

    # -- running ----------------------------------------------------------------------------
    def run(self, document: str, query: Query, llm: LLM) -> Answer:
        return self._run_chains([(document, query)], llm)[0]

    def answer_many(
        self, items: Sequence[tuple[str, Query]], llm: LLM, *, embedder: Any = None
    ) -> list[Answer]:
        """Answer several (document, query) pairs, stepping their chains together so that each
        step is one batched ``generate``. ``stats.seconds`` of each answer is the wall time of
        the whole batch (``stats.extra["batched_with"]`` says how many shared it)."""
        t0 = time.perf_counter()
        answers = self._run_chains(list(items), llm, embedder=embedder)
        wall = time.perf_counter() - t0
        for a in answers:
            a.stats.seconds = wall
            a.stats.extra["batched_with"] = len(answers)
        return answers

    def prepare(
        self, document: str, query: Query, llm: LLM, *, embedder: Any = None
    ) -> tuple[list[Chunk], list[int], dict[str, Any]]:
        """Chunks, reading order and the stats that describe them, for one document."""
        kind = self.kind(llm)
        t = self.templates(kind, query.task)
        parts = self.chunk_budget(llm, t, query)
        chunks = chunk_document(document, llm, parts["chunk_budget"])
        if not chunks:
            raise BadInput("the document is empty")
        ordering = order_chunks(
            self.ordering,
            [c.text for c in chunks],
            query.render(),
            similarity=self.similarity,
            embedder=embedder if embedder is not None else self.embedder,
        )
        extra = {
            **parts,
            "chunks": len(chunks),
            "ordering": self.ordering,
            "similarity": self.similarity if self.ordering != "default" else None,
            "order": ordering.order,
            "root": ordering.root,
            "prompt_kind": kind,
            "prompt_version": t["version"],
            "worker_mode": self.worker_mode(t),
        }
        return chunks, ordering.order, extra

    def _run_chains(
        self, items: list[tuple[str, Query]], llm: LLM, *, embedder: Any = None
    ) -> list[Answer]:
        chains: list[_Chain] = []
        for document, query in items:
            chunks, order, extra = self.prepare(document, query, llm, embedder=embedder)
            kind = extra["prompt_kind"]
            stats = Stats(extra={**extra, "memory_truncations": 0, "empty_updates": 0})
            chains.append(
                _Chain(query, chunks, order, self.templates(kind, query.task), kind, stats)
            )

        while True:
            live = [c for c in chains if not c.done]
            if not live:
                break
            requests = []
            for c in live:
                chunk = c.chunks[c.order[c.step]]
                prompt = self.worker_prompt(c.templates, c.memory, chunk.text, c.query)
                requests.append(Request(llm.as_prompt(prompt), self._worker_params(c.templates)))
            outs = llm.generate(requests)
            for c, out in zip(live, outs, strict=True):
                c.stats.add([out])
                self._update(c, out, llm)

        requests = [
            Request(
                llm.as_prompt(self.manager_prompt(c.templates, c.memory, c.query)),
                self._manager_params(c.templates, c.query),
            )
            for c in chains
        ]
        outs = llm.generate(requests)
        answers = []
        for c, out in zip(chains, outs, strict=True):
            c.stats.add([out])
            text = _answer_text(out.text, c.kind)
            c.trace.append(
                TraceEvent(
                    "manager",
                    list(c.order),
                    {"raw": out.text, "answer": text, "memory": c.memory},
                    out.prompt_tokens,
                    out.completion_tokens,
                    out.latency_s,
                    round=len(c.order),
                )
            )
            answers.append(Answer(text, c.trace, c.stats))
        return answers

    def _update(self, c: _Chain, out: Any, llm: LLM) -> None:
        """Take a worker's output as the new memory, under the hard cap."""
        cap = self.memory_cap(c.templates)
        if self.worker_mode(c.templates) == "append":
            added = " ".join((out.text or "").split())
            raw = f"{c.memory} {added}".strip() if added else c.memory
        else:
            raw = _clean_memory(out.text, c.templates)
        memory, n = truncate_tokens(raw, llm, cap)
        truncated = memory != raw
        if truncated:
            c.stats.extra["memory_truncations"] += 1
        kept_previous = False
        if not memory.strip() and self.keep_on_empty and c.memory:
            memory, n, kept_previous = c.memory, llm.count_tokens(c.memory), True
            c.stats.extra["empty_updates"] += 1
        idx = c.order[c.step]
        chunk = c.chunks[idx]
        c.trace.append(
            TraceEvent(
                "worker",
                [idx],
                {
                    "span": [chunk.start_char, chunk.end_char],  # what it read (the audit)
                    "raw": out.text,
                    "memory": memory,
                    "memory_tokens": n,
                    "truncated": truncated,
                    "kept_previous": kept_previous,
                },
                out.prompt_tokens,
                out.completion_tokens,
                out.latency_s,
                round=c.step + 1,
            )
        )
        c.memory = memory
        c.step += 1


_NOTE_LABELS = ("notes:", "new notes:", "updated notes:", "running summary:", "summary:")


def _clean_memory(text: str, t: dict[str, Any] | None = None) -> str:
    """A rewrite worker's output as memory: its label removed (the prompt set's
    ``memory_label``, or a notes label), and "" when it only says there is nothing
    (``empty_markers``; case and spacing ignored, ``*`` stands for any text)."""
    t = t or {}
    out = (text or "").strip()
    low = out.lower()
    labels = [str(t["memory_label"]).lower()] if t.get("memory_label") else []
    for label in (*labels, *_NOTE_LABELS):
        if low.startswith(label):
            out = out[len(label) :].strip()
            break
    said = " ".join(out.lower().split())
    for marker in t.get("empty_markers", []):
        if fnmatch.fnmatchcase(said, " ".join(str(marker).lower().split())):
            return ""
    return out


def _answer_text(raw: str, kind: str) -> str:
    text = (raw or "").strip()
    at = text.rfind("Answer:")
    if kind in ("chat", "mr") and at != -1:
        return text[at + len("Answer:") :].strip()
    return text


def _is_default_mr(llm: LLM) -> bool:
    """Whether ``llm`` is the embedded model with one of its packaged adapters, taught the
    MapReduce map call (hf/vllm:default-mr) or trained on this set (hf/vllm:default-coa)."""
    from chunkwise.llm.loading import is_alias
    from chunkwise.llm.spec import parse_spec

    try:
        return is_alias(parse_spec(llm.spec or ""))
    except BadInput:
        return False


__all__ = ["ChainOfAgents", "truncate_tokens"]
