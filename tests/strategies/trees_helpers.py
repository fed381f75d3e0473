"""Shared by the summary-tree tests: a three-topic document the hashing embedder separates,
and a scripted LLM that answers each DTCRS / RAPTOR stage's prompt."""

from __future__ import annotations

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query
from chunkwise.strategies.tree import CALL_KINDS

EMB = "hashing"

TOPICS = {
    "apples": "orchard apples harvest cider orchard apples trees fruit pick",
    "rockets": "rockets launch engine orbit fuel rockets thrust booster pad",
    "violins": "violins strings bow concert luthier violins music orchestra tune",
}


def topic_document(sentences_per_topic: int = 16) -> str:
    """Three sections, each on one topic in its own words, so the hashing embedder
    separates them."""
    parts = []
    for name, words in TOPICS.items():
        w = words.split()
        sents = [
            f"{w[i % len(w)].title()} {w[(i + 1) % len(w)]} {w[(i + 2) % len(w)]} {name} {i}."
            for i in range(sentences_per_topic)
        ]
        parts.append(f"{name.title()}\n\n" + " ".join(sents))
    parts[1] += " The secret launch code is 4711."
    return "\n\n".join(parts)


def stage(prompt: str) -> str:
    if "Table of contents of the text above" in prompt:
        return "toc"
    if "(yes or no)" in prompt:
        return "classify"
    if "Simpler questions" in prompt:
        return "decompose"
    if "In short, the passages above say that" in prompt:
        return "summarize"
    return "answer"


def scripted(classify: str = " yes", decompose: str | None = None) -> ScriptedLLM:
    decompose = decompose or (
        " What about apples and orchard harvest?\n2. What about rockets launch orbit?\n"
        "3. What about violins strings concert?"
    )
    rules = [
        (r"Table of contents of the text above:\n1\.$", " Apples\n2. Rockets\n3. Violins"),
        (r"\(yes or no\)\? Answer:$", classify),
        (r"Simpler questions[^\n]*\n1\.$", decompose),
        (r"In short, the passages above say that$", " things happened in order."),
        (r"code is (\d+)(?s:.*)Question: [^\n]*\n(?:Answer:|The letter)", r" \1"),
    ]
    return ScriptedLLM(rules=rules, default=" unknown", window=4096)


def kinds_seen(llm: ScriptedLLM) -> dict[str, int]:
    out = dict.fromkeys(CALL_KINDS, 0)
    for r in llm.calls:
        out[stage(r.prompt)] += 1
    return out


Q = Query("What is the secret launch code of the rockets?")
