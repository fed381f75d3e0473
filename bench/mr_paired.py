"""Two models on the same documents: the paired difference per cell of a ``bench/mr_trained.py``
ledger, with a 95% paired bootstrap interval.

Two adapters benched into one ``--out`` (the ledger keys a packaged adapter by its content
hash, so the cells of both stay there side by side) are answered on the same held-out
documents; the per-document difference is a tighter test than two overlapping intervals.

    .venv/bin/python bench/mr_paired.py runs/bench/n50 --a default-mr-7027f1074a2e \\
        --b default-mr-e7ef30ab1b29

``--a`` and ``--b`` pick a model by a piece of its identity (an adapter hash, a model spec).
Prints one JSON object and a markdown table (b - a in points, [95% interval], n documents
answered by both); ``--out DIR`` also writes ``paired.json`` and ``paired.md``.

``--models P1 P2 P3 ...`` instead asks whether several models (one recipe's seeds) agree:
per cell that all of them answered, each one's accuracy and every pair's paired interval; a
cell agrees when every pair's interval holds 0, and the recipe reproduces within noise when
every cell agrees (``agreement.json``, ``agreement.md``). That verdict is one question of
many comparisons, so by default each interval is Bonferroni-widened to hold the whole verdict
at 95% (``--correction none`` judges each at 95%; the table shows both):

    .venv/bin/python bench/mr_paired.py runs/bench/seeds --models b03119cf9b34 \
        d1bddb5ab481 2ff48ab292a0
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.experiments.ledger import Ledger
from chunkwise.stats import (
    bootstrap_interval,
    bootstrap_means,
    corrected_level,
    percentile_interval,
)
from chunkwise.tables import estimate, markdown_table

Key = tuple[str, str, str, str]
#: bootstrap resamples of one comparison's per-document differences
ROUNDS = 10000
#: resamples of each pair in --models (one resample read at the corrected and nominal level)
AGREEMENT_ROUNDS = 20000


def doc_scores(ledger: Path) -> dict[Key, dict[int, float]]:
    """``(arm, model identity, cell, documents) -> {document index: score}`` of every answered
    document: ``mr_trained``'s per-document rows (key ``[cell key, "doc", i]``) and its finished
    cells' ``scores`` lists (older ledgers have only these). ``documents`` is the cell key's
    seed and generator fingerprint (its n is left out: a cell of 50 starts with the cell of 20):
    document i of one cell name is the same document only under the same seed and
    fingerprint, so a changed generator is never paired with the old. Where one model answered
    a cell under several settings (strategy options, window), the setting it answered last
    in the ledger is read (:func:`read_scores`)."""
    return read_scores(ledger)[0]


def read_scores(ledger: Path) -> tuple[dict[Key, dict[int, float]], dict[Key, str]]:
    """:func:`doc_scores` and, per key, the setting (strategy, options, window) its scores
    were answered under. A cell re-benched under new options (a decoding check switched on)
    supersedes its earlier rows instead of mixing with them document by document."""
    by_setting: dict[Key, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    last: dict[Key, dict[str, int]] = defaultdict(dict)
    with Ledger(ledger, readonly=True) as rows:
        for pos, row in enumerate(rows.rows.values()):
            if "doc" in row:
                cell_key, _, i = json.loads(row["key"])
                scores = {int(i): float(row["score"])}
            elif "scores" in row:
                cell_key, scores = row["key"], dict(enumerate(map(float, row["scores"])))
            else:
                continue
            arm, model, strategy, opts, window, cell, _n, *documents = json.loads(cell_key)
            key = (arm, model, cell, json.dumps(documents))
            setting = json.dumps([strategy, opts, window], sort_keys=True)
            by_setting[key][setting].update(scores)
            last[key][setting] = pos
    if not by_setting:
        raise SystemExit(f"mr_paired: {ledger} holds no answered document of bench/mr_trained.py")
    settings = {key: max(seen, key=seen.__getitem__) for key, seen in last.items()}
    return {key: by_setting[key][s] for key, s in settings.items()}, settings


def _same_setting(settings: dict[Key, str], keys: list[Key]) -> bool:
    """Whether the models' scores of one cell were answered under one setting."""
    return len({settings[k] for k in keys if k in settings}) <= 1


