"""Which devices a model copy may use: one function that every backend asks.

A launcher (``accelerate launch``, ``torchrun``) starts one process per rank and tells each its
``LOCAL_RANK`` of ``LOCAL_WORLD_SIZE`` on this node; a ``vllm:...?dp=N`` engine runs N replicas
in each of them. Every model copy on the node (rank x replica) is one *slot*; slot ``s`` gets

- on GPUs: the ``per_slot`` visible GPUs ``[s * per_slot, (s + 1) * per_slot)`` (``tp`` GPUs for
  a vLLM replica, one for hf), named through ``CUDA_VISIBLE_DEVICES`` for a vLLM engine (its
  workers are processes that read it as they start) and as ``cuda:K`` for hf;
- on CPU: its share of this process's cores (``os.sched_getaffinity``), split evenly, so that
  two ranks or two replicas on one machine do not fight over the same cores.

Without a launcher and without replicas there is one slot holding everything: nothing changes.
Too few GPUs for the slots is an error naming the numbers, never a silent pile-up on GPU 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chunkwise.errors import BadInput


@dataclass(frozen=True)
class Placement:
    """Where one model copy runs: its slot of ``slots`` on this node and its devices."""

    slot: int
    slots: int
    #: CUDA device ids as the process sees them (indices into CUDA_VISIBLE_DEVICES); empty: CPU
    gpus: tuple[int, ...]
    #: CPU cores this copy's threads may use
    cpus: tuple[int, ...]
    #: the value of CUDA_VISIBLE_DEVICES a child process (a vLLM worker) of this copy needs
    cuda_visible: str | None = None

    @property
    def device(self) -> str:
        """The torch device string for an hf model: ``cuda:K`` or ``cpu``."""
        return f"cuda:{self.gpus[0]}" if self.gpus else "cpu"

    @property
    def shared(self) -> bool:
        """Whether other copies run on this node (so the pinning matters)."""
        return self.slots > 1


def local_rank(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(LOCAL_RANK, LOCAL_WORLD_SIZE)`` from a launcher's environment; ``(0, 1)`` without."""
    env = os.environ if env is None else env
    try:
        rank = int(env.get("LOCAL_RANK", "0") or 0)
        if env.get("LOCAL_WORLD_SIZE"):
            world = int(env["LOCAL_WORLD_SIZE"])
        else:  # an older launcher: assume one node
            world = int(env.get("WORLD_SIZE", "1") or 1) if "LOCAL_RANK" in env else 1
    except ValueError:
        raise BadInput(
            f"LOCAL_RANK={env.get('LOCAL_RANK')!r} / LOCAL_WORLD_SIZE="
            f"{env.get('LOCAL_WORLD_SIZE')!r}: expected whole numbers (set by the launcher)"
        ) from None
    if not 0 <= rank < world:
        raise BadInput(f"LOCAL_RANK={rank} is outside LOCAL_WORLD_SIZE={world}")
    return rank, world


def _visible_ids(env: Mapping[str, str], n_gpus: int) -> list[str]:
    """The physical names behind the indices ``0..n_gpus-1`` (what CUDA_VISIBLE_DEVICES says)."""
    given = env.get("CUDA_VISIBLE_DEVICES")
    if given is None or given.strip() == "":
        return [str(i) for i in range(n_gpus)]
    return [x.strip() for x in given.split(",") if x.strip()][:n_gpus]


def placement(
    *,
    replica: int = 0,
    replicas: int = 1,
    per_slot: int = 1,
    n_gpus: int | None = None,
    cpus: Sequence[int] | None = None,
    env: Mapping[str, str] | None = None,
) -> Placement:
    """The devices of replica ``replica`` of ``replicas`` in this launcher rank.

    ``n_gpus`` (default: ``torch.cuda.device_count()``) and ``cpus`` (default: this process's
    affinity) can be given, so the arithmetic is testable on any machine."""
    env = os.environ if env is None else env
    rank, world = local_rank(env)
    slots, slot = world * replicas, rank * replicas + replica
    if n_gpus is None:
        n_gpus = _cuda_count()
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        cpus = cpus or list(range(os.cpu_count() or 1))
    cpus = list(cpus)
    share = max(1, len(cpus) // slots)
    start = (slot * share) % len(cpus)
    mine = tuple(cpus[start : start + share]) if slots > 1 else tuple(cpus)
    if n_gpus <= 0:
        return Placement(slot, slots, (), mine)
    need = slots * per_slot
    if need > n_gpus:
        raise BadInput(
            f"{world} rank(s) on this node x {replicas} replica(s) x {per_slot} GPU(s) each "
            f"need {need} GPUs, but {n_gpus} are visible (lower dp/tp or --num_processes)"
        )
    gpus = tuple(range(slot * per_slot, (slot + 1) * per_slot))
    names = _visible_ids(env, n_gpus)
    return Placement(slot, slots, gpus, mine, ",".join(names[g] for g in gpus))


def pin_cpus(where: Placement) -> None:
    """Keep this process's threads on its cores (CPU only, and only when copies share the node).

    Call it before torch starts its thread pool; torch's intra-op threads follow the count."""
    if where.gpus or not where.shared or not hasattr(os, "sched_setaffinity"):
        return
    os.sched_setaffinity(0, set(where.cpus))
    os.environ["OMP_NUM_THREADS"] = str(len(where.cpus))
    try:
        import torch

        torch.set_num_threads(len(where.cpus))
    except ImportError:  # pragma: no cover - every backend has torch
        pass


def _cuda_count() -> int:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


__all__ = ["Placement", "local_rank", "pin_cpus", "placement"]
