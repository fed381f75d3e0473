"""LLM plumbing for synthesis: per-stage accounting and cross-document batching.

* :class:`BatchingLLM` lets several document workers (threads) share one backend: each
  ``generate`` call waits until every registered worker is waiting too (or ``max_wait_s``
  passes), then one thread sends all their requests as one batch. Each document's code stays
  sequential, yet the backend sees waves that span documents (summaries of level 1 of four
  documents, the MapReduce map calls of several questions, ...).
* :class:`StageLLM` is a thin view of an LLM that counts calls, tokens and wall seconds under
  a stage name into a :class:`Meter` (one meter per document).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from chunkwise.llm import LLM, Completion, Request
from chunkwise.text.tokens import count_many


@dataclass
class StageCount:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class Meter:
    stages: dict[str, StageCount] = field(default_factory=dict)

    def add(self, stage: str, outs: Sequence[Completion], seconds: float) -> None:
        s = self.stages.setdefault(stage, StageCount())
        s.calls += len(outs)
        s.prompt_tokens += sum(c.prompt_tokens for c in outs)
        s.completion_tokens += sum(c.completion_tokens for c in outs)
        s.seconds += seconds

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {k: v.to_dict() for k, v in self.stages.items()}


class Delegate(LLM):
    """An LLM that forwards everything but generation to ``inner``."""

    def __init__(self, inner: LLM):
        self.inner = inner
        self.chat = inner.chat
        self.spec = inner.spec

    @property
    def context_window(self) -> int:
        return self.inner.context_window

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        return count_many(self.inner, texts)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_offsets(text)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.inner.decode(ids)

    def prompt_tokens(self, prompt: Any) -> int:
        return self.inner.prompt_tokens(prompt)


class StageLLM(Delegate):
    def __init__(self, inner: LLM, stage: str, meter: Meter):
        super().__init__(inner)
        self.stage = stage
        self.meter = meter

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        t0 = time.perf_counter()
        outs = self.inner.generate(requests)
        self.meter.add(self.stage, outs, time.perf_counter() - t0)
        return outs


@dataclass
class _Ticket:
    requests: list[Request]
    result: list[Completion] | None = None
    error: BaseException | None = None
    done: bool = False


class BatchingLLM(Delegate):
    """Coalesces concurrent ``generate`` calls of registered worker threads into one batch."""

    def __init__(self, inner: LLM, max_wait_s: float = 0.5):
        super().__init__(inner)
        self.max_wait_s = max_wait_s
        self._cond = threading.Condition()
        self._active = 0
        self._pending: list[_Ticket] = []
        self._running = False
        self._local = threading.local()
        #: (number of requests, number of callers) of every batch sent, for tests and stats
        self.batches: list[tuple[int, int]] = []

    @contextlib.contextmanager
    def worker(self) -> Iterator[None]:
        """Register the calling thread as a worker for the duration of the block."""
        with self._cond:
            self._active += 1
        self._local.registered = True
        try:
            yield
        finally:
            self._local.registered = False
            with self._cond:
                self._active -= 1
                self._cond.notify_all()  # the others may now all be waiting

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        if not getattr(self._local, "registered", False):
            with self._cond:  # an outside caller waits for the backend to be free
                while self._running:
                    self._cond.wait(0.05)
                self._running = True
            try:
                return self.inner.generate(requests)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
        ticket = _Ticket(list(requests))
        t0 = time.monotonic()
        with self._cond:
            self._pending.append(ticket)
            self._cond.notify_all()
            while not ticket.done:
                everyone = len(self._pending) >= self._active
                waited = time.monotonic() - t0 >= self.max_wait_s
                if not self._running and self._pending and (everyone or waited):
                    batch, self._pending = self._pending, []
                    self._running = True
                    self._cond.release()
                    try:
                        self._run(batch)
                    finally:
                        self._cond.acquire()
                        self._running = False
                        self._cond.notify_all()
                else:
                    self._cond.wait(0.05)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.result is not None
        return ticket.result

    def _run(self, batch: list[_Ticket]) -> None:
        flat = [r for t in batch for r in t.requests]
        self.batches.append((len(flat), len(batch)))
        try:
            outs = self.inner.generate(flat)
        except Exception as e:
            if len(batch) == 1:
                batch[0].error, batch[0].done = e, True
                return
            # one document's bad request must not fail the others merged into its batch:
            # each caller's requests again on their own, so only the culprit sees an error
            for t in batch:
                self._run([t])
            return
        except BaseException as e:  # an interrupt: every caller in the batch sees it
            for t in batch:
                t.error, t.done = e, True
            return
        pos = 0
        for t in batch:
            t.result = outs[pos : pos + len(t.requests)]
            pos += len(t.requests)
            t.done = True
