"""Token counting, sentence splitting and the token-budgeted chunker."""

from chunkwise.text.budget import chunk_budget
from chunkwise.text.chunker import Chunk, chunk_document
from chunkwise.text.sentences import split_sentences
from chunkwise.text.tokens import HFTokenCounter, TokenCounter, WordPieceCounter, middle_truncate

__all__ = [
    "Chunk",
    "HFTokenCounter",
    "TokenCounter",
    "WordPieceCounter",
    "chunk_budget",
    "chunk_document",
    "middle_truncate",
    "split_sentences",
]
