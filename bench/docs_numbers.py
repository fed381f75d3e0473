"""The measured numbers in the docs, rendered from the results JSON in docs/results/.

A marked block in README.md, docs/*.md or src/chunkwise/models/*/README.md holds what a table
function renders from one JSON file (paths from the repository root)::

    <!-- numbers: docs/results/default-mr-4k.json table=mr_trained -->
    (rendered: do not edit)
    <!-- /numbers -->

``table=mr_trained`` is ``bench/mr_trained.py``'s ``table(out)``, loaded by path;
``table=mr_trained.cells_table`` is another function of that script; a dotted name under
``chunkwise.`` is a function of the package (``chunkwise.demo.verdict.report_text``). A results
file is what the bench wrote plus a ``source`` block (command, commit, date, machine), which
``--publish`` adds. Markers inside fenced code blocks are examples and are left alone.

    .venv/bin/python bench/docs_numbers.py            # rewrite every block (make docs-numbers)
    .venv/bin/python bench/docs_numbers.py --check    # exit 1 naming each block that differs
    .venv/bin/python bench/docs_numbers.py --publish runs/bench/mr/results.json \\
        docs/results/NAME.json --command "bench/mr_trained.py --lengths 4000 --out runs/bench/mr"

A block that cannot be rendered (its JSON missing, no end marker, an unknown table) is one
error naming the file and line (exit 2).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib
import importlib.util
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
#: the Markdown files that may hold marked blocks, as globs from the repository root
DOCS = ("README.md", "docs/*.md", "src/chunkwise/models/*/README.md")
START = re.compile(r"<!--\s*numbers:(?P<args>.*?)-->")
END = "<!-- /numbers -->"
#: what a results file's source block names
SOURCE_KEYS = ("command", "commit", "date", "machine")


class NumbersError(Exception):
    """A marked block that cannot be rendered; the message names the file and line."""


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # 1-based, of the start marker
    results: str  # the JSON file as the marker names it
    table: str
    start: int  # 0-based index of the start marker's line
    end: int  # 0-based index of the end marker's line

    def where(self, root: Path) -> str:
        return f"{_rel(self.doc, root)}:{self.line}"


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def doc_files(root: Path) -> list[Path]:
    return sorted({p for pattern in DOCS for p in root.glob(pattern) if p.is_file()})


def find_blocks(doc: Path, lines: list[str], root: Path) -> list[Block]:
    """The marked blocks of one file, in order."""
    blocks: list[Block] = []
    opened: tuple[int, str, str] | None = None
    fence = ""
    for i, line in enumerate(lines):
        text = line.strip()
        where = f"{_rel(doc, root)}:{i + 1}"
        if text.startswith(("```", "~~~")):
            if not fence:
                fence = text[:3]
            elif text.startswith(fence):
                fence = ""
            continue
        if fence:
            continue
        if m := START.fullmatch(text):
            if opened is not None:
                raise NumbersError(f"{where}: a new numbers marker before the {END} of line "
                                   f"{opened[0] + 1}")  # fmt: skip
            opened = (i, *_marker_args(m["args"], where))
        elif text == END:
            if opened is None:
                raise NumbersError(f"{where}: {END} without its <!-- numbers: ... --> above")
            blocks.append(Block(doc, opened[0] + 1, opened[1], opened[2], opened[0], i))
            opened = None
        elif text.startswith(("<!-- numbers", "<!--numbers", "<!-- /numbers")):
            raise NumbersError(f"{where}: not a numbers marker: {text!r} (want "
                               f"'<!-- numbers: FILE.json table=NAME -->' or '{END}')")  # fmt: skip
    if opened is not None:
        raise NumbersError(f"{_rel(doc, root)}:{opened[0] + 1}: <!-- numbers: {opened[1]} ... --> "
                           f"has no {END} below it")  # fmt: skip
    return blocks


def _marker_args(text: str, where: str) -> tuple[str, str]:
    """(results file, table) from ``FILE.json table=NAME``."""
    words = text.split()
    if not words or "=" in words[0]:
        raise NumbersError(f"{where}: the numbers marker names no results file")
    opts = dict(w.split("=", 1) if "=" in w else (w, "") for w in words[1:])
    unknown = sorted(set(opts) - {"table"})
    if unknown or not opts.get("table"):
        raise NumbersError(f"{where}: the numbers marker takes one option, table=NAME "
                           f"(got {' '.join(words[1:]) or 'none'})")  # fmt: skip
    return words[0], opts["table"]


@functools.cache
def _bench_script(name: str) -> ModuleType | None:
    path = BENCH / f"{name}.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses with postponed annotations look it up
    spec.loader.exec_module(mod)
    return mod


def renderer(name: str, where: str = "") -> Callable[[dict[str, Any]], str]:
    """The table function ``table=name`` names: a bench script's (``mr_trained``,
    ``mr_trained.cells_table``) or the package's (``chunkwise.demo.verdict.report_text``)."""
    prefix = f"{where}: " if where else ""
    if name.startswith("chunkwise."):
        module, _, func = name.rpartition(".")
        try:
            mod: ModuleType | None = importlib.import_module(module)
        except ImportError as e:
            raise NumbersError(f"{prefix}table={name}: cannot import {module} ({e})") from None
    else:
        script, _, func = name.partition(".")
        func = func or "table"
        mod = _bench_script(script)
        if mod is None:
            raise NumbersError(f"{prefix}table={name}: no bench/{script}.py")
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise NumbersError(f"{prefix}table={name}: {mod.__name__} has no function {func}")
    return fn


