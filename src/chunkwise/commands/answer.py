"""`chunkwise answer`: answer a question about a document with any strategy."""

from __future__ import annotations

import argparse
import json

HELP = "answer a question about a (long) document with a strategy"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="hf:default", help="model spec (default: hf:default)")
    p.add_argument("--strategy", default="mapreduce", help="standard, mapreduce, ... (registry)")
    p.add_argument("--doc", required=True, help="UTF-8 document file")
    p.add_argument("--question", required=True)
    p.add_argument(
        "--task",
        default="qa",
        help="task family: qa, multiple_choice, summary, retrieval, code, math, dialogue",
    )
    p.add_argument("--options", help='multiple-choice options, "A|B|C|D"')
    p.add_argument(
        "--answer-prefix",
        default="",
        help='base models: the words the answer continues, e.g. "The pass key is" (default '
        '"Answer:", after which a base model may just repeat the question)',
    )
    p.add_argument("--chunk-tokens", type=int, help="cap on chunk size (mapreduce)")
    p.add_argument("--context-window", type=int, help="cap the window below the model's own")
    p.add_argument("--strategy-args", help="extra strategy options, k=v,k2=v2")
    p.add_argument("--trace", help="write the full trace (every call) to this JSON file")
    p.add_argument("--json", action="store_true", help="print answer and stats as JSON")


def run(args: argparse.Namespace) -> int:
    from chunkwise.documents import read_document
    from chunkwise.errors import BadInput
    from chunkwise.io import atomic_write_json, check_output_file
    from chunkwise.llm import load_llm
    from chunkwise.strategies import Query, parse_strategy_args, resolve_options

    if args.trace:  # checked now: a bad path must not cost the answer
        check_output_file(args.trace, "--trace")
    options = tuple(o.strip() for o in args.options.split("|")) if args.options else ()
    query = Query(args.question, args.task, options, answer_prefix=args.answer_prefix.strip())
    document = read_document(args.doc)
    kwargs: dict[str, object] = dict(parse_strategy_args(args.strategy_args))
    if args.context_window is not None:
        if args.context_window < 1:
            raise BadInput(f"--context-window must be positive, got {args.context_window}")
        kwargs["window"] = args.context_window
    if args.chunk_tokens is not None:
        if args.chunk_tokens < 1:
            raise BadInput(f"--chunk-tokens must be positive, got {args.chunk_tokens}")
        kwargs["chunk_tokens"] = args.chunk_tokens
    # the user's options over those the model carries (its strategy.json)
    resolved = resolve_options(args.strategy, args.model, kwargs)
    strategy = resolved.build()
    with load_llm(args.model) as llm:
        ans = strategy.answer(document, query, llm)
    if args.trace:
        atomic_write_json(
            args.trace,
            {
                "question": args.question,
                "strategy": args.strategy,
                "model": args.model,
                **resolved.record(),
                **ans.to_dict(),
            },
        )
    if args.json:
        # the strategy's whole stats: calls and tokens, and whatever it counts of its own
        # (summary nodes, calls by kind, chunks, collapse rounds, orderings, ...)
        out = {"answer": ans.text, "stats": ans.stats.to_dict(), **resolved.record()}
        print(json.dumps(out, default=str))
    else:
        print(ans.text)
    return 0
