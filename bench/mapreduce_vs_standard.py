"""MapReduce with an 8K window vs standard decoding, per backend: accuracy, wall time, floor.

    .venv/bin/python bench/mapreduce_vs_standard.py --lengths 32000,128000 --n 2 --out runs/bench/mvs
    .venv-vllm/bin/python bench/mapreduce_vs_standard.py --model hf:default,vllm:default \
        --lengths 8000,32000,128000 --n 3 --runs b,c --out runs/bench/mvs

Documents (``--task``): ``passkey`` (InfiniteBench's repeated filler lines, so the map prompts
of one document share whole token blocks that vLLM's prefix cache prefills once; asked and
scored as the ``infinitebench`` benchmark) or ``niah_single_2`` (RULER: a number hidden in
Python's reference text; no two chunks alike, so no cache helps; the ``ruler`` benchmark).
Needles sit at depths 1/(n+1) ... n/(n+1), away from the edges that middle truncation keeps.
Runs:
  (a) standard, the model's full window   (b) standard, 8K window   (c) mapreduce, 8K window

Every (model, length, run) cell is a ``chunkwise eval`` run on those documents
(:mod:`chunkwise.experiments.cell`): the benchmark's prompts and scorer, predictions and results.json
in a run folder of its own. Per cell: accuracy with its n and 95% Wilson interval, wall
seconds (the strategy's, summed over the documents), and the floor = document tokens / the
backend's best measured prefill rate (one 1000-token prompt, and a wave of map-sized prompts
in one generate call, as the engine batches a map wave): what merely reading the documents
once costs. Several ``--model`` specs (comma-separated) run one after another in this process,
so their ratios come from one run. ``--n`` is one count or one per length (``--n 3,3,8``);
``--skip hf:default@128000`` leaves a model's length out (HF at 128K on 2 CPU cores is an hour
a document).

``--out`` gets, per model, ``<model>/prefill.json`` (its measured rates) and per length
``<model>/<task>-<length>-n<n>-seed<seed>/`` holding ``data/`` (the documents) and one run
folder per run (``a``, ``b-w8192``, ``c-w8192``): a crash loses at most the document in
flight, and a rerun with the same settings reads finished cells and resumes a cut one. Also
``results.json`` (cells and the wall-time ratios between models) and ``table.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.experiments.cell import finished, model_folder, run_cell, write_examples
from chunkwise.io import atomic_write_json, read_json
from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.tables import estimate, markdown_table

NOISE = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
)
RUNS = {"a": ("standard", None), "b": ("standard", "window"), "c": ("mapreduce", "window")}


def _passkey(**kw: Any) -> list[dict[str, Any]]:
    from chunkwise.data.synthetic import generate

    return generate("passkey", **kw)


def _niah_single_2(**kw: Any) -> list[dict[str, Any]]:
    from chunkwise.data import ruler

    return ruler.generate("niah_single_2", **kw)


#: task -> (the benchmark that asks and scores it, its document generator)
TASKS: dict[str, tuple[str, Callable[..., list[dict[str, Any]]]]] = {
    "passkey": ("infinitebench", _passkey),
    "niah_single_2": ("ruler", _niah_single_2),
}


def _noise(llm, tokens: int, salt: int) -> str:
    # a number per prompt, so that vLLM's prefix cache cannot answer one prompt from another
    return f"{salt}. " + llm.decode(llm.encode(NOISE * (tokens // 15 + 1))[:tokens])


def prefill_rates(llm, tokens: int = 1000, wave: int = 8) -> dict[str, float]:
    """Prompt tokens/s for one prompt and for a wave of ``wave`` such prompts in one call."""
    llm.generate([Request(_noise(llm, tokens, 0), GenerationParams(max_new_tokens=1))])  # warm-up
    rates = {}
    for name, n in (("single", 1), ("wave", wave)):
        reqs = [
            Request(_noise(llm, tokens, 1 + n + i), GenerationParams(max_new_tokens=1))
            for i in range(n)
        ]
        t0 = time.perf_counter()
        out = llm.generate(reqs)
        rates[name] = round(sum(o.prompt_tokens for o in out) / (time.perf_counter() - t0), 1)
    return rates


def documents(task: str, length: int, n: int, seed: int, count_tokens) -> list[dict]:
    """``n`` records with needles at depths 1/(n+1) ... n/(n+1) (the two edge records of an
    n+2 sweep dropped)."""
    made = TASKS[task][1](length_tokens=length, n=n + 2, seed=seed, count_tokens=count_tokens)
    return made[1:-1]


def run_model(spec: str, args: argparse.Namespace) -> dict:
    benchmark = TASKS[args.task][0]
    lengths = [x for x in args.lengths_list if f"{spec}@{x}" not in args.skip_cells]
    runs = args.runs.split(",")
    folder = model_folder(args.out, spec)

    def cell_dir(length: int, run: str) -> Path:
        group = folder / f"{args.task}-{length}-n{args.n_at[length]}-seed{args.seed}"
        return group / (run if RUNS[run][1] is None else f"{run}-w{args.window}")

    rates_file = folder / "prefill.json"
    llm = None
    if not rates_file.is_file() or any(not finished(cell_dir(x, r)) for x in lengths for r in runs):
        llm = load_llm(spec)
        if not rates_file.is_file():
            atomic_write_json(
                rates_file, {"rates": prefill_rates(llm), "full_window": llm.context_window}
            )
    measured = read_json(rates_file, "prefill rates")
    rates = measured["rates"]
    rate = max(rates.values())
    result: dict = {"model": spec, "prefill_tok_per_s": rates, "lengths": {}}
    result["full_window"] = measured["full_window"]
    for length in lengths:
        per_len: dict = {}
        data = cell_dir(length, runs[0]).parent / "data"
        doc_tokens = None
        for key in runs:
            out = cell_dir(length, key)
            name, window = RUNS[key]
            new = not finished(out)
            if new and not (data / f"{args.task}.jsonl").is_file():  # else: the ones begun on
                assert llm is not None
                records = documents(args.task, length, args.n_at[length], args.seed,
                                    llm.count_tokens)  # fmt: skip
                write_examples(data, args.task, records)
            cell = run_cell(
                model=spec, llm=llm, benchmark=benchmark, task=args.task, data=data, out=out,
                strategy=name, window=args.window if window else None, seed=args.seed,
            )  # fmt: skip
            if new:
                print(json.dumps({"model": spec, "length": length, "run": key, **cell}), flush=True)
            if doc_tokens is None:
                doc_tokens = _document_tokens(data, args.task, llm)
            floor = doc_tokens / rate
            cell.update(doc_tokens_total=doc_tokens, floor_s=round(floor, 3))
            cell["over_floor"] = round(cell["wall_s"] / floor, 3)
            per_len[key] = cell
        if "a" in per_len and "c" in per_len:
            per_len["c_over_a_wall"] = round(per_len["c"]["wall_s"] / per_len["a"]["wall_s"], 3)
        result["lengths"][str(length)] = per_len
    if llm is not None:
        llm.close()
    return result


def _document_tokens(data: Path, task: str, llm: Any) -> int:
    """The documents' tokens, counted once by the model and kept beside them."""
    path = data / "document_tokens.json"
    if not path.is_file():
        assert llm is not None
        from chunkwise.io import read_jsonl

        total = sum(llm.count_tokens(r["context"]) for _, r in read_jsonl(data / f"{task}.jsonl"))
        atomic_write_json(path, {"tokens": total})
    return int(read_json(path, "document tokens")["tokens"])


