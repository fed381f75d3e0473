"""`chunkwise generate`: one completion from any model spec."""

from __future__ import annotations

import argparse
import json

HELP = "print the completion of a prompt by any model spec"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="hf:default", help="model spec (default: hf:default)")
    p.add_argument("--prompt", required=True, help="prompt text ('-' reads standard input)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--seed", type=int)
    p.add_argument("--json", action="store_true", help="print the completion record as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    from chunkwise.errors import BadInput
    from chunkwise.llm import GenerationParams, Request, load_llm

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt:
        raise BadInput("--prompt is empty")
    try:
        params = GenerationParams(
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            stop=tuple(args.stop),
            seed=args.seed,
        )
    except ValueError as e:
        raise BadInput(str(e)) from None
    with load_llm(args.model) as llm:
        c = llm.generate([Request(prompt, params)])[0]
    if args.json:
        print(json.dumps({k: v for k, v in vars(c).items() if v is not None}))
    else:
        print(c.text)
    return 0
