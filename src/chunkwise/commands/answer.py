"""`chunkwise answer`: answer a question about a document with any strategy."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

HELP = "answer a question about a (long) document with a strategy"


@dataclass
class AnswerArgs:
    """One question about one document (the flags of ``chunkwise answer``)."""

    #: UTF-8 document file
    doc: str
    #: the question
    question: str
    #: model spec
    model: str = "hf:default"
    #: any registered strategy: standard, mapreduce, chain_of_agents, ...
    strategy: str = "mapreduce"
    #: task family: qa, multiple_choice, summary, retrieval, code, math, dialogue
    task: str = "qa"
    #: multiple-choice options, "A|B|C|D"
    options: str | None = None
    #: base models: the words the answer continues, e.g. "The pass key is" (default "Answer:",
    #: after which a base model may just repeat the question)
    answer_prefix: str = ""
    #: cap on chunk size in tokens (the strategy option chunk_tokens)
    chunk_tokens: int | None = None
    #: cap the window below the model's own (the strategy option window)
    context_window: int | None = None
    #: strategy options, k=v,k2=v2; options the model carries in its strategy.json fill the
    #: rest
    strategy_args: dict[str, Any] = field(default_factory=dict)
    #: write the full trace (every call) and the resolved options to this JSON file
    trace: str | None = None
    #: print answer, stats and the resolved options as JSON
    json: bool = False

    def __post_init__(self) -> None:
        from chunkwise.config.convert import InvalidOption

        for key in ("chunk_tokens", "context_window"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise InvalidOption(key, value, "a whole number >= 1")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from chunkwise.config.flags import add_flags

    add_flags(p, AnswerArgs)


def run(ns: argparse.Namespace) -> int:
    from chunkwise.config import load_config
    from chunkwise.config.flags import flag_overrides
    from chunkwise.documents import read_document
    from chunkwise.io import atomic_write_json, check_output_file
    from chunkwise.llm import load_llm
    from chunkwise.strategies import Query, resolve_options

    args = load_config(AnswerArgs, None, flag_overrides(ns, AnswerArgs))
    if args.trace:  # checked now: a bad path must not cost the answer
        check_output_file(args.trace, "--trace")
    options = tuple(o.strip() for o in args.options.split("|")) if args.options else ()
    query = Query(args.question, args.task, options, answer_prefix=args.answer_prefix.strip())
    document = read_document(args.doc)
    kwargs: dict[str, Any] = dict(args.strategy_args)
    if args.context_window is not None:
        kwargs["window"] = args.context_window
    if args.chunk_tokens is not None:
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
