"""RULER-style synthetic tasks at any length, offline, in the benchmark record shape.

The task set and its settings follow NVIDIA/RULER (``scripts/synthetic.yaml`` and
``scripts/data/synthetic/*.py``); names are RULER's:

=================  ===========================================================  ==========
task               what is hidden and asked                                     haystack
=================  ===========================================================  ==========
niah_single_1      one word key -> one 7-digit number                           noise
niah_single_2      one word key -> one 7-digit number                           essay
niah_single_3      one word key -> one UUID                                     essay
niah_multikey_1    four word keys, one number each; one key asked               essay
niah_multikey_2    one word key -> number among distractor needles              needles
niah_multikey_3    one UUID key -> UUID among distractor needles                needles
niah_multivalue    one word key with four numbers; all four asked               essay
niah_multiquery    four word keys, one number each; all four asked              essay
vt                 one chain ``VAR A = 12345``, ``VAR B = VAR A``, ... (4 hops)  noise
                   hidden line by line; every variable holding the value asked
cwe                numbered word list: 10 words 30 times each, the rest 3 times
                   (6 and 1 below 4K tokens); the 10 common words asked
fwe                coded words with Zipf counts (alpha 2, '...' ranked first);
                   the three next most frequent asked
=================  ===========================================================  ==========

Haystacks: ``noise`` is the repeated noise sentence (InfiniteBench's and RULER's), ``essay``
is Python's own language reference (``pydoc_data.topics``, shipped with CPython, PSF License;
RULER uses Paul Graham's essays, which would need a download), whitespace-normalised and
repeated when a context needs more words, with needles put at sentence ends; ``needles`` is a
haystack made only of needles with other keys.

Length: ``length_tokens`` is the token count of the **context** (the instructions and the
question add some tens of tokens), measured with the caller's ``count_tokens``. The repeated
unit (noise line, essay word, distractor needle, distinct list word, coded word) is sized by
two small probes and secant steps on full contexts (about three tokenizations of a full
context), then each example is measured once and re-sized only if its own random content puts
it more than 1% off. Needles: across ``n`` examples the first answer needle's depth sweeps
0 -> 1 (a single example sits in the middle); further needles take distinct depths from
RULER's grid of 40 depths; vt's chain lines take random positions in order (RULER's rule).
Everything is drawn from ``random.Random`` seeded with the task and ``seed``, so a seed always
gives the same records.

What differs from RULER, on purpose: RULER sizes the whole prompt (template + context +
generated tokens) to the sequence length; RULER's vt and cwe prompts carry a worked example
(few-shot), which a chunked reader would meet as a chunk of the document, so ours have none;
the wording of needles and questions is ours (``prompts/ruler.yaml``); word keys pair our own
adjective and noun lists (RULER uses wonderwords'); cwe draws real words from the Python
reference (~2,500 of them) and, when a long list needs more, made-up pronounceable words too
(RULER falls back to a larger English word list).

Records: ``{id, context, input, answer, options, meta}``; ``answer`` is the list of expected
strings (scored by the fraction present in the prediction, RULER's ``string_match_all``),
``meta`` holds what the question templates need (``query``, ``kind``, ``count``, ...), the
answer needles' depths and the measured ``tokens``.
"""

from __future__ import annotations

import bisect
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from importlib import resources
from typing import Any

from chunkwise.config import load_yaml
from chunkwise.data.synthetic import NOISE, needle_depths
from chunkwise.errors import BadInput

CountTokens = Callable[[str], int]

NOISE_LINE = NOISE.strip()
#: RULER's needle depths: 40 points from 0% to 100% of the document
DEPTH_GRID = tuple(k / 39 for k in range(40))
#: relative error the size search aims for (the contract is 2%)
_AIM = 0.004
#: an example whose own random content lands further off than this is re-sized
_EXAMPLE_TOL = 0.01
#: below this many tokens cwe uses RULER's short-context frequencies (6 and 1)
CWE_SHORT_CONTEXT = 4096

