"""Packing and loss weighting: packed loss == unpacked loss, plans, collation, MFU arithmetic."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from chunkwise.train.attention import register, segments
from chunkwise.train.formats import IGNORE, Example
from chunkwise.train.loss import batch_loss_sum, mean_of_means, reference_token_losses
from chunkwise.train.mfu import Arch, step_flops
from chunkwise.train.modeling import arch_config
from chunkwise.train.packing import (
    MicroBatch,
    best_fit_decreasing,
    collate,
    plan_epoch,
    shard_sequence,
)

VOCAB = 97


def make_examples(n: int, seed: int = 0, lo: int = 8, hi: int = 60) -> list[Example]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(lo, hi)
        ids = np.array([rng.randrange(VOCAB) for _ in range(length)], dtype=np.int32)
        labels = np.full(length, IGNORE, dtype=np.int32)
        k = rng.randint(1, max(1, length // 2))
        labels[length - k :] = ids[length - k :]  # a tail "answer" span
        if i % 3 == 0 and length > 12:  # a second assistant span in the middle
            labels[3:6] = ids[3:6]
        out.append(Example(f"e{i}", "chat", ids, labels))
    return out


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared 2-core machine
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    cfg = arch_config("tiny", {"num_hidden_layers": 2}, VOCAB)
    return LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa").eval()


def test_best_fit_decreasing_is_valid_and_tight():
    rng = random.Random(1)
    lengths = [rng.randint(1, 100) for _ in range(300)]
    bins = best_fit_decreasing(lengths, 128)
    flat = sorted(i for b in bins for i in b)
    assert flat == list(range(300))
    assert all(sum(lengths[i] for i in b) <= 128 for b in bins)
    lower = -(-sum(lengths) // 128)
    assert len(bins) <= lower * 1.1 + 1  # BFD stays within a few percent of the bound here
    assert best_fit_decreasing([5, 5, 5, 5], 10) == [[0, 1], [2, 3]]


def test_plans_are_deterministic_and_cover_everything():
    lengths = [len(e) for e in make_examples(50)]
    for strategy in ("packed", "sorted", "padded"):
        a = plan_epoch(
            lengths, strategy=strategy, max_tokens=128, batch_size=4, seed=7, epoch=2, group=2
        )
        b = plan_epoch(
            lengths, strategy=strategy, max_tokens=128, batch_size=4, seed=7, epoch=2, group=2
        )
        c = plan_epoch(
            lengths, strategy=strategy, max_tokens=128, batch_size=4, seed=7, epoch=3, group=2
        )
        assert a == b and a != c
        assert sorted(i for mb in a for row in mb.rows for i in row) == list(range(50))
    sorted_plan = plan_epoch(
        lengths, strategy="sorted", max_tokens=0, batch_size=5, seed=0, epoch=0, group=2
    )
    for mb in sorted_plan:  # a sorted batch holds neighbours in length
        ls = sorted(lengths[i] for row in mb.rows for i in row)
        assert ls[-1] - ls[0] <= 20


def test_collate_shifts_within_each_sequence():
    exs = make_examples(3)
    b = collate(exs, MicroBatch(((0, 1, 2),)), pad_id=0, pad_to_multiple_of=16)
    n = [len(e) for e in exs]
    assert b["input_ids"].shape[1] % 16 == 0
    assert b["position_ids"][0, : sum(n)].tolist() == [p for k in n for p in range(k)]
    start = 0
    for e, k in zip(exs, n, strict=True):
        t = b["targets"][0, start : start + k].tolist()
        assert (
            t[:-1] == e.labels[1:].tolist() and t[-1] == IGNORE
        )  # never predicts across sequences
        w = b["weights"][0, start : start + k]
        assert torch.allclose(
            w.sum(), torch.tensor(1.0)
        )  # sequence weighting: sums to 1 per sequence
        start += k
    assert (b["targets"][0, sum(n) :] == IGNORE).all()
    assert b["n_seqs"] == 3 and b["n_tokens"] == sum(n)
    assert b["n_targets"] == sum(e.n_targets for e in exs)


@pytest.mark.parametrize("attn", ["chunkwise_varlen", "sdpa", "eager"])
def test_packed_loss_equals_unpacked_loss(model, attn):
    """The same 12 sequences, packed into a few rows vs one at a time through the plain model:
    LongAlign's mean of per-sequence mean losses agrees to float precision."""
    if attn == "chunkwise_varlen":
        register()
    model.config._attn_implementation = attn
    exs = make_examples(12, seed=5)
    ref = mean_of_means(reference_token_losses(model, exs))
    for strategy in ("packed", "padded"):
        plan = plan_epoch(
            [len(e) for e in exs], strategy=strategy, max_tokens=160, batch_size=3, seed=0, epoch=0
        )
        total = 0.0
        for mb in plan:
            b = collate(exs, mb, pad_id=0)
            total = total + batch_loss_sum(model, b, chunk=7)
        assert any(len(row) > 1 for mb in plan for row in mb.rows) == (strategy == "packed")
        assert torch.allclose(total / len(exs), ref, rtol=1e-5, atol=1e-6), (strategy, attn)
    model.config._attn_implementation = "sdpa"


