"""Python's own language reference, shipped with every CPython: real English text with no
download and a clear licence.

``pydoc_data.topics`` holds the reference topics ``help()`` shows (about 80 topics, ~465K
characters of prose and grammar), part of the Python documentation, distributed under the PSF
License Version 2 (https://docs.python.org/3/license.html). The same Python version always
yields the same topics. Extractive QA documents (:mod:`chunkwise.data.families`) are cut from it.
"""

from __future__ import annotations

LICENSE = "PSF License Version 2 (Python documentation, pydoc_data.topics)"


def reference_topics() -> list[tuple[str, str]]:
    """``(topic, text)`` pairs in topic-name order (non-empty topics only)."""
    import pydoc_data.topics as topics

    return sorted((k, v.strip()) for k, v in topics.topics.items() if v.strip())


__all__ = ["LICENSE", "reference_topics"]
