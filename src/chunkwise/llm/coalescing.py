"""Several threads, one model: their concurrent ``generate`` calls run as one batch.

An evaluation that answers one document at a time gives the backend only that document's
requests per call: a MapReduce map wave of four chunks, then one collapse, then one reduce. On
vLLM (and on the HF backend's padded batches) decoding sixteen sequences costs little more
than decoding four, so the runner can answer several documents at once, each in its own thread,
and let this wrapper merge their calls.

The rule is deterministic, with no time window: a batch runs when every thread that is working
on an example (between :meth:`CoalescingLLM.enter` and :meth:`CoalescingLLM.leave`) is waiting
in ``generate``. The last thread to arrive runs the merged batch for all of them and hands each
its own completions, in its own order. If the merged batch fails, each call is retried on its
own, so one bad request fails only its own example.

Every other method of the model (``count_tokens``, ``encode``, ...) is forwarded under one lock:
tokenizers are not all safe to call from several threads at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from chunkwise.llm.base import Completion, Request


class _Call:
    def __init__(self, requests: list[Request]):
        self.requests = requests
        self.result: list[Completion] | None = None
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


class CoalescingLLM:
    """Forwards to ``inner``; see the module docstring. ``batch_sizes`` lists how many calls
    each backend batch merged (for tests and benchmarks)."""

    def __init__(self, inner: Any):
        self._inner = inner
        self._cond = threading.Condition()
        self._model_lock = threading.RLock()
        self._active = 0
        self._pending: list[_Call] = []
        self._running = False
        self.batch_sizes: list[int] = []

    # -- who is working --------------------------------------------------------------------
    def enter(self) -> None:
        """The calling thread starts an example: batches wait for its calls too."""
        with self._cond:
            self._active += 1

    def leave(self) -> None:
        """The calling thread is done with its example: batches no longer wait for it."""
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    # -- the model ---------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        call = _Call(list(requests))
        if not call.requests:
            return []
        with self._cond:
            if self._active < 1:
                raise RuntimeError("CoalescingLLM.generate outside enter()/leave()")
            self._pending.append(call)
            self._cond.notify_all()
            while not call.done:
                if not self._running and len(self._pending) >= self._active:
                    batch, self._pending = self._pending, []
                    self._running = True
                    break
                self._cond.wait()
            else:
                return self._outcome(call)
        try:
            self._run(batch)
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()
        return self._outcome(call)

    def complete(self, prompt: Any, **params: object) -> Completion:
        from chunkwise.llm.base import GenerationParams

        return self.generate([Request(prompt, GenerationParams(**params))])[0]  # type: ignore[arg-type]

    def _run(self, batch: list[_Call]) -> None:
        flat = [r for c in batch for r in c.requests]
        self.batch_sizes.append(len(batch))
        try:
            with self._model_lock:
                out = list(self._inner.generate(flat))
        except BaseException as e:
            if len(batch) == 1:
                batch[0].error = e
                return
            for c in batch:  # one bad request must not fail the other examples
                try:
                    with self._model_lock:
                        c.result = list(self._inner.generate(c.requests))
                except BaseException as e1:
                    c.error = e1
            return
        k = 0
        for c in batch:
            c.result, k = out[k : k + len(c.requests)], k + len(c.requests)

    @staticmethod
    def _outcome(call: _Call) -> list[Completion]:
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value
        lock = self._model_lock

        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return value(*args, **kwargs)

        return locked


def run_each(
    items: Sequence[Any], work: Callable[[Any], Any], llm: CoalescingLLM, threads: int
) -> Iterator[tuple[Any, Any]]:
    """Yield ``(item, result or exception)`` as each item finishes.

    ``threads`` workers take items in order from one queue. Each is registered with ``llm``
    before any starts and stays registered until the queue is empty, so a batch never runs
    while a worker is only between two items. Closing the generator early (an error, Ctrl-C)
    starts no more items and does not wait for the running ones.
    """
    todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for item in items:
        todo.put(item)
    done: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    stop = threading.Event()
    n = max(1, min(threads, len(items)))

    def worker() -> None:
        try:
            while not stop.is_set():
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    result = work(item)
                except BaseException as e:
                    result = e
                done.put((item, result))
        finally:
            llm.leave()
            done.put((_FINISHED, None))

    workers = [
        threading.Thread(target=worker, name=f"chunkwise-example-{k}", daemon=True)
        for k in range(n)
    ]
    for _ in workers:
        llm.enter()
    for w in workers:
        w.start()
    alive = n
    try:
        while alive:
            item, result = done.get()
            if item is _FINISHED:
                alive -= 1
            else:
                yield item, result
    finally:
        # Stopped early: the workers take nothing more, and nobody waits for the examples
        # they are in (minutes on a CPU): they are daemon threads and end with the process.
        stop.set()


_FINISHED = object()


__all__ = ["CoalescingLLM", "run_each"]
