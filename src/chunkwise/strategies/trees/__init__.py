"""The parts retrieval, RAPTOR and DTCRS share, one job per module:

* :mod:`.leaves` — sentence-packed chunks, cache keys, the leaf layer of a tree;
* :mod:`.nodes` — :class:`Node` and :class:`Tree` (JSON round trip);
* :mod:`.cache` — :class:`LRU`, the one bounded cache every strategy uses, and
  :class:`TreeCache` (an LRU that can also keep trees on disk);
* :mod:`.select` — collapsed-tree and traversal retrieval, the context text;
* :mod:`.calls` — prompt sets and :class:`TreeRun` (LLM calls counted by kind);
* :mod:`.summaries` — summarising clusters into a layer;
* :mod:`.answering` — the answer call and its budget;
* :mod:`.options` — option checks and the embedder choice, shared by the three strategies.

``chunkwise.strategies.tree`` re-exports all of it (the old single-module import path).
"""
