"""The final files of a synthesis run, derived from its ledger and written atomically: each
shard's records, pyramids and stats, then (once every shard is done) stats.json and the
``datasets`` folder, optionally pushed to the Hub."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_json, read_json, read_jsonl
from chunkwise.io.jsonl import MAX_LINE_BYTES, iter_lines, parse_jsonl_line
from chunkwise.synth.config import SynthConfig
from chunkwise.synth.records import features
from chunkwise.synth.shard_stats import merge_stats, shard_stats

log = logging.getLogger(__name__)


def part_name(cfg: SynthConfig) -> str:
    """The name of this shard's files: ``part-IIIII-of-NNNNN``."""
    return _part_name(cfg.shard_index, cfg.num_shards)


def _part_name(index: int, num_shards: int) -> str:
    return f"part-{index:05d}-of-{num_shards:05d}"


def _ledger_entries(path: Path) -> Iterator[dict[str, Any]]:
    """The finished documents of a work ledger, each checked for what the exports read (a
    hand-edited line is one error naming it, not a traceback)."""
    if not path.exists():
        return
    for line, entry in read_jsonl(path, skip_bad_lines=True):
        _check_entry(entry, f"{path}:{line}")
        yield entry


def _sorted_entries(path: Path) -> Iterator[dict[str, Any]]:
    """The ledger's entries in source-id order, whatever order the workers finished them in
    (so a shard's files, and the dataset merged from the shards in shard order, come out the
    same on every run). Holds only (id, line start) pairs in memory, not the documents; lines
    that are not entries are passed over here (the stats pass logs them)."""
    if not path.exists():
        return
    keys: list[tuple[str, int, int]] = []
    with path.open("rb") as f:
        end = 0
        for lineno, raw in iter_lines(f):
            start, end = end, f.tell()
            entry = _parse(raw)
            if isinstance(entry, dict) and "source_id" in entry:
                keys.append((str(entry["source_id"]), lineno, start))
        keys.sort()
        for _, lineno, start in keys:
            f.seek(start)
            entry = _parse(f.readline(MAX_LINE_BYTES + 1))
            _check_entry(entry, f"{path}:{lineno}")
            yield entry


def _parse(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return parse_jsonl_line(raw)
    except ValueError:
        return None


def _check_entry(entry: dict[str, Any], where: str) -> None:
    records = entry.get("records")
    problem = None
    if records is not None and not (
        isinstance(records, list) and all(isinstance(r, dict) for r in records)
    ):
        problem = "'records' is not a list of objects"
    elif records and not isinstance(entry.get("document"), str):
        problem = "'document' is not text"  # a skipped document has none, and no records
    elif entry.get("pyramid") is not None and (
        not isinstance(entry["pyramid"], dict) or "source_id" not in entry
    ):
        problem = "'pyramid' is not an object with its 'source_id'"
    if problem:
        raise BadInput(
            f"{where}: work ledger entry {problem}; delete that line and rerun to redo the document"
        )


def _records_of(entry: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for r in entry.get("records") or []:
        yield {**r, "document": entry["document"]}


def _write_jsonl_atomic(path: Path, lines: Iterable[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for rec in lines:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


def export(cfg: SynthConfig) -> dict[str, Any]:
    """Write the shard's final files from its ledger; merge all shards once each has stats."""
    out = Path(cfg.out)
    part = part_name(cfg)
    ledger = out / "work" / f"docs-{part}.jsonl"
    runs_path = out / "work" / f"runs-{part}.jsonl"
    runs = [r for _, r in _read(runs_path)]
    _write_jsonl_atomic(
        out / "data" / f"{part}.jsonl", (r for e in _sorted_entries(ledger) for r in _records_of(e))
    )
    _write_jsonl_atomic(
        out / "pyramids" / f"{part}.jsonl",
        (
            {"source_id": e["source_id"], **e["pyramid"]}
            for e in _sorted_entries(ledger)
            if e.get("pyramid")
        ),
    )
    try:
        stats = shard_stats(_ledger_entries(ledger), runs)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(
            f"{ledger}: a work ledger entry's stats cannot be read ({type(e).__name__}: {e}); "
            "delete the damaged line and rerun to redo that document"
        ) from None
    stats["config"] = {**cfg.content(), "docs": cfg.docs, "shard_index": cfg.shard_index}
    atomic_write_json(out / "stats" / f"{part}.json", stats)
    _merge_all(cfg, out)
    return stats


def _read(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.exists():
        return iter(())
    return read_jsonl(path, skip_bad_lines=True)


def _merge_all(cfg: SynthConfig, out: Path) -> None:
    import fcntl

    names = [_part_name(i, cfg.num_shards) for i in range(cfg.num_shards)]
    if not all((out / "stats" / f"{n}.json").exists() for n in names):
        missing = [n for n in names if not (out / "stats" / f"{n}.json").exists()]
        log.info("waiting for shards %s before writing stats.json and dataset/", ", ".join(missing))
        return
    with open(out / "work" / ".merge.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stats = _merged_stats([out / "stats" / f"{n}.json" for n in names])
        stats["config"] = {**cfg.content(), "docs": cfg.docs}
        stats["files"] = {
            "data": [f"data/{n}.jsonl" for n in names],
            "dataset": "dataset",
            "pyramids": [f"pyramids/{n}.jsonl" for n in names],
        }
        _save_dataset(out, [out / "data" / f"{n}.jsonl" for n in names])
        atomic_write_json(out / "stats.json", stats)
        if cfg.push_to_hub:
            _push(out, cfg.push_to_hub)


def _merged_stats(files: list[Path]) -> dict[str, Any]:
    """The shards' stats files added together; a damaged one is an error naming it (delete it
    and rerun that shard to write it again)."""
    parts = []
    for f in files:
        part = read_json(f, "shard stats file")
        if not isinstance(part, dict):
            raise BadInput(
                f"{f}: a shard stats file holds an object; delete it and rerun the shard"
            )
        parts.append(part)
    try:
        return merge_stats(parts)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(
            f"shard stats files {', '.join(f.name for f in files)} in {files[0].parent} do not "
            f"add up ({type(e).__name__}: {e}); delete the damaged one and rerun its shard"
        ) from None


def load_dataset(out: str | Path) -> Any:
    """The records of a finished synthesis folder as a ``datasets.Dataset``."""
    import datasets

    return datasets.load_from_disk(str(Path(out) / "dataset"))


def _save_dataset(out: Path, files: list[Path]) -> None:
    import datasets

    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # our own progress bar and stats say what happened
    try:
        _save_dataset_quietly(out, files)
    finally:
        if bars:
            datasets.enable_progress_bars()


def _save_dataset_quietly(out: Path, files: list[Path]) -> None:
    import datasets

    feats = features()
    nonempty = [str(f) for f in files if f.exists() and f.stat().st_size > 0]
    if nonempty:
        ds = datasets.Dataset.from_json(
            nonempty, features=feats, cache_dir=str(out / "work" / "hf-cache")
        )
    else:
        ds = datasets.Dataset.from_dict({k: [] for k in feats}, features=feats)
    tmp = out / f".dataset.{os.getpid()}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    ds.save_to_disk(str(tmp), num_shards=1 if len(ds) == 0 else None)
    final = out / "dataset"
    old = out / f".dataset.{os.getpid()}.old"
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(out / "work" / "hf-cache", ignore_errors=True)


def _push(out: Path, name: str) -> None:
    try:
        load_dataset(out).push_to_hub(name)
    except Exception as e:
        raise BadInput(
            f"--push-to-hub {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
            f"(the local files in {out} are complete)"
        ) from None
