"""`chunkwise synth`: Pyramid-Align records (document, question, MapReduce trace, answer)."""

from __future__ import annotations

import argparse
import json
import os

HELP = "synthesize Pyramid-Align long-context SFT records with a short-context model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--docs",
        metavar="SOURCE",
        help="LongAlign-format JSONL (the long user turn is the document), a folder of "
        ".txt files, a save_to_disk folder, or a hub dataset id with a text column "
        "(required with --teacher llm)",
    )
    p.add_argument(
        "--teacher",
        choices=("llm", "oracle"),
        default="llm",
        help="llm: questions and MapReduce answers from --model over --docs (default); "
        "oracle: generated documents with known evidence and exact map/collapse/reduce "
        "targets (--families, --lengths, --n); --model then only counts tokens",
    )
    p.add_argument(
        "--families",
        default="all",
        help="oracle: document families, comma-separated, 'all' (default) or 'train' (all but "
        "the held-out one; see chunkwise.data.families)",
    )
    p.add_argument(
        "--lengths",
        default="4000",
        help="oracle: document lengths in tokens, or 'train' for the training lengths "
        "(default: 4000)",
    )
    p.add_argument("--n", type=int, default=4, help="oracle: documents per family and length")
    p.add_argument(
        "--unanswerable",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="oracle: also that fraction of the documents with their evidence cut out, so the "
        "reduce learns to answer [NO INFORMATION] when every part is empty (retrieval and "
        "conflicting families; default: 0)",
    )
    p.add_argument(
        "--override-settings",
        action="store_true",
        help="continue an --out folder started with other settings (its config.json is "
        "rewritten; records made under both stay in one folder)",
    )
    p.add_argument(
        "--model", default="hf:default", metavar="SPEC", help="model spec (default: hf:default)"
    )
    p.add_argument(
        "--out", required=True, metavar="DIR", help="output folder (a rerun continues it)"
    )
    p.add_argument("--limit", type=int, help="use only the first N documents of the source")
    p.add_argument("--questions-per-doc", type=int, default=1, metavar="K", help="default: 1")
    p.add_argument(
        "--window",
        type=int,
        default=4096,
        metavar="L",
        help="context window of every call, in tokens (default: 4096)",
    )
    p.add_argument(
        "--chunk-tokens",
        type=int,
        default=0,
        help="leaf size in tokens (default: what lets 3 leaves share one summary call)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--num-shards",
        type=int,
        default=None,
        help="split the documents over N processes (default: $WORLD_SIZE under accelerate/torchrun, else 1)",
    )
    p.add_argument(
        "--shard-index",
        type=int,
        default=None,
        help="which shard this process runs (default: $RANK, else 0)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="documents in flight; their LLM calls are batched together (default: 4)",
    )
    p.add_argument(
        "--node-mix",
        default="leaf=0.4,mid=0.3,root=0.3",
        help="question nodes by kind (default: leaf=0.4,mid=0.3,root=0.3)",
    )
    p.add_argument(
        "--importance",
        choices=("embedding", "llm"),
        default="embedding",
        help="leaf sentence importance: embedding centrality (no LLM calls) or LLM-rated",
    )
    p.add_argument(
        "--embedder", default="minilm", help="minilm (offline default), st:PATH, hashing"
    )
    p.add_argument("--prompts", choices=("auto", "chat", "base"), default="auto")
    p.add_argument("--text-column", help="text column of a dataset source")
    p.add_argument("--split", default="train", help="dataset split (default: train)")
    p.add_argument("--strategy-args", help="MapReduce options for the answers, k=v,k2=v2")
    p.add_argument("--push-to-hub", metavar="NAME", help="also push the dataset to the hub")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def shard_from_env(
    num_shards: int | None, shard_index: int | None, env: dict[str, str] | None = None
) -> tuple[int, int]:
    """Explicit flags win; otherwise a launcher's ``WORLD_SIZE``/``RANK`` (accelerate launch,
    torchrun) give each process its shard; otherwise one shard."""
    env = dict(os.environ) if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1") or 1)
        rank = int(env.get("RANK", "0") or 0)
    except ValueError:
        world, rank = 1, 0
    n = num_shards if num_shards is not None else world
    i = shard_index if shard_index is not None else (rank if num_shards is None else 0)
    return n, i


def run(args: argparse.Namespace) -> int:
    from chunkwise.strategies import parse_strategy_args
    from chunkwise.synth import SynthConfig, run_synth

    if args.teacher == "oracle":
        from chunkwise.synth.oracle import run_oracle_cli

        return run_oracle_cli(args, dict(parse_strategy_args(args.strategy_args)))
    if not args.docs:
        from chunkwise.errors import BadInput

        raise BadInput("--docs is required with --teacher llm (the default)")

    num_shards, shard_index = shard_from_env(args.num_shards, args.shard_index)

    cfg = SynthConfig(
        docs=args.docs,
        out=args.out,
        model=args.model,
        limit=args.limit,
        questions_per_doc=args.questions_per_doc,
        window=args.window,
        chunk_tokens=args.chunk_tokens,
        seed=args.seed,
        num_shards=num_shards,
        shard_index=shard_index,
        concurrency=args.concurrency,
        node_mix=args.node_mix,
        importance=args.importance,
        embedder=args.embedder,
        prompts=args.prompts,
        text_column=args.text_column,
        split=args.split,
        mapreduce_args=dict(parse_strategy_args(args.strategy_args)),
        push_to_hub=args.push_to_hub,
        progress=not args.no_progress,
        override_settings=args.override_settings,
    )
    stats = run_synth(cfg)
    keys = ("documents", "examples", "level_histogram", "question_node_mix", "questions", "seconds")
    print(
        json.dumps(
            {k: stats[k] for k in keys}
            | {
                "llm_calls": stats["llm"]["calls"],
                "summary_calls_per_leaf": stats["llm"]["summary_calls_per_leaf"],
                "out": args.out,
            }
        )
    )
    return 0
