"""A real chunkwise OpenAI-compatible server for kill tests (a helper script, not a test file).

    python tests/llm/held_server.py --port P [--model scripted:passkey] [--answer N]

Serves ``--model`` with :class:`chunkwise.serve.OpenAIServer` (what ``chunkwise serve`` runs) on
127.0.0.1:P. The first ``N`` requests are answered; every later one is held, never answered,
until the process is killed. A test can so kill the server while a client waits on it, at a point
it knows (N answers given) without timing anything. Prints the base URL once listening.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from chunkwise.llm import load_llm
from chunkwise.llm.base import Completion, Request
from chunkwise.serve import OpenAIServer


def hold_after(llm, answer: int) -> None:
    """Make ``llm`` answer ``answer`` requests, then block every later call forever."""
    inner = llm._generate
    lock = threading.Lock()
    answered = 0

    def held(requests: Sequence[Request]) -> list[Completion]:
        nonlocal answered
        with lock:
            go = answered + len(requests) <= answer
            if go:
                answered += len(requests)
        if not go:
            threading.Event().wait()  # until the process is killed
        return inner(requests)

    llm._generate = held


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", default="scripted:passkey")
    p.add_argument("--answer", type=int, default=1 << 30, help="requests answered before holding")
    args = p.parse_args(argv)
    llm = load_llm(args.model)
    hold_after(llm, args.answer)
    server = OpenAIServer(llm, port=args.port).start()
    print(server.base_url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
