"""`chunkwise train RECIPE [--key=value ...]`: fine-tune in this process (CPU or one GPU);
`chunkwise train --plan RECIPE --config_file CFG --num_processes N`: a per-GPU memory plan;
`chunkwise train RECIPE --data-mix`: what the recipe's data teaches per family, nothing trained.

Multi-GPU runs go through ``accelerate launch ... train/sft.py RECIPE``; both run
:func:`chunkwise.train.loop.run`.
"""

from __future__ import annotations

import argparse
import json

from chunkwise.errors import BadInput

HELP = "fine-tune a model per a recipe YAML (resumes from the output folder's last checkpoint)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from chunkwise.config.flags import options_help
    from chunkwise.train.recipe import Recipe

    # the recipe's keys, each settable as --key=value, listed from its declaration
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "recipe options (--key=value overrides the recipe):\n  " + "\n  ".join(
        options_help(Recipe)
    )
    parser.add_argument(
        "recipe", nargs="?", help="recipe YAML, e.g. recipes/tiny/pyramid_align-mapreduce.yaml"
    )
    parser.add_argument(
        "--plan",
        metavar="RECIPE",
        help="print per-GPU memory of RECIPE (meta-device model, nothing trained) instead",
    )
    parser.add_argument(
        "--config_file",
        action="append",
        help="with --plan: accelerate config(s), e.g. configs/accelerate/zero3.yaml (repeatable)",
    )
    parser.add_argument(
        "--num_processes", type=int, default=8, help="with --plan: GPUs in all (default 8)"
    )
    parser.add_argument(
        "--data-mix",
        action="store_true",
        help="print the examples RECIPE's data gives per task family (map findings, NO "
        "INFORMATION kept and left out, collapse, reduce, tokens): tokenized, nothing trained",
    )
    parser.add_argument(
        "--json", action="store_true", help="with --plan or --data-mix: JSON rows, no table"
    )
    parser.add_argument(
        "--trust_checkpoint",
        action="store_true",
        help="resume even from a checkpoint whose files do not match the sha256 its save "
        "recorded (or that records none: an older chunkwise); resuming unpickles them, so only "
        "for checkpoints you trust",
    )
    parser.add_argument(
        "overrides",
        nargs=argparse.REMAINDER,
        metavar="--key=value",
        help="recipe overrides, e.g. --train.max_steps=10 --output_dir=runs/train/x",
    )


def _plan(args: argparse.Namespace) -> int:
    from chunkwise.train.plan import format_table, plan_rows, to_json
    from chunkwise.train.recipe import load_recipe

    if not args.config_file:
        raise BadInput("--plan needs --config_file (an accelerate config)")
    if args.num_processes < 1:
        raise BadInput(f"--num_processes must be at least 1, got {args.num_processes}")
    recipe = load_recipe(args.plan, args.overrides or [], check_paths=False)
    rows = []
    for cfg in args.config_file:
        rows += plan_rows(recipe, args.plan, cfg, args.num_processes)
    print(to_json(rows) if args.json else format_table(rows))
    return 0


def _data_mix(args: argparse.Namespace) -> int:
    from chunkwise.train.data_mix import mix_rows, mix_table
    from chunkwise.train.formats import build_examples
    from chunkwise.train.modeling import build_tokenizer, prompt_kind
    from chunkwise.train.recipe import load_recipe, training_files

    recipe = load_recipe(args.recipe, args.overrides or [])
    files = training_files(recipe.data)
    tokenizer = build_tokenizer(recipe, files, is_main=False)  # nothing written
    _, stats = build_examples(recipe.data, tokenizer, prompt_kind(recipe, tokenizer), files)
    print(json.dumps(mix_rows(stats.mix), indent=1) if args.json else mix_table(stats.mix))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.plan:
        return _plan(args)
    if not args.recipe:
        raise BadInput("name a recipe YAML (or --plan RECIPE)")
    # the flags that may also follow the recipe (its overrides take the rest of the line)
    rest = list(args.overrides or [])
    args.data_mix = args.data_mix or "--data-mix" in rest
    args.json = args.json or (args.data_mix and "--json" in rest)
    flags = {"--data-mix", "--json"} if args.data_mix else set()
    args.overrides = [o for o in rest if o not in flags]
    if args.data_mix:
        return _data_mix(args)
    from chunkwise.train.loop import run as train
    from chunkwise.train.recipe import load_recipe
    from chunkwise.train.saving import TRUST_FLAG

    overrides = list(args.overrides or [])
    trust = args.trust_checkpoint or TRUST_FLAG in overrides  # also after the recipe
    overrides = [o for o in overrides if o != TRUST_FLAG]
    recipe = load_recipe(args.recipe, overrides)
    summary = train(recipe, trust_checkpoint=trust)
    final = summary.get("final") or {}
    print(
        json.dumps(
            {
                "output_dir": recipe.output_dir,
                "steps": summary["steps"],
                "final_loss": final.get("train/loss"),
                "seconds": summary["seconds"],
            }
        )
    )
    return 0