def load_results(block: Block, root: Path) -> dict[str, Any]:
    where = block.where(root)
    path = root / block.results
    if not path.is_file():
        raise NumbersError(f"{where}: {block.results}: no such file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NumbersError(f"{where}: {block.results}: not JSON ({e})") from None
    source = data.get("source") if isinstance(data, dict) else None
    missing = [k for k in SOURCE_KEYS if not (isinstance(source, dict) and source.get(k))]
    if missing:
        raise NumbersError(f"{where}: {block.results}: its source block lacks "
                           f"{', '.join(missing)} (add it with --publish)")  # fmt: skip
    return data


def render(block: Block, root: Path) -> list[str]:
    """The lines between the block's markers: a blank line, the table, a blank line (so the
    Markdown table stands apart from the comments)."""
    data = load_results(block, root)
    fn = renderer(block.table, block.where(root))
    try:
        text = fn(data)
    except (KeyError, TypeError, ValueError) as e:
        raise NumbersError(f"{block.where(root)}: table={block.table} cannot render "
                           f"{block.results}: {type(e).__name__}: {e}") from None  # fmt: skip
    return ["", *text.strip("\n").split("\n"), ""]


def _lines(doc: Path) -> list[str]:
    return doc.read_text(encoding="utf-8").split("\n")


def check(root: Path = ROOT) -> list[str]:
    """One line per block whose text differs from what its JSON renders (none: in sync)."""
    stale = []
    for doc in doc_files(root):
        lines = _lines(doc)
        for b in find_blocks(doc, lines, root):
            want, have = render(b, root), lines[b.start + 1 : b.end]
            if want != have:
                stale.append(f"{b.where(root)}: differs from {b.results} (table={b.table})"
                             f"{_first_difference(have, want)}")  # fmt: skip
    return stale


def _first_difference(have: list[str], want: list[str]) -> str:
    for i, (h, w) in enumerate(zip(have, want, strict=False)):
        if h != w:
            return f"; block line {i + 1} reads {h!r}, the JSON renders {w!r}"
    return f"; the block has {len(have)} lines, the JSON renders {len(want)}"


def write(root: Path = ROOT) -> list[str]:
    """Rewrite every block that differs; the files changed."""
    changed = []
    for doc in doc_files(root):
        lines = _lines(doc)
        new = list(lines)
        for b in reversed(find_blocks(doc, lines, root)):
            new[b.start + 1 : b.end] = render(b, root)
        if new != lines:
            doc.write_text("\n".join(new), encoding="utf-8")
            changed.append(_rel(doc, root))
    return changed


def publish(results: Path, dest: Path, command: str, root: Path = ROOT) -> dict[str, Any]:
    """``results`` (what a bench wrote) as ``dest`` with a source block first: the command
    given, the checkout's commit (``-dirty`` when tracked files differ), today's date (UTC)
    and this machine."""
    from chunkwise.train.runinfo import git_sha, machine

    data = json.loads(results.read_text(encoding="utf-8"))
    m = machine()
    where = f"{m['cpus']} cores, {m['cpu']}" + (f"; {m['gpus']} x {m['gpu']}" if m["gpus"] else "")
    source = {
        "command": command,
        "commit": git_sha(root) or "unknown",
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
        "machine": where,
    }
    out = {"source": source, **{k: v for k, v in data.items() if k != "source"}}
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a block differs"
    )
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    ap.add_argument("--publish", nargs=2, type=Path, metavar=("RESULTS", "DEST"),
                    help="copy a bench's JSON to DEST (docs/results/NAME.json) with a source block")  # fmt: skip
    ap.add_argument("--command", help="with --publish: the bench command that wrote RESULTS")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    if args.publish:
        if not args.command:
            ap.error("--publish needs --command (the bench command that wrote the file)")
        publish(*args.publish, command=args.command, root=root)
        print(f"docs_numbers: wrote {args.publish[1]}; now make docs-numbers")
        return 0
    try:
        if args.check:
            stale = check(root)
            for line in stale:
                print(line)
            if stale:
                print(f"docs_numbers: {len(stale)} block(s) differ from their JSON: run "
                      "make docs-numbers (or fix the JSON)", file=sys.stderr)  # fmt: skip
                return 1
            return 0
        for path in write(root):
            print(f"docs_numbers: rendered {path}")
    except NumbersError as e:
        print(f"docs_numbers: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