# Needle keys are ``adjective-noun`` pairs (RULER draws them from wonderwords' lists; these
# are ours). No adjective ends another and no noun starts another, so no key is a substring
# of another key.
ADJECTIVES = tuple(
    """
    able acid amber ample angry antique arctic ashen autumn balmy bashful bitter bland blazing
    blunt bouncy brave breezy brisk bronze bumpy calm candid cheery chilly civic clumsy cobalt
    coral cozy crimson crisp curly dainty damp dapper dizzy dreamy dusky dusty eager early
    earnest elegant empty faded fancy feisty fervent fierce filthy fluffy foggy formal fragile
    frosty frugal fuzzy gentle giddy gloomy glossy golden grumpy hasty hazy hearty hollow humble
    husky idle jagged jolly jovial keen lanky lavish lively lofty loyal lucky lunar mellow merry
    misty modest murky nimble noisy nutty oblong ochre odd plump polite proud quaint quiet rapid
    rosy royal rusty sandy scarlet shaggy shiny silky sleepy slender snowy soggy solar spicy
    stormy sturdy sunny swift tender thorny tidy timid tiny tranquil vivid wary wicked windy
    witty woolly zesty
    """.split()
)
NOUNS = tuple(
    """
    acorn anchor anthem apron arrow attic badger bagel ballad banjo barrel beacon beetle bishop
    blanket blossom bonnet bracelet breeze bucket buffalo button cabin cactus camel candle
    canyon carpet castle cellar cherry chimney cider circus cloud clover cobbler comet compass
    cookie cottage crayon cricket crystal cushion dagger dolphin donkey dragon drum eagle easel
    ember falcon feather ferry fiddle fjord forest fossil fountain galaxy garden garlic geyser
    glacier goblet gondola gravel guitar hammock harbor harp hedgehog helmet hermit honey
    iceberg igloo island jacket jasmine jigsaw kettle kiwi ladder lagoon lantern lemon lizard
    lobster locket magnet mango marble meadow mitten monsoon muffin napkin needle nutmeg oasis
    octopus olive orchard otter paddle parrot pebble pepper piano pillow pirate plum pocket pony
    potato puddle quartz quill rabbit raven ribbon river robot saddle salmon satchel scarf
    shovel sparrow spoon squirrel statue teapot thimble thistle tiger tractor trumpet tulip
    turnip umbrella valley velvet violin volcano waffle walnut whistle willow window zebra
    """.split()
)
#: value kinds: plural and singular display names
KIND_NAMES = {
    "numbers": ("numbers", "number"),
    "words": ("words", "word"),
    "uuids": ("UUIDs", "UUID"),
}


@cache
def templates() -> dict[str, Any]:
    """``prompts/ruler.yaml``: needle formats and question wording per task kind."""
    path = resources.files("chunkwise.prompts") / "ruler.yaml"
    return load_yaml(path.read_text(encoding="utf-8"), "prompts/ruler.yaml")


def prompt_version() -> str:
    return str(templates().get("version", "0"))


@dataclass(frozen=True)
class Made:
    """One built example before it is numbered."""

    context: str
    answer: list[str]
    meta: dict[str, Any]


