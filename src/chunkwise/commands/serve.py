"""`chunkwise serve`: expose any model spec through an OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse

HELP = (
    "serve a model spec over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", default="hf:default", help="model spec to serve (default: hf:default)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=8000, help="port to bind; 0 picks a free one (default: 8000)"
    )
    p.add_argument("--name", help="model name reported by /v1/models (default: the spec's target)")
    p.add_argument(
        "--batch-window-ms",
        type=float,
        default=5.0,
        help="how long to gather concurrent requests into one batch (default: 5)",
    )
    p.add_argument(
        "--max-batch", type=int, default=32, help="most requests per batch (default: 32)"
    )


def run(args: argparse.Namespace) -> int:
    import logging

    from chunkwise.errors import BadInput
    from chunkwise.llm import load_llm
    from chunkwise.serve import OpenAIServer

    log = logging.getLogger("chunkwise.serve")
    if not 0 <= args.port <= 65535:
        raise BadInput(f"--port must be in 0..65535, got {args.port}")
    if args.max_batch < 1 or args.batch_window_ms < 0:
        raise BadInput("--max-batch must be >= 1 and --batch-window-ms >= 0")
    llm = load_llm(args.model)
    try:
        try:
            server = OpenAIServer(
                llm,
                host=args.host,
                port=args.port,
                model_name=args.name,
                batch_window_s=args.batch_window_ms / 1000,
                max_batch=args.max_batch,
            )
        except OSError as e:
            raise BadInput(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            log.warning(
                "listening on %s without authentication: anyone who can reach it can use it",
                args.host,
            )
        log.info(
            "serving %s as %r at %s (Ctrl-C stops)", args.model, server.model_name, server.base_url
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            log.info("stopping")
        finally:
            server.close()
    finally:
        llm.close()
    return 0
