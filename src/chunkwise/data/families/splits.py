"""What training sees and what evaluation holds out: the seeds, lengths and family of each
side, and the split of the reference's sentences that extractive_qa asks about."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

#: the split `make default-mr` trains on and bench/mr_trained.py evaluates on: training uses
#: TRAIN_SEED at TRAIN_LENGTHS for every family but HELDOUT_FAMILY; evaluation uses seeds from
#: HELDOUT_SEED (never trained on) at any length, and HELDOUT_FAMILY entirely
TRAIN_SEED = 0
TRAIN_LENGTHS = (2000, 3000, 4000)
HELDOUT_FAMILY = "variable_tracking"
HELDOUT_SEED = 100_000

#: one sentence of the reference in SPAN_HELDOUT_EVERY is asked about only in held-out
#: documents: training and evaluation share the reference's text (no loss falls on it) but
#: never a question or an answer
SPAN_HELDOUT_EVERY = 4
SPLITS = ("train", "heldout")


def span_split(words: Sequence[str]) -> str:
    """``"train"`` or ``"heldout"``: the split a span question over a sentence whose first ten
    words are ``words`` belongs to (a hash of those words, whatever whitespace the text has
    between them)."""
    digest = hashlib.sha256(" ".join(words[:10]).encode()).digest()
    return "heldout" if int.from_bytes(digest[:4], "big") % SPAN_HELDOUT_EVERY == 0 else "train"