@pytest.fixture(scope="module")
def gemma3():
    """A tiny Gemma-3 (the embedded model's architecture) whose local layer sees 6 positions."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=6,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=256,
    )
    return Gemma3ForCausalLM._from_config(cfg, attn_implementation="sdpa").eval()


def test_packed_loss_keeps_gemma3_sliding_window(gemma3):
    """Packed through chunkwise_varlen, each sequence's local layer sees its last 6 positions,
    as transformers' own sliding-window mask gives it (run per sequence): the same loss. The
    sequences are 8-60 tokens, so a full causal band would differ."""
    exs = make_examples(10, seed=3)
    ref = mean_of_means(reference_token_losses(gemma3, exs))  # sdpa, transformers' masks
    gemma3.config._attn_implementation = register()
    try:
        b = collate(exs, MicroBatch((tuple(range(5)), tuple(range(5, 10)))), pad_id=0)
        packed = batch_loss_sum(gemma3, b) / len(exs)
        one = collate(exs, MicroBatch(((7,),)), pad_id=0)  # a row without restarts
        alone = batch_loss_sum(gemma3, one)  # one sequence: its mean token loss
    finally:
        gemma3.config._attn_implementation = "sdpa"
    assert torch.allclose(packed, ref, rtol=1e-5, atol=1e-6)
    ref_one = reference_token_losses(gemma3, [exs[7]])[0].mean()
    assert len(exs[7]) > 6 and torch.allclose(alone, ref_one, rtol=1e-5, atol=1e-6)


def test_sliding_causal_attention_matches_an_explicit_band():
    from chunkwise.train.attention import causal_attention

    torch.manual_seed(1)
    q, k, v = torch.randn(2, 4, 23, 8), torch.randn(2, 2, 23, 8), torch.randn(2, 2, 23, 8)
    i, j = torch.arange(23)[:, None], torch.arange(23)[None, :]
    for w in (1, 5, 23, 40):
        band = (j <= i) & (j > i - w)
        want = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=band, enable_gqa=True
        )
        assert torch.allclose(causal_attention(q, k, v, window=w), want, atol=1e-6), w


def test_packed_gradients_equal_unpacked(model):
    register()
    model.config._attn_implementation = "chunkwise_varlen"
    exs = make_examples(8, seed=9)
    model.zero_grad()
    mean_of_means(reference_token_losses(model, exs)).backward()
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    b = collate(exs, MicroBatch((tuple(range(8)),)), pad_id=0)
    (batch_loss_sum(model, b) / len(exs)).backward()
    for n, p in model.named_parameters():
        assert torch.allclose(p.grad, ref[n], rtol=1e-4, atol=1e-7), n
    model.config._attn_implementation = "sdpa"


def test_token_weighting_is_the_token_mean(model):
    exs = make_examples(6, seed=2)
    per_seq = reference_token_losses(model, exs)
    ref = torch.cat(per_seq).mean()
    b = collate(exs, MicroBatch((tuple(range(6)),)), pad_id=0, weighting="token")
    assert torch.allclose(batch_loss_sum(model, b) / b["n_targets"], ref, rtol=1e-5)


def test_segments_and_sequence_shards():
    pos = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3, 4, 5, 6]])
    assert segments(pos) == [[(0, 3), (3, 5), (5, 12)]]
    b = collate(make_examples(2), MicroBatch(((0, 1),)), pad_id=0, pad_to_multiple_of=4)
    parts = [shard_sequence(b, 4, i) for i in range(4)]
    for k in ("input_ids", "targets", "weights", "position_ids"):
        assert torch.equal(torch.cat([p[k] for p in parts], dim=1), b[k])


def test_step_flops_match_parameter_count():
    from transformers import LlamaForCausalLM

    cfg = arch_config("tiny", {}, 500)
    m = LlamaForCausalLM._from_config(cfg)
    arch = Arch.from_config(cfg)
    linear = sum(p.numel() for n, p in m.named_parameters() if n.endswith("proj.weight"))
    assert arch.decoder_matmul_params == linear
    big = Arch.from_config(arch_config("llama3.1-8b", {}))
    assert 6.9e9 < big.decoder_matmul_params < 7.0e9  # 8.03B minus the two 0.53B embeddings
    t = 32768
    f = step_flops(big, [t], n_targets=t)
    assert f == 6 * big.decoder_matmul_params * t + 6 * 4096 * 128256 * t + 6 * 32 * 4096 * t * t


def test_stage_weights_give_the_stage_weighted_mean_of_sequence_losses(model):
    exs = make_examples(4, seed=5)
    for e, stage in zip(exs, ("map", "map", "collapse", "reduce"), strict=True):
        e.stage = stage
    weights = {"reduce": 3.0, "map": 0.5}
    mb = MicroBatch(((0, 1), (2, 3)))
    b = collate(exs, mb, pad_id=0, stage_weights=weights)
    assert b["n_seqs"] == pytest.approx(0.5 + 0.5 + 1.0 + 3.0)
    tensors = {k: v for k, v in b.items() if isinstance(v, torch.Tensor)}
    with torch.no_grad():
        loss = batch_loss_sum(model, tensors) / b["n_seqs"]
        per_seq = [x.mean() for x in reference_token_losses(model, exs)]
    ws = [weights.get(e.stage, 1.0) for e in exs]
    ref = sum(w * x for w, x in zip(ws, per_seq, strict=True)) / sum(ws)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)
    plain = collate(exs, mb, pad_id=0)  # the default: every sequence counts once
    assert plain["n_seqs"] == 4
