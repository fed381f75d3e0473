"""What the text utilities need from a tokenizer, and a dependency-free fallback.

Any :class:`chunkwise.llm.LLM` satisfies :class:`TokenCounter`, so chunks are always measured
with the tokenizer of the model that will read them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class TokenCounter(Protocol):
    def count_tokens(self, text: str) -> int: ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of every token of ``text`` (no special tokens)."""
        ...


_PIECE = re.compile(r"\w+|[^\w\s]|\s+")


class WordPieceCounter:
    """Approximate tokenizer: one token per word, punctuation mark or whitespace run, with
    words longer than ``max_word_chars`` split. Used when a backend has no tokenizer (e.g. a
    remote API without ``?tokenizer=``); ``scale`` > 1 makes budgets conservative."""

    def __init__(self, max_word_chars: int = 8, scale: float = 1.0):
        self.max_word_chars = max_word_chars
        self.scale = scale

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        spans = []
        for m in _PIECE.finditer(text):
            s, e = m.span()
            if text[s].isspace():
                continue
            step = self.max_word_chars
            spans.extend((i, min(i + step, e)) for i in range(s, e, step))
        return spans

    def count_tokens(self, text: str) -> int:
        n = len(self.token_offsets(text))
        return int(n * self.scale + 0.999999) if self.scale != 1.0 else n


class HFTokenCounter:
    """A :class:`TokenCounter` over a Hugging Face tokenizer (no special tokens)."""

    def __init__(self, tokenizer: object):
        self.tokenizer = tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(x) for x in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(int(s), int(e)) for s, e in enc["offset_mapping"]]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)


def count_many(counter: TokenCounter, texts: Sequence[str]) -> list[int]:
    """Count several texts, through the backend's batched path when it has one."""
    batched = getattr(counter, "count_tokens_batch", None)
    if batched is not None:
        return list(batched(list(texts)))
    return [counter.count_tokens(t) for t in texts]


def middle_truncate(text: str, counter: TokenCounter, max_tokens: int) -> tuple[str, bool]:
    """Keep the first and last halves of ``text`` so it takes at most ``max_tokens`` tokens.

    InfiniteBench's rule (``tokens[:L//2] + tokens[-L//2:]``), applied at token boundaries of
    the original string so no token is re-decoded. Returns (text, whether it was cut).
    """
    if max_tokens <= 0:
        return "", bool(text)
    offsets = counter.token_offsets(text)
    if len(offsets) <= max_tokens:
        return text, False
    head = max_tokens // 2
    tail = max_tokens - head
    # Re-tokenizing the joined halves can merge tokens differently; shrink until it fits.
    while True:
        head_end = offsets[head - 1][1] if head else 0
        tail_start = offsets[len(offsets) - tail][0] if tail else len(text)
        cut = text[:head_end] + "\n...\n" + text[tail_start:]
        if counter.count_tokens(cut) <= max_tokens or (head <= 1 and tail <= 1):
            return cut, True
        head, tail = max(head - 8, 0), max(tail - 8, 0)
