"""`chunkwise synth`: Pyramid-Align records (document, question, MapReduce trace, answer)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from typing import Literal

#: exit status when some documents failed after their retries and were skipped (the dataset
#: holds the rest); 2 stays "nothing usable" (bad input, or every document failed)
FAILED_DOCUMENTS_EXIT = 3

HELP = "synthesize Pyramid-Align long-context SFT records with a short-context model"


@dataclass
class TeacherOptions:
    """Which teacher writes the records, and what the oracle teacher generates."""

    #: llm: questions and MapReduce answers from --model over --docs | oracle: generated
    #: documents with known evidence and exact map/collapse/reduce targets (--families,
    #: --lengths, --n); --model then only counts tokens
    teacher: Literal["llm", "oracle"] = "llm"
    #: oracle: document families, comma-separated, all, or train (all but the held-out one;
    #: see chunkwise.data.families)
    families: str = "all"
    #: oracle: document lengths in tokens, comma-separated, or train for the training lengths
    lengths: str = "4000"
    #: oracle: documents per family and length
    n: int = 4
    #: oracle: also that fraction of the documents with their evidence cut out, so the reduce
    #: learns to answer [NO INFORMATION] when every part is empty (retrieval and conflicting
    #: families)
    unanswerable: float = 0.0
    #: oracle: the families that get --unanswerable variants, comma-separated (default: every
    #: one that makes them unasked; extractive_qa only when named)
    unanswerable_families: str = ""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from chunkwise.config.flags import add_flags
    from chunkwise.synth.config import SynthConfig

    # one flag per field of the two declarations, help from their #: comments
    add_flags(p, TeacherOptions)
    add_flags(p, SynthConfig, aliases={"mapreduce_args": ["--strategy-args"]})


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
    from chunkwise.config import load_config
    from chunkwise.config.flags import flag_overrides
    from chunkwise.synth import SynthConfig, run_synth

    teacher = load_config(TeacherOptions, None, flag_overrides(args, TeacherOptions))
    cfg = load_config(SynthConfig, None, flag_overrides(args, SynthConfig))
    if teacher.teacher == "oracle":
        from chunkwise.synth.oracle import run_oracle_cli

        oracle_args = argparse.Namespace(
            **dataclasses.asdict(teacher),
            out=cfg.out,
            model=cfg.model,
            seed=cfg.seed,
            window=cfg.window,
            no_progress=not cfg.progress,
            override_settings=cfg.override_settings,
        )
        return run_oracle_cli(oracle_args, dict(cfg.mapreduce_args))
    # a launcher's WORLD_SIZE / RANK give each process its shard unless the flags say
    num_shards, shard_index = shard_from_env(
        cfg.num_shards if args.num_shards is not None else None,
        cfg.shard_index if args.shard_index is not None else None,
    )
    cfg = dataclasses.replace(cfg, num_shards=num_shards, shard_index=shard_index)
    stats = run_synth(cfg)
    failed = stats["documents"].get("failed", 0)
    keys = ("documents", "examples", "level_histogram", "question_node_mix", "questions", "seconds")
    print(
        json.dumps(
            {k: stats[k] for k in keys}
            | {
                "llm_calls": stats["llm"]["calls"],
                "summary_calls_per_leaf": stats["llm"]["summary_calls_per_leaf"],
                "out": args.out,
                "failed": failed,
            }
        )
    )
    if failed:  # the dataset holds the others; exit 3 says it is not complete
        first = stats["failed_documents"][0] if stats.get("failed_documents") else {}
        sys.stderr.write(
            f"chunkwise synth: {failed} document(s) failed and were skipped (first: "
            f"{first.get('origin')}: {first.get('error')}); stats.json lists them under "
            "failed_documents; rerun the same command to retry them\n"
        )
        return FAILED_DOCUMENTS_EXIT
    return 0
