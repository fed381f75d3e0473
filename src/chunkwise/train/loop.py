"""The training entry: ``run(recipe)`` drives one :class:`~chunkwise.train.trainer.Trainer`
(setup, train, save) with ``output_dir`` locked for the run; ``main`` is the command line that
train/sft.py, ``python -m chunkwise.train`` and ``accelerate launch`` run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from chunkwise.errors import ChunkwiseError
from chunkwise.train.recipe import Recipe, load_recipe
from chunkwise.train.saving import FINAL_TMP, TRUST_FLAG, checkpoints, incomplete_final
from chunkwise.train.steps import Layout, forward_backward, lr_at, step_counts
from chunkwise.train.trainer import HOLD_ENV, KILL_ENV, Trainer


def run(recipe: Recipe, *, trust_checkpoint: bool = False) -> dict[str, Any]:
    """Train per ``recipe``; returns a summary (also written to ``train_info.json``).

    ``output_dir`` must be absent, empty or a folder chunkwise train made, and is locked for
    the run (a second run on it is refused). A resume loads the latest checkpoint only when its
    files are those its save recorded (``trust_checkpoint=True`` skips that check: resuming
    unpickles the checkpoint's files, see :func:`chunkwise.train.saving.resume_point`)."""
    trainer = Trainer(recipe, trust_checkpoint=trust_checkpoint)
    with contextlib.ExitStack() as held:
        trainer.setup(held)
        trainer.train()
        return trainer.save()


USAGE = """usage: train/sft.py RECIPE.yaml [--key=value ...] [--trust_checkpoint]

Fine-tune per a recipe (recipes/*/*.yaml); --key=value overrides any recipe key, e.g.
--train.lr=1e-5 --data.max_length=32768 --output_dir=runs/train/x. Launch on GPUs with
  accelerate launch --config_file configs/accelerate/zero3.yaml train/sft.py RECIPE.yaml
A rerun with the same output_dir resumes from its latest checkpoint, once its files match the
sha256 recorded at save; --trust_checkpoint skips that check (resuming unpickles the files:
only for checkpoints you trust, e.g. written by an older chunkwise)."""


#: test hook: ``RANK=DIR`` gives that global rank another output_dir than the recipe's (what a
#: node whose disk is not shared sees, on one machine)
RANK_DIR_ENV = "CHUNKWISE_TRAIN_OUTPUT_DIR_OF_RANK"


def _close_process_group() -> None:
    """Leave torch.distributed once the run is saved: every rank waits for the others, then the
    default process group is destroyed. The groups the engines still hold live on past this;
    :func:`exit_rank` keeps interpreter teardown from touching them."""
    dist = sys.modules.get("torch.distributed")  # no torch imported: nothing to close
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    dist.barrier()
    dist.destroy_process_group()


def exit_rank(code: int) -> NoReturn:
    """End the training entry's process with ``code`` (train/sft.py, ``python -m chunkwise.train``).

    One process: ``sys.exit``. A rank of a multi-process launch (``WORLD_SIZE`` > 1) flushes its
    logs and stdio and leaves with ``os._exit``, skipping interpreter teardown. The process groups
    DeepSpeed and accelerate keep referenced outlive ``destroy_process_group``: their gloo threads
    (``gloo_tcp_loop``, ``pt_gloo_runloop``) are still in /proc/self/task after
    :func:`_close_process_group` under DDP, ZeRO-2 and ZeRO-3 on two CPU ranks. Teardown then
    destroys them in no set order, and a rank could abort with -6 ("terminate called without
    an active exception") after a complete, saved run: once under FSDP2+LoRA, and under ZeRO-3
    twice in one fresh-clone CI run with the process group already destroyed."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        sys.exit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _rank_output_dir(output_dir: str) -> str:
    rank, sep, folder = os.environ.get(RANK_DIR_ENV, "").partition("=")
    if sep and rank.strip() == os.environ.get("RANK", "0"):
        return folder
    return output_dir


def main(argv: Sequence[str] | None = None) -> int:
    from chunkwise.logs import setup_logging

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    verbose = "-v" in args or "--verbose" in args
    trust = TRUST_FLAG in args
    args = [a for a in args if a not in ("-v", "--verbose", TRUST_FLAG)]
    setup_logging(verbose=verbose)
    path, overrides = args[0], args[1:]
    if path.startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        recipe = load_recipe(path, overrides)
        recipe.output_dir = _rank_output_dir(recipe.output_dir)
        summary = run(recipe, trust_checkpoint=trust)
        _close_process_group()
    except ChunkwiseError as e:
        sys.stderr.write(f"train: error: {e}\n")  # one write: ranks' lines never interleave
        sys.stderr.flush()
        return 2
    if int(os.environ.get("RANK", "0") or 0) != 0:
        return 0
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


__all__ = [
    "FINAL_TMP",
    "HOLD_ENV",
    "KILL_ENV",
    "RANK_DIR_ENV",
    "Layout",
    "checkpoints",
    "exit_rank",
    "forward_backward",
    "incomplete_final",
    "lr_at",
    "main",
    "run",
    "step_counts",
]
