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

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.call_cache import CachedLLM, CallCache

WORDS = (
    "report ledger river north account signal harbour method figure archive window morning "
    "engine border letter garden market silver number station village council meadow"
).split()


def prompts(llm, n: int, tokens: int, seed: int) -> list[Request]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(tokens))
        text = llm.decode(llm.encode(text)[:tokens])
        prompt = f"{text}\n\nQuestion: which word comes up most often above?\nAnswer:"
        out.append(Request(prompt, GenerationParams(max_new_tokens=ARGS.new_tokens)))
    return out


def whole(llm, requests: list[Request]) -> tuple[float, int]:
    t0 = time.perf_counter()
    got = llm.generate(requests)
    return time.perf_counter() - t0, sum(c.completion_tokens for c in got)


def in_pieces(llm, requests: list[Request], piece: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as folder:
        cached = CachedLLM(llm, CallCache(Path(folder), "bench"), piece=piece)
        t0 = time.perf_counter()
        got = cached.generate(requests)
        seconds = time.perf_counter() - t0
        cached.cache.close()
    return seconds, sum(c.completion_tokens for c in got)


def main() -> None:
    llm = load_llm(ARGS.model)
    llm.generate(prompts(llm, 2, 32, seed=-1))  # warm-up
    arms: dict[str, dict[str, float]] = {"whole": {}, "pieces": {}}
    for k in range(ARGS.rounds):
        order = ("whole", "pieces") if k % 2 == 0 else ("pieces", "whole")
        for j, arm in enumerate(order):
            batch = prompts(llm, ARGS.calls, ARGS.prompt_tokens, seed=2 * k + j)
            s, new = whole(llm, batch) if arm == "whole" else in_pieces(llm, batch, ARGS.piece)
            arms[arm]["seconds"] = arms[arm].get("seconds", 0.0) + s
            arms[arm]["new_tokens"] = arms[arm].get("new_tokens", 0) + new
    llm.close()
    report = {
        "model": ARGS.model,
        "calls": ARGS.calls,
        "piece": ARGS.piece,
        "prompt_tokens": ARGS.prompt_tokens,
        "new_tokens": ARGS.new_tokens,
        "rounds": ARGS.rounds,
        "arms": {a: {k: round(v, 2) for k, v in d.items()} for a, d in arms.items()},
        "pieces_over_whole": round(arms["pieces"]["seconds"] / arms["whole"]["seconds"], 3),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if ARGS.json:
        Path(ARGS.json).parent.mkdir(parents=True, exist_ok=True)
        Path(ARGS.json).write_text(text + "\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="vllm:default")
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--piece", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=400)
    ap.add_argument("--new-tokens", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    ARGS = ap.parse_args()
    main()
