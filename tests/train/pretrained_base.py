"""A saved, trained tiny model for the ``--model.init=pretrained`` launches, and that model's own
loss on the first optimizer step's data, computed in this process with plain transformers.

``train_saved_model`` trains the tiny recipe in one process (30 steps, ~15 s) and keeps its final
folder (weights, tokenizer, chat template), which a launch then loads as a pretrained model.
``own_step1_loss`` rebuilds what step 1 of a ``world``-rank run trains on (the recipe's examples,
the epoch plan, micro-batches ``0..world-1``) and runs every sequence *alone and unpacked*
through ``AutoModelForCausalLM.from_pretrained`` (no packing, no masks, no logits selection):
the mean over sequences of each sequence's mean token loss, the quantity the loop logs as
``train/loss`` under ``loss_weighting: sequence``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "pyramid_align-mapreduce.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "pyramid_align.jsonl"
#: the data every engine launch trains on (the tiny fixture, 16 records)
DATA = [f"--data.paths=[{FIXTURE}]", "--data.limit=16", "--wandb.mode=disabled"]
ENV = {
    "WANDB_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "CUDA_VISIBLE_DEVICES": "",
}


def pretrained_flags(saved: Path) -> list[str]:
    """The overrides that start the tiny recipe from ``saved`` (its tokenizer too)."""
    return ["--model.init=pretrained", f"--model.name_or_path={saved}", "--model.tokenizer="]


def train_saved_model(out: Path, steps: int = 30) -> Path:
    """Train the tiny recipe from random weights in one process; returns the saved folder."""
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "train" / "sft.py"),
            str(RECIPE),
            *DATA,
            f"--output_dir={out}",
            f"--train.max_steps={steps}",
            f"--train.save_steps={steps}",
        ],
        env={**os.environ, **ENV},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    return out


def own_step1_loss(
    saved: Path, work: Path, *, world: int = 2, overrides: Sequence[str] = ()
) -> tuple[float, int]:
    """(loss, vocabulary size): the saved model's own loss on step 1's sequences of a
    ``world``-rank data-parallel run of the tiny recipe (+ ``overrides``) started from it
    (grad_accum 1)."""
    import torch
    from transformers import AutoModelForCausalLM

    from chunkwise.train.example_cache import cached_examples
    from chunkwise.train.loss import mean_of_means, reference_token_losses
    from chunkwise.train.modeling import build_tokenizer, prompt_kind
    from chunkwise.train.packing import plan_epoch
    from chunkwise.train.recipe import load_recipe, training_files

    flags = [*DATA, *pretrained_flags(saved), *overrides, f"--output_dir={work}"]
    r = load_recipe(str(RECIPE), flags)
    assert r.train.grad_accum == 1 and r.train.loss_weighting == "sequence"
    files = training_files(r.data)
    tokenizer = build_tokenizer(r, files)
    examples, _, _ = cached_examples(r.data, tokenizer, prompt_kind(r, tokenizer), files, None)
    b = r.batching
    plan = plan_epoch(
        [len(e) for e in examples],
        strategy=b.strategy,
        max_tokens=b.max_tokens,
        batch_size=b.batch_size,
        seed=r.train.seed,
        epoch=0,
        group=world,
    )
    step1 = [examples[i] for mb in plan[:world] for row in mb.rows for i in row]
    model = AutoModelForCausalLM.from_pretrained(str(saved), dtype=torch.float32).eval()
    with torch.no_grad():
        per_seq = [t for t in reference_token_losses(model, step1) if t.numel()]
    assert per_seq, "step 1 holds no sequence with targets"
    return float(mean_of_means(per_seq)), int(model.config.vocab_size)
