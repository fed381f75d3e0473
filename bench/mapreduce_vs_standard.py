"""MapReduce with an 8K window vs standard decoding with the full and an 8K window.

    .venv/bin/python bench/mapreduce_vs_standard.py --lengths 32000,128000 --n 2

Passkey documents, needles at depths 1/(n+1) ... n/(n+1) (not at the edges, which middle
truncation keeps). Runs:
  (a) standard, the model's full window   (b) standard, 8K window   (c) mapreduce, 8K window
Per run: accuracy, wall seconds, and the floor = document tokens / the backend's measured
prefill tokens/s (what merely reading the document once costs). Prints JSON with the ratios
the goals name: c/a wall time at the first length, c/floor, and accuracies at the last length.
"""

from __future__ import annotations

import argparse
import json
import time

from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.eval.metrics import score_one
from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.strategies import get_strategy


def prefill_rate(llm, tokens: int = 1000) -> float:
    noise = "The grass is green. The sky is blue. The sun is yellow. Here we go.\n"
    text = llm.decode(llm.encode(noise * (tokens // 15 + 1))[:tokens])
    llm.generate([Request(text, GenerationParams(max_new_tokens=1))])  # warm-up
    t0 = time.perf_counter()
    out = llm.generate([Request(text, GenerationParams(max_new_tokens=1))])
    return out[0].prompt_tokens / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--lengths", default="32000,128000")
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="a,b,c", help="subset of runs to do")
    args = ap.parse_args()
    llm = load_llm(args.model)
    rate = prefill_rate(llm)
    runs = {
        "a": ("standard", None),
        "b": ("standard", args.window),
        "c": ("mapreduce", args.window),
    }
    result: dict = {
        "model": args.model,
        "prefill_tok_per_s": round(rate, 1),
        "full_window": llm.context_window,
        "window": args.window,
        "n": args.n,
        "lengths": {},
    }
    for length in [int(x) for x in args.lengths.split(",")]:
        # Needles at depths 1/(n+1) ... n/(n+1): away from the edges that middle truncation
        # keeps, so truncation can be seen to lose them.
        records = generate(
            "passkey",
            length_tokens=length,
            n=args.n + 2,
            seed=args.seed,
            count_tokens=llm.count_tokens,
        )[1:-1]
        doc_tokens = sum(llm.count_tokens(r["context"]) for r in records)
        floor = doc_tokens / rate
        per_len: dict = {"doc_tokens_total": doc_tokens, "floor_s": round(floor, 1)}
        for key in args.runs.split(","):
            name, window = runs[key]
            strategy = get_strategy(name, window=window)
            t0 = time.perf_counter()
            preds = []
            for r in records:
                ans = strategy.answer(r["context"], passkey_query(r), llm)
                preds.append(
                    {
                        "prediction": ans.text,
                        "answer": r["answer"][0],
                        "correct": score_one("passkey", ans.text, r["answer"]) > 0,
                        "llm_calls": ans.stats.llm_calls,
                    }
                )
            wall = time.perf_counter() - t0
            per_len[key] = {
                "strategy": name,
                "window": window or llm.context_window,
                "accuracy": 100.0 * sum(p["correct"] for p in preds) / len(preds),
                "wall_s": round(wall, 1),
                "over_floor": round(wall / floor, 2),
                "predictions": preds,
            }
            print(json.dumps({"length": length, "run": key, **per_len[key]}), flush=True)
        if "a" in per_len and "c" in per_len:
            per_len["c_over_a_wall"] = round(per_len["c"]["wall_s"] / per_len["a"]["wall_s"], 3)
        result["lengths"][str(length)] = per_len
    print(json.dumps(result))


if __name__ == "__main__":
    main()
