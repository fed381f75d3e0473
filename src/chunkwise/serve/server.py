"""Running the app: uvicorn on a socket bound at construction, in a thread or in the foreground."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from chunkwise.llm.base import LLM
from chunkwise.redact import redact
from chunkwise.serve.limits import Limits
from chunkwise.serve.scheduling import Scheduler, ServerStats

log = logging.getLogger(__name__)

#: pending connections the kernel queues before accept (a burst of clients must not stall)
BACKLOG = 4096


def default_name(llm: LLM) -> str:
    """The name a model is served as: its spec's target (``hf:default`` -> ``default``), with
    any URL user info and secret query parameters masked (``m@http://***@host/v1``)."""
    if llm.spec:
        from chunkwise.llm.spec import parse_spec

        try:
            return redact(parse_spec(llm.spec).target)
        except Exception:
            return redact(llm.spec)
    return "chunkwise"


def _listen(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class OpenAIServer:
    """An OpenAI-compatible server over ``llm``, bound at construction (``port=0``: any free one).

    ``start()`` serves from a background thread; ``serve_forever()`` blocks (the CLI; Ctrl-C
    stops it); ``close()`` stops serving and the worker. It does not close ``llm``: whoever
    loaded it owns it. ``api_key``: clients must send ``Authorization: Bearer KEY``.
    ``allowed_hosts``: more ``Host`` names to answer to (see :meth:`Access.for_bind`; bound to
    loopback, only the loopback names are answered by default). The served name is redacted
    (:func:`~chunkwise.redact.redact`), ``model_name`` too: it is shown to every client.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str | None = None,
        api_key: str | None = None,
        limits: Limits | None = None,
        batch_window_s: float = 0.005,
        max_batch: int = 32,
        allowed_hosts: Iterable[str] = (),
    ):
        try:
            import uvicorn

            from chunkwise.serve.app import Access, create_app
            from chunkwise.serve.connections import protocol
        except ImportError as e:
            from chunkwise.errors import MissingDependency

            raise MissingDependency(
                f"the server's {e.name or 'dependencies'}", "pip install 'chunkwise[serve]'"
            ) from None

        self.llm = llm
        self.stats = ServerStats()
        self.model_name = redact(model_name) if model_name else default_name(llm)
        self.limits = limits or Limits()
        self._sock = _listen(host, port)
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        self.scheduler = Scheduler(
            llm,
            self.stats,
            window_s=batch_window_s,
            max_batch=max_batch,
            max_queued=self.limits.max_queued,
            max_queued_bytes=self.limits.max_queued_bytes,
        )
        self.access = Access.for_bind(host, self.port, allowed_hosts)
        self.app = create_app(
            llm,
            model=self.model_name,
            scheduler=self.scheduler,
            stats=self.stats,
            limits=self.limits,
            api_key=api_key or None,
            access=self.access,
        )
        self.config = uvicorn.Config(
            self.app,
            http=protocol(self.limits),  # h11 + a connection cap and a request-head deadline
            ws="none",
            log_level="warning",
            access_log=False,
            lifespan="off",
            backlog=BACKLOG,
            # a backstop on request tasks (one per connection at a time); connections past
            # max_connections are refused as they are accepted, by the protocol
            limit_concurrency=2 * self.limits.max_connections,
            timeout_keep_alive=self.limits.keep_alive_s,  # type: ignore[arg-type]
            timeout_graceful_shutdown=5,
            server_header=False,
        )
        self._server = uvicorn.Server(self.config)
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> OpenAIServer:
        if self._thread is None:
            started = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(started,), name=f"chunkwise-serve-{self.port}", daemon=True
            )
            self._thread.start()
            started.wait(30)
            if not self._server.started:
                self.close()
                raise RuntimeError("the HTTP server did not start")
        return self

    def _run(self, started: threading.Event) -> None:
        import asyncio

        async def serve() -> None:
            task = asyncio.ensure_future(self._server.serve(sockets=[self._sock]))
            while not self._server.started and not task.done():
                await asyncio.sleep(0.01)
            started.set()
            await task

        try:
            asyncio.run(serve())
        finally:
            started.set()

    def serve_forever(self) -> None:
        self._server.run(sockets=[self._sock])

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._server.should_exit = True
        self.scheduler.close()
        if self._thread is not None:
            self._thread.join(timeout=15)
        self._sock.close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def serve_in_thread(llm: LLM, **kwargs: Any) -> Iterator[str]:
    """Serve ``llm`` on 127.0.0.1 (an ephemeral port) for the ``with`` block; yields the base
    URL (``http://127.0.0.1:PORT/v1``). Keyword arguments go to :class:`OpenAIServer`."""
    server = OpenAIServer(llm, **kwargs).start()
    try:
        yield server.base_url
    finally:
        server.close()