def _points(interval: tuple[float, float]) -> list[float]:
    """A 0-1 interval in points (2 decimals)."""
    return [round(100 * v, 2) for v in interval]


def _pct(xs: list[float]) -> float:
    """The mean of 0-1 scores, in points."""
    return round(100 * float(np.mean(xs)), 2)


def _one(models: set[str], piece: str, flag: str) -> str:
    hits = sorted(m for m in models if piece in m)
    if len(hits) != 1:
        raise SystemExit(
            f"mr_paired: {flag} {piece!r} matches {len(hits)} models of the ledger "
            f"({', '.join(hits) or 'none'}); known: {', '.join(sorted(models))}"
        )
    return hits[0]


def compare(ledger: Path, a: str, b: str) -> dict[str, Any]:
    """Every (arm, cell) that both models answered: n shared documents, each model's accuracy
    on them, and b - a with its paired interval."""
    scores, settings = read_scores(ledger)
    models = {m for _, m, _, _ in scores}
    ma, mb = _one(models, a, "--a"), _one(models, b, "--b")
    cells, skipped = [], []
    for arm, cell, documents in sorted({(arm, cell, d) for arm, _, cell, d in scores}):
        ka, kb = (arm, ma, cell, documents), (arm, mb, cell, documents)
        sa, sb = scores.get(ka), scores.get(kb)
        if not sa or not sb:
            continue
        if not _same_setting(settings, [ka, kb]):
            skipped.append(f"{arm} {cell}")
            continue
        docs = sorted(set(sa) & set(sb))
        if not docs:
            continue
        diff = [sb[i] - sa[i] for i in docs]
        cells.append(
            {
                "arm": arm,
                "cell": cell,
                "documents": (json.loads(documents) or [""])[-1],
                "n": len(docs),
                "a": _pct([sa[i] for i in docs]),
                "b": _pct([sb[i] for i in docs]),
                "b_minus_a": _pct(diff),
                # documents resampled together: both models' scores of one stay paired
                "ci95": _points(bootstrap_interval(diff, rounds=ROUNDS)),
            }
        )
    return {"ledger": str(ledger), "a": ma, "b": mb, "cells": cells, **_skips(skipped)}


def _skips(skipped: list[str]) -> dict[str, list[str]]:
    """Cells both (all) models answered, but under different options: not compared."""
    for c in skipped:
        print(f"mr_paired: {c}: answered under different options, not compared", file=sys.stderr)
    return {"options_differ": skipped}


CORRECTIONS = ("bonferroni", "none")


