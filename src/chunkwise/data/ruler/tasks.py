"""The RULER task kinds (needles in a haystack, variable tracking, common and frequent words)
and the task table: each kind builds one example of a given size from a seeded draw."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Any

from chunkwise.data.ruler.haystacks import HAYSTACKS, NOISE_LINE, essay, grid_depths, insert
from chunkwise.data.ruler.wording import KIND_NAMES, templates
from chunkwise.data.ruler.words import distinct, distinct_from, draw, sample_words
from chunkwise.errors import BadInput

#: below this many tokens cwe uses RULER's short-context frequencies (6 and 1)
CWE_SHORT_CONTEXT = 4096


@dataclass(frozen=True)
class Made:
    """One built example before it is numbered."""

    context: str
    answer: list[str]
    meta: dict[str, Any]
    #: character spans of the lines this example's answer rests on (the asked needles, the
    #: chain's assignments), recorded as they are placed; None: the whole text is the evidence
    #: (cwe, fwe: word counts)
    evidence: list[tuple[int, int]] | None = None


def _placed_spans(context: str, lines: list[str]) -> list[tuple[int, int]]:
    """Where the placed ``lines`` landed in ``context`` (each line is placed once and is
    unique in it: keys and values are drawn distinct from the haystack)."""
    spans = []
    for line in lines:
        at = context.find(line)
        if at < 0:  # a generator bug, never a data condition
            raise AssertionError(f"placed line {line!r} is not in the context")
        spans.append((at, at + len(line)))
    return sorted(spans)


def _and_list(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


@dataclass(frozen=True)
class Niah:
    """Needles ``A special magic <kind> for <key> is: <value>.`` in a haystack."""

    haystack: str  # noise | essay | needle
    key: str  # words | numbers | uuids
    value: str
    keys: int = 1
    values: int = 1
    queries: int = 1
    kind: str = "niah"
    min_size: int = 1

    def make(self, size: int, rng: random.Random, depth: float, target: int) -> Made:
        fmt = templates()["needles"]["niah"]
        plural, one = KIND_NAMES[self.value]
        avoid_text = essay()[2] if self.haystack == "essay" else ""
        n_keys = max(self.keys, self.queries)
        keys = distinct(self.key, rng, n_keys, set(), avoid_text)
        values = distinct(self.value, rng, n_keys * self.values, set(keys), avoid_text)
        by_key = [values[i * self.values : (i + 1) * self.values] for i in range(n_keys)]
        asked = rng.sample(range(n_keys), self.queries)
        answers = [v for i in asked for v in by_key[i]]
        # the first answer needle at the sweep depth, every other needle at a grid depth
        order = [(i, j) for i in range(n_keys) for j in range(self.values)]
        first = (asked[0], 0)
        rest = [p for p in order if p != first]
        depth_of = dict(zip(rest, grid_depths(rng, len(rest), depth), strict=True))
        depth_of[first] = depth
        needles = [
            (depth_of[(i, j)], fmt.format(kind_one=one, key=keys[i], value=by_key[i][j]))
            for i, j in order
        ]
        real = set(keys) | set(values)

        def distractor(r: random.Random) -> str:
            k = draw(self.key, r)
            while k in real:
                k = draw(self.key, r)
            return fmt.format(kind_one=one, key=k, value=draw(self.value, r))

        context = HAYSTACKS[self.haystack](size, needles, rng, distractor)
        gold = [
            fmt.format(kind_one=one, key=keys[i], value=by_key[i][j])
            for i in asked
            for j in range(self.values)
        ]
        meta = {
            "query": _and_list([keys[i] for i in asked]),
            "kind": plural,
            "kind_one": one,
            "count": len(answers),
            "form": "one" if len(answers) == 1 else "many",
            "depths": [round(depth_of[(i, j)], 4) for i in asked for j in range(self.values)],
        }
        return Made(context, answers, meta, _placed_spans(context, gold))


def _var_name(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_uppercase, k=5))


@dataclass(frozen=True)
class VariableTracking:
    """Chains ``VAR A = 12345``, ``VAR B = VAR A``, ... hidden line by line in noise."""

    chains: int = 1
    hops: int = 4
    kind: str = "vt"
    min_size: int = 1

    def make(self, size: int, rng: random.Random, depth: float, target: int) -> Made:
        fmt = templates()["needles"]
        per = self.hops + 1
        names = distinct_from(rng, _var_name, self.chains * per, {"VAR"})
        values = distinct_from(rng, lambda r: str(r.randint(10000, 99999)), self.chains, set())
        placed: list[tuple[int, str]] = []
        positions: list[list[int]] = []
        asked_lines: list[str] = []
        for c in range(self.chains):
            chain = names[c * per : (c + 1) * per]
            lines = [fmt["vt_value"].format(name=chain[0], value=values[c])]
            lines += [
                fmt["vt_copy"].format(name=chain[j + 1], source=chain[j]) for j in range(self.hops)
            ]
            slots = range(size + 1)
            pos = sorted(rng.sample(slots, per) if size + 1 >= per else rng.choices(slots, k=per))
            positions.append(pos)
            if c == 0:
                asked_lines = lines
            placed.extend(zip(pos, lines, strict=True))
        # stable sort in _insert keeps each chain's lines in order, also within one gap
        context = "\n".join(insert([NOISE_LINE] * size, placed))
        meta = {
            "query": values[0],
            "count": per,
            "form": "one",
            "depths": [round(p / max(size, 1), 4) for p in positions[0]],
        }
        return Made(context, names[:per], meta, _placed_spans(context, asked_lines))


@dataclass(frozen=True)
class CommonWords:
    """A numbered list where ``common`` words occur ``freq_common`` times, the others
    ``freq_other`` times; the size is the number of distinct words."""

    common: int = 10
    freq_common: int = 30
    freq_other: int = 3
    short_freq: tuple[int, int] = (6, 1)
    kind: str = "cwe"
    min_size: int = 11

    def make(self, size: int, rng: random.Random, depth: float, target: int) -> Made:
        f_common, f_other = (
            self.short_freq if target < CWE_SHORT_CONTEXT else (self.freq_common, self.freq_other)
        )
        words = sample_words(rng, max(size, self.common + 1))
        common, other = words[: self.common], words[self.common :]
        items = common * f_common + other * f_other
        rng.shuffle(items)
        context = " ".join(f"{i}. {w}" for i, w in enumerate(items, 1))
        meta = {
            "query": "",
            "count": self.common,
            "form": "one",
            "frequencies": [f_common, f_other],
        }
        return Made(context, list(common), meta)


def zeta(alpha: float) -> float:
    """Riemann zeta at ``alpha`` > 1 (Euler-Maclaurin after 1000 terms)."""
    if alpha <= 1:
        raise BadInput(f"fwe: alpha must be above 1, got {alpha}")
    k = 1000
    head = sum(i**-alpha for i in range(1, k))
    return head + k ** (1 - alpha) / (alpha - 1) + k**-alpha / 2 + alpha * k ** (-alpha - 1) / 12


@dataclass(frozen=True)
class FrequentWords:
    """Coded words (``word_len`` random letters) with Zipf counts ``size * k^-alpha / zeta``;
    the top-ranked word is ``...`` (noise), the next ``answers`` ranks are asked. The
    vocabulary has ``target // 50`` words (RULER's rule); the size is the number of draws."""

    alpha: float = 2.0
    word_len: int = 6
    answers: int = 3
    kind: str = "fwe"
    min_size: int = 128

    def make(self, size: int, rng: random.Random, depth: float, target: int) -> Made:
        vocab_size = max(self.answers + 2, target // 50)
        letters = string.ascii_lowercase

        def coded(r: random.Random) -> str:
            return "".join(r.choices(letters, k=self.word_len))

        vocab = ["...", *distinct_from(rng, coded, vocab_size - 1, {"..."})]
        z = zeta(self.alpha)
        counts = [int(size * (k**-self.alpha) / z) for k in range(1, vocab_size + 1)]
        items = [w for w, c in zip(vocab, counts, strict=True) for _ in range(c)]
        rng.shuffle(items)
        meta = {
            "query": "",
            "count": self.answers,
            "form": "one",
            "counts": counts[: self.answers + 2],
        }
        return Made(" ".join(items), vocab[1 : 1 + self.answers], meta)


#: task name -> its definition (RULER's names and settings)
TASKS: dict[str, Any] = {
    "niah_single_1": Niah("noise", "words", "numbers"),
    "niah_single_2": Niah("essay", "words", "numbers"),
    "niah_single_3": Niah("essay", "words", "uuids"),
    "niah_multikey_1": Niah("essay", "words", "numbers", keys=4),
    "niah_multikey_2": Niah("needle", "words", "numbers"),
    "niah_multikey_3": Niah("needle", "uuids", "uuids"),
    "niah_multivalue": Niah("essay", "words", "numbers", values=4),
    "niah_multiquery": Niah("essay", "words", "numbers", keys=4, queries=4),
    "vt": VariableTracking(chains=1, hops=4),
    "cwe": CommonWords(),
    "fwe": FrequentWords(),
}
