"""Where each arm lost the answer, at each length: the evidence audit's funnels and the effective
lengths of several ``chunkwise eval --audit --lengths ...`` sweeps, in one JSON, one table per
arm and task, and one stacked-bar PNG (issue #48, item 6).

Each ``--arm LABEL=FOLDER`` is a sweep's output folder (``lengths.json`` and ``len-<tokens>/``
run folders, each with ``results.json`` holding an ``audit`` block) or one ``chunkwise eval
--audit`` run folder (its ``results.json``: one length per task, the one its data was built at,
and no effective length). One label given with several folders is one arm (its runs at
different lengths or tasks joined). Nothing is evaluated here: run the sweeps first, e.g.::

    .venv-vllm/bin/chunkwise eval --model vllm:default-mr --strategy mapreduce \\
        --benchmark generated --tasks kv_retrieval --data heldout:4000 --lengths 4K,8K,16K,32K \\
        --limit 50 --parallel 25 --audit --output runs/audit/mr
    .venv/bin/python bench/audit_report.py --arm default-mr/mapreduce=runs/audit/mr \\
        --arm base/standard=runs/audit/std --json runs/audit/report.json --png runs/audit/report.png

It prints the scores (task and arm against length), the funnels and, last, the JSON.
``table(out)`` renders the funnels for the docs (``bench/docs_numbers.py``,
``table=audit_report``), ``scores_table(out)`` the scores (``table=audit_report.scores_table``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from chunkwise.eval.audit.outcomes import OUTCOMES
from chunkwise.eval.lengths import length_label
from chunkwise.io import atomic_write_json


def _arm(text: str) -> tuple[str, Path]:
    label, sep, folder = text.partition("=")
    if not sep or not label or not folder:
        raise argparse.ArgumentTypeError(f"--arm {text!r}: give LABEL=FOLDER")
    return label, Path(folder)


def _read(path: Path, what: str) -> dict[str, Any]:
    """``path``'s JSON object, or one line naming the file and what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"{path}: not a readable {what} ({e})") from None
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: not a {what} (expected a JSON object)")
    return data


def _point(results: dict[str, Any], task: str, length: int) -> dict[str, Any] | None:
    """One task at one length: score, interval, n, the funnel and the compute per example."""
    res = results.get("results", {}).get(task)
    audit = (results.get("audit") or {}).get(task)
    if res is None:
        return None
    per = (results.get("strategy_stats") or {}).get(task, {}).get("per_example", {})
    funnel = dict(audit["funnel"]) if isinstance(audit, dict) else None
    if funnel is not None and sum(funnel.values()) != audit["n"]:
        raise SystemExit(f"audit.{task} at {length}: the funnel does not add up to n")
    return {
        "length": length,
        "score": res.get("score"),
        "ci95": res.get("score_ci95"),
        "n": res.get("n"),
        "funnel": funnel,
        "prefill_tokens_per_example": per.get("prompt_tokens"),
        "decode_tokens_per_example": per.get("completion_tokens"),
        "calls_per_example": per.get("llm_calls"),
        "seconds_per_example": per.get("seconds"),
    }


def _single_run(label: str, folder: Path) -> dict[str, Any]:
    """An arm that is one eval run, not a sweep: each task is one point at the length its data
    was built at (``configs.<task>.data.length``); a task whose data has no length is refused."""
    results = _read(folder / "results.json", "results.json of an eval run")
    config = results.get("config") or {}
    points: dict[str, list[dict[str, Any]]] = {}
    for task in results.get("results", {}):
        length = ((results.get("configs") or {}).get(task, {}).get("data") or {}).get("length")
        if not isinstance(length, int):
            raise SystemExit(
                f"--arm {label}={folder}: {task}'s data has no length (give a --lengths sweep)"
            )
        point = _point(results, task, length)
        if point is not None:
            points[task] = [point]
    return {
        "label": label,
        "model": config.get("model"),
        "strategy": config.get("strategy"),
        "benchmark": config.get("benchmark"),
        "data": config.get("data"),
        "lengths": sorted({p["length"] for pts in points.values() for p in pts}),
        "thresholds": {},
        "points": points,
        "effective_length": {},
    }


