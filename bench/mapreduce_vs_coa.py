"""Wall time of MapReduce vs Chain-of-Agents on the same document and question, same window.

    flock /tmp/chunkwise-cpu.lock .venv/bin/python bench/mapreduce_vs_coa.py      # 32K, 8K window

One passkey document of ``--length`` tokens (needle in the middle), one question, window
``--window``. Runs (``--runs``, comma-separated):

  mr         mapreduce, its defaults (base models: 1000-token chunks; all map calls in one wave)
  coa        chain_of_agents, its defaults (chunks fill the window after the memory reservations:
             the paper's setting), document order
  coa_same   chain_of_agents with MapReduce's chunk size, so the two differ only in reading the
             chunks in parallel vs one after another

Each run is a ``chunkwise eval`` run of the ``infinitebench`` passkey task on that document
(:mod:`chunkwise.experiments.cell`), in ``--out/<model>/passkey-<length>-seed<seed>/<run>-w<window>``;
a rerun reads finished runs. Per run: wall seconds (the strategy's), LLM calls, prompt and
completion tokens, chunks, the answer and whether it is right; and the ratios coa / mr and
coa_same / mr of wall time. Prints one JSON line per run, then one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from chunkwise.experiments.cell import (
    model_folder,
    predictions,
    run_cell,
    write_examples,
)
from chunkwise.io import read_jsonl
from chunkwise.llm import load_llm
from chunkwise.strategies import get_strategy

TASK = "passkey"


def document(llm: Any, length: int, seed: int) -> dict[str, Any]:
    """A passkey record of ``length`` tokens with its needle in the middle (the middle one of
    three needles at depths 0, 0.5, 1)."""
    from chunkwise.data.synthetic import generate

    return generate(TASK, length_tokens=length, n=3, seed=seed, count_tokens=llm.count_tokens)[1]


def runs(llm: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """Run name -> (strategy, options); ``coa_same`` reads MapReduce's chunk size."""
    mr_chunk = int(
        get_strategy("mapreduce")
        .prompt_set("chat" if llm.chat else "base", "retrieval")
        .templates.get("chunk_tokens", 0)
    )
    return {
        "mr": ("mapreduce", {}),
        "coa": ("chain_of_agents", {}),
        "coa_same": ("chain_of_agents", {"chunk_tokens": mr_chunk} if mr_chunk else {}),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--length", type=int, default=32000)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="mr,coa,coa_same")
    ap.add_argument("--out", type=Path, default=Path("runs/bench/mapreduce_vs_coa"))
    args = ap.parse_args(argv)
    wanted = [r for r in args.runs.split(",") if r]
    if not wanted or set(wanted) - {"mr", "coa", "coa_same"}:
        ap.error(f"--runs takes a comma-separated subset of mr,coa,coa_same, got {args.runs!r}")

    group = model_folder(args.out, args.model) / f"{TASK}-{args.length}-seed{args.seed}"
    data = group / "data"
    t0 = time.perf_counter()
    llm = load_llm(args.model)
    load_s = time.perf_counter() - t0
    if not (data / f"{TASK}.jsonl").is_file():
        write_examples(data, TASK, [document(llm, args.length, args.seed)])
    ((_, record),) = read_jsonl(data / f"{TASK}.jsonl")
    result: dict = {
        "model": args.model,
        "cpu_threads": os.cpu_count(),
        "model_load_s": round(load_s, 1),
        "document_tokens": llm.count_tokens(record["context"]),
        "window": args.window,
        "question": record["input"],
        "runs": {},
    }
    walls: dict[str, float] = {}
    for key, (name, opts) in runs(llm).items():
        if key not in wanted:
            continue
        out = group / f"{key}-w{args.window}"
        cell = run_cell(
            model=args.model, llm=llm, benchmark="infinitebench", task=TASK, data=data,
            out=out, strategy=name, strategy_args=opts, window=args.window, seed=args.seed,
        )  # fmt: skip
        (pred,) = predictions(out, TASK)
        walls[key] = cell["wall_s"]
        result["runs"][key] = {
            "strategy": name,
            "options": opts,
            "wall_s": round(cell["wall_s"], 1),
            "llm_calls": cell["llm_calls"],
            "prompt_tokens": cell["prompt_tokens"],
            "completion_tokens": cell["completion_tokens"],
            "chunks": pred["stats"].get("chunks"),
            "chunk_budget": pred["stats"].get("chunk_budget"),
            "answer": pred["prediction"],
            "correct": cell["correct"] == 1,
            "run_dir": cell["run_dir"],
        }
        print(json.dumps({"run": key, **result["runs"][key]}), flush=True)
    llm.close()
    for key in ("coa", "coa_same"):
        if walls.get("mr") and key in walls:
            result[f"{key}_over_mr_wall"] = round(walls[key] / walls["mr"], 2)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
