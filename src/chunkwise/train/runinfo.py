"""What a run records about itself: git sha, package versions, the machine, the input positions
each rank's model received, the wandb mode and run id."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from chunkwise.train.recipe import Recipe


def git_sha(cwd: str | Path | None = None) -> str | None:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty else "")


def versions() -> dict[str, str]:
    import accelerate
    import torch
    import transformers

    out = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
    }
    for name in ("peft", "deepspeed", "flash_attn", "liger_kernel"):
        with contextlib.suppress(Exception):
            out[name] = __import__(name).__version__
    return out


def machine() -> dict[str, object]:
    """What ran the training: kernels round differently across CPUs and GPUs, so two runs of one
    recipe are bit-identical on one machine but not across machines."""
    import torch

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpu = torch.cuda.get_device_name(0) if gpus else None
    return {"cpu": cpu, "cpus": os.cpu_count(), "gpu": gpu, "gpus": gpus}


class InputPositions:
    """Counts the sequence positions (rows x width) the model's input embedding receives in
    this process: under Ulysses each rank of a group must see its slice of every row, not the
    whole row. :meth:`per_rank` gathers the counts of every rank (all ranks call it)."""

    def __init__(self, model: Any) -> None:
        self.positions = 0
        emb = model.get_input_embeddings()
        self._hook = emb.register_forward_hook(self._count)

    def _count(self, module: Any, args: tuple, output: Any) -> None:
        if args and hasattr(args[0], "shape"):
            self.positions += int(args[0].numel())

    def per_rank(self, accelerator: Any) -> list[int]:
        if accelerator.num_processes < 2:
            return [self.positions]
        from accelerate.utils import gather_object

        return [int(n) for n in gather_object([self.positions])]


def wandb_mode(recipe: Recipe) -> str:
    mode = recipe.wandb.mode
    if mode == "auto":
        mode = os.environ.get("WANDB_MODE") or "offline"
    return mode


def new_run_id(out_dir: Path, is_main: bool) -> str:
    import uuid

    path = out_dir / "wandb_id.txt"
    if path.exists():
        return path.read_text().strip()
    run_id = uuid.uuid4().hex[:12]
    if is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(run_id)
    return run_id


WANDB_STEP_FILE = "wandb_step.txt"


def wandb_init_kwargs(
    recipe: Recipe, out_dir: Path, run_id: str, start: int, mode: str
) -> dict[str, object]:
    """``wandb.init`` arguments for a run that starts (``start=0``) or resumes at ``start``.

    Online, a resume rewinds the wandb run to the checkpoint's step (``resume_from``), so the
    steps the killed run logged after its last checkpoint are replaced by the resumed run's.
    Offline (no rewind there), the run is resumed by id and the loop skips the steps already
    logged (:func:`wandb_logged_step`), instead of re-logging them with lower step numbers."""
    kw: dict[str, object] = {
        "name": recipe.run_name,
        "dir": str(out_dir),
        "group": recipe.wandb.group or None,
        "tags": list(recipe.wandb.tags) or None,
    }
    if start > 0 and mode == "online":
        kw["resume_from"] = f"{run_id}?_step={start}"
    else:
        kw["id"] = run_id
        kw["resume"] = "allow"
    return kw


def wandb_logged_step(out_dir: Path) -> int:
    """The last step this output folder's wandb run has logged (0 when none)."""
    try:
        return int((out_dir / WANDB_STEP_FILE).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def note_wandb_step(out_dir: Path, step: int) -> None:
    (out_dir / WANDB_STEP_FILE).write_text(str(step))


__all__ = [
    "InputPositions",
    "git_sha",
    "machine",
    "new_run_id",
    "note_wandb_step",
    "versions",
    "wandb_init_kwargs",
    "wandb_logged_step",
    "wandb_mode",
]
