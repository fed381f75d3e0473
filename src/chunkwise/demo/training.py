"""The demo's training runs: the packaged recipe templates they start from, the base model they
train, the ``accelerate launch -m chunkwise.train`` command that runs one, and its summary.

Recipes and the entry point are found through the installed package (``chunkwise/recipes/demo/``,
``python -m chunkwise.train``), never through a source checkout.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from chunkwise.demo.child import count_lines, run_logged
from chunkwise.demo.errors import DemoError
from chunkwise.errors import BadInput

#: how ``accelerate launch`` starts the training entry (train/sft.py's ``main``, as a module)
TRAIN_ENTRY = ("-m", "chunkwise.train")


def package_path(relative: str) -> Path:
    """A file shipped inside the chunkwise package (``recipes/demo/...``, ``prompts/...``)."""
    return Path(str(resources.files("chunkwise") / relative))


def recipe_template(mode: str) -> Path:
    """The packaged recipe the demo's ``mode`` training is written from."""
    return package_path(f"recipes/demo/pyramid_align-{mode}.yaml")


def check_model(model: str) -> str:
    """The recipe's base model name for ``--model``; a spec the demo cannot use (bad syntax,
    options, an adapter, another backend) fails here, before anything is made or deleted."""
    from chunkwise.llm.spec import parse_spec

    if model != "default":  # the one alias base_name takes that is not a spec
        parse_spec(model)
    return base_name(model)


def base_name(model: str) -> str:
    """The training recipe's ``model.name_or_path`` for a decoding spec (hf only)."""
    if model in ("hf:default", "default"):
        return "default"
    if model.startswith("hf:") and "?" not in model and "+adapter=" not in model:
        return model[3:]
    raise BadInput(
        f"the demo trains LoRA adapters on --model; {model!r} must be hf:default or "
        "hf:<folder or hub id> without options"
    )


def training_precision() -> str:
    """bf16 autocast where it is fast (CUDA, CPUs with native bf16), else fp32: written into
    the demo's recipes, so a rerun of one trains the same way."""
    from chunkwise.train.engine import fast_bf16

    return "bf16" if fast_bf16() else "fp32"


def cpu_launch_flags() -> list[str]:
    """``accelerate launch`` flags for a run on every CPU core ([] when there is a GPU).

    Without ``--cpu``, accelerate gives its child OMP_NUM_THREADS=1 (unless the caller set
    it): on CPU the run used one core of several (measured: a 2,048-token LoRA step 16 s on 1
    of 2 cores, 9 s on both)."""
    import torch

    if torch.cuda.is_available():
        return []
    threads = os.environ.get("OMP_NUM_THREADS") or str(len(os.sched_getaffinity(0)))
    return ["--cpu", "--num_cpu_threads_per_process", threads]


def rerun_training(recipe: Path) -> str:
    """The training command a person can rerun alone (what :func:`training_command` runs)."""
    return shlex.join(["accelerate", "launch", *cpu_launch_flags(), *TRAIN_ENTRY, str(recipe)])


def training_command(recipe: Path) -> list[str]:
    """``accelerate launch`` of the training entry on one process (GPU when there is one, else
    CPU)."""
    accelerate = Path(sys.executable).with_name("accelerate")
    launcher = [str(accelerate)] if accelerate.exists() else [shutil.which("accelerate") or ""]
    if not launcher[0]:
        raise DemoError("accelerate is not installed (pip install accelerate)")
    return [
        *launcher,
        "launch",
        *cpu_launch_flags(),
        "--num_processes",
        "1",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        *TRAIN_ENTRY,
        str(recipe),
    ]


def launch_training(recipe: Path, out_dir: Path, steps: int, desc: str) -> None:
    """Run one recipe to completion in a child process, with a progress bar read from the
    run's metrics.jsonl; the child's output goes to ``<out_dir>.log``."""
    from tqdm import tqdm

    metrics = out_dir / "metrics.jsonl"
    with tqdm(total=steps, desc=desc, unit="step", dynamic_ncols=True) as bar:

        def tick() -> None:
            done = count_lines([metrics]) if metrics.exists() else 0
            bar.update(max(0, min(done, steps) - bar.n))

        run_logged(
            training_command(recipe),
            out_dir.with_suffix(".log"),
            desc,
            {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline")},
            tick,
        )


def fmt3(v: Any) -> str:
    """A loss or score with three decimals (``?`` when there is none)."""
    return "?" if v is None else f"{float(v):.3f}"


def _number(v: Any) -> float | int | None:
    """``v`` when it is a finite number (not a bool), else None."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < float("inf")
    return v if ok else None


def read_train_info(path: Path) -> dict[str, Any]:
    """A finished run's ``train_info.json`` (a JSON object, else one-line :class:`BadInput`)."""
    from chunkwise.io import read_json

    info = read_json(path, "training summary")
    if not isinstance(info, dict):
        raise BadInput(
            f"{path}: not a training summary (a JSON {type(info).__name__}); delete its run "
            "folder to train it again"
        )
    return info


def training_summary(out_dir: Path, train_info: dict[str, Any]) -> dict[str, Any]:
    """Steps, seconds and the loss curve of the finished run in ``out_dir`` (metric lines a
    kill cut short, or without a numeric loss, are left out)."""
    from chunkwise.io import parse_json

    losses = []
    metrics = out_dir / "metrics.jsonl"
    if metrics.exists():
        for line in metrics.read_bytes().splitlines():
            try:
                rec = parse_json(line) if line.strip() else None
            except ValueError:
                continue
            loss = _number(rec.get("train/loss")) if isinstance(rec, dict) else None
            if loss is not None:
                losses.append(loss)
    final = train_info.get("final")
    final_loss = _number(final.get("train/loss")) if isinstance(final, dict) else None
    return {
        "steps": train_info.get("steps"),
        "seconds": train_info.get("seconds"),
        "first_loss": losses[0] if losses else None,
        "final_loss": final_loss if final_loss is not None else (losses[-1] if losses else None),
        "losses": losses,
        "output_dir": str(out_dir),
    }


def losses_line(s: dict[str, Any]) -> str:
    """One run's :func:`training_summary` in a few words."""
    if s["steps"] == 1:
        return f"1 step, loss {fmt3(s['final_loss'])}"
    return f"{s['steps']} steps, loss {fmt3(s['first_loss'])} -> {fmt3(s['final_loss'])}"


__all__ = [
    "check_model",
    "launch_training",
    "read_train_info",
    "recipe_template",
    "rerun_training",
    "training_command",
    "training_precision",
]
