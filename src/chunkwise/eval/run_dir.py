"""The run folder on disk: its config.yaml, its prediction files, and merging rank shards.

``config.yaml`` is checked when a run starts (a folder made with another config is refused) but
written only once the first prediction exists, so a command that fails before producing
anything (a bad model spec, an unreachable hub, a model that will not load) leaves no
``config.yaml`` behind to refuse the corrected command. Specs are stored with credentials
masked (:mod:`chunkwise.redact`).

One run at a time: :class:`RunLock` (the :class:`~chunkwise.run_folders.FolderLock` that train
uses too) holds an exclusive ``flock`` on ``.eval.rank<r>.lock`` in the folder from before
anything in it is read until results.json is written. Ranks of one data-parallel run lock
their own files and then wait for each other (a barrier), so they never refuse each other,
while any two separate runs both have a rank 0 and so collide; the run that comes second is
refused at once, naming the process that holds the folder. The kernel frees a flock when its
holder dies (``kill -9`` included), so a crashed run leaves nothing that blocks the next one.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from chunkwise.config import config_to_dict, dump_yaml, load_config
from chunkwise.errors import BadInput, ChunkwiseError
from chunkwise.eval.config import RESUME_EXEMPT, EvalConfig
from chunkwise.io import JSONInputError, atomic_write_text, parse_json
from chunkwise.redact import redact_obj
from chunkwise.run_folders import FolderLock


def stored_config(cfg: EvalConfig) -> dict[str, Any]:
    """The config as it is written anywhere (config.yaml, results.json, wandb): no secrets."""
    return redact_obj(config_to_dict(cfg))


def check_output_path(out: Path, flag: str = "--output") -> None:
    """``out`` must be a folder, or creatable as one (no file on the way)."""
    if out.exists() and not out.is_dir():
        raise BadInput(f"{flag} {out} is a file; give a folder for the run")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInput(f"{flag} {out}: {parent} is a file, so no folder can be made there")
            break


def _config_diffs(path: Path, cfg: EvalConfig) -> list[str]:
    try:
        old = load_config(EvalConfig, path).resolved()
    except ChunkwiseError as e:
        return [f"its config cannot be read ({e})"]
    a, b = stored_config(old), stored_config(cfg)
    return [
        f"{k}: {a.get(k)!r} -> {b.get(k)!r}"
        for k in dict.fromkeys([*a, *b])
        if k not in RESUME_EXEMPT and a.get(k) != b.get(k)
    ]


def prepare_run_dir(out: Path, cfg: EvalConfig, dist: Any = None) -> bool:
    """Check that ``out`` can hold this run. Returns whether an earlier run is resumed.

    Nothing is written here: :func:`write_config` does it when the first prediction exists.
    """
    check_output_path(out)
    cfg_path = out / "config.yaml"
    resuming = cfg_path.exists()
    if resuming:
        diffs = _config_diffs(cfg_path, cfg)
        if diffs:
            raise BadInput(
                f"{out} holds a run made with a different config, so it cannot be resumed; "
                f"differences (in config.yaml -> now): {'; '.join(diffs)}. Rerun with the "
                "original settings, or pass a new --output"
            )
    elif any(p.stat().st_size for p in (out / "predictions").rglob("*.jsonl")):
        raise BadInput(
            f"{out}/predictions holds files but {cfg_path} is missing, so it is not known how "
            "they were made; pass a new --output"
        )
    return resuming


class RunLock(FolderLock):
    """One rank's exclusive, non-blocking lock on the run folder ``out``: a
    :class:`~chunkwise.run_folders.FolderLock` on ``.eval.rank<r>.lock``, taken on ``with`` or
    :meth:`acquire` (with the folder, when it is missing) and removed on :meth:`release`, with
    the folders that acquiring made when they are empty again: a run refused or failed before
    its first prediction leaves no folder behind."""

    def __init__(self, out: Path, rank: int = 0, world: int = 1):
        super().__init__(
            Path(out),
            f".eval.rank{rank}.lock",
            what="`chunkwise eval` run",
            option="--output",
            rank=rank,
            world=world,
            remove=True,
            acquire=False,
        )
        self.out = self.folder

    def acquire(self) -> RunLock:
        check_output_path(self.out)
        super().acquire()
        return self


@contextlib.contextmanager
def lock_run_dir(out: Path, dist: Any = None) -> Iterator[RunLock]:
    """Hold this rank's lock on ``out``; with several ranks, wait until every rank holds its
    own (a rank that is refused stops, and with it the others, before any rank reads)."""
    rank, world = (dist.rank, dist.world) if dist is not None else (0, 1)
    with RunLock(out, rank, world) as lock:
        if dist is not None:
            dist.barrier()
        yield lock


def write_config(out: Path, cfg: EvalConfig) -> None:
    """Write ``config.yaml`` (every rank writes the same text atomically; a rerun refreshes
    the keys that may change: scorer, extract, wandb)."""
    dump_yaml(stored_config(cfg), out / "config.yaml")


def main_file(out: Path, task: str) -> Path:
    return out / "predictions" / f"{task}.jsonl"


def shard_file(out: Path, task: str, rank: int) -> Path:
    return out / "predictions" / "shards" / f"{task}.rank{rank}.jsonl"


def shard_files(out: Path, task: str) -> list[Path]:
    return sorted((out / "predictions" / "shards").glob(f"{task}.rank*.jsonl"))


def answered(out: Path, task: str) -> set[Any]:
    """The ids of ``task`` with a finished prediction (no error) in run folder ``out``, in the
    main file or any rank's shard."""
    ids: set[Any] = set()
    for path in [main_file(out, task), *shard_files(out, task)]:
        ids.update(r["id"] for r in read_records(path) if not r.get("error"))
    return ids


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a predictions file that another process may still be appending to: an
    unfinished last line is ignored (a complete record without its newline is kept)."""
    if not path.exists():
        return []
    out = []
    with path.open("rb") as f:
        lines = f.read().split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = parse_json(raw)
        except JSONInputError as e:
            if lineno == len(lines):  # the unfinished tail of a live or killed writer
                continue
            raise BadInput(
                f"{path}:{lineno}: not valid JSON ({e}); fix or delete that line"
            ) from None
        if not isinstance(rec, dict) or "id" not in rec:
            raise BadInput(f"{path}:{lineno}: expected a JSON object with an 'id'")
        if isinstance(rec["id"], (dict, list)):
            raise BadInput(
                f"{path}:{lineno}: 'id' is a JSON {type(rec['id']).__name__}, not a string or "
                "number; fix or delete that line"
            )
        out.append(rec)
    return out


def drop_errored(path: Path) -> list[Any]:
    """Remove the lines of examples that failed (``error``) so a rerun tries them again;
    returns their ids."""
    records = read_records(path)
    failed = [r["id"] for r in records if r.get("error")]
    if failed:
        atomic_write_text(path, "".join(_line(r) for r in records if not r.get("error")))
    return failed


def show_ids(ids: Iterable[Any], limit: int = 10) -> str:
    ids = list(ids)
    text = ", ".join(repr(i) for i in ids[:limit])
    return text + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _line(r: dict[str, Any]) -> str:
    return json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"


def merge(out: Path, task: str, ids: list[Any]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """All of a task's predictions in data order, each id once, in ``predictions/<task>.jsonl``.

    Where an id has several records (a retried failure, a merge interrupted before cleanup),
    a successful one wins over a failed one."""
    main = main_file(out, task)
    shards = shard_files(out, task)
    by_id: dict[Any, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for path in [main, *shards]:
        recs = read_records(path)
        if path != main:
            counts[path.stem.rsplit(".", 1)[-1]] = len(recs)
        for r in recs:
            old = by_id.get(r["id"])
            if old is None or (old.get("error") and not r.get("error")):
                by_id[r["id"]] = r
    order = {i: k for k, i in enumerate(ids)}
    extra = [i for i in by_id if i not in order]
    if extra:
        raise BadInput(f"{task}: predictions for ids not in the data: {show_ids(extra)}")
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise BadInput(
            f"{task}: no prediction for ids {show_ids(missing)} after every rank finished; "
            "rerun the same command to fill them in"
        )
    records = [by_id[i] for i in ids]
    current = read_records(main)
    if shards or [r["id"] for r in current] != ids:
        atomic_write_text(main, "".join(_line(r) for r in records))
        for p in shards:
            p.unlink()
        shard_dir = out / "predictions" / "shards"
        if shard_dir.is_dir() and not any(shard_dir.iterdir()):
            shard_dir.rmdir()
    return records, counts


__all__ = [
    "RunLock",
    "check_output_path",
    "drop_errored",
    "lock_run_dir",
    "main_file",
    "merge",
    "prepare_run_dir",
    "read_records",
    "shard_file",
    "shard_files",
    "show_ids",
    "stored_config",
    "write_config",
]