def agreement(
    ledger: Path, pieces: list[str], level: float = 95.0, correction: str = "bonferroni"
) -> dict[str, Any]:
    """Do these models (one recipe's seeds) agree? Every (arm, cell) that all of them answered:
    n shared documents, each model's accuracy, every pair's b - a with its paired interval, and
    ``agree`` (every interval holds 0). ``reproducible``: every cell agrees.

    The verdict asks one question of many comparisons (cells x pairs: 24 for three seeds on
    eight cells), so at 95% each, one interval in twenty misses 0 by chance alone even when
    the seeds are alike. ``correction="bonferroni"`` (the default) holds the whole verdict to
    ``level``: each comparison's interval is at ``100 - (100 - level) / comparisons``; the
    unadjusted ``level``% interval is kept beside it (``ci_nominal``, ``disagree_nominal``)
    so a near miss stays visible. ``correction="none"`` judges by the unadjusted intervals."""
    if len(pieces) < 2:
        raise SystemExit("mr_paired: --models needs two models or more")
    if correction not in CORRECTIONS:
        raise SystemExit(f"mr_paired: correction {correction!r}: one of {', '.join(CORRECTIONS)}")
    scores, settings = read_scores(ledger)
    known = {m for _, m, _, _ in scores}
    models = [_one(known, p, "--models") for p in pieces]
    if len(set(models)) < len(models):
        raise SystemExit(f"mr_paired: --models names one model twice ({', '.join(models)})")
    shared, skipped = [], []
    for arm, cell, documents in sorted({(arm, cell, d) for arm, _, cell, d in scores}):
        keys = [(arm, m, cell, documents) for m in models]
        per = [scores.get(k) or {} for k in keys]
        docs = sorted(set.intersection(*(set(s) for s in per)))
        if docs and not _same_setting(settings, keys):
            skipped.append(f"{arm} {cell}")
        elif docs:
            shared.append((arm, cell, documents, per, docs))
    n_pairs = len(models) * (len(models) - 1) // 2
    comparisons = len(shared) * n_pairs
    pair_level = corrected_level(level, comparisons, correction)
    cells = []
    for arm, cell, documents, per, docs in shared:
        pairs = []
        for (i, si), (j, sj) in itertools.combinations(enumerate(per), 2):
            diff = [sj[d] - si[d] for d in docs]
            means = bootstrap_means(diff, rounds=AGREEMENT_ROUNDS)  # read at both levels
            pairs.append(
                {
                    "a": i,
                    "b": j,
                    "b_minus_a": _pct(diff),
                    "ci": _points(percentile_interval(means, pair_level)),
                    "ci_nominal": _points(percentile_interval(means, level)),
                }
            )
        # the pair whose interval lies farthest from 0 (or, all holding 0, the widest gap)
        worst = max(pairs, key=lambda p: (max(p["ci"][0], -p["ci"][1]), abs(p["b_minus_a"])))
        cells.append(
            {
                "arm": arm,
                "cell": cell,
                "documents": (json.loads(documents) or [""])[-1],
                "n": len(docs),
                "accuracy": [_pct([s[d] for d in docs]) for s in per],
                "pairs": pairs,
                "worst": worst,
                "agree": all(_holds_0(p["ci"]) for p in pairs),
                "agree_nominal": all(_holds_0(p["ci_nominal"]) for p in pairs),
            }
        )
    return {
        "ledger": str(ledger),
        "models": models,
        "level": level,
        "correction": correction,
        "comparisons": comparisons,
        "pair_level": round(pair_level, 4),
        "cells": cells,
        "disagree": [f"{c['arm']} {c['cell']}" for c in cells if not c["agree"]],
        "disagree_nominal": [f"{c['arm']} {c['cell']}" for c in cells if not c["agree_nominal"]],
        "reproducible": bool(cells) and all(c["agree"] for c in cells),
        **_skips(skipped),
    }


def _holds_0(ci: list[float]) -> bool:
    return ci[0] <= 0 <= ci[1]


def agreement_table(out: dict[str, Any]) -> str:
    models = out["models"]
    level, pair = f"{out['level']:g}%", f"{out['pair_level']:g}%"
    adjusted = out["pair_level"] != out["level"]
    head = ["arm", "cell", "n", *(f"model {i}" for i in range(len(models)))]
    head.append(f"widest pair: b - a [{pair} paired]")
    if adjusted:
        head.append(f"its {level} interval")
    rows = []
    for c in out["cells"]:
        w = c["worst"]
        row = [c["arm"], c["cell"], c["n"], *(f"{a:.1f}" for a in c["accuracy"])]
        row.append(f"{w['b']} - {w['a']}: " + _difference(w["b_minus_a"], w["ci"]))
        if adjusted:
            row.append(_difference(w["b_minus_a"], w["ci_nominal"]))
        rows.append([*row, "yes" if c["agree"] else "**no**"])
    align = "llr" + "r" * (len(head) - 3) + "l"
    lines = [f"model {i}: `{m}`" for i, m in enumerate(models)]
    lines += ["", markdown_table(rows, [*head, "agree"], align=align)]
    verdict = "yes" if out["reproducible"] else "no"
    how = f"{level} over all {out['comparisons']} comparisons, each at {pair}"
    if not adjusted:
        how = f"{level} paired intervals"
    lines += ["", f"reproducible within noise ({how}): **{verdict}**"]
    if out["disagree"]:
        lines.append(f"cells that disagree: {', '.join(out['disagree'])}")
    if adjusted and out["disagree_nominal"] != out["disagree"]:
        near = ", ".join(out["disagree_nominal"]) or "none"
        lines.append(f"cells whose unadjusted {level} interval misses 0: {near}")
    return "\n".join(lines + _skipped_lines(out)) + "\n"


