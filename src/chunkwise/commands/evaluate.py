"""`chunkwise eval`: score a model under one decoding strategy on benchmark tasks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "evaluate a model (or training checkpoint) with a strategy on InfiniteBench tasks"

# flag -> EvalConfig field; every flag defaults to None so that only given flags override
_FLAGS = {
    "model": "model",
    "strategy": "strategy",
    "strategy_args": "strategy_args",
    "benchmark": "benchmark",
    "tasks": "tasks",
    "data": "data",
    "revision": "revision",
    "limit": "limit",
    "seed": "seed",
    "context_window": "context_window",
    "prompts": "prompts",
    "prompt_source": "prompt_source",
    "prompt_family": "prompt_family",
    "truncation": "truncation",
    "scorer": "scorer",
    "extract": "extract",
    "output": "output",
    "save_trace": "save_trace",
    "log_samples": "log_samples",
    "parallel": "parallel",
    "wandb": "wandb",
    "wandb_project": "wandb_project",
    "wandb_entity": "wandb_entity",
    "wandb_tags": "wandb_tags",
    "wandb_step": "wandb_step",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="YAML",
        help="start from a recipe (recipes/eval/*.yaml); flags given here override it",
    )
    p.add_argument("--model", help="model spec or training output folder (default: hf:default)")
    p.add_argument("--strategy", help="decoding mode: any registered strategy (default: standard)")
    p.add_argument("--strategy-args", metavar="K=V,...", help="strategy options, k=v,k2=v2")
    p.add_argument("--benchmark", help="benchmark (default: infinitebench)")
    p.add_argument(
        "--tasks",
        help="comma-separated tasks, e.g. passkey,kv_retrieval, or all (every task "
        "the data can provide)",
    )
    p.add_argument(
        "--data", help="hub | FOLDER of official <task>.jsonl | synthetic:LENGTH (default: hub)"
    )
    p.add_argument("--revision", help="Hub dataset revision (default: the pinned one)")
    p.add_argument(
        "--limit",
        help="first N examples per task (synthetic: generate N), or a fraction such as 0.1",
    )
    p.add_argument("--seed", type=int, help="seed for synthetic data (default: 0)")
    p.add_argument("--context-window", type=int, help="cap the window below the model's own")
    p.add_argument(
        "--prompts",
        choices=["auto", "chat", "base"],
        help="question wording (default: auto, from the model)",
    )
    p.add_argument(
        "--prompt-source",
        metavar="PROMPT_PY",
        help="your copy of InfiniteBench's src/prompt.py: use its official templates (read as "
        "data, never run)",
    )
    p.add_argument(
        "--prompt-family", help="template family in it: gpt4 | claude2 | kimi | yarn_mistral"
    )
    p.add_argument(
        "--truncation",
        choices=["document", "official"],
        help="document: cut the document's middle, room kept for the output (default); "
        "official: cut the whole prompt's middle to the window, as InfiniteBench's scripts do",
    )
    p.add_argument("--scorer", help="official | lenient (default: official)")
    p.add_argument(
        "--extract",
        help="answer extraction before scoring: auto | none | parsed | mapreduce | answer_field "
        "(default: auto, by the reply format of the strategy's prompts: parsed under mapreduce "
        "(the answer the strategy parsed from our prompts' Answer: field, 'answer: ' in front "
        "for multiple choice and code_debug), none otherwise. mapreduce is LLM×MapReduce's own "
        "process_answer, for replies in the reference's format: on ours it keeps a retrieval "
        "task's whole 'Rationale: ... Answer: ...'. Rerunning a finished run with another "
        "--extract or --scorer rescores it without loading the model)",
    )
    p.add_argument("--output", help="run folder, e.g. runs/NAME (rerun to resume)")
    p.add_argument(
        "--no-trace",
        dest="save_trace",
        action="store_const",
        const=False,
        help="leave strategy traces out of the prediction lines",
    )
    p.add_argument(
        "--log-samples",
        dest="log_samples",
        action="store_const",
        const=True,
        help="store every example's exact prompt(s) in its prediction line and write "
        "samples/<task>.jsonl (prompt, raw output, extracted answer, score)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="answer N examples at once, their model calls merged into one batch (default: 1; "
        "worth it on vLLM, where decoding many sequences costs little more than one)",
    )
    p.add_argument(
        "--wandb",
        action="store_const",
        const=True,
        help="log to Weights & Biases (WANDB_MODE=offline unless you set it)",
    )
    p.add_argument("--wandb-project", help="wandb project (default: chunkwise-eval)")
    p.add_argument("--wandb-entity", help="wandb entity (team or user)")
    p.add_argument("--wandb-tags", metavar="T1,T2", help="extra wandb tags, comma-separated")
    p.add_argument(
        "--wandb-step", type=int, help="log the metrics at this step (e.g. the checkpoint's)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace):
    import dataclasses

    from chunkwise.config import load_config
    from chunkwise.errors import BadInput
    from chunkwise.eval.config import EvalConfig, parse_limit
    from chunkwise.strategies import parse_strategy_args

    cfg = load_config(EvalConfig, args.config) if args.config else EvalConfig()
    given = {}
    for flag, key in _FLAGS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        if key == "strategy_args":
            value = parse_strategy_args(value)
        elif key in ("tasks", "wandb_tags"):
            value = [t.strip() for t in value.split(",") if t.strip()]
        elif key == "limit":
            value = parse_limit(value)
        given[key] = value
    cfg = dataclasses.replace(cfg, **given)
    if not args.config and args.output is None:
        raise BadInput("--output is required (the run folder, e.g. runs/NAME)")
    return cfg


def run(args: argparse.Namespace) -> int:
    from chunkwise.eval.runner import run_eval

    cfg = config_from_args(args)
    results = run_eval(cfg, progress=not args.no_progress)
    assert results is not None
    summary = {
        "output": cfg.output,
        "results": str(Path(cfg.output) / results["files"]["results"]),
        "scores": {t: r["score"] for t, r in results["results"].items()},
        "stderr": {t: r["score_stderr"] for t, r in results["results"].items()},
        "average": results["average"]["score"],
        "n": {t: r["n"] for t, r in results["results"].items()},
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0
