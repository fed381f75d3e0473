"""Generated document families with ground truth down to the evidence, for the oracle teacher.

Each family builds documents whose answer is known *and* whose evidence is known: every
sentence that bears on the question, where it sits, what it says, and how reliable it is. The
oracle teacher (:mod:`chunkwise.synth.oracle`) asks a family, for each chunk MapReduce reads,
which evidence the chunk holds (:meth:`Family.evidence_in`) and what a set of evidence supports
(:meth:`Family.resolve`): that is the map target of one chunk, the collapse target of a group
and the reduce target of the whole, so the three stay consistent by construction.

Modules: ``base`` (the contract: evidence kinds and their confidence, :class:`Family`),
one module per family — ``needles`` (passkey, number_string, kv_retrieval), ``math_find``
(largest / smallest), ``multihop`` (fact chains, :mod:`chunkwise.data.multihop`),
``variable_tracking``, ``conflicting`` (one plain statement against a hedged, unreliable or
retracted one), ``extractive_qa`` (spans of Python's own reference text,
``pydoc_data.topics``, PSF License) — ``splits`` (what training sees, what is held out),
``wordings`` (the templates questions and evidence statements are worded with, each train or
held out: ``wordings.yaml``) and ``registry`` (name -> family).
"""

from chunkwise.data.families.base import CONFIDENCE, Doc, Evidence, Family, Finding, Straddle
from chunkwise.data.families.conflicting import Conflicting
from chunkwise.data.families.extractive_qa import ExtractiveQA, reference_sections, span_questions
from chunkwise.data.families.math_find import MathFind
from chunkwise.data.families.multihop import MultiHop
from chunkwise.data.families.needles import KVRetrieval, NumberString, Passkey
from chunkwise.data.families.registry import FAMILIES, get_family, train_families
from chunkwise.data.families.splits import (
    HELDOUT_FAMILY,
    HELDOUT_SEED,
    SPAN_HELDOUT_EVERY,
    TRAIN_LENGTHS,
    TRAIN_SEED,
    span_split,
)
from chunkwise.data.families.variable_tracking import VariableTracking

__all__ = [
    "CONFIDENCE",
    "FAMILIES",
    "HELDOUT_FAMILY",
    "HELDOUT_SEED",
    "SPAN_HELDOUT_EVERY",
    "TRAIN_LENGTHS",
    "TRAIN_SEED",
    "Conflicting",
    "Doc",
    "Evidence",
    "ExtractiveQA",
    "Family",
    "Finding",
    "KVRetrieval",
    "MathFind",
    "MultiHop",
    "NumberString",
    "Passkey",
    "Straddle",
    "VariableTracking",
    "get_family",
    "reference_sections",
    "span_questions",
    "span_split",
    "train_families",
]
