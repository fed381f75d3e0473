"""Okapi BM25 over a small in-memory corpus (numpy; no extra dependency).

``BM25(docs).scores(query)`` gives one score per document; ``similarity(queries, docs)`` the
(len(queries), len(docs)) matrix. BM25 is asymmetric: ``similarity(a, b) != similarity(b, a).T``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, CJK characters)."""
    return _TOKEN.findall(text.lower())


class BM25:
    def __init__(self, corpus: Sequence[str], k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b
        docs = [tokenize(t) for t in corpus]
        self.n = len(docs)
        self.lengths = np.array([len(d) for d in docs], dtype=np.float64)
        self.avg_len = float(self.lengths.mean()) if self.n and self.lengths.sum() else 1.0
        self.tf: list[Counter[str]] = [Counter(d) for d in docs]
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        # the "+1" variant keeps idf positive for terms found in most documents
        self.idf = {t: float(np.log((self.n - n + 0.5) / (n + 0.5) + 1.0)) for t, n in df.items()}

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float64)
        if not self.n:
            return out
        norm = self.k1 * (1 - self.b + self.b * self.lengths / self.avg_len)
        for term in set(tokenize(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            f = np.array([c.get(term, 0) for c in self.tf], dtype=np.float64)
            out += idf * f * (self.k1 + 1) / (f + norm)
        return out

    def top_k(self, query: str, k: int) -> list[int]:
        s = self.scores(query)
        return [int(i) for i in np.argsort(-s, kind="stable")[:k]]


def similarity(queries: Sequence[str], docs: Sequence[str], **params: float) -> np.ndarray:
    """BM25 score of every query against every document (documents form the corpus)."""
    index = BM25(docs, **params)
    if not queries:
        return np.zeros((0, len(docs)))
    return np.stack([index.scores(q) for q in queries])
