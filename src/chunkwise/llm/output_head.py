"""The output head (hidden state -> vocabulary logits) of a model decoding on CPU in fp32.

Gemma-3's vocabulary has 262,144 tokens, so the embedded model's output head is a 671 MB
matrix that every decoding step reads whole. torch's ``linear`` (``x @ W.T``) on CPU handles a
few rows badly: measured on a 2-core EPYC, 55 ms for one row but 217 ms for three and 176 ms
for eight, as if it streamed the matrix once per row. The same product taken the other way
round, ``(W @ x.T).T`` with ``x.T`` left as a strided view, reads the matrix once: 41 ms for
three rows, 55 ms for eight. A batch of map calls decodes a few rows at a time: three
prompts of ~600 tokens decoding 64 tokens each took 19.9 s with ``linear`` and 12.4 s this way
(``bench/hf_output_head.py`` prints both on the machine at hand).

The sums run in another order, so logits differ from ``linear``'s in the last bits (~1e-4 on
logits of order 10); greedy outputs of the embedded model are unchanged in the tests.
"""

from __future__ import annotations

import types
from typing import Any

#: the most rows computed this way (measured faster up to 256: 697 ms against 953 ms); longer
#: inputs (full-sequence logits) go through ``linear``
MAX_ROWS = 256


def fast_output_head(model: Any) -> bool:
    """Compute ``model``'s output head as ``(W @ x.T).T`` when it is a plain fp32 ``Linear``
    on CPU. Returns whether it did (a LoRA-wrapped, bf16 or GPU head is left as it is)."""
    import torch

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if type(head) is not torch.nn.Linear:
        return False
    w = head.weight
    if w.device.type != "cpu" or w.dtype != torch.float32:
        return False
    head.forward = types.MethodType(_head_forward, head)
    return True


def _head_forward(self: Any, x: Any) -> Any:
    import torch

    rows = x.reshape(-1, x.shape[-1])
    if rows.shape[0] > MAX_ROWS:
        return torch.nn.functional.linear(x, self.weight, self.bias)
    # rows.t() stays a strided view: a contiguous copy sends BLAS back to its slow path
    out = torch.mm(self.weight, rows.t()).t().contiguous()
    if self.bias is not None:
        out = out + self.bias
    return out.reshape(*x.shape[:-1], out.shape[-1])
