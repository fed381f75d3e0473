"""`chunkwise generate-data`: write synthetic InfiniteBench-style examples (JSONL)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chunkwise.errors import BadInput

HELP = "generate synthetic long-context examples (passkey, kv_retrieval, ...) at a token length"


def generators() -> dict:
    """Every generator by task name: InfiniteBench-style ones, then RULER's as ``ruler_<task>``."""
    from chunkwise.data import ruler, synthetic

    return {**synthetic.GENERATORS, **{f"ruler_{k}": g for k, g in ruler.GENERATORS.items()}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    GENERATORS = generators()
    parser.add_argument("--task", required=True, help=f"one of: {', '.join(GENERATORS)}")
    parser.add_argument(
        "--length", type=int, required=True, help="context length in tokens of --model"
    )
    parser.add_argument("--n", type=int, default=20, help="number of examples (default: 20)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--out", required=True, metavar="FILE.jsonl", help="output file")
    parser.add_argument(
        "--model",
        default="hf:default",
        metavar="SPEC",
        help="model whose tokenizer measures the length (default: hf:default)",
    )


def run(args: argparse.Namespace) -> int:
    from chunkwise.io import atomic_write_text, check_output_file
    from chunkwise.llm import load_llm

    GENERATORS = generators()
    if args.task not in GENERATORS:
        raise BadInput(f"no generator for task {args.task!r}; available: {', '.join(GENERATORS)}")
    if args.length <= 0:
        raise BadInput(f"--length must be a positive number of tokens, got {args.length}")
    if args.n <= 0:
        raise BadInput(f"--n must be at least 1, got {args.n}")
    out = check_output_file(Path(args.out), "--out")  # before any work: none is lost to it
    with load_llm(args.model) as llm:
        records = GENERATORS[args.task](
            length_tokens=args.length,
            n=args.n,
            seed=args.seed,
            count_tokens=llm.count_tokens,
        )
    # serialised first, then written to a temporary file beside --out and renamed over it
    text = "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records)
    atomic_write_text(out, text)
    summary = {
        "task": args.task,
        "n": len(records),
        "length": args.length,
        "seed": args.seed,
        "model": args.model,
        "out": str(out),
    }
    print(json.dumps(summary))
    return 0
