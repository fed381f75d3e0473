"""Shared helpers for the synthesis tests: a scripted model that plays every synthesis role."""

from __future__ import annotations

import re
import time

from chunkwise.llm.scripted import ScriptedLLM

SUMMARY_CUE = "In short, the text above says that"
QUESTION_CUE = "A question that the text above answers:"


def key_sentences(m: re.Match[str]) -> list[str]:
    return [line[2:] for line in m.group(1).splitlines() if line.startswith("- ")]


def summary_from_keys(m: re.Match[str]) -> str:
    """A summary that keeps the first two marked sentences (as a good summarizer would)."""
    return " " + " ".join(key_sentences(m)[:2])


def question_from_text(m: re.Match[str]) -> str:
    words = [w.lower() for w in re.findall(r"[A-Za-z]{6,}", m.group(1))]
    picked = list(dict.fromkeys(words))[:2] or ["thing"]
    return " is said about " + " and ".join(picked) + "?"


def synth_llm(
    window: int = 2048,
    *,
    summary=summary_from_keys,
    question=question_from_text,
    answer: str = " the answer is forty two",
    delay: float = 0.0,
) -> ScriptedLLM:
    def slow(reply):
        if not delay:
            return reply

        def f(m):
            time.sleep(delay)
            return reply(m) if callable(reply) else m.expand(reply)

        return f

    return ScriptedLLM(
        rules=[
            (r"Key sentences:\n(.*?)\n\n" + re.escape(SUMMARY_CUE) + "$", slow(summary)),
            (r"(.*)\n\n" + re.escape(QUESTION_CUE) + r"\n[A-Z]\w*(?: \w+)*$", slow(question)),
            (r"Question: .*\nAnswer:$", slow(answer)),
        ],
        window=window,
    )


def topic_text(words: int, topic: str, seed: int = 0) -> str:
    """Plain English-like sentences about ``topic`` of about ``words`` words."""
    import random

    rng = random.Random(f"{topic}:{seed}")
    verbs = ["describes", "changes", "follows", "supports", "explains", "limits", "extends"]
    nouns = [
        "harbor",
        "engine",
        "garden",
        "ledger",
        "bridge",
        "market",
        "lantern",
        "orchard",
        "compass",
        "library",
        "furnace",
        "meadow",
    ]
    out, n = [], 0
    while n < words:
        s = (
            f"The {topic} {rng.choice(verbs)} the {rng.choice(nouns)} near the "
            f"{rng.choice(nouns)} every {rng.choice(['morning', 'season', 'year', 'week'])}."
        )
        out.append(s)
        n += len(s.split())
    return " ".join(out)
