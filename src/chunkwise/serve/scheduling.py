"""One worker thread owns the backend and runs batches fairly across waiting requests.

Every HTTP request becomes a :class:`Job`: its backend requests (prompts x ``n``). The worker
builds each batch round-robin, one backend request from each waiting job in turn, up to
``max_batch``, so a one-prompt request waits at most one batch behind a thousand-prompt one;
requests that arrive while a batch runs join the next batch (micro-batching). A job whose
client went away is dropped before its next batch: a queued job that is abandoned never runs,
a running one stops between batches (the backend's own batches cannot be interrupted).

Before a job's first batch the worker runs its ``admit`` check (token counting with the
backend's tokenizer, which is thus only ever used from this thread); it may refuse the job or
hand back its final requests. Results travel back to the
job's event loop as events: ``("admitted",)``, ``("done", [(index, Completion), ...])``,
``("error", ApiError)``.

The scheduler also holds the byte budget (:class:`ByteBudget`): every request body is counted
against it while it is read, and stays counted until its response is finished, so the bodies
held by requests being read, queued and running never exceed ``max_queued_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chunkwise.llm.base import LLM, Completion, Request
from chunkwise.redact import redact
from chunkwise.serve.errors import ApiError

log = logging.getLogger(__name__)

_ids = itertools.count(1)


@dataclass
class ServerStats:
    """What the server saw; tests assert on it. Read fields under ``lock`` when it matters."""

    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    #: jobs whose client went away before they finished
    cancelled: int = 0
    #: backend requests never run because their job was cancelled
    skipped: int = 0
    #: jobs waiting or running in the scheduler
    queued: int = 0
    #: request-body bytes held now, and the most ever held (see :class:`ByteBudget`)
    held_bytes: int = 0
    max_held_bytes: int = 0
    #: requests refused because the byte budget was spent
    over_budget: int = 0
    #: the most recent request paths and batch sizes (bounded: a server may run for weeks)
    paths: deque[str] = field(default_factory=lambda: deque(maxlen=10_000))
    batch_sizes: deque[int] = field(default_factory=lambda: deque(maxlen=10_000))
    #: (job id, request index) of every batch, in order
    batches: deque[list[tuple[int, int]]] = field(default_factory=lambda: deque(maxlen=10_000))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def enter(self, path: str) -> None:
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.paths.append(path)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


class ByteBudget:
    """Request-body bytes the server may hold at once, shared by all requests (thread-safe).

    A request takes bytes as its body arrives (:meth:`take`) and gives them all back when its
    response is finished (:meth:`give`); a request that would go past ``limit`` is refused
    with 429, before it adds more.
    """

    def __init__(self, limit: int, stats: ServerStats):
        self.limit = limit
        self.stats = stats

    def take(self, n: int) -> None:
        """Counts ``n`` more bytes, or raises ApiError 429 (counting nothing) past the limit."""
        with self.stats.lock:
            if self.stats.held_bytes + n > self.limit:
                self.stats.over_budget += 1
                raise ApiError(
                    429,
                    f"the server is busy: it holds {self.stats.held_bytes:,} bytes of requests, "
                    f"and this one would go past its limit of {self.limit:,}; retry later",
                    code="server_busy",
                    headers={"Retry-After": "1"},
                )
            self.stats.held_bytes += n
            self.stats.max_held_bytes = max(self.stats.max_held_bytes, self.stats.held_bytes)

    def give(self, n: int) -> None:
        with self.stats.lock:
            self.stats.held_bytes -= n


class Job:
    """The backend requests of one HTTP request, and the way back to its event loop."""

    def __init__(
        self,
        requests: list[Request],
        loop: asyncio.AbstractEventLoop,
        admit: Callable[[], list[Request] | None] | None = None,
    ):
        self.id = next(_ids)
        self.requests = requests
        self.loop = loop
        self.admit = admit
        self.events: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.next = 0  # the next request index to schedule
        self.delivered = 0
        self.admitted = False
        self.cancelled = False
        self.finished = False  # every result or an error was posted

    @property
    def remaining(self) -> int:
        return len(self.requests) - self.next

    def post(self, *event: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the server is stopping
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)


def _api_error(e: Exception) -> ApiError:
    if isinstance(e, ApiError):
        return e
    if isinstance(e, ValueError):  # the backend refused the input
        return ApiError(400, f"{type(e).__name__}: {e}")
    log.error("generation failed: %s: %s", type(e).__name__, redact(str(e)))
    return ApiError(500, f"generation failed: {type(e).__name__}: {e}")


class Scheduler:
    """Owns ``llm`` from one daemon thread; see the module docstring."""

    def __init__(
        self,
        llm: LLM,
        stats: ServerStats,
        *,
        window_s: float = 0.005,
        max_batch: int = 32,
        max_queued: int = 1024,
        max_queued_bytes: int = 256 * 1024 * 1024,
    ):
        self.llm = llm
        self.stats = stats
        self.window_s = window_s
        self.max_batch = max_batch
        self.max_queued = max_queued
        self.budget = ByteBudget(max_queued_bytes, stats)
        self._jobs: deque[Job] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(
            target=self._work, name="chunkwise-serve-worker", daemon=True
        )
        self._thread.start()

    # -- called from the event loop ----------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closed:
                raise ApiError(503, "the server is shutting down")
            if len(self._jobs) >= self.max_queued:
                raise ApiError(
                    429,
                    f"the server is busy ({len(self._jobs)} requests queued); retry later",
                    code="server_busy",
                    headers={"Retry-After": "1"},
                )
            self._jobs.append(job)
            self._set_queued()
            self._cond.notify()

    def cancel(self, job: Job) -> None:
        """The client went away: drop what of ``job`` has not run yet."""
        with self._cond:
            if job.cancelled or job.finished:
                return
            job.cancelled = True
            with self.stats.lock:
                self.stats.cancelled += 1
            self._cond.notify()

    def close(self, timeout: float = 60) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=timeout)

    # -- the worker thread -------------------------------------------------------------------
    def _set_queued(self) -> None:
        with self.stats.lock:
            self.stats.queued = len(self._jobs)

    def _prune(self) -> None:
        """Under the lock: forget cancelled and finished jobs."""
        keep: deque[Job] = deque()
        for j in self._jobs:
            if j.cancelled:
                with self.stats.lock:
                    self.stats.skipped += j.remaining
                j.next = len(j.requests)
            elif not j.finished:
                keep.append(j)
        self._jobs = keep
        self._set_queued()

    def _take(self) -> list[tuple[Job, int]]:
        """Under the lock: one request from each waiting job in turn, up to ``max_batch``."""
        batch: list[tuple[Job, int]] = []
        ready = [j for j in self._jobs if j.admitted and j.remaining]
        while ready and len(batch) < self.max_batch:
            for j in ready:
                if len(batch) < self.max_batch and j.remaining:
                    batch.append((j, j.next))
                    j.next += 1
            ready = [j for j in ready if j.remaining]
        if batch:  # the next batch starts with the job after the one that got the last slot
            self._jobs.rotate(-(self._jobs.index(batch[-1][0]) + 1))
        return batch

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if self._closed:
                    break
                pending = sum(j.remaining for j in self._jobs)
                if self.window_s > 0 and pending < self.max_batch:
                    self._cond.wait(self.window_s)  # let concurrent requests join this batch
                    if self._closed:
                        break
                self._prune()
                new = [j for j in self._jobs if not j.admitted]
            for j in new:
                self._admit(j)
            with self._cond:
                self._prune()
                batch = self._take()
            if batch:
                self._run(batch)
            with self._cond:
                self._prune()
        self._fail_all(ApiError(503, "the server is shutting down"))

    def _admit(self, job: Job) -> None:
        try:
            if job.admit is not None:
                requests = job.admit()
                if requests is not None:
                    if len(requests) != len(job.requests):
                        raise RuntimeError("admit changed the number of requests")
                    job.requests = requests
        except Exception as e:
            self._fail(job, _api_error(e))
            return
        job.admitted = True
        job.post("admitted")

    def _fail(self, job: Job, error: ApiError) -> None:
        job.finished = True
        job.next = len(job.requests)
        job.post("error", error)

    def _fail_all(self, error: ApiError) -> None:
        with self._cond:
            jobs, self._jobs = list(self._jobs), deque()
            self._set_queued()
        for j in jobs:
            if not j.finished:
                self._fail(j, error)

    def _run(self, batch: list[tuple[Job, int]]) -> None:
        with self.stats.lock:
            self.stats.batch_sizes.append(len(batch))
            self.stats.batches.append([(j.id, i) for j, i in batch])
        try:
            outs: list[Completion | Exception] = list(
                self.llm.generate([j.requests[i] for j, i in batch])
            )
        except Exception as e:
            if len(batch) == 1:
                outs = [e]
            else:  # one bad request must not fail its neighbours: retry them one by one
                log.debug("batch of %d failed (%s); retrying one by one", len(batch), e)
                outs = []
                for j, i in batch:
                    if j.cancelled or j.finished:
                        outs.append(ApiError(499, "cancelled"))
                        continue
                    try:
                        outs.append(self.llm.generate([j.requests[i]])[0])
                    except Exception as e1:
                        outs.append(e1)
        done: dict[Job, list[tuple[int, Completion]]] = {}
        for (j, i), out in zip(batch, outs, strict=True):
            if j.finished:
                continue
            if isinstance(out, Exception):
                self._fail(j, _api_error(out))
                done.pop(j, None)
                continue
            done.setdefault(j, []).append((i, out))
        for j, results in done.items():
            j.delivered += len(results)
            j.finished = j.delivered == len(j.requests)
            j.post("done", results)
