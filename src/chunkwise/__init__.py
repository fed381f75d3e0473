"""chunkwise: long documents, short-context models."""

__version__ = "0.1.0"
