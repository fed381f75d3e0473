"""The FastAPI application: :func:`create_app` puts the :class:`~chunkwise.serve.guard.Guard`
in front, maps errors to OpenAI-shaped answers and adds the routes (models, health, and the two
generation routes of :mod:`~chunkwise.serve.generation`). Who is answered is
:mod:`~chunkwise.serve.access`; how a body is read is :mod:`~chunkwise.serve.body`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from chunkwise.llm.base import LLM
from chunkwise.serve.access import Access, host_name, key_matches, origin_key
from chunkwise.serve.body import decode_body
from chunkwise.serve.errors import ApiError
from chunkwise.serve.generation import Generation
from chunkwise.serve.guard import Guard, error_response
from chunkwise.serve.limits import Limits
from chunkwise.serve.scheduling import Scheduler, ServerStats
from chunkwise.serve.schemas import GenerationCall, parse_chat, parse_completions

log = logging.getLogger(__name__)

#: names callers import from here (their homes are the modules above)
__all__ = ["Access", "create_app", "decode_body", "host_name", "key_matches", "origin_key"]


def create_app(
    llm: LLM,
    *,
    model: str,
    scheduler: Scheduler,
    stats: ServerStats,
    limits: Limits,
    api_key: str | None,
    access: Access,
) -> FastAPI:
    """``access``: the Host names answered and the web pages trusted (:class:`Access`)."""
    app = FastAPI(title="chunkwise", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, api_key=api_key, limits=limits, access=access)
    created = int(time.time())

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> JSONResponse:
        return error_response(e, {"Connection": "close"} if e.status in (408, 413) else None)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        message = (
            f"no route {request.method} {request.url.path}"
            if e.status_code in (404, 405)
            else str(e.detail)
        )
        return error_response(ApiError(e.status_code, message))

    @app.exception_handler(Exception)
    async def _bug(request: Request, e: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return error_response(ApiError(500, f"internal error: {type(e).__name__}"))

    async def models(request: Request) -> JSONResponse:
        card = {
            "id": model,
            "object": "model",
            "created": created,
            "owned_by": "chunkwise",
            "max_model_len": llm.context_window,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    def route(parse: Callable[..., GenerationCall]) -> Callable[[Request], Any]:
        generation = Generation(llm, model, scheduler, stats, limits, parse)

        async def endpoint(request: Request) -> Response:
            return await generation(request)

        return endpoint

    completions, chat = route(parse_completions), route(parse_chat)
    for prefix in ("/v1", ""):  # the /v1 prefix is optional
        app.add_api_route(f"{prefix}/models", models, methods=["GET"])
        app.add_api_route(f"{prefix}/health", health, methods=["GET"])
        app.add_api_route(f"{prefix}/completions", completions, methods=["POST"])
        app.add_api_route(f"{prefix}/chat/completions", chat, methods=["POST"])
    return app
