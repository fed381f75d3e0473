"""`chunkwise score`: score an InfiniteBench-style predictions file."""

from __future__ import annotations

import argparse
import json

HELP = "score a predictions JSONL file with InfiniteBench's official or LLM×MapReduce's rules"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from chunkwise.benchmarks.infinitebench.metrics import EXTRACTORS, SCORERS, TASKS

    parser.add_argument("--task", required=True, help=f"one of: {', '.join(TASKS)}")
    parser.add_argument(
        "--predictions",
        required=True,
        metavar="FILE",
        help='JSONL lines {"id", "prediction"|"pred", "ground_truth"|"label"}',
    )
    parser.add_argument(
        "--scorer",
        default="official",
        help=f"scoring rules: {' | '.join(SCORERS)} (default: official)",
    )
    parser.add_argument(
        "--extract",
        default="auto",
        help=f"answer extraction before scoring: auto | {' | '.join(EXTRACTORS)} (default: "
        "auto: per line, by the strategy a chunkwise prediction line names, as `chunkwise "
        "eval` scores it: parsed for mapreduce, none otherwise and for lines that name no "
        "strategy. parsed is the strategy's parsed answer ('answer: ' in front for multiple "
        "choice and code_debug); mapreduce is LLM×MapReduce's own process_answer, for the "
        "reference's released reduce outputs (on ours it keeps a retrieval task's Rationale); "
        "answer_field our stricter reading; those two read a chunkwise line's raw_output)",
    )
    parser.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="count malformed lines as skipped instead of stopping at the first one",
    )
    parser.add_argument(
        "--model-name",
        default=None,
        help="model the predictions came from; 'gpt4' drops the first number in math_calc, "
        "as the official scorer does for GPT-4",
    )


def run(args: argparse.Namespace) -> int:
    from chunkwise.benchmarks.infinitebench.metrics import score_predictions_file

    result = score_predictions_file(
        args.task,
        args.predictions,
        args.scorer,
        args.extract,
        skip_bad_lines=args.skip_bad_lines,
        model_name=args.model_name,
    )
    line = {
        "task": result["task"],
        "scorer": result["scorer"],
        "score": round(result["score"], 4),
        "n": result["n"],
    }
    if result["skipped"]:
        line["skipped"] = result["skipped"]
    print(json.dumps(line, ensure_ascii=False))
    return 0
