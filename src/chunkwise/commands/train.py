"""`chunkwise train RECIPE [--key=value ...]`: fine-tune in this process (CPU or one GPU).

Multi-GPU runs go through ``accelerate launch ... train/sft.py RECIPE``; both run
:func:`chunkwise.train.loop.run`.
"""

from __future__ import annotations

import argparse
import json

HELP = "fine-tune a model per a recipe YAML (resumes from the output folder's last checkpoint)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "recipe", help="recipe YAML, e.g. recipes/tiny/pyramid_align-mapreduce.yaml"
    )
    parser.add_argument(
        "overrides",
        nargs=argparse.REMAINDER,
        metavar="--key=value",
        help="recipe overrides, e.g. --train.max_steps=10 --output_dir=runs/train/x",
    )


def run(args: argparse.Namespace) -> int:
    from chunkwise.train.loop import run as train
    from chunkwise.train.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides)
    summary = train(recipe)
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
