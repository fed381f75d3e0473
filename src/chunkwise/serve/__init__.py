"""An OpenAI-compatible HTTP server over any chunkwise backend, on FastAPI + uvicorn.

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (both stream as SSE with
``stream: true``, with a final usage chunk under ``stream_options.include_usage``),
``GET /v1/models`` and ``GET /v1/health`` (the ``/v1`` prefix is optional). Errors are
OpenAI-shaped: ``{"error": {"message", "type", "param", "code"}}``.

What protects it (each refused before any generation): an optional API key checked on every
route (:mod:`~chunkwise.serve.app`), JSON bodies only (no CORS: a browser's cross-site POST
cannot get through), requests framed by both Content-Length and Transfer-Encoding refused,
only loopback ``Host`` names answered when bound to loopback (no DNS rebinding) and only the
server's own web origins trusted, body, ``n``, prompt-count and ``max_tokens`` caps and the
model's context window (:mod:`~chunkwise.serve.limits`, :mod:`~chunkwise.serve.schemas`),
text that is valid Unicode, a bounded queue and a byte budget for the bodies held, a cap on
open connections and deadlines for a request's head and body
(:mod:`~chunkwise.serve.connections`). Served names and error messages never carry a URL's
user info or secret parameters. One worker thread owns the backend and batches fairly across
requests, dropping the work of clients that hung up (:mod:`~chunkwise.serve.scheduling`). It
binds to loopback by default.

From Python::

    with serve_in_thread(llm) as base_url:           # "http://127.0.0.1:PORT/v1"
        remote = load_llm(f"openai:default@{base_url}")

    with OpenAIServer(llm, api_key="...") as server:  # server.port, .base_url, .stats
        ...

From the shell: ``chunkwise serve --model hf:default --port 8000`` (needs the ``serve`` extra).
"""

from chunkwise.serve.errors import ApiError
from chunkwise.serve.limits import Limits
from chunkwise.serve.scheduling import ServerStats
from chunkwise.serve.server import OpenAIServer, serve_in_thread

__all__ = ["ApiError", "Limits", "OpenAIServer", "ServerStats", "serve_in_thread"]
