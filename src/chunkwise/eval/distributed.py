"""Process group for data-parallel evaluation: who am I, how many are we, wait for the others.

Evaluation only needs barriers (each rank writes its own shard file; rank 0 merges), so the
group always uses gloo, which works with or without GPUs. Started by ``torchrun`` or
``accelerate launch --multi_gpu`` (they set ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK``); a
plain process is rank 0 of 1 and never touches torch.distributed.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    _owns_group: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as td

            td.barrier()

    def close(self) -> None:
        if self._owns_group:
            import torch.distributed as td

            if td.is_initialized():
                td.destroy_process_group()
            self._owns_group = False

    def __enter__(self) -> Dist:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def from_env(timeout_hours: float = 24.0) -> Dist:
    """The group the launcher describes in the environment (rank 0 of 1 when there is none).

    The barrier timeout is long because ranks wait at the merge for the slowest one. With
    CUDA, each rank's default device is its local GPU, so ``device=cuda`` lands there.
    """
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return Dist()
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    import torch
    import torch.distributed as td

    owns = False
    if not td.is_initialized():
        td.init_process_group(
            "gloo", timeout=datetime.timedelta(hours=timeout_hours), rank=rank, world_size=world
        )
        owns = True
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
    return Dist(td.get_rank(), td.get_world_size(), local_rank, owns)


__all__ = ["Dist", "from_env"]