def collect(label: str, folder: Path) -> dict[str, Any]:
    """One arm: its model, strategy, data, per task the points in length order, and the
    effective lengths its ``lengths.json`` computed (none for a single run)."""
    lengths_file = folder / "lengths.json"
    if not lengths_file.is_file():
        if (folder / "results.json").is_file():
            return _single_run(label, folder)
        raise SystemExit(
            f"--arm {label}={folder}: no lengths.json and no results.json "
            "(give a --lengths sweep's folder or one eval run's)"
        )
    report = _read(lengths_file, "lengths.json of a --lengths sweep")
    missing = [k for k in ("lengths", "runs", "tasks", "strategy") if k not in report]
    if missing:
        raise SystemExit(f"{lengths_file}: not a lengths.json (no {', '.join(missing)})")
    points: dict[str, list[dict[str, Any]]] = {}
    for length in report["lengths"]:
        run = Path(report["runs"][str(length)])
        run = run if run.is_absolute() else folder / run.name
        results = _read(run / "results.json", "results.json of an eval run")
        for task in report["tasks"]:
            point = _point(results, task, int(length))
            if point is not None:
                points.setdefault(task, []).append(point)
    strategy = report["strategy"]
    return {
        "label": label,
        "model": report["model"],
        "strategy": strategy,
        "benchmark": report["benchmark"],
        "data": report["data"],
        "lengths": report["lengths"],
        "thresholds": report["thresholds"],
        "points": points,
        "effective_length": report["effective_length"].get(strategy, {}),
    }


