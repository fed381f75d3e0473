"""Serving one generation route: :class:`Generation` reads and parses the request, queues it
on the scheduler, waits for the results (or streams them as server-sent events) and answers,
dropping the work as soon as the client hangs up."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from chunkwise.llm.base import LLM, Completion
from chunkwise.serve.body import ClientGone, Held, read_json
from chunkwise.serve.errors import ApiError
from chunkwise.serve.limits import Limits
from chunkwise.serve.responses import ChunkWriter, whole
from chunkwise.serve.scheduling import Job, Scheduler, ServerStats
from chunkwise.serve.schemas import GenerationCall, check_window

log = logging.getLogger(__name__)


async def _client_gone(request: Request) -> None:
    """Returns once the client has hung up (the body is read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class _JobStream(StreamingResponse):
    """An SSE response that runs ``on_close`` however it ends (even if never iterated)."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None]):
        super().__init__(
            content, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()


class Generation:
    """Serves one generation route: parse, queue, wait (or stream), answer."""

    def __init__(
        self,
        llm: LLM,
        model: str,
        scheduler: Scheduler,
        stats: ServerStats,
        limits: Limits,
        parse: Callable[..., GenerationCall],
    ):
        self.llm, self.model, self.scheduler = llm, model, scheduler
        self.stats, self.limits, self.parse = stats, limits, parse

    async def __call__(self, request: Request) -> Response:
        self.stats.enter(request.url.path)
        held = Held(self.scheduler.budget)
        streaming = False
        try:
            body = await read_json(request, self.limits, held)
            call = self._parse(body)
            job = Job(
                call.requests(),
                asyncio.get_running_loop(),
                admit=functools.partial(check_window, call, self.llm),
            )
            self.scheduler.submit(job)
            gone = asyncio.ensure_future(_client_gone(request))
            try:
                await self._next(job, gone)  # admitted: the prompt fits
                if call.stream:
                    streaming = True
                    return _JobStream(self._stream(job, call), on_close=self._closer(job, held))
                results: dict[int, Completion] = {}
                while len(results) < len(job.requests):
                    results.update(await self._next(job, gone))
                return JSONResponse(whole(call, self.model, results))
            finally:
                gone.cancel()
                if not streaming:
                    self.scheduler.cancel(job)  # a no-op once it finished
        except ClientGone:
            return Response(status_code=499)
        finally:
            if not streaming:
                held.release()
                self.stats.leave()

    def _parse(self, body: dict[str, Any]) -> GenerationCall:
        try:
            return self.parse(body, self.llm, self.model, self.limits)
        except ApiError:
            raise
        except Exception as e:  # a bug, or a backend failing on input: keep the connection
            log.exception("parsing a request failed")
            raise ApiError(500, f"internal error: {type(e).__name__}: {e}") from None

    async def _next(self, job: Job, gone: asyncio.Future) -> list[tuple[int, Completion]]:
        """The next results of ``job``; raises its error, or ClientGone."""
        getter = asyncio.ensure_future(job.events.get())
        await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not getter.done():
            getter.cancel()
            self.scheduler.cancel(job)
            raise ClientGone
        event = getter.result()
        if event[0] == "error":
            raise event[1]
        return event[1] if event[0] == "done" else []

    def _closer(self, job: Job, held: Held) -> Callable[[], None]:
        def close() -> None:
            self.scheduler.cancel(job)  # a no-op once it finished
            held.release()
            self.stats.leave()

        return close

    async def _stream(self, job: Job, call: GenerationCall) -> AsyncIterator[bytes]:
        """SSE events; Starlette stops iterating when the client hangs up."""
        writer = ChunkWriter(call, self.model)
        results: dict[int, Completion] = {}
        while len(results) < len(job.requests):
            event = await job.events.get()
            if event[0] == "error":
                yield writer.error(event[1].payload())
                break
            for i, c in sorted(event[1], key=lambda x: x[0]):
                results[i] = c
                for chunk in writer.choice(i, c):
                    yield chunk
        else:
            if call.include_usage:
                yield writer.usage(results)
        yield writer.done()