def _skipped_lines(out: dict[str, Any]) -> list[str]:
    if not out.get("options_differ"):
        return []
    return [
        "",
        f"not compared (answered under different options): {', '.join(out['options_differ'])}",
    ]


def _difference(points: float, ci: list[float]) -> str:
    return estimate(points, *ci, digits=1, signed=True)


def table(out: dict[str, Any]) -> str:
    names = [(c["arm"], c["cell"]) for c in out["cells"]]
    rows = []
    for c in out["cells"]:
        cell = c["cell"]
        if names.count((c["arm"], cell)) > 1:  # one cell name, two document sets
            cell += f" (documents {c['documents']})"
        rows.append(
            [c["arm"], cell, c["n"], f"{c['a']:.1f}", f"{c['b']:.1f}",
             _difference(c["b_minus_a"], c["ci95"])]
        )  # fmt: skip
    head = ["arm", "cell", "n", "a", "b", "b - a [95% paired bootstrap]"]
    lines = [f"a = `{out['a']}`, b = `{out['b']}`, on the same documents", ""]
    lines.append(markdown_table(rows, head, align="llrrrr"))
    return "\n".join(lines + _skipped_lines(out)) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "ledger", type=Path, help="a bench/mr_trained.py --out folder or its cells.jsonl"
    )
    ap.add_argument("--a", help="a piece of the first model's identity")
    ap.add_argument("--b", help="a piece of the second model's identity")
    ap.add_argument(
        "--models", nargs="+", help="instead of --a/--b: do these models (seeds) agree?"
    )
    ap.add_argument("--level", type=float, default=95.0, help="the verdict's level, %% (--models)")
    ap.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="bonferroni",
        help="--models: hold the whole verdict to --level (bonferroni) or each interval (none)",
    )
    ap.add_argument("--out", type=Path, help="also write the JSON and the table here")
    args = ap.parse_args()
    if (args.models and (args.a or args.b)) or not (args.models or (args.a and args.b)):
        ap.error("give --a and --b, or --models")
    if not 0 < args.level < 100:
        ap.error(f"--level {args.level:g}: an interval level is between 0 and 100")
    path = args.ledger / "cells.jsonl" if args.ledger.is_dir() else args.ledger
    if not path.is_file():
        raise SystemExit(f"mr_paired: no ledger at {path}")
    if args.models:
        out = agreement(path, args.models, args.level, args.correction)
        _write_out(args.out, "agreement", out, agreement_table)
        return
    out = compare(path, args.a, args.b)
    if not out["cells"]:
        raise SystemExit(f"mr_paired: {out['a']} and {out['b']} share no answered cell")
    _write_out(args.out, "paired", out, table)


def _write_out(
    folder: Path | None, name: str, out: dict[str, Any], render: Callable[[dict[str, Any]], str]
) -> None:
    """Print the JSON line and the table; with ``--out``, also ``<name>.json`` and ``.md``."""
    if not out["cells"]:
        raise SystemExit("mr_paired: the models share no answered cell")
    md = render(out)
    print(json.dumps(out))
    print(md)
    if folder:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(out, indent=1) + "\n")
        (folder / f"{name}.md").write_text(md)


if __name__ == "__main__":
    sys.exit(main())