def _and_list(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


# --------------------------------------------------------------------------------------------
# draws


def _draw(kind: str, rng: random.Random) -> str:
    if kind == "numbers":
        return str(rng.randint(10**6, 10**7 - 1))
    if kind == "words":
        return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _distinct(
    kind: str, rng: random.Random, count: int, avoid: set[str], text: str = ""
) -> list[str]:
    """``count`` distinct draws of ``kind``, none in ``avoid`` nor occurring in ``text``."""
    out: list[str] = []
    seen = set(avoid)
    while len(out) < count:
        v = _draw(kind, rng)
        if v in seen or (text and v in text):
            continue
        seen.add(v)
        out.append(v)
    return out


# --------------------------------------------------------------------------------------------
# haystacks: (size, [(depth, needle text)], rng, distractor) -> context


def _insert(units: list[str], placed: list[tuple[int, str]]) -> list[str]:
    """``units`` with each ``(position, text)`` put before unit ``position`` (stable order)."""
    out: list[str] = []
    prev = 0
    for pos, text in sorted(placed, key=lambda p: p[0]):
        out.extend(units[prev:pos])
        out.append(text)
        prev = pos
    out.extend(units[prev:])
    return out


def _noise_haystack(size: int, needles, rng, distractor) -> str:
    units = [NOISE_LINE] * size
    return "\n".join(_insert(units, [(round(d * size), t) for d, t in needles]))


def _needle_haystack(size: int, needles, rng, distractor) -> str:
    units = [distractor(rng) for _ in range(size)]
    return "\n".join(_insert(units, [(round(d * size), t) for d, t in needles]))


@cache
def essay() -> tuple[tuple[str, ...], tuple[int, ...], str]:
    """Python's reference topics as one word stream: (words, insertion points after a sentence
    end, the text once)."""
    import pydoc_data.topics as topics

    text = " ".join(v for _, v in sorted(topics.topics.items()) if v.strip())
    words = tuple(re.sub(r"\s+", " ", text).strip().split(" "))
    ends = tuple(i + 1 for i, w in enumerate(words) if len(w) > 1 and w[-1] in ".!?")
    return words, ends, " ".join(words)


def _sentence_point(target: int, size: int) -> int:
    """The insertion point nearest ``target`` that follows a sentence end (cycles repeat)."""
    words, ends, _ = essay()
    if target <= 0 or size <= 0:
        return 0
    if target >= size:
        return size
    base = target - target % len(words)
    j = bisect.bisect_left(ends, target - base)
    cands = [base]  # a cycle starts after the previous cycle's last sentence
    if j < len(ends):
        cands.append(base + ends[j])
    if j > 0:
        cands.append(base + ends[j - 1])
    return min((c for c in cands if 0 <= c <= size), key=lambda c: abs(c - target))


def _essay_haystack(size: int, needles, rng, distractor) -> str:
    words = essay()[0]
    reps = -(-size // len(words))
    units = list(words * reps)[:size] if reps > 1 else list(words[:size])
    placed = [(_sentence_point(round(d * size), size), t) for d, t in needles]
    return " ".join(_insert(units, placed))


HAYSTACKS: dict[str, Callable[..., str]] = {
    "noise": _noise_haystack,
    "essay": _essay_haystack,
    "needle": _needle_haystack,
}


def _grid_depths(rng: random.Random, count: int, first: float) -> list[float]:
    """``count`` distinct grid depths, avoiding the grid point nearest ``first``."""
    near = min(DEPTH_GRID, key=lambda g: abs(g - first))
    grid = [g for g in DEPTH_GRID if g != near]
    if count <= len(grid):
        return rng.sample(grid, count)
    return [rng.random() for _ in range(count)]


# --------------------------------------------------------------------------------------------
# task kinds


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
        keys = _distinct(self.key, rng, n_keys, set(), avoid_text)
        values = _distinct(self.value, rng, n_keys * self.values, set(keys), avoid_text)
        by_key = [values[i * self.values : (i + 1) * self.values] for i in range(n_keys)]
        asked = rng.sample(range(n_keys), self.queries)
        answers = [v for i in asked for v in by_key[i]]
        # the first answer needle at the sweep depth, every other needle at a grid depth
        order = [(i, j) for i in range(n_keys) for j in range(self.values)]
        first = (asked[0], 0)
        rest = [p for p in order if p != first]
        depth_of = dict(zip(rest, _grid_depths(rng, len(rest), depth), strict=True))
        depth_of[first] = depth
        needles = [
            (depth_of[(i, j)], fmt.format(kind_one=one, key=keys[i], value=by_key[i][j]))
            for i, j in order
        ]
        real = set(keys) | set(values)

        def distractor(r: random.Random) -> str:
            k = _draw(self.key, r)
            while k in real:
                k = _draw(self.key, r)
            return fmt.format(kind_one=one, key=k, value=_draw(self.value, r))

        context = HAYSTACKS[self.haystack](size, needles, rng, distractor)
        meta = {
            "query": _and_list([keys[i] for i in asked]),
            "kind": plural,
            "kind_one": one,
            "count": len(answers),
            "form": "one" if len(answers) == 1 else "many",
            "depths": [round(depth_of[(i, j)], 4) for i in asked for j in range(self.values)],
        }
        return Made(context, answers, meta)


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
        names = _distinct_from(rng, _var_name, self.chains * per, {"VAR"})
        values = _distinct_from(rng, lambda r: str(r.randint(10000, 99999)), self.chains, set())
        placed: list[tuple[int, str]] = []
        positions: list[list[int]] = []
        for c in range(self.chains):
            chain = names[c * per : (c + 1) * per]
            lines = [fmt["vt_value"].format(name=chain[0], value=values[c])]
            lines += [
                fmt["vt_copy"].format(name=chain[j + 1], source=chain[j]) for j in range(self.hops)
            ]
            slots = range(size + 1)
            pos = sorted(rng.sample(slots, per) if size + 1 >= per else rng.choices(slots, k=per))
            positions.append(pos)
            placed.extend(zip(pos, lines, strict=True))
        # stable sort in _insert keeps each chain's lines in order, also within one gap
        context = "\n".join(_insert([NOISE_LINE] * size, placed))
        meta = {
            "query": values[0],
            "count": per,
            "form": "one",
            "depths": [round(p / max(size, 1), 4) for p in positions[0]],
        }
        return Made(context, names[:per], meta)


def _distinct_from(
    rng: random.Random, draw: Callable[[random.Random], str], count: int, avoid: set[str]
) -> list[str]:
    out: list[str] = []
    seen = set(avoid)
    while len(out) < count:
        v = draw(rng)
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


@cache
def reference_words() -> tuple[str, ...]:
    """Lower-case words of 4-10 letters from Python's reference topics and our key lists."""
    words = set(ADJECTIVES) | set(NOUNS)
    words.update(re.findall(r"\b[a-z]{4,10}\b", essay()[2]))
    return tuple(sorted(w for w in words if len(w) >= 4))


_SYLLABLES = tuple(c + v for c in "bdfghjklmnprstvz" for v in "aeiou")  # 80


def _pseudo_word(i: int) -> str:
    """The ``i``-th pronounceable made-up word (three syllables, then four)."""
    n = len(_SYLLABLES)
    parts = 3 if i < n**3 else 4
    i = i if parts == 3 else i - n**3
    return "".join(_SYLLABLES[(i // n**k) % n] for k in range(parts))


def _sample_words(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct words: real ones while they suffice (as RULER samples wonderwords'
    lists), then real and made-up ones together (RULER falls back to a larger word list)."""
    real = reference_words()
    if count <= len(real):
        return rng.sample(real, count)
    space = len(real) + len(_SYLLABLES) ** 3 + len(_SYLLABLES) ** 4
    if count > space // 2:
        raise BadInput(f"cwe: {count} distinct words asked; at most {space // 2} are available")
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        for i in rng.sample(range(space), count - len(out)):
            w = real[i] if i < len(real) else _pseudo_word(i - len(real))
            if w not in seen:
                seen.add(w)
                out.append(w)
    return out


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
        words = _sample_words(rng, max(size, self.common + 1))
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

        vocab = ["...", *_distinct_from(rng, coded, vocab_size - 1, {"..."})]
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


# --------------------------------------------------------------------------------------------
# sizing


def _fit(
    build: Callable[[int], str], target: int, count_tokens: CountTokens, min_size: int
) -> tuple[int, float, dict[int, int]]:
    """The unit count whose context is closest to ``target`` tokens, the tokens one unit adds
    near it, and every full-size measurement made ({size: tokens}).

    Two small probes give a first slope; then secant steps on full-size contexts (at most
    four, usually two or three) until one lands within 0.4% of the target.
    """
    s0 = max(min_size, 8)
    t0 = count_tokens(build(s0))
    s1 = max(s0 + 1, round(min(target, 2048) / max(t0 / s0, 1e-6)))
    t1 = count_tokens(build(s1))
    points = [(s0, t0), (s1, t1)]
    measured: dict[int, int] = {}
    per = max(t1 / s1, 1e-6)
    for _ in range(4):
        (a, ta), (b, tb) = points[-2], points[-1]
        per = (tb - ta) / (b - a) if b != a else 0.0
        if per <= 0:
            per = max(tb / b, 1e-6)
        size = round(b + (target - tb) / per)
        if size < min_size:
            raise BadInput(
                f"a context of {target} tokens is too short for this task: its smallest "
                f"context takes about {t0 + round((min_size - s0) * per)} tokens"
            )
        if size in measured:
            break  # granularity reached
        got = count_tokens(build(size))
        measured[size] = got
        points.append((size, got))
        if abs(got - target) <= _AIM * target:
            break
    best = min(measured, key=lambda s: abs(measured[s] - target))
    return best, per, measured


def _generate(
    name: str, *, length_tokens: int, n: int, seed: int, count_tokens: CountTokens
) -> list[dict[str, Any]]:
    spec = TASKS[name]
    rng = random.Random(f"ruler/{name}/{seed}")
    seeds = [rng.getrandbits(64) for _ in range(n)]
    depths = needle_depths(n)

    def build(i: int, size: int) -> Made:
        return spec.make(size, random.Random(seeds[i]), depths[i], length_tokens)

    size, per, measured = _fit(
        lambda s: build(0, s).context, length_tokens, count_tokens, spec.min_size
    )
    out = []
    for i in range(n):
        s, best = size, None
        for attempt in range(3):
            made = build(i, s)
            got = measured[s] if i == 0 and s in measured else count_tokens(made.context)
            err = abs(got - length_tokens)
            if best is None or err < best[0]:
                best = (err, made, got)
            if err <= _EXAMPLE_TOL * length_tokens or attempt == 2:
                break
            step = round((length_tokens - got) / per) or (1 if got < length_tokens else -1)
            s = max(spec.min_size, s + step)
        assert best is not None
        _, made, got = best
        out.append(_record(name, i, made, got))
    return out


def _record(name: str, i: int, made: Made, tokens: int) -> dict[str, Any]:
    meta = {"task": name, **made.meta, "tokens": tokens, "version": prompt_version()}
    return {
        "id": i,
        "context": made.context,
        "input": render_question(name, meta, "chat"),
        "answer": list(made.answer),
        "options": [],
        "meta": meta,
    }


def render_question(task: str, meta: dict[str, Any], style: str) -> str:
    """The question of ``task`` for an example's ``meta``; style is chat | base."""
    spec = templates()["kinds"][TASKS[task].kind]
    form = meta.get("form", "one")
    return spec[style][form].format(**_fields(meta))


def render_answer_prefix(task: str, meta: dict[str, Any]) -> str:
    spec = templates()["kinds"][TASKS[task].kind]
    return spec["answer_prefix"][meta.get("form", "one")].format(**_fields(meta))


def _fields(meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "query": meta.get("query", ""),
        "kind": meta.get("kind", ""),
        "kind_one": meta.get("kind_one", ""),
        "count": meta.get("count", ""),
    }


GENERATORS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    name: partial(_generate, name) for name in TASKS
}


def generate(
    task: str, *, length_tokens: int, n: int, seed: int, count_tokens: CountTokens
) -> list[dict[str, Any]]:
    """``n`` records of RULER task ``task`` whose contexts each take ~``length_tokens``."""
    gen = GENERATORS.get(task)
    if gen is None:
        raise BadInput(f"no RULER task {task!r}; available: {', '.join(GENERATORS)}")
    if length_tokens <= 0:
        raise BadInput(f"length must be a positive number of tokens, got {length_tokens}")
    if n <= 0:
        raise BadInput(f"n must be at least 1, got {n}")
    return gen(length_tokens=length_tokens, n=n, seed=seed, count_tokens=count_tokens)


__all__ = [
    "GENERATORS",
    "TASKS",
    "CommonWords",
    "FrequentWords",
    "Niah",
    "VariableTracking",
    "essay",
    "generate",
    "prompt_version",
    "render_answer_prefix",
    "render_question",
    "templates",
    "zeta",
]
