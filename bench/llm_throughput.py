"""Prefill and decode throughput of a backend at batch 1 and 8, and the batched speedup.

    .venv/bin/python bench/llm_throughput.py [--model hf:default] [--prompt-tokens 1500]

Prints one JSON object. "batched_speedup" = time for 8 map-sized prompts one by one / time
for the same 8 prompts in one generate() call (same outputs, greedy).
"""

from __future__ import annotations

import argparse
import json
import random
import time

from chunkwise.llm import GenerationParams, Request, load_llm

WORDS = (
    "the grass is green the sky is blue a reader takes notes while the model reads "
    "each chunk of the long document and answers the question with care"
).split()


def make_prompt(llm, tokens: int, seed: int) -> str:
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(int(tokens * 0.9)))
    ids = llm.encode(text)[:tokens]
    return llm.decode(ids) + "\n\nQuestion: what colour is the sky?\nAnswer:"


def timed(llm, prompts: list[str], new_tokens: int) -> tuple[float, list]:
    reqs = [Request(p, GenerationParams(max_new_tokens=new_tokens)) for p in prompts]
    t0 = time.perf_counter()
    out = llm.generate(reqs)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()
    t0 = time.perf_counter()
    llm = load_llm(args.model)
    load_s = time.perf_counter() - t0
    prompts = [make_prompt(llm, args.prompt_tokens, s) for s in range(8)]
    timed(llm, prompts[:1], 1)  # warm-up
    result: dict[str, object] = {
        "model": args.model,
        "load_s": round(load_s, 2),
        "prompt_tokens": args.prompt_tokens,
    }
    for bs in (1, 8):
        batch = prompts[:bs]
        t_prefill, out1 = timed(llm, batch, 1)
        t_gen, out = timed(llm, batch, args.new_tokens)
        n_prompt = sum(c.prompt_tokens for c in out1)
        n_new = sum(c.completion_tokens for c in out) - bs  # tokens after the first
        result[f"batch{bs}"] = {
            "prefill_tok_per_s": round(n_prompt / t_prefill, 1),
            "decode_tok_per_s": round(n_new / max(t_gen - t_prefill, 1e-9), 1),
            "seconds": round(t_gen, 2),
        }
    t_seq = 0.0
    seq_out = []
    for p in prompts:
        dt, o = timed(llm, [p], args.new_tokens)
        t_seq += dt
        seq_out += o
    t_bat, bat_out = timed(llm, prompts, args.new_tokens)
    result["sequential_8_s"] = round(t_seq, 2)
    result["batched_8_s"] = round(t_bat, 2)
    result["batched_speedup"] = round(t_seq / t_bat, 2)
    result["same_outputs"] = [c.text for c in seq_out] == [c.text for c in bat_out]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
