"""What sending a batch in pieces costs: chunkwise eval keeps each model call on disk, sending
the calls of a batch in pieces (chunkwise.llm.call_cache.PIECE_CALLS) so that a kill loses at
most one piece; a backend that decodes many sequences at once then sees smaller batches, with a
tail at the end of each piece where few sequences are left.

    .venv-vllm/bin/python bench/call_pieces.py [--model vllm:default] [--calls 256] [--piece 64]
        [--prompt-tokens 400] [--new-tokens 40] [--json runs/bench/call_pieces.json]

Each round answers ``--calls`` fresh map-sized prompts (a random word list, new every round, so
neither arm reuses the other's prefix cache) once in one ``generate`` call and once through
:class:`~chunkwise.llm.call_cache.CachedLLM` in pieces of ``--piece``, in alternating order.
Prints one JSON object; ``pieces_over_whole`` is the ratio of the two arms' total seconds,
measured in this run.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.call_cache import CachedLLM, CallCache

WORDS = (
    "report ledger river north account signal harbour method figure archive window morning "
    "engine border letter garden market silver number station village council meadow"
).split()


class _Counted:
    """Forwards to ``llm``, counting its generate calls."""

    def __init__(self, llm: Any):
        self.llm, self.batches = llm, 0

    def generate(self, requests: list[Request]) -> list[Any]:
        self.batches += 1
        return self.llm.generate(requests)


def prompts(llm: Any, n: int, tokens: int, new_tokens: int, seed: int) -> list[Request]:
    """``n`` prompts of ``tokens`` random words and a question, new for every ``seed``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(tokens))
        text = llm.decode(llm.encode(text)[:tokens])
        prompt = f"{text}\n\nQuestion: which word comes up most often above?\nAnswer:"
        out.append(Request(prompt, GenerationParams(max_new_tokens=new_tokens)))
    return out


def answer(llm: Any, requests: list[Request], piece: int | None) -> dict[str, float]:
    """Seconds, new tokens and backend calls for ``requests``: in one call (``piece`` None) or
    through the call cache in pieces of ``piece``."""
    counted = _Counted(llm)
    with tempfile.TemporaryDirectory() as folder:
        model: Any = counted
        if piece is not None:
            model = CachedLLM(counted, CallCache(Path(folder), "bench"), piece=piece)
        t0 = time.perf_counter()
        got = model.generate(requests)
        seconds = time.perf_counter() - t0
        if piece is not None:
            model.cache.close()
    new = sum(c.completion_tokens for c in got)
    return {"seconds": seconds, "new_tokens": new, "backend_calls": counted.batches}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="vllm:default")
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--piece", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=400)
    ap.add_argument("--new-tokens", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        llm = load_llm(args.model)
    except BadInput as e:
        raise SystemExit(f"call_pieces: --model {args.model}: {e}") from None
    llm.generate(prompts(llm, 2, 32, 4, seed=-1))  # warm-up
    arms: dict[str, dict[str, float]] = {
        a: {"seconds": 0.0, "new_tokens": 0, "backend_calls": 0} for a in ("whole", "pieces")
    }
    for k in range(args.rounds):
        order = ("whole", "pieces") if k % 2 == 0 else ("pieces", "whole")
        for j, arm in enumerate(order):
            batch = prompts(llm, args.calls, args.prompt_tokens, args.new_tokens, seed=2 * k + j)
            got = answer(llm, batch, None if arm == "whole" else args.piece)
            for key, value in got.items():
                arms[arm][key] += value
    llm.close()
    report = {
        "model": args.model,
        "calls": args.calls,
        "piece": args.piece,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "rounds": args.rounds,
        "arms": {a: {k: round(v, 2) for k, v in d.items()} for a, d in arms.items()},
        "pieces_over_whole": round(arms["pieces"]["seconds"] / arms["whole"]["seconds"], 3),
    }
    text = json.dumps(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(text)
    return report


if __name__ == "__main__":
    main()
