"""`chunkwise demo`: the project's main job at laptop scale."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "compare standard decoding and MapReduce on long passkey documents (8K window)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="hf:default")
    p.add_argument("--lengths", default="8000,32000,64000", help="document lengths in tokens")
    p.add_argument("--n", type=int, default=1, help="documents per length")
    p.add_argument("--window", type=int, default=8192, help="context window both strategies get")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/demo", help="folder for the JSON and markdown table")


def run(args: argparse.Namespace) -> int:
    from chunkwise.demo import run_passkey_demo, table
    from chunkwise.errors import BadInput

    try:
        lengths = tuple(int(x) for x in args.lengths.split(",") if x.strip())
    except ValueError:
        raise BadInput(
            f"--lengths must be comma-separated integers, got {args.lengths!r}"
        ) from None
    if not lengths or min(lengths) < 100 or args.n < 1 or args.window < 256:
        raise BadInput("need lengths >= 100 tokens, --n >= 1 and --window >= 256")
    cells = run_passkey_demo(
        args.model, lengths, args.n, args.window, seed=args.seed, out=Path(args.out)
    )
    print(table(cells, args.window))
    print(f"\nsaved: {args.out}/passkey_demo.json, {args.out}/passkey_demo.md")
    return 0
