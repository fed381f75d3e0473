"""What the processes of one launch must agree on before they train together: one shared
``output_dir``, and (on resume) the layout the checkpoint was written with.

Only global rank 0 renames a checkpoint folder and writes the final model, while every rank
writes its part of each checkpoint and looks for the latest one on resume: with an
``output_dir`` each node sees on its own disk, nodes resume from different steps and hang.
:func:`check_shared_output_dir` has every rank write a token into ``output_dir`` and rank 0
check that it sees them all. A checkpoint's ZeRO / FSDP shards and the data each rank takes
per step depend on the world size, engine and sequence-parallel degree, so
:func:`check_resume_layout` refuses a resume under another one, naming both.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput

#: prefix of the token files each rank writes into output_dir (removed after the check)
TOKEN_PREFIX = ".rank-token-"


def check_shared_output_dir(accelerator: Any, out_dir: Path) -> None:
    """Refuse (``BadInput`` on every rank, the same line) an ``output_dir`` that the ranks of
    this launch do not share: each rank writes ``.rank-token-<launch>-<rank>`` into it, rank 0
    lists them, and names the ranks whose token it cannot see."""
    from accelerate.utils import broadcast_object_list, gather_object

    world = accelerator.num_processes
    if world < 2:
        return
    launch = broadcast_object_list([uuid.uuid4().hex[:12] if accelerator.is_main_process else None])
    stem = f"{TOKEN_PREFIX}{launch[0]}-"
    mine = out_dir / f"{stem}{accelerator.process_index}"
    error = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        mine.write_text(str(accelerator.process_index))
    except OSError as e:
        error = f"rank {accelerator.process_index} cannot write into output_dir {out_dir} ({e})"
    accelerator.wait_for_everyone()
    error = next((e for e in gather_object([error]) if e), None)
    if accelerator.is_main_process and error is None:
        missing = _missing_tokens(out_dir, stem, world)
        if missing:
            error = (
                f"output_dir {out_dir} is not shared by every rank: rank 0 cannot see the "
                f"token{'s' if len(missing) > 1 else ''} of rank{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} (of {world}); put output_dir on a filesystem every node "
                "mounts at the same path"
            )
    error = broadcast_object_list([error])[0]
    with contextlib.suppress(OSError):
        mine.unlink()
    if error:
        raise BadInput(error)


#: seconds rank 0 keeps looking for tokens it does not see yet (a network filesystem may show
#: another node's new file a moment late)
TOKEN_GRACE_S = 3.0


def _missing_tokens(out_dir: Path, stem: str, world: int) -> list[str]:
    """The ranks whose token rank 0 cannot see, looked up by name (a directory listing may be
    cached on a network filesystem), again for up to :data:`TOKEN_GRACE_S` seconds."""
    import time

    deadline = time.monotonic() + TOKEN_GRACE_S
    while True:
        missing = [str(r) for r in range(world) if not (out_dir / f"{stem}{r}").exists()]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.25)


def layout_of(world: int, engine: str, sp: int) -> dict[str, Any]:
    """What a checkpoint records of the launch that wrote it (trainer_state.json)."""
    return {"world_size": world, "engine": engine, "sp_size": sp}


def _describe(layout: dict[str, Any]) -> str:
    n = layout.get("world_size")
    return (
        f"{n} process{'' if n == 1 else 'es'} ({layout.get('engine')}, sp {layout.get('sp_size')})"
    )


def check_resume_layout(state: dict[str, Any], folder: Path, now: dict[str, Any]) -> None:
    """Refuse to resume from checkpoint ``folder`` (its ``state``) under a launch whose world
    size, engine or sequence-parallel degree (``now``, from :func:`layout_of`) differ from
    those it was written with. A checkpoint that records none (an older chunkwise) passes."""
    if "world_size" not in state:
        return
    then = {k: state.get(k) for k in now}
    then["sp_size"] = then["sp_size"] or 1
    if then == now:
        return
    raise BadInput(
        f"{folder} was written by {_describe(then)} but this launch has {_describe(now)}: its "
        "sharded states and the data each rank takes per step depend on those; resume with "
        f"--num_processes {then['world_size']} and the same accelerate config, or start over "
        "with a new output_dir or --train.resume=never"
    )


__all__ = ["TOKEN_PREFIX", "check_resume_layout", "check_shared_output_dir", "layout_of"]
