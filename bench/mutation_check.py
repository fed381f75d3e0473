"""Mutation check: which small changes to the MapReduce code do the fast tests not notice?

Each mutant is one AST edit (a comparison flipped, an arithmetic or boolean operator swapped,
a number nudged, a condition negated, a ``return`` turned into ``return None``, True/False
swapped) applied to a copy of the package; the fast MapReduce/protocol tests then run against
that copy (``PYTHONPATH`` first, so the working tree is never touched), with a per-mutant
timeout and an overall time budget. A mutant is *killed* when a test fails, *survived* when all
pass. Prints one JSON object (counts and every survivor as ``file:line: change``) and a table.

    .venv/bin/python bench/mutation_check.py --budget-s 3000 --json runs/mut.json

Not part of ``make test``: it runs the test files once per mutant (~420 mutants, 15-35 minutes
on 2 cores).

``--recheck RESULT.json`` runs only the survivors of an earlier run (matched by file, line and
change), e.g. against more test files: which survivors does the wider suite kill?

    .venv/bin/python bench/mutation_check.py --recheck runs/mut.json \\
        --tests tests/strategies/test_protocol.py tests/strategies/test_grounding.py ...
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from chunkwise.tables import markdown_table

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "chunkwise"
#: the MapReduce package (strategies/mapreduce.py before its split by job) and the protocol
DEFAULT_FILES = (
    "strategies/mapreduce/strategy.py",
    "strategies/mapreduce/prompts.py",
    "strategies/mapreduce/replies.py",
    "strategies/mapreduce/confidence.py",
    "strategies/mapreduce/map_stage.py",
    "strategies/mapreduce/collapse.py",
    "strategies/mapreduce/reduce.py",
    "strategies/mapreduce/intermediate.py",
    "strategies/protocol.py",
)
#: every fast test file that drives MapReduce (scripted models, ~5 s a run)
DEFAULT_TESTS = (
    "tests/strategies/test_protocol.py",
    "tests/strategies/test_mapreduce_flow.py",
    "tests/strategies/test_grounding.py",
    "tests/strategies/test_coa_mr_prompts.py",
    "tests/faults/test_faults_outputs.py",
    "tests/benchmarks/infinitebench/test_mapreduce_scoring.py",
)

_CMP_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


@dataclass
class Mutant:
    line: int
    what: str
    index: int  # the index-th mutation site of this kind, in walk order


def _sites(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """Every (node, kind) that can be mutated, skipping docstrings and log/error messages."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("warning", "info", "debug", "error") or name.endswith("Error"):
                skip.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.Raise):
            skip.update(id(n) for n in ast.walk(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            out += [(node, f"cmp{i}") for i, op in enumerate(node.ops) if type(op) in _CMP_SWAP]
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP:
            out.append((node, "binop"))
        elif isinstance(node, ast.BoolOp):
            out.append((node, "boolop"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            out.append((node, "not"))
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)):
            out.append((node, "negate"))
        elif isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                out.append((node, "return_none"))
        elif isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                out.append((node, "bool"))
            elif isinstance(v, (int, float)):
                out.append((node, "number"))
    return out


def _apply(node: ast.AST, kind: str) -> str:
    """Mutate ``node`` in place; returns a short description."""
    if kind.startswith("cmp"):
        i = int(kind[3:])
        old = node.ops[i]  # type: ignore[attr-defined]
        new = _CMP_SWAP[type(old)]()
        node.ops[i] = new  # type: ignore[attr-defined]
        return f"{type(old).__name__} -> {type(new).__name__}"
    if kind == "binop":
        old = node.op  # type: ignore[attr-defined]
        node.op = _BIN_SWAP[type(old)]()  # type: ignore[attr-defined]
        return f"{type(old).__name__} -> {type(node.op).__name__}"  # type: ignore[attr-defined]
    if kind == "boolop":
        old = node.op  # type: ignore[attr-defined]
        node.op = ast.Or() if isinstance(old, ast.And) else ast.And()  # type: ignore[attr-defined]
        return f"{type(old).__name__} -> {type(node.op).__name__}"  # type: ignore[attr-defined]
    if kind == "not":
        node.op = ast.UAdd()  # type: ignore[attr-defined]  # `+x` of a bool is its int value
        return "not x -> x"
    if kind == "negate":
        node.test = ast.UnaryOp(ast.Not(), node.test)  # type: ignore[attr-defined]
        return "condition negated"
    if kind == "return_none":
        node.value = ast.Constant(None)  # type: ignore[attr-defined]
        return "return ... -> return None"
    if kind == "bool":
        node.value = not node.value  # type: ignore[attr-defined]
        return f"{not node.value} -> {node.value}"  # type: ignore[attr-defined]
    if kind == "number":
        v = node.value  # type: ignore[attr-defined]
        node.value = v + 1 if v == 0 else (0 if v == 1 else v * 2)  # type: ignore[attr-defined]
        return f"{v!r} -> {node.value!r}"  # type: ignore[attr-defined]
    raise ValueError(kind)


def mutants_of(source: str) -> list[tuple[Mutant, str]]:
    tree = ast.parse(source)
    n = len(_sites(tree))
    out = []
    for i in range(n):
        t = copy.deepcopy(tree)
        node, kind = _sites(t)[i]
        what = _apply(node, kind)
        try:
            code = ast.unparse(ast.fix_missing_locations(t))
        except Exception:  # an unprintable mutant is simply skipped
            continue
        out.append((Mutant(getattr(node, "lineno", 0), what, i), code))
    return out


def run_tests(pythonpath: Path, tests: list[str], timeout: float) -> str:
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "WANDB_MODE": "disabled"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"  # counted as killed (the tests noticed: they hung)
    return "survived" if r.returncode == 0 else "killed"


def recheck_sites(path: Path) -> set[tuple[str, int, str]]:
    """(file under src/chunkwise, line, change) of each survivor in an earlier result."""
    out = set()
    try:
        survivors = json.loads(path.read_text(encoding="utf-8"))["survivors"]
        for s in survivors:
            where, what = s.split(": ", 1)
            file, line = where.rsplit(":", 1)
            out.add((file.removeprefix("src/chunkwise/"), int(line), what))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise SystemExit(
            f"mutation_check: --recheck {path}: not a mutation_check --json result "
            f"(a 'survivors' list of 'file:line: change'): {e!r}"
        ) from None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", nargs="*", default=list(DEFAULT_FILES))
    ap.add_argument("--tests", nargs="*", default=list(DEFAULT_TESTS))
    ap.add_argument("--timeout-s", type=float, default=60.0, help="per mutant")
    ap.add_argument("--budget-s", type=float, default=3000.0, help="whole run")
    ap.add_argument("--json", type=Path, help="also write the result here")
    ap.add_argument("--recheck", type=Path, help="only the survivors in this earlier --json")
    args = ap.parse_args()
    if args.recheck and not args.recheck.is_file():
        raise SystemExit(f"mutation_check: --recheck {args.recheck}: no such file")
    wanted = recheck_sites(args.recheck) if args.recheck else None

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chunkwise-mut-") as tmp:
        copy_root = Path(tmp)
        shutil.copytree(PACKAGE, copy_root / "chunkwise")
        if run_tests(copy_root, args.tests, args.timeout_s * 3) != "survived":
            print("the tests fail on the unmutated code; fix them first", file=sys.stderr)
            sys.exit(2)
        result: dict = {"files": {}, "tests": args.tests, "killed": 0, "survived": 0,
                        "recheck": str(args.recheck) if args.recheck else None}  # fmt: skip
        survivors: list[str] = []
        untested = 0
        for rel in args.files:
            target = copy_root / "chunkwise" / rel
            original = target.read_text(encoding="utf-8")
            counts = {"mutants": 0, "killed": 0, "survived": 0}
            for m, code in mutants_of(original):
                if wanted is not None and (rel, m.line, m.what) not in wanted:
                    continue
                if time.perf_counter() - t0 > args.budget_s:
                    untested += 1
                    continue
                target.write_text(code, encoding="utf-8")
                outcome = run_tests(copy_root, args.tests, args.timeout_s)
                counts["mutants"] += 1
                key = "survived" if outcome == "survived" else "killed"
                counts[key] += 1
                if key == "survived":
                    survivors.append(f"src/chunkwise/{rel}:{m.line}: {m.what}")
                print(f"{rel}:{m.line} {m.what}: {outcome}", file=sys.stderr, flush=True)
            target.write_text(original, encoding="utf-8")
            result["files"][rel] = counts
            result["killed"] += counts["killed"]
            result["survived"] += counts["survived"]
    total = result["killed"] + result["survived"]
    result.update(
        mutants=total,
        kill_ratio=round(result["killed"] / total, 3) if total else None,
        untested_over_budget=untested,
        survivors=survivors,
        wall_s=round(time.perf_counter() - t0, 1),
    )
    print(json.dumps(result, indent=1))
    rows = [[rel, c["mutants"], c["killed"], c["survived"]] for rel, c in result["files"].items()]
    print("\n" + markdown_table(rows, ["file", "mutants", "killed", "survived"]))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
