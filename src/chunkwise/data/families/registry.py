"""The registry of document families: name -> family."""

from __future__ import annotations

from chunkwise.data.families.base import Family
from chunkwise.data.families.conflicting import Conflicting
from chunkwise.data.families.extractive_qa import ExtractiveQA
from chunkwise.data.families.math_find import MathFind
from chunkwise.data.families.multihop import MultiHop
from chunkwise.data.families.needles import KVRetrieval, NumberString, Passkey
from chunkwise.data.families.splits import HELDOUT_FAMILY
from chunkwise.data.families.variable_tracking import VariableTracking
from chunkwise.errors import BadInput

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Passkey(),
        NumberString(),
        KVRetrieval(),
        MathFind(),
        MultiHop(),
        VariableTracking(),
        Conflicting(),
        ExtractiveQA(),
    )
}


def train_families() -> list[str]:
    return [f for f in FAMILIES if f != HELDOUT_FAMILY]


def get_family(name: str) -> Family:
    if name not in FAMILIES:
        raise BadInput(f"unknown document family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]
