"""Batching long sequences: packs (best-fit decreasing), sorted batches, plain padding.

A micro-batch is a list of rows; a row holds one or more sequences. :func:`collate` turns it
into tensors for a causal LM called with ``position_ids`` and *no* attention mask:

* position ids restart at 0 for every sequence of a packed row. transformers reads the restarts
  as sequence boundaries (``masking_utils.find_packed_sequence_indices``): sdpa and eager get a
  block-diagonal causal mask (exact on CPU), flash-attention 2/3 gets ``cu_seqlens`` (varlen) on
  GPU. No token attends to another sequence, and RoPE sees each sequence's own positions.
* right padding continues the last sequence's positions: under a causal mask no real token
  attends to a later pad token, so padding cannot change a real token's output, and a row with
  one sequence keeps the fast causal (no explicit mask) path.
* ``targets`` are the labels shifted left *within each sequence* (the last token of a sequence
  predicts nothing), ``-100`` elsewhere; ``weights`` carry the loss weighting of
  :mod:`chunkwise.train.loss`; ``segments`` number the sequences of the micro-batch (-1: pad).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from chunkwise.errors import BadInput

IGNORE = -100


def best_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Pack items (by index) into bins of ``capacity``: longest first, each into the fullest bin
    that still has room. Returns the bins, each a list of item indices, longest item first."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, bin index), sorted
    for i in order:
        n = lengths[i]
        if n > capacity:
            raise BadInput(f"a sequence of {n} tokens does not fit a pack of {capacity}")
        k = bisect.bisect_left(free, (n, -1))
        if k < len(free):
            room, b = free.pop(k)
            bins[b].append(i)
            bisect.insort(free, (room - n, b))
        else:
            bins.append([i])
            bisect.insort(free, (capacity - n, len(bins) - 1))
    return bins


@dataclass(frozen=True)
class MicroBatch:
    rows: tuple[tuple[int, ...], ...]  # example indices per row


def plan_epoch(
    lengths: Sequence[int],
    *,
    strategy: str,
    max_tokens: int,
    batch_size: int,
    seed: int,
    epoch: int,
    group: int = 1,
) -> list[MicroBatch]:
    """The micro-batches of one epoch, in training order. Deterministic in (seed, epoch).

    ``group`` = micro-batches per optimizer step over all ranks (world x grad_accum): the
    sorted strategy keeps similar lengths inside one step, then shuffles whole steps, so the
    ranks of a step get similar work (LongAlign's sorted batching).
    """
    rng = random.Random(seed * 1_000_003 + epoch)
    idx = list(range(len(lengths)))
    if strategy == "packed":
        rng.shuffle(idx)  # ties in length are broken differently each epoch
        shuffled = [lengths[i] for i in idx]
        packs = [tuple(idx[j] for j in b) for b in best_fit_decreasing(shuffled, max_tokens)]
        rng.shuffle(packs)
        return [MicroBatch((p,)) for p in packs]
    if strategy == "padded":
        rng.shuffle(idx)
        return [
            MicroBatch(tuple((i,) for i in idx[k : k + batch_size]))
            for k in range(0, len(idx), batch_size)
        ]
    if strategy == "sorted":
        rng.shuffle(idx)
        idx.sort(key=lambda i: lengths[i])
        batches = [
            MicroBatch(tuple((i,) for i in idx[k : k + batch_size]))
            for k in range(0, len(idx), batch_size)
        ]
        steps = [batches[k : k + group] for k in range(0, len(batches), group)]
        rng.shuffle(steps)
        return [b for s in steps for b in s]
    raise BadInput(f"unknown batching strategy {strategy!r}; valid: packed, sorted, padded")


def sequence_weights(n_targets: int, weighting: str) -> float:
    """Per-target-token weight of one sequence before the global normalisation."""
    if weighting == "sequence":
        return 1.0 / n_targets
    if weighting == "token":
        return 1.0
    raise BadInput(f"unknown loss weighting {weighting!r}; valid: sequence, token")


def collate(
    examples: Sequence,
    mb: MicroBatch,
    *,
    pad_id: int,
    weighting: str = "sequence",
    pad_to_multiple_of: int = 1,
    stage_weights: dict[str, float] | None = None,
) -> dict:
    """Tensors for one micro-batch (see the module docstring), plus counts for the loss/metrics:
    ``n_seqs`` (sequences with targets), ``n_targets``, ``n_tokens`` (non-pad) and
    ``seq_lengths`` (per sequence, for attention FLOPs). ``stage_weights`` (stage -> weight,
    default 1) scales an example's weights and counts it that many times in ``n_seqs`` /
    ``n_targets``, so the step loss is the stage-weighted mean."""
    import torch

    rows = []
    seq_lengths: list[int] = []
    n_targets = 0
    n_seqs = 0
    seg = 0
    for row in mb.rows:
        parts: list[list[np.ndarray]] = [[], [], [], [], []]
        for i in row:
            ex = examples[i]
            n = len(ex.input_ids)
            t = np.full(n, IGNORE, dtype=np.int64)
            t[:-1] = ex.labels[1:]
            k = int((t != IGNORE).sum())
            sw = float((stage_weights or {}).get(ex.stage, 1.0)) if k else 0.0
            w = np.where(t != IGNORE, sw * sequence_weights(k, weighting) if k else 0.0, 0.0)
            for dst, src in zip(
                parts,
                (
                    ex.input_ids.astype(np.int64),
                    np.arange(n),
                    t,
                    w.astype(np.float32),
                    np.full(n, seg),
                ),
                strict=True,
            ):
                dst.append(src)
            seg += 1
            seq_lengths.append(n)
            n_targets += k * sw  # a stage weight w counts its example w times
            n_seqs += sw
        rows.append([np.concatenate(x) for x in parts])
    width = max(len(r[0]) for r in rows)
    if pad_to_multiple_of > 1:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    shape = (len(rows), width)
    ids = torch.full(shape, pad_id, dtype=torch.long)
    pos = torch.zeros(shape, dtype=torch.long)
    tgt = torch.full(shape, IGNORE, dtype=torch.long)
    wts = torch.zeros(shape, dtype=torch.float32)
    sgs = torch.full(shape, -1, dtype=torch.long)
    for b, (r_ids, r_pos, r_tgt, r_wts, r_sgs) in enumerate(rows):
        n = len(r_ids)
        ids[b, :n] = torch.from_numpy(r_ids)
        pos[b, :n] = torch.from_numpy(r_pos.astype(np.int64))
        pos[b, n:] = int(r_pos[-1]) + 1 + torch.arange(width - n)
        tgt[b, :n] = torch.from_numpy(r_tgt)
        wts[b, :n] = torch.from_numpy(r_wts)
        sgs[b, :n] = torch.from_numpy(r_sgs.astype(np.int64))
    return {
        "input_ids": ids,
        "position_ids": pos,
        "targets": tgt,
        "weights": wts,
        "segments": sgs,
        "n_seqs": n_seqs,
        "n_targets": n_targets,
        "n_tokens": int(sum(seq_lengths)),
        "seq_lengths": seq_lengths,
    }


def shard_sequence(batch: dict, parts: int, index: int) -> dict:
    """Slice a collated batch along the sequence axis into ``parts`` equal shards (sequence
    parallelism: each rank of a group holds one shard of the same rows); the row width must be a
    multiple of ``parts``. Counts stay those of the whole batch."""
    if parts == 1:
        return batch
    width = batch["input_ids"].shape[1]
    if width % parts:
        raise ValueError(f"row width {width} is not a multiple of {parts}")
    size = width // parts
    cut = slice(index * size, (index + 1) * size)
    out = dict(batch)
    for k in ("input_ids", "position_ids", "targets", "weights", "segments"):
        out[k] = batch[k][:, cut].contiguous()
    return out


def padding_efficiency(batches: Sequence[dict]) -> float:
    """Real tokens / tokens computed (rows x width) over collated batches."""
    real = sum(b["n_tokens"] for b in batches)
    total = sum(b["input_ids"].numel() for b in batches)
    return real / total if total else 0.0


__all__ = [
    "MicroBatch",
    "best_fit_decreasing",
    "collate",
    "padding_efficiency",
    "plan_epoch",
    "shard_sequence",
]
