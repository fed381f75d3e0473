"""Cut a document into chunks of at most N tokens at the most natural boundary available.

Boundaries, best first: paragraph (blank line) → line → sentence → clause (after a comma or
semicolon) → word → token. A boundary is taken at the coarsest level that still fills at least
``min_fill`` of the budget, so chunks stay large. Chunks never include leading or trailing whitespace, so without overlap only
whitespace falls between consecutive chunks and ``document[start_char:end_char] == text``.

Cost: one tokenization of the document (for token offsets) plus one batched count of the
chunks, so about 1.5-2x the time of tokenizing the document once.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import asdict, dataclass

from chunkwise.errors import BadInput
from chunkwise.text.sentences import sentence_ends
from chunkwise.text.tokens import TokenCounter, count_many

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"\s+")
# whitespace after a comma or semicolon: the chunk keeps the separator. In a one-line JSON
# object ``{"k": "v", "k2": "v2"}`` this cuts between pairs where a word boundary could
# cut a key from its value (the evidence audit found such straddling pairs were all lost)
_CLAUSE = re.compile(r"(?<=[,;])\s+")


@dataclass(frozen=True)
class Chunk:
    index: int
    start_char: int
    end_char: int
    tokens: int
    text: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _last_match_start(rx: re.Pattern[str], text: str, lo: int, hi: int) -> int | None:
    """Start of the last match of ``rx`` that begins in [lo, hi)."""
    last = None
    for m in rx.finditer(text, lo, hi):
        last = m.start()
    return last


def _best_boundary(text: str, cur: int, hard_end: int, min_fill: float) -> int:
    """The end position for a chunk starting at ``cur`` that may extend to ``hard_end``."""
    if hard_end >= len(text):
        return len(text)
    lo = cur + max(1, int((hard_end - cur) * min_fill))
    if lo < hard_end:
        # A boundary *at* hard_end counts: the chunk ends right before the separator.
        for rx in (_PARAGRAPH, _LINE):
            b = _last_match_start(rx, text, lo, hard_end + 1)
            if b is not None and b > cur:
                return b
        ends = sentence_ends(text, lo, hard_end)
        if ends:
            return ends[-1]
        b = _last_match_start(_CLAUSE, text, lo, hard_end + 1)
        if b is not None and b > cur:
            return b
        b = _last_match_start(_SPACE, text, lo, hard_end + 1)
        if b is not None and b > cur:
            return b
    return hard_end  # a token boundary: the last resort


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


class _Cutter:
    def __init__(self, text: str, counter: TokenCounter, min_fill: float):
        self.text = text
        self.counter = counter
        self.min_fill = min_fill
        self.offsets = [(s, e) for s, e in counter.token_offsets(text) if e > s]
        self.ends = [e for _, e in self.offsets]
        self.forced_end: dict[int, int] = {}

    def span(self, cur: int, budget: int, region_end: int) -> tuple[int, int]:
        """(start, end) of the chunk that starts at the first non-space char at/after ``cur``."""
        text = self.text
        start, _ = _trim(text, cur, region_end)
        first = bisect.bisect_right(self.ends, start)  # first token ending after `start`
        last = first + budget - 1
        if last >= len(self.offsets) or self.offsets[last][1] >= region_end:
            hard_end = region_end
            end = region_end
        else:
            hard_end = max(self.offsets[last][1], start + 1)
            end = _best_boundary(text, start, hard_end, self.min_fill)
        s, e = _trim(text, start, end)
        if e <= s:  # only whitespace before the boundary: take the token cut instead
            s, e = _trim(text, start, hard_end)
        return s, e

    def _greedy(
        self,
        cur: int,
        end: int,
        first_index: int,
        budgets: dict[int, int],
        default: int,
        overlap: int,
    ) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        while True:
            s, e = _trim(self.text, cur, end)
            if e <= s:
                return spans
            k = first_index + len(spans)
            if k in self.forced_end:
                s, e = _trim(self.text, s, self.forced_end[k])
            else:
                s, e = self.span(cur, budgets.get(k, default), end)
            spans.append((s, e))
            if e >= _trim(self.text, s, end)[1]:
                return spans
            cur = self._next_start(s, e, overlap)

    def run(
        self, start: int, end: int, max_tokens: int, overlap: int
    ) -> list[tuple[int, int, int]]:
        """Chunks covering text[start:end] as (start_char, end_char, tokens).

        Chunks are cut from token offsets of the whole document, then counted on their own in
        one batch: a chunk whose own tokenization runs over (tokens can merge differently at
        its edges) is cut again with a smaller budget and everything after it re-flowed.
        """
        margin = 0 if max_tokens < 64 else max(1, max_tokens // 200)
        budgets: dict[int, int] = {}
        self.forced_end = {}
        done: list[tuple[int, int, int]] = []
        cur = start
        while True:
            pending = self._greedy(cur, end, len(done), budgets, max_tokens - margin, overlap)
            counts = count_many(self.counter, [self.text[s:e] for s, e in pending])
            bad = next((i for i, n in enumerate(counts) if n > max_tokens), None)
            if bad is None:
                return done + [(s, e, n) for (s, e), n in zip(pending, counts, strict=True)]
            done += [(s, e, n) for (s, e), n in zip(pending[:bad], counts[:bad], strict=True)]
            k = len(done)
            used = budgets.get(k, max_tokens - margin)
            if used <= 1 or k in self.forced_end:
                # Even one token of the document's tokenization re-tokenizes to too many on
                # its own: cut inside it, character by character.
                self.forced_end[k] = self._char_cut(*pending[bad], max_tokens)
            else:
                budgets[k] = max(1, used - (counts[bad] - max_tokens) - 1)
            cur = self._next_start(done[-1][0], done[-1][1], overlap) if done else start

    def _char_cut(self, s: int, e: int, max_tokens: int) -> int:
        """The longest prefix end of text[s:e] (shorter than e) that fits ``max_tokens``."""
        lo, hi = s, e - 1  # invariant: text[s:lo] fits (or lo == s); answer in [lo, hi]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.counter.count_tokens(self.text[s:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        if lo <= s:
            raise BadInput(
                f"the text at char {s} takes more than {max_tokens} tokens even one character "
                "at a time; use a larger budget"
            )
        return lo

    def _next_start(self, s: int, e: int, overlap: int) -> int:
        if overlap <= 0:
            return e
        last = bisect.bisect_left(self.ends, e)  # token ending at e
        first = bisect.bisect_right(self.ends, s)
        back = max(first + 1, last - overlap + 1)
        if back > last:
            return e
        pos = self.offsets[back][0]
        if pos == 0 or self.text[pos - 1].isspace():
            return pos
        m = _SPACE.search(self.text, pos, e)  # snap forward to a word start
        return m.end() if m and m.end() < e else pos


def chunk_document(
    text: str,
    counter: TokenCounter,
    max_tokens: int,
    *,
    overlap: int = 0,
    min_fill: float = 0.5,
    rebalance: bool = True,
) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``max_tokens`` tokens of ``counter``'s tokenizer.

    ``overlap`` tokens of each chunk's end are repeated at the start of the next. The last
    chunk is rebalanced with the one before it when it would be under half the budget.
    """
    if max_tokens < 1:
        raise BadInput(f"max_tokens must be at least 1, got {max_tokens}")
    if overlap < 0 or overlap >= max_tokens:
        raise BadInput(f"overlap must be in [0, max_tokens), got {overlap}")
    if not text.strip():
        return []
    cutter = _Cutter(text, counter, min_fill)
    spans = cutter.run(0, len(text), max_tokens, overlap)
    if rebalance and overlap == 0 and len(spans) >= 2 and spans[-1][2] < max_tokens // 2:
        (s0, _, n0), (_, e1, n1) = spans[-2], spans[-1]
        budget = max(1, (n0 + n1 + 1) // 2)
        while budget < max_tokens:
            try:
                pair = cutter.run(s0, e1, budget, 0)
            except BadInput:  # a smaller budget cannot hold some character: keep the cut
                break
            if len(pair) <= 2 and all(n <= max_tokens for _, _, n in pair):
                if min(n for _, _, n in pair) > n1:
                    spans = spans[:-2] + pair
                break
            budget += max(1, max_tokens // 20)
    return [Chunk(i, s, e, n, text[s:e]) for i, (s, e, n) in enumerate(spans)]
