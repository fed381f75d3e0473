"""MapReduce with an 8K window vs standard decoding with the full and an 8K window.

    .venv/bin/python bench/mapreduce_vs_standard.py --lengths 32000,128000 --n 2
    .venv-vllm/bin/python bench/mapreduce_vs_standard.py --model hf:default,vllm:default \
        --lengths 8000,32000 --n 1 --runs b,c

Passkey documents, needles at depths 1/(n+1) ... n/(n+1) (not at the edges, which middle
truncation keeps). Runs:
  (a) standard, the model's full window   (b) standard, 8K window   (c) mapreduce, 8K window
Per run: accuracy, wall seconds, and the floor = document tokens / the backend's best measured
prefill tokens/s (one 1000-token prompt, and a wave of map-sized prompts in one generate call,
as the engine batches a map wave): what merely reading the document once costs. Several
``--model`` specs (comma-separated) run one after another in this process, so their ratios
come from one run. Prints a table and JSON with the ratios the goals name: c/a wall time,
c/floor, accuracies, and mapreduce wall time on each model over the first model's.
"""

from __future__ import annotations

import argparse
import json
import time

from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.eval.metrics import score_one
from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.strategies import get_strategy

NOISE = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
)


def _noise(llm, tokens: int, salt: int) -> str:
    # a number per prompt, so that vLLM's prefix cache cannot answer one prompt from another
    return f"{salt}. " + llm.decode(llm.encode(NOISE * (tokens // 15 + 1))[:tokens])


def prefill_rates(llm, tokens: int = 1000, wave: int = 8) -> dict[str, float]:
    """Prompt tokens/s for one prompt and for a wave of ``wave`` such prompts in one call."""
    llm.generate([Request(_noise(llm, tokens, 0), GenerationParams(max_new_tokens=1))])  # warm-up
    rates = {}
    for name, n in (("single", 1), ("wave", wave)):
        reqs = [
            Request(_noise(llm, tokens, 1 + n + i), GenerationParams(max_new_tokens=1))
            for i in range(n)
        ]
        t0 = time.perf_counter()
        out = llm.generate(reqs)
        rates[name] = round(sum(o.prompt_tokens for o in out) / (time.perf_counter() - t0), 1)
    return rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:default", help="one spec, or several comma-separated")
    ap.add_argument("--lengths", default="32000,128000")
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="a,b,c", help="subset of runs to do")
    args = ap.parse_args()
    results = {spec: run_model(spec, args) for spec in args.model.split(",") if spec}
    first = next(iter(results.values()))
    print("| model | length | run | accuracy | wall s | floor s | x floor |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for spec, res in results.items():
        for length, per_len in res["lengths"].items():
            for key in args.runs.split(","):
                r = per_len[key]
                print(
                    f"| {spec} | {length} | {key} {r['strategy']}@{r['window']} | "
                    f"{r['accuracy']:.0f} | {r['wall_s']} | {per_len['floor_s']} | "
                    f"{r['over_floor']} |"
                )
    if len(results) == 1:
        print(json.dumps(first))
        return
    ratios = {}
    for spec, res in list(results.items())[1:]:
        for length, per_len in res["lengths"].items():
            if "c" in per_len and "c" in first["lengths"].get(length, {}):
                base = first["lengths"][length]["c"]["wall_s"]
                ratios[f"{spec}/{first['model']}@{length}"] = round(
                    per_len["c"]["wall_s"] / max(base, 1e-9), 3
                )
    print(json.dumps({"models": results, "mapreduce_wall_ratio": ratios}))


def run_model(spec: str, args: argparse.Namespace) -> dict:
    llm = load_llm(spec)
    rates = prefill_rates(llm)
    rate = max(rates.values())
    runs = {
        "a": ("standard", None),
        "b": ("standard", args.window),
        "c": ("mapreduce", args.window),
    }
    result: dict = {
        "model": spec,
        "prefill_tok_per_s": rates,
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
            print(
                json.dumps({"model": spec, "length": length, "run": key, **per_len[key]}),
                flush=True,
            )
        if "a" in per_len and "c" in per_len:
            per_len["c_over_a_wall"] = round(per_len["c"]["wall_s"] / per_len["a"]["wall_s"], 3)
        result["lengths"][str(length)] = per_len
    llm.close()
    return result


if __name__ == "__main__":
    main()
