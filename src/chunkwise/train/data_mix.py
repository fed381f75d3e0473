"""What a recipe's data teaches, per task family: the table of :attr:`FormatStats.mix`.

A MapReduce-mode recipe turns each record into map, collapse and reduce examples, then keeps
only a share of the map examples whose target is NO INFORMATION (``data.no_information_keep``,
per family ``data.no_information_keep_by_family``). What the adapter learns to abstain on is
decided by those counts, and they move whenever another family's data is added: a recipe that
adds findings elsewhere lowers every family's share of abstentions without touching its own
numbers. ``chunkwise train RECIPE --data-mix`` prints this table before any training (it
tokenizes, nothing more); every run keeps the same counts in ``train_info.json``
(``data_stats.mix``) and logs the table when its data is built.

One row per family (a record's ``meta.family``; ``-`` for records without one) and a total:

* ``map findings`` / ``map NO INFO``: map examples kept whose target is a finding / says
  NO INFORMATION; ``NO INFO left out``: those ``no_information_keep`` dropped;
* ``abstain %``: the share of the family's kept map examples that say NO INFORMATION;
* ``collapse``, ``reduce``, ``other`` (standard, chat, single: other modes' examples);
* ``tokens`` and ``token %``: the family's share of the tokens trained on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from chunkwise.tables import markdown_table

COLUMNS = (
    "family",
    "map findings",
    "map NO INFO",
    "NO INFO left out",
    "abstain %",
    "collapse",
    "reduce",
    "other",
    "examples",
    "tokens",
    "token %",
)


def mix_rows(mix: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per family of ``mix`` (``FormatStats.mix``), families sorted, then ``all``."""
    by_family: dict[str, Counter] = {}
    for key, n in mix.items():
        family, _, kind = key.rpartition("/")
        by_family.setdefault(family, Counter())[kind] += n
    total_tokens = sum(c["tokens"] for c in by_family.values())
    rows = [_row(f, by_family[f], total_tokens) for f in sorted(by_family)]
    if len(rows) > 1:
        rows.append(_row("all", sum(by_family.values(), Counter()), total_tokens))
    return rows


def _row(family: str, c: Counter, total_tokens: int) -> dict[str, Any]:
    found, empty = c["map_finding"], c["map_no_information"]
    other = sum(n for k, n in c.items() if k in ("standard", "chat", "single"))
    examples = found + empty + c["collapse"] + c["reduce"] + other
    return {
        "family": family,
        "map findings": found,
        "map NO INFO": empty,
        "NO INFO left out": c["map_no_information_dropped"],
        "abstain %": round(100 * empty / (found + empty), 1) if found + empty else None,
        "collapse": c["collapse"],
        "reduce": c["reduce"],
        "other": other,
        "examples": examples,
        "tokens": c["tokens"],
        "token %": round(100 * c["tokens"] / total_tokens, 1) if total_tokens else None,
    }


def mix_table(mix: Mapping[str, int]) -> str:
    """The markdown table of :func:`mix_rows`."""
    return _table(mix_rows(mix))


def _table(rows: list[dict[str, Any]]) -> str:
    return markdown_table(rows, list(COLUMNS), missing="-")


def results_table(results: Mapping[str, Any]) -> str:
    """Several recipes' mixes, one table each under its name: ``results["mixes"]`` is a list
    of ``{"name", "rows"}``, each ``rows`` what ``--data-mix --json`` printed (the docs'
    rendered blocks, bench/docs_numbers.py)."""
    parts = []
    for mix in results["mixes"]:
        parts.append(f"{mix['name']}:\n\n{_table(mix['rows'])}")
    return "\n\n".join(parts)


__all__ = ["COLUMNS", "mix_rows", "mix_table", "results_table"]
