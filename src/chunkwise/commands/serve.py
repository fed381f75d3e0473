"""`chunkwise serve`: expose any model spec through an OpenAI-compatible HTTP API."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chunkwise.serve import Limits

HELP = (
    "serve a model spec over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions)"
)
KEY_ENV = "CHUNKWISE_API_KEY"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", default="hf:default", help="model spec to serve (default: hf:default)"
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default: 127.0.0.1, loopback only; any other address needs "
        "--api-key, and a reverse proxy with TLS in front)",
    )
    p.add_argument(
        "--port", type=int, default=8000, help="port to bind; 0 picks a free one (default: 8000)"
    )
    p.add_argument("--name", help="model name reported by /v1/models (default: the spec's target)")
    p.add_argument(
        "--api-key",
        help=f"clients must send 'Authorization: Bearer KEY' (default: ${KEY_ENV}; prefer the "
        "variable: a command line is visible to other users)",
    )
    p.add_argument(
        "--batch-window-ms",
        type=float,
        default=5.0,
        help="how long to gather concurrent requests into one batch (default: 5)",
    )
    p.add_argument(
        "--max-batch", type=int, default=32, help="most requests per batch (default: 32)"
    )
    p.add_argument(
        "--max-body-mb", type=float, default=16.0, help="largest request body in MiB (default: 16)"
    )
    p.add_argument("--max-n", type=int, default=16, help="largest 'n' per request (default: 16)")
    p.add_argument(
        "--max-prompts", type=int, default=256, help="most prompts per request (default: 256)"
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header names NAME (repeatable; '*': any). Bound "
        "to loopback, only 127.0.0.1, localhost and ::1 are answered (this stops DNS "
        "rebinding); bound beyond loopback, any Host is answered unless this names some. Pages "
        "on NAME are trusted as web origins",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=512,
        help="open connections at once; more are answered 503 and closed (default: 512)",
    )
    p.add_argument(
        "--max-queued-mb",
        type=float,
        default=256.0,
        help="request bodies held at once, in MiB, by requests being read, queued or running; "
        "beyond it requests get 429 (default: 256)",
    )
    p.add_argument(
        "--head-timeout-s",
        type=float,
        default=10.0,
        help="seconds a client has to send its request line and headers (default: 10)",
    )
    p.add_argument(
        "--body-timeout-s",
        type=float,
        default=60.0,
        help="seconds a client has to send its request body (default: 60)",
    )
    p.add_argument(
        "--keep-alive-s",
        type=float,
        default=30.0,
        help="seconds an idle connection stays open between requests (default: 30)",
    )


def run(args: argparse.Namespace) -> int:
    import logging

    from chunkwise.errors import BadInput
    from chunkwise.llm import load_llm
    from chunkwise.serve import OpenAIServer
    from chunkwise.serve.limits import LOOPBACK

    log = logging.getLogger("chunkwise.serve")
    if not 0 <= args.port <= 65535:
        raise BadInput(f"--port must be in 0..65535, got {args.port}")
    if args.max_batch < 1 or args.batch_window_ms < 0:
        raise BadInput("--max-batch must be >= 1 and --batch-window-ms >= 0")
    limits = _limits(args)
    api_key = args.api_key or os.environ.get(KEY_ENV) or None
    if args.host not in LOOPBACK and api_key is None:
        raise BadInput(
            f"--host {args.host} reaches beyond this machine: set --api-key (or ${KEY_ENV}), "
            "and put a reverse proxy with TLS in front"
        )
    llm = load_llm(args.model)
    try:
        try:
            server = OpenAIServer(
                llm,
                host=args.host,
                port=args.port,
                model_name=args.name,
                api_key=api_key,
                limits=limits,
                batch_window_s=args.batch_window_ms / 1000,
                max_batch=args.max_batch,
                allowed_hosts=args.allowed_host,
            )
        except OSError as e:
            raise BadInput(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
        log.info(
            "serving %s as %r at %s%s (Ctrl-C stops)",
            args.model,  # the CLI's log handler masks secrets (logs.RedactFilter)
            server.model_name,
            server.base_url,
            " with an API key" if api_key else "",
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


#: the flag that sets each server limit (for errors that name the flag)
LIMIT_FLAGS = {
    "max_body_bytes": "--max-body-mb",
    "max_n": "--max-n",
    "max_prompts": "--max-prompts",
    "max_connections": "--max-connections",
    "max_queued_bytes": "--max-queued-mb",
    "head_timeout_s": "--head-timeout-s",
    "body_timeout_s": "--body-timeout-s",
    "keep_alive_s": "--keep-alive-s",
}


def _limits(args: argparse.Namespace) -> Limits:
    from chunkwise.errors import BadInput
    from chunkwise.serve import Limits

    mib = 1024 * 1024
    try:
        return Limits(
            max_body_bytes=int(args.max_body_mb * mib),
            max_n=args.max_n,
            max_prompts=args.max_prompts,
            max_connections=args.max_connections,
            max_queued_bytes=int(args.max_queued_mb * mib),
            head_timeout_s=args.head_timeout_s,
            body_timeout_s=args.body_timeout_s,
            keep_alive_s=args.keep_alive_s,
        )
    except ValueError as e:
        flag = next((f for k, f in LIMIT_FLAGS.items() if f"limit {k} " in str(e)), "a limit")
        raise BadInput(f"{flag}: {e}") from None
