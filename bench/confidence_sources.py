"""Does a log-probability confidence help the embedded base model? MapReduce on passkey
documents with each confidence source (and with the confidence floor switched off).

    .venv/bin/python bench/confidence_sources.py --length 16000 --n 3

The base prompt set asks for no self-rated score (a 270M base model cannot follow the
four-field protocol), so ``self`` means: no confidence at all, every finding reaches reduce
(the floor keeps unscored records; ``unscored_kept`` counts them and ``confidence_source`` says
``none``). ``off`` is the explicit no-confidence ablation.

Each variant is a ``chunkwise eval`` run of the ``infinitebench`` passkey task on the same
documents (:mod:`chunkwise.experiments.cell`), in ``--out/<model>/passkey-<length>-n<n>/<variant>``;
a rerun reads finished variants. Prints per variant its accuracy with n and 95% Wilson
interval, wall seconds and each answer's confidence source; and each variant against ``off``
on the same documents (paired difference with its bootstrap interval, exact McNemar p);
then one JSON object and a table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from chunkwise.experiments.cell import (
    finished,
    model_folder,
    predictions,
    run_cell,
    write_examples,
)
from chunkwise.llm import load_llm
from chunkwise.stats import mcnemar_exact, paired_bootstrap
from chunkwise.tables import estimate, markdown_table

TASK = "passkey"
VARIANTS = {
    "logprob": {"confidence": "logprob"},
    "self": {"confidence": "self"},
    "logprob_no_floor": {"confidence": "logprob", "min_confidence": "0"},
    "off": {"confidence": "off"},
}
#: the variant every other one is compared with
BASELINE = "off"


def against(cells: dict[str, dict[str, Any]], base: str = BASELINE) -> dict[str, Any]:
    """Each variant minus ``base`` on the same documents: points, paired 95% bootstrap
    interval and the exact McNemar p-value."""
    out = {}
    for name, c in cells.items():
        if name == base or base not in cells:
            continue
        a, b = c["scores"], cells[base]["scores"]
        d = paired_bootstrap(a, b)
        out[name] = {
            "points": round(100 * d.mean, 2),
            "ci95": [round(100 * d.low, 2), round(100 * d.high, 2)],
            "mcnemar_p": round(mcnemar_exact(a, b), 4),
        }
    return out


def table(out: dict[str, Any]) -> str:
    rows = []
    for name, c in out["variants"].items():
        d = out["against_" + BASELINE].get(name)
        rows.append(
            [name, c["n"], estimate(c["accuracy"], *c["ci95"]), c["wall_s"],
             "" if d is None else estimate(d["points"], *d["ci95"], signed=True),
             "" if d is None else d["mcnemar_p"]]
        )  # fmt: skip
    head = ["variant", "n", "accuracy % [95% Wilson]", "wall s", f"minus {BASELINE} [paired]",
            "McNemar p"]  # fmt: skip
    return markdown_table(rows, head)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--length", type=int, default=16000)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--out", type=Path, default=Path("runs/bench/confidence_sources"))
    args = ap.parse_args(argv)
    group = model_folder(args.out, args.model) / f"{TASK}-{args.length}-n{args.n}"
    data = group / "data"
    runs = {name: group / f"{name}-w{args.window}" for name in VARIANTS}
    llm = None
    if not all(finished(r) for r in runs.values()):
        llm = load_llm(args.model)
    if not (data / f"{TASK}.jsonl").is_file():
        from chunkwise.data.synthetic import generate

        assert llm is not None
        docs = generate(
            TASK, length_tokens=args.length, n=args.n, seed=1, count_tokens=llm.count_tokens
        )
        write_examples(data, TASK, docs)
    out: dict = {"model": args.model, "length": args.length, "n": args.n, "variants": {}}
    for name, opts in VARIANTS.items():
        cell = run_cell(
            model=args.model, llm=llm, benchmark="infinitebench", task=TASK, data=data,
            out=runs[name], strategy="mapreduce", strategy_args=opts, window=args.window,
        )  # fmt: skip
        preds = predictions(runs[name], TASK)
        out["variants"][name] = {
            **cell,
            "predictions": [p["prediction"] for p in preds],
            "confidence_source": [p["stats"].get("confidence_source") for p in preds],
        }
        print(json.dumps({name: out["variants"][name]}), flush=True)
    if llm is not None:
        llm.close()
    out["against_" + BASELINE] = against(out["variants"])
    print(json.dumps(out))
    print(table(out))
    return out


if __name__ == "__main__":
    main()
