"""Pyramid-Align: long-context SFT data from short-context models.

pyramid (chunks → summaries of ~3 children → one root), importance (leaf sentences scored,
propagated upward), questions (nodes drawn across levels, filtered by rules), build (MapReduce
answers, records, resumable sharded output). Entry point: :func:`run_synth` or ``chunkwise synth``.
"""

from chunkwise.synth.build import SynthConfig, export, load_dataset, run_synth
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
