"""Run by tests/train/test_train_ddp.py under ``accelerate launch --multi_gpu --num_processes 2``
(torchrun + gloo on CPU). One optimizer step of packed micro-batches, 2 ranks x grad_accum 2,
through the training loop's own step code; rank 0 compares the loss and the all-reduced
gradients with a naive single-process reference over the same sequences and writes JSON.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_train_packing import VOCAB, make_examples

from chunkwise.train.attention import register
from chunkwise.train.loop import Layout, forward_backward, step_counts
from chunkwise.train.loss import backward_scale, mean_of_means, reference_token_losses
from chunkwise.train.modeling import arch_config
from chunkwise.train.packing import collate, plan_epoch


def main(out_path: str) -> None:
    from accelerate import Accelerator
    from transformers import LlamaForCausalLM

    ga = 2
    acc = Accelerator(gradient_accumulation_steps=ga, cpu=not torch.cuda.is_available())
    if acc.num_processes != 2:
        raise SystemExit(f"expected 2 processes, got {acc.num_processes}")
    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(
        arch_config("tiny", {}, VOCAB), attn_implementation=register()
    )
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    model, optimizer = acc.prepare(model, optimizer)
    layout = Layout(acc)
    exs = make_examples(40, seed=11)
    plan = plan_epoch(
        [len(e) for e in exs],
        strategy="packed",
        max_tokens=150,
        batch_size=1,
        seed=3,
        epoch=0,
        group=layout.dp_world * ga,
    )
    step_mbs = plan[: layout.dp_world * ga]
    result = {"world": acc.num_processes}
    for weighting in ("sequence", "token"):
        model.zero_grad()
        mine = [step_mbs[m * layout.dp_world + layout.dp_rank] for m in range(ga)]
        batches = [collate(exs, mb, pad_id=0, weighting=weighting) for mb in mine]
        units, _, _ = step_counts(acc, batches, layout, weighting)
        loss_sum = forward_backward(
            acc, model, batches, scale=backward_scale(layout.world, ga, units)
        )
        loss = acc.reduce(loss_sum.reshape(1), reduction="sum").item() / units
        seqs = [exs[i] for mb in step_mbs for row in mb.rows for i in row]
        reference.zero_grad()
        per_seq = reference_token_losses(reference, seqs)
        ref = mean_of_means(per_seq) if weighting == "sequence" else torch.cat(per_seq).mean()
        ref.backward()
        ref_grads = dict(reference.named_parameters())
        diff = max(
            (
                (p.grad - ref_grads[n].grad).abs().max() / (ref_grads[n].grad.abs().max() + 1e-12)
            ).item()
            for n, p in acc.unwrap_model(model).named_parameters()
        )
        result[weighting] = {
            "loss": loss,
            "reference": ref.item(),
            "grad_rel_diff": diff,
            "units": units,
            "sequences": len(seqs),
            "rank_sequences": [sum(len(r) for r in mb.rows) for mb in mine],
        }
    if acc.is_main_process:
        Path(out_path).write_text(json.dumps(result))
    acc.wait_for_everyone()


if __name__ == "__main__":
    main(sys.argv[1])
