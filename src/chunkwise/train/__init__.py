"""Supervised fine-tuning for long contexts: formats, packing, loss weighting, the loop, MFU.

Entry points: ``train/sft.py`` (what ``accelerate launch`` runs) and ``chunkwise train``; both
call :func:`chunkwise.train.loop.main`. Modules import torch and transformers lazily where they
can, so ``import chunkwise.train`` stays cheap.
"""
