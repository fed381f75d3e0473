"""The demo's documents: Python's own language reference, shipped with every CPython.

``pydoc_data.topics`` holds the reference topics ``help()`` shows (about 80 topics, ~465K
characters of English prose and grammar). It is part of the Python documentation, distributed
under the PSF License Version 2 (https://docs.python.org/3/license.html), so the demo needs no
download and no data of unclear licence. Documents are built by concatenating whole topics in
a fixed order (each under its own heading) until a size target is reached, so the same Python
version always yields the same documents.
"""

from __future__ import annotations

from pathlib import Path

from chunkwise.io import atomic_write_text

LICENSE = "PSF License Version 2 (Python documentation, pydoc_data.topics)"

#: characters per token of English reference prose for a Gemma/Llama tokenizer (a size target
#: only; the real counts are measured later by the tools that read the documents)
CHARS_PER_TOKEN = 4.0


def reference_topics() -> list[tuple[str, str]]:
    """``(topic, text)`` pairs in topic-name order (non-empty topics only)."""
    import pydoc_data.topics as topics

    return sorted((k, v.strip()) for k, v in topics.topics.items() if v.strip())


def build_documents(n: int, tokens: int) -> list[tuple[str, str]]:
    """``n`` documents of about ``tokens`` tokens each, from disjoint runs of topics (topics
    are reused only when the reference runs out). Topics longer than the target are cut at a
    paragraph boundary."""
    if n < 1 or tokens < 50:
        raise ValueError("need n >= 1 and tokens >= 50")
    topics = reference_topics()
    budget = int(tokens * CHARS_PER_TOKEN)
    docs: list[tuple[str, str]] = []
    i = 0
    for d in range(n):
        parts: list[str] = []
        used = 0
        first = topics[i % len(topics)][0]
        while used < budget:
            name, text = topics[i % len(topics)]
            i += 1
            section = f"## {name}\n\n{text}"
            if used + len(section) > budget:
                section = _cut(section, budget - used)
                if not section:
                    break
            parts.append(section)
            used += len(section) + 2
        docs.append((f"doc{d:02d}-{first}", "\n\n".join(parts)))
    return docs


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at the last paragraph break (or '')."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    at = head.rfind("\n\n")
    return head[:at].rstrip() if at > 0 else ""


def write_documents(folder: Path, n: int, tokens: int) -> list[Path]:
    """Write the documents as ``<name>.txt`` (unchanged files are left alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in build_documents(n, tokens):
        path = folder / f"{name}.txt"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write_text(path, text)
        paths.append(path)
    return paths


__all__ = ["LICENSE", "build_documents", "write_documents"]
