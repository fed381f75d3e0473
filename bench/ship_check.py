"""Does a retrained adapter keep what the shipped one measured? Each cell of the shipped
adapter's published results beside the same cell of a candidate's bench runs, with the change
and its 95% interval (issue #49: "no seen-template cell drops by more than its interval").

Nothing is evaluated here: bench the candidate first with ``bench/mr_trained.py`` (any number
of ``--out`` folders), then::

    .venv/bin/python bench/ship_check.py \\
        --shipped docs/results/default-mr-4k.json --shipped docs/results/default-mr-8k-16k.json \\
        --candidate runs/bench/dmr3-seen/results.json --candidate runs/bench/dmr3-kv/results.json \\
        --json runs/bench/ship-check.json

The two sides are different documents (the shipped numbers are published, not re-run, and a
new wording changes the text), so the change's interval resamples each side on its own
(:func:`chunkwise.stats.difference_interval`). A cell "drops" when the whole interval is below
zero, "rises" when it is above, and is "within" otherwise. A family compared at several
lengths is also judged with its cells pooled (:func:`pooled_by_family`): a few points lower at
every length is a drop that no single 50-document cell can show. Per-document scores come from the
results file; a transcribed cell without them is rebuilt from its accuracy and n when its
family scores 0 or 1 per document (all but variable_tracking, which only at 0 or 100). It
prints the table and, last, the JSON; ``table(out)`` renders the JSON for the docs
(``table=ship_check``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_json, read_json
from chunkwise.stats import difference_interval
from chunkwise.tables import estimate, markdown_table

#: families whose per-document score is a fraction, not 0 or 1
FRACTIONAL = ("variable_tracking",)


def scores_of(name: str, cell: dict[str, Any]) -> list[float]:
    """The cell's per-document scores, or, for a transcribed 0/1 cell, the ones its accuracy
    and n imply (``k`` ones and ``n - k`` zeros)."""
    if cell.get("scores"):
        return [float(x) for x in cell["scores"]]
    n, acc = int(cell["n"]), float(cell["accuracy"])
    k = acc * n / 100
    binary = name.split("@")[0] not in FRACTIONAL or acc in (0.0, 100.0)
    if not binary or abs(k - round(k)) > 1e-6:
        raise SystemExit(f"cell {name}: no per-document scores, and {acc}% of {n} is not a count")
    return [1.0] * round(k) + [0.0] * (n - round(k))


def _cells(paths: list[Path], arm: str, side: str) -> dict[str, dict[str, Any]]:
    """Every cell of ``arm`` in the results files; a cell in two files is refused."""
    cells: dict[str, dict[str, Any]] = {}
    for path in paths:
        try:
            data = read_json(path, "results file")
        except BadInput as e:
            raise SystemExit(str(e)) from None
        arms = data.get("arms") if isinstance(data, dict) else None
        got = ((arms if isinstance(arms, dict) else {}).get(arm) or {}).get("cells")
        if not isinstance(got, dict):
            raise SystemExit(f"{path}: no arm {arm!r} with cells (--{side})")
        for name, cell in got.items():
            if name in cells:
                raise SystemExit(f"{path}: cell {name} is also in another --{side} file")
            cells[name] = {
                "accuracy": cell["accuracy"],
                "ci95": cell["ci95"],
                "n": cell["n"],
                "scores": scores_of(name, cell),
            }
    return cells


def verdict(lo: float, hi: float) -> str:
    """``drops`` when the change's interval is below zero, ``rises`` above it, else
    ``within``."""
    if hi < 0:
        return "drops"
    return "rises" if lo > 0 else "within"


def compare(shipped: dict[str, dict], candidate: dict[str, dict]) -> dict[str, Any]:
    """Per shipped cell the two scores, the change and the verdict; cells the candidate did not
    run are listed, not judged."""
    rows = {}
    for name in sorted(shipped, key=lambda n: (n.split("@")[0], _length(n))):
        if name not in candidate:
            continue
        s, c = shipped[name], candidate[name]
        change, lo, hi = difference_interval(c["scores"], s["scores"])
        rows[name] = {
            "shipped": {k: v for k, v in s.items() if k != "scores"},
            "candidate": {k: v for k, v in c.items() if k != "scores"},
            "change": round(100 * change, 6),
            "change_ci95": [round(100 * lo, 6), round(100 * hi, 6)],
            "verdict": verdict(lo, hi),
        }
    pooled = pooled_by_family(shipped, candidate, rows)
    return {
        "cells": rows,
        "families": pooled,
        "not_run": sorted(set(shipped) - set(candidate)),
        "only_candidate": sorted(set(candidate) - set(shipped)),
        "drops": sorted(n for n, r in rows.items() if r["verdict"] == "drops"),
        "no_drop": all(r["verdict"] != "drops" for r in rows.values()),
        "pooled_drops": sorted(f for f, r in pooled.items() if r["verdict"] == "drops"),
    }


def _length(name: str) -> tuple[int, str]:
    """``family@4000`` sorts by its length in tokens."""
    digits = name.split("@", 1)[-1].split(":")[0]
    return (int(digits) if digits.isdigit() else 0, name)


def pooled_by_family(
    shipped: dict[str, dict], candidate: dict[str, dict], rows: dict[str, Any]
) -> dict[str, Any]:
    """For each family compared at two lengths or more: every compared cell's documents
    pooled on each side (the cells' documents are independent, so each side is resampled as
    one sample), the change and its verdict. A family a little lower at every length can
    stay ``within`` in each cell, as 50 documents cannot tell 10 points, and drop pooled."""
    by_family: dict[str, list[str]] = {}
    for name in rows:
        by_family.setdefault(name.split("@")[0], []).append(name)
    out = {}
    for family, names in sorted(by_family.items()):
        if len(names) < 2:
            continue
        names = sorted(names, key=_length)
        s = [x for n in names for x in shipped[n]["scores"]]
        c = [x for n in names for x in candidate[n]["scores"]]
        change, lo, hi = difference_interval(c, s)
        out[family] = {
            "cells": names,
            "n": {"shipped": len(s), "candidate": len(c)},
            "shipped": round(100 * sum(s) / len(s), 6),
            "candidate": round(100 * sum(c) / len(c), 6),
            "change": round(100 * change, 6),
            "change_ci95": [round(100 * lo, 6), round(100 * hi, 6)],
            "verdict": verdict(lo, hi),
        }
    return out


def table(out: dict[str, Any]) -> str:
    rows = [
        [
            name,
            estimate(r["shipped"]["accuracy"], *r["shipped"]["ci95"]),
            estimate(r["candidate"]["accuracy"], *r["candidate"]["ci95"]),
            estimate(r["change"], *r["change_ci95"], signed=True),
            r["verdict"],
        ]
        for name, r in out["cells"].items()
    ]
    head = ["family @ length", "shipped", "candidate", "change [95%]", "verdict"]
    lines = [markdown_table(rows, head, align="lrrrl")]
    ns = sorted({r[k]["n"] for r in out["cells"].values() for k in ("shipped", "candidate")})
    lines.append(
        f"\nn = {', '.join(map(str, ns))} per cell; [95% bootstrap], the change's resampling "
        "each side's documents on its own"
    )
    if out["not_run"]:
        lines.append(f"Not run for the candidate: {', '.join(out['not_run'])}.")
    lines.append(
        "No cell drops (a change whose whole interval is below zero)."
        if out["no_drop"]
        else f"Drops (the whole interval below zero): {', '.join(out['drops'])}."
    )
    families = out.get("families") or {}
    if families:
        rows = [
            [
                f"{family} ({', '.join(n.split('@')[1] for n in r['cells'])})",
                f"{r['shipped']:.0f}",
                f"{r['candidate']:.0f}",
                estimate(r["change"], *r["change_ci95"], signed=True),
                r["verdict"],
            ]
            for family, r in families.items()
        ]
        head = ["family (lengths pooled)", "shipped", "candidate", "change [95%]", "verdict"]
        lines.append("\n" + markdown_table(rows, head, align="lrrrl"))
        drops = out.get("pooled_drops") or []
        lines.append(
            "\nEach side's documents at those lengths pooled into one sample; "
            + (f"pooled, {', '.join(drops)} drops." if drops else "no family drops pooled.")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shipped", type=Path, action="append", required=True)
    ap.add_argument("--candidate", type=Path, action="append", required=True)
    ap.add_argument("--arm", default="mr/mapreduce", help="the arm compared on both sides")
    ap.add_argument("--json", type=Path, help="write the comparison here")
    args = ap.parse_args(argv)
    out = compare(
        _cells(args.shipped, args.arm, "shipped"), _cells(args.candidate, args.arm, "candidate")
    )
    out["arm"] = args.arm
    out["shipped_files"] = [str(p) for p in args.shipped]
    out["candidate_files"] = [str(p) for p in args.candidate]
    print(table(out))
    if args.json:
        atomic_write_json(args.json, out)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
