"""LLM×MapReduce: map every chunk, collapse while the results do not fit, reduce once.

Map outputs follow the structured information protocol (:mod:`chunkwise.strategies.protocol`)
and are parsed; records whose *answer* says NO INFORMATION are dropped; the rest are collapsed in
document order until they fit the reduce call; the reduce call resolves conflicts by confidence.
Confidence comes from the model's own 0-5 score (``self``), from the mean probability of the
answer tokens (``logprob``), or both; ``confidence=off`` neither asks for, shows nor uses one.
Chat models get the protocol as instructions; base models get completion scaffolds
(``prompts/mapreduce/base.yaml``).

Two separate ablation knobs: ``calibration=false`` removes exactly the in-context calibration
block (scoring principles and worked example) from the map, collapse and reduce prompts and
changes nothing else; ``confidence=off`` removes the confidence score itself (not requested,
not shown to collapse/reduce, no floor, no confidence ordering).

One module per job:

    strategy.py      the options, the plan (prompt set, chunk budget, chunks), the run in order
    prompts.py       the prompt set rendered into map, collapse and reduce prompts
    replies.py       a map or collapse reply read as a record, with its confidence
    confidence.py    the confidence source, the follow-up ask, the floor
    map_stage.py     the map wave and the grounding checks on its findings
    echo.py          the check that a finding does not answer with the question's own quote
    collapse.py      grouping and merging records until they fit the reduce call
    reduce.py        the final call and its answer
    intermediate.py  the trace as Pyramid-Align's intermediate output M
"""

from chunkwise.strategies.mapreduce.collapse import CollapseError, pack_groups
from chunkwise.strategies.mapreduce.intermediate import to_intermediate
from chunkwise.strategies.mapreduce.prompts import NO_RELEVANT
from chunkwise.strategies.mapreduce.replies import NO_INFO_STOP
from chunkwise.strategies.mapreduce.strategy import MapPlan, MapReduce

__all__ = [
    "NO_INFO_STOP",
    "NO_RELEVANT",
    "CollapseError",
    "MapPlan",
    "MapReduce",
    "pack_groups",
    "to_intermediate",
]