def table(results: dict[str, dict]) -> str:
    rows = []
    for spec, res in results.items():
        for length, per_len in res["lengths"].items():
            for key, r in per_len.items():
                if not isinstance(r, dict):
                    continue
                rows.append(
                    [spec, length, f"{key} {r['strategy']}@{r['window']}",
                     f"{estimate(r['accuracy'], *r['ci95'])} ({r['n']})",
                     f"{r['wall_s']:.1f}", f"{r['floor_s']:.1f}", f"{r['over_floor']:.2f}"]
                )  # fmt: skip
    head = ["model", "length", "run", "accuracy % [95% CI] (n)", "wall s", "floor s", "x floor"]
    return markdown_table(rows, head, align="lrlrrrr")


def wall_ratios(results: dict[str, dict]) -> dict[str, float]:
    """Each later model's mapreduce wall time over the first model's, per length."""
    first_spec, first = next(iter(results.items()))
    ratios = {}
    for spec, res in results.items():
        if spec == first_spec:
            continue
        for length, per_len in res["lengths"].items():
            base = first["lengths"].get(length, {}).get("c")
            if "c" in per_len and base:
                ratios[f"{spec}/{first_spec}@{length}"] = round(
                    per_len["c"]["wall_s"] / max(base["wall_s"], 1e-9), 3
                )
    return ratios


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="hf:default", help="one spec, or several comma-separated")
    ap.add_argument("--task", default="passkey", choices=sorted(TASKS))
    ap.add_argument("--lengths", default="32000,128000")
    ap.add_argument("--n", default="2", help="documents per length: one count, or one per length")
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", default="a,b,c", help="subset of runs to do")
    ap.add_argument("--skip", default="", help="MODEL@LENGTH cells to leave out, comma-separated")
    ap.add_argument("--out", type=Path, default=Path("runs/bench/mapreduce_vs_standard"))
    args = ap.parse_args(argv)
    runs = [r for r in args.runs.split(",") if r]
    if not runs or set(runs) - set(RUNS):
        ap.error(f"--runs takes a comma-separated subset of {','.join(RUNS)}, got {args.runs!r}")
    try:
        args.lengths_list = [int(x) for x in args.lengths.split(",") if x]
        ns = [int(x) for x in args.n.split(",") if x]
    except ValueError:
        ap.error(f"--lengths and --n take whole numbers, got {args.lengths!r} and {args.n!r}")
    if len(ns) == 1:
        ns *= len(args.lengths_list)
    if len(ns) != len(args.lengths_list) or min(ns) < 1 or min(args.lengths_list) < 1:
        ap.error(f"--n takes one count >= 1 or one per length, got {args.n!r}")
    args.n_at = dict(zip(args.lengths_list, ns, strict=True))
    args.skip_cells = {c.strip() for c in args.skip.split(",") if c.strip()}
    if args.out.exists() and not args.out.is_dir():
        ap.error(f"--out {args.out} is a file, not a folder")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        results = {s: run_model(s, args) for s in args.model.split(",") if s}
    except BadInput as e:  # a bad model spec, a damaged run folder: said, not a traceback
        ap.exit(2, f"mapreduce_vs_standard.py: error: {e}\n")
    out = {
        "args": {k: str(v) for k, v in vars(args).items() if k not in ("n_at", "skip_cells")},
        "models": results,
        "mapreduce_wall_ratio": wall_ratios(results),
    }
    text = table(results)
    atomic_write_json(args.out / "results.json", out)
    (args.out / "table.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    print(json.dumps({"mapreduce_wall_ratio": out["mapreduce_wall_ratio"]}, indent=1))
    print(f"wrote {args.out / 'results.json'} and {args.out / 'table.md'}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
