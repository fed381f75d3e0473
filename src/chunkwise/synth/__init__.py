"""Pyramid-Align: long-context SFT data from short-context models.

pyramid_builder (chunks → summaries of ~3 children → one root; the tree itself in pyramid,
the summary rules in summaries), importance (leaf sentences scored, propagated upward),
questions (nodes drawn across levels, filtered by rules), document_worker (one document:
pyramid, questions, MapReduce answers, records), build (the run: workers, resumable ledger,
shards; its settings in config), outputs and shard_stats (the final files). Entry point:
:func:`run_synth` or ``chunkwise synth``.
"""

from chunkwise.synth.build import run_synth
from chunkwise.synth.config import SynthConfig
from chunkwise.synth.outputs import export, load_dataset
from chunkwise.synth.pyramid import Pyramid
from chunkwise.synth.pyramid_builder import PyramidBuilder, PyramidConfig
from chunkwise.synth.records import validate_record

__all__ = [
    "Pyramid",
    "PyramidBuilder",
    "PyramidConfig",
    "SynthConfig",
    "export",
    "load_dataset",
    "run_synth",
    "validate_record",
]