def merge(arms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Arms that share a label are one arm: their points joined (a task's lengths in order).
    Runs of one arm may be separate folders (a 16K run, then a 64K one); they must agree on
    model and strategy, and no task may be given twice at one length. Effective lengths are
    each sweep's own, not recomputed over the joined lengths."""
    merged: dict[str, dict[str, Any]] = {}
    for arm in arms:
        label = arm["label"]
        if label not in merged:
            merged[label] = {**arm, "points": {t: list(p) for t, p in arm["points"].items()}}
            continue
        into = merged[label]
        for key in ("model", "strategy"):
            if into[key] != arm[key]:
                raise SystemExit(
                    f"--arm {label}: its folders disagree on {key} ({into[key]!r}, {arm[key]!r})"
                )
        for task, pts in arm["points"].items():
            have = into["points"].setdefault(task, [])
            for p in pts:
                if any(q["length"] == p["length"] for q in have):
                    raise SystemExit(
                        f"--arm {label}: {task} at {length_label(p['length'])} is given twice"
                    )
                have.append(p)
            have.sort(key=lambda q: q["length"])
        into["lengths"] = sorted(set(into["lengths"]) | set(arm["lengths"]))
        into["thresholds"] = {**into["thresholds"], **arm["thresholds"]}
        into["effective_length"] = {**into["effective_length"], **arm["effective_length"]}
    return list(merged.values())


def scores_table(out: dict[str, Any]) -> str:
    """Markdown: one row per task and arm, one column per length any arm ran, each cell the
    score with its 95% interval (``-`` where that arm did not run that length)."""
    lengths = sorted({p["length"] for arm in out["arms"] for pts in arm["points"].values()
                      for p in pts})  # fmt: skip
    heads = [length_label(n) for n in lengths]
    rows = ["| task | arm | " + " | ".join(heads) + " |", "|---|---|" + "---:|" * len(heads)]
    tasks = list(dict.fromkeys(t for arm in out["arms"] for t in arm["points"]))
    for task in tasks:
        for arm in out["arms"]:
            if task not in arm["points"]:
                continue
            at = {p["length"]: p for p in arm["points"][task]}
            cells = [_score(at[n]) if n in at else "-" for n in lengths]
            rows.append(f"| {task} | {arm['label']} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _cell(count: int, n: int) -> str:
    return f"{count} ({100 * count / n:.0f}%)" if n else str(count)


def _score(p: dict[str, Any]) -> str:
    if p.get("score") is None:
        return "-"
    lo, hi = p.get("ci95") or (None, None)
    band = f" [{lo:g}, {hi:g}]" if lo is not None and hi is not None else ""
    return f"{p['score']:g}{band}"


def _effective(e: dict[str, Any] | None) -> str:
    if not e:
        return "-"
    if e.get("below_shortest"):
        return "below shortest"
    text = length_label(int(e["length"]))
    return f"≥ {text}" if e.get("beyond_longest") else text


def table(out: dict[str, Any]) -> str:
    """Markdown: per arm and task, the funnel against length (count and share of n, the
    outcomes that occur), the score row and the compute row; then the effective lengths."""
    parts = []
    for arm in out["arms"]:
        for task, pts in arm["points"].items():
            audited = [p for p in pts if p["funnel"] is not None]
            if not audited:
                continue
            heads = [length_label(p["length"]) for p in audited]
            shown = [o for o in OUTCOMES if any(p["funnel"].get(o) for p in audited)]
            rows = ["| outcome | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
            for o in shown:
                cells = [_cell(p["funnel"].get(o, 0), sum(p["funnel"].values())) for p in audited]
                rows.append(f"| {o} | " + " | ".join(cells) + " |")
            rows.append("| **score [95%]** | " + " | ".join(_score(p) for p in audited) + " |")
            rows.append("| **n** | " + " | ".join(str(p["n"]) for p in audited) + " |")
            pre = [p["prefill_tokens_per_example"] for p in audited]
            rows.append(
                "| prefill tokens / example | "
                + " | ".join("-" if v is None else f"{v:,.0f}" for v in pre)
                + " |"
            )
            title = f"**{arm['label']}** ({arm['strategy']}, {arm['model']}), {task}:"
            parts.append(title + "\n\n" + "\n".join(rows))
    names = sorted({name for arm in out["arms"] for name in arm["thresholds"]})
    if names:
        given = {n: v for arm in out["arms"] for n, v in arm["thresholds"].items()}
        heads = [f"effective length ({n} > {given[n]})" for n in names]
        rows = [
            "| arm | task | " + " | ".join(heads) + " |",
            "|---|---|" + "---:|" * len(names),
        ]
        for arm in out["arms"]:
            for task, eff in arm["effective_length"].items():
                if task not in arm["points"]:
                    continue
                cells = [_effective(eff.get(n)) for n in names]
                rows.append(f"| {arm['label']} | {task} | " + " | ".join(cells) + " |")
        parts.append("\n".join(rows))
    return "\n\n".join(parts)


def plot(out: dict[str, Any], path: str | Path) -> Path:
    """Stacked bars (:func:`chunkwise.eval.funnels.plot`): one bar per arm and length, one
    group per task."""
    from chunkwise.eval.funnels import plot as funnel_plot

    tasks: dict[str, dict[str, Any]] = {}
    for arm in out["arms"]:
        for task, pts in arm["points"].items():
            for p in pts:
                if p["funnel"] is not None:
                    key = f"{arm['label']} · {length_label(p['length'])}"
                    tasks.setdefault(task, {})[key] = {
                        "n": sum(p["funnel"].values()),
                        "funnel": p["funnel"],
                    }
    return funnel_plot({"tasks": tasks}, path, title="Evidence audit against length")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", type=_arm, action="append", required=True, metavar="LABEL=FOLDER")
    ap.add_argument("--json", type=Path, help="write the report here")
    ap.add_argument("--png", type=Path, help="write the stacked-bar chart here")
    args = ap.parse_args(argv)
    out = {"arms": merge([collect(label, folder) for label, folder in args.arm])}
    print(scores_table(out) + "\n\n" + table(out))
    if args.png:
        print(f"\nwrote {plot(out, args.png)}")
    if args.json:
        atomic_write_json(args.json, out)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
