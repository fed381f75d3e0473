"""The sections of the multi-hop documents: filler paragraphs (they name nobody and hold no
digits) with at most one fact sentence each, and the chunk size that cuts one section per
chunk."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from chunkwise.errors import BadInput

CountTokens = Callable[[str], int]

_SUBJECTS = (
    "the baker", "an old fisherman", "the night porter", "a travelling painter", "the miller",
    "a schoolteacher", "the ferryman", "two cousins", "the town clerk", "a gardener",
    "the innkeeper", "a young carpenter", "the postmistress", "a tired shepherd",
)  # fmt: skip
_VERBS = (
    "walked along", "painted", "swept", "argued about", "sang near", "repaired", "watched",
    "measured", "forgot about", "photographed", "cleaned", "described",
)  # fmt: skip
_PLACES = (
    "the river bank", "the market square", "the old bridge", "a windy hill", "the harbour wall",
    "the orchard", "the railway platform", "a muddy lane", "the village green", "the cliff path",
    "the crowded ferry", "the empty theatre",
)  # fmt: skip
_TIMES = (
    "in the morning", "after the rain", "before supper", "during the fair", "late at night",
    "at dawn", "on a grey afternoon", "while the bells rang", "in early spring", "all summer",
)  # fmt: skip


def _filler_sentence(rng: random.Random) -> str:
    s = rng.choice(_SUBJECTS)
    return f"{s[0].upper()}{s[1:]} {rng.choice(_VERBS)} {rng.choice(_PLACES)} {rng.choice(_TIMES)}."


def section(rng: random.Random, fact: str | None, sentences: int) -> str:
    """A paragraph of ``sentences`` sentences: filler, with the fact (if any) counted as one
    of them, so sections are of similar length whether they hold a fact or not."""
    body = [_filler_sentence(rng) for _ in range(sentences - (fact is not None))]
    if fact is not None:
        body.insert(rng.randint(0, len(body)), fact)
    return " ".join(body)


def chunk_tokens_for(records: dict[str, Any] | Sequence[dict[str, Any]], count: CountTokens) -> int:
    """A chunk size that makes the chunker cut every given record into exactly one section
    per chunk: the largest section, valid while no two sections fit together."""
    recs = [records] if isinstance(records, dict) else list(records)
    sizes = [count(s) for r in recs for s in r["meta"]["sections"]]
    if 2 * min(sizes) <= max(sizes):
        raise BadInput(
            f"sections of {min(sizes)}..{max(sizes)} tokens are too uneven for one section per "
            "chunk; raise section_sentences"
        )
    return max(sizes)
