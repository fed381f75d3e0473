"""Wall time of MapReduce vs Chain-of-Agents on the same document and question, same window.

    flock /tmp/chunkwise-cpu.lock .venv/bin/python bench/mapreduce_vs_coa.py      # 32K, 8K window

One passkey document of ``--length`` tokens (needle in the middle), one question, window
``--window``. Runs (``--runs``, comma-separated):

  mr         mapreduce, its defaults (base models: 1000-token chunks; all map calls in one wave)
  coa        chain_of_agents, its defaults (chunks fill the window after the memory reservations:
             the paper's setting), document order
  coa_same   chain_of_agents with MapReduce's chunk size, so the two differ only in reading the
             chunks in parallel vs one after another

Per run: wall seconds, LLM calls, prompt/completion tokens, the answer and whether it is right.
Ratios: coa / mr and coa_same / mr (the goal: MapReduce at least 3x faster). Prints one JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.eval.metrics import score_one
from chunkwise.llm import load_llm
from chunkwise.strategies import get_strategy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--length", type=int, default=32000)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="mr,coa,coa_same")
    args = ap.parse_args()

    t0 = time.perf_counter()
    llm = load_llm(args.model)
    load_s = time.perf_counter() - t0
    # three needles at depths 0, 0.5, 1: take the middle one
    record = generate(
        "passkey", length_tokens=args.length, n=3, seed=args.seed, count_tokens=llm.count_tokens
    )[1]
    query = passkey_query(record)
    doc_tokens = llm.count_tokens(record["context"])
    mr_chunk = int(
        get_strategy("mapreduce")
        .prompt_set("chat" if llm.chat else "base", "retrieval")
        .templates.get("chunk_tokens", 0)
    )
    runs = {
        "mr": ("mapreduce", {}),
        "coa": ("chain_of_agents", {}),
        "coa_same": ("chain_of_agents", {"chunk_tokens": mr_chunk} if mr_chunk else {}),
    }
    result: dict = {
        "model": args.model,
        "cpu_threads": os.cpu_count(),
        "model_load_s": round(load_s, 1),
        "document_tokens": doc_tokens,
        "window": args.window,
        "question": query.question,
        "runs": {},
    }
    walls: dict[str, float] = {}
    for key in args.runs.split(","):
        name, opts = runs[key]
        strategy = get_strategy(name, window=args.window, **opts)
        t0 = time.perf_counter()
        ans = strategy.answer(record["context"], query, llm)
        wall = time.perf_counter() - t0
        walls[key] = wall
        x = ans.stats.extra
        result["runs"][key] = {
            "strategy": name,
            "options": opts,
            "wall_s": round(wall, 1),
            "llm_calls": ans.stats.llm_calls,
            "prompt_tokens": ans.stats.prompt_tokens,
            "completion_tokens": ans.stats.completion_tokens,
            "chunks": x.get("chunks"),
            "chunk_budget": x.get("chunk_budget"),
            "answer": ans.text,
            "correct": score_one("passkey", ans.text, record["answer"]) > 0,
        }
        print(json.dumps({"run": key, **result["runs"][key]}), flush=True)
    r = result["runs"]
    if "mr" in r:
        for key in ("coa", "coa_same"):
            if key in r and walls["mr"] > 0:
                result[f"{key}_over_mr_wall"] = round(walls[key] / walls["mr"], 2)
        result["goal"] = "mapreduce >= 3x faster than chain_of_agents (coa_over_mr_wall >= 3)"
    llm.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
