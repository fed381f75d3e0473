"""What the RULER tasks draw: needle keys (``adjective-noun``), values (numbers, UUIDs),
distinct draws, and the list words of cwe (real words of the Python reference, then made-up
pronounceable ones)."""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable
from functools import cache

from chunkwise.data.ruler.haystacks import essay
from chunkwise.errors import BadInput

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


def draw(kind: str, rng: random.Random) -> str:
    """One random value of ``kind`` (numbers: seven digits; words: a needle key; uuids)."""
    if kind == "numbers":
        return str(rng.randint(10**6, 10**7 - 1))
    if kind == "words":
        return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def distinct(
    kind: str, rng: random.Random, count: int, avoid: set[str], text: str = ""
) -> list[str]:
    """``count`` distinct draws of ``kind``, none in ``avoid`` nor occurring in ``text``."""
    out: list[str] = []
    seen = set(avoid)
    while len(out) < count:
        v = draw(kind, rng)
        if v in seen or (text and v in text):
            continue
        seen.add(v)
        out.append(v)
    return out


def distinct_from(
    rng: random.Random, draw: Callable[[random.Random], str], count: int, avoid: set[str]
) -> list[str]:
    """``count`` distinct values of ``draw``, none in ``avoid``."""
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


def sample_words(rng: random.Random, count: int) -> list[str]:
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
