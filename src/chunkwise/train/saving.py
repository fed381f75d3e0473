"""Saving a run: the output folder it may write into (one chunkwise made, locked for the run),
step checkpoints (complete or absent, every file's sha256 recorded and checked before a
resume loads them), metric trimming on resume, and the final model folder that
``chunkwise eval --model`` loads, written atomically."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chunkwise.config import dump_yaml
from chunkwise.digests import file_sha256
from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_json, read_json
from chunkwise.run_folders import FolderLock, check_run_folder
from chunkwise.train.checkpoint_contents import save_state
from chunkwise.train.recipe import Recipe

log = logging.getLogger("chunkwise.train.loop")

CKPT_RE = re.compile(r"^step-(\d+)$")
STATE_FILE = "trainer_state.json"
#: the CLI flag that resumes from a checkpoint whose files cannot be verified
TRUST_FLAG = "--trust_checkpoint"


# -- the output folder ------------------------------------------------------------------------

#: written first into every output folder a run trains into: chunkwise made this folder
TRAIN_MARKER = "chunkwise-train.json"
#: what an output folder of a chunkwise train from before TRAIN_MARKER holds
LEGACY_MARKERS = ("train_info.json", "recipe.yaml")
#: the lock file one run holds (fcntl.flock) for as long as it runs
LOCK_FILE = ".chunkwise-train.lock"


def _model_folders(r: Recipe) -> list[tuple[str, Path]]:
    keys = (("model.name_or_path", r.model.name_or_path), ("model.tokenizer", r.model.tokenizer))
    return [(k, Path(v).expanduser()) for k, v in keys if v and Path(v).expanduser().is_dir()]


def check_output_dir(r: Recipe) -> bool:
    """Refuse an ``output_dir`` training must not write into: the model's or tokenizer's own
    folder, or a non-empty folder that chunkwise train did not make (see
    :mod:`chunkwise.run_folders`). Whether it is a run folder already."""
    out = Path(r.output_dir)
    for key, folder in _model_folders(r):
        if out.exists() and out.resolve() == folder.resolve():
            raise BadInput(
                f"output_dir {out} is the folder of {key}: training would overwrite its files; "
                "give another output_dir"
            )
    return check_run_folder(
        out,
        (TRAIN_MARKER, *LEGACY_MARKERS),
        made_by="chunkwise train",
        option="output_dir",
        ignore=(LOCK_FILE,),
    )


def lock_output_dir(r: Recipe, world: int = 1) -> FolderLock:
    """Check ``output_dir`` (:func:`check_output_dir`), lock it for this run (a second run is
    refused while this one lives; ``world``: the processes of the launch that holds it) and
    mark it as chunkwise train's. The lock file is removed when the run ends."""
    out = Path(r.output_dir)
    check_output_dir(r)
    lock = FolderLock(
        out, LOCK_FILE, what="chunkwise train run", option="output_dir", world=world, remove=True
    )
    try:
        if not (out / TRAIN_MARKER).exists():
            atomic_write_json(out / TRAIN_MARKER, {"made_by": "chunkwise train", "format": 1})
    except BaseException:
        lock.release()
        raise
    return lock


@contextlib.contextmanager
def hold_output_dir(accelerator: Any, r: Recipe) -> Iterator[None]:
    """Hold ``output_dir`` for the whole run, for every rank of one launch.

    The global main process alone checks and locks it (:func:`lock_output_dir`) and
    broadcasts the outcome, before any rank goes past the first barrier: the ranks of one
    launch all proceed under their main process's lock, and every rank of a second launch on
    the same folder stops with the same one-line error (none waits at a barrier for a main
    process that has left)."""
    from accelerate.utils import broadcast_object_list

    lock, error = None, None
    if accelerator.is_main_process:
        try:
            lock = lock_output_dir(r, accelerator.num_processes)
        except BadInput as e:
            error = str(e)
        except OSError as e:
            error = f"output_dir {r.output_dir}: cannot take its lock ({e})"
    if accelerator.num_processes > 1:
        error = broadcast_object_list([error])[0]
    if error:
        raise BadInput(error)
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


# -- checkpoints -----------------------------------------------------------------------------


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (those with trainer_state.json, written last), oldest first."""
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = CKPT_RE.match(p.name)
        if m and (p / STATE_FILE).exists():
            out.append((int(m.group(1)), p))
    return sorted(out)


def trim_metrics(path: Path, upto: int) -> None:
    """Drop metric lines past step ``upto`` (left by a run killed after its last checkpoint)."""
    if not path.exists():
        return
    from chunkwise.io import atomic_write_bytes, parse_json

    keep = []
    for line in path.read_bytes().splitlines():  # lines that are not metrics are dropped too
        try:  # parse_json: bad UTF-8 and deep nesting are ValueErrors too
            if parse_json(line)["step"] <= upto:
                keep.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    atomic_write_bytes(path, b"".join(x + b"\n" for x in keep))


def checkpoint_files(folder: Path) -> list[str]:
    """Every file of a checkpoint folder (relative POSIX paths, sorted) but trainer_state.json."""
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir()]
    return sorted(n for n in names if n != STATE_FILE)


def _listing(accelerator: Any, folder: Path) -> list[str]:
    """The main process's listing of ``folder``, the same on every rank."""
    from accelerate.utils import broadcast_object_list

    names = checkpoint_files(folder) if accelerator.is_main_process else None
    if accelerator.num_processes > 1:
        names = broadcast_object_list([names])[0]
    return names or []


def checkpoint_digests(accelerator: Any, folder: Path, names: list[str]) -> dict[str, str]:
    """sha256 of each named file of ``folder``; the ranks share the reading (rank i hashes
    every world-th file), and every rank gets the whole table."""
    from accelerate.utils import gather_object

    rank, world = accelerator.process_index, accelerator.num_processes
    mine = {n: file_sha256(folder / n) for n in names[rank::world]}
    table: dict[str, str] = {}
    for part in gather_object([mine]) if world > 1 else [mine]:
        table.update(part)
    return table


def _file(folder: Path, name: str) -> str:
    """``folder/name`` for an error line; repr'd when the name holds a newline or another
    character that does not print."""
    path = str(folder / name)
    return path if path.isprintable() else repr(path)


def verify_checkpoint(accelerator: Any, folder: Path, state: dict, *, trust: bool) -> None:
    """Refuse (``BadInput`` naming the file) a checkpoint whose files are not exactly those
    its save recorded in trainer_state.json, byte for byte (sha256).

    Resuming unpickles files of the checkpoint folder: accelerate's RNG states and
    DeepSpeed's optimizer states are read with ``torch.load(weights_only=False)``, which runs
    whatever code a crafted file holds. The check catches files changed, swapped, added or
    lost since the save (a copy gone wrong, another run, an edit); it cannot stop someone who
    can also rewrite trainer_state.json, so resume only from folders you trust.
    ``trust=True`` (``--trust_checkpoint``) skips it: for checkpoints written before
    chunkwise recorded the digests, or changed on purpose."""
    if trust:
        log.warning(
            "%s: loading the checkpoint without checking its files (%s)", folder, TRUST_FLAG
        )
        return
    recorded = state.get("files_sha256")
    how = (
        f"resuming unpickles these files, so it only loads checkpoints it can verify; if you "
        f"trust {folder}, rerun with {TRUST_FLAG}, else use a new output_dir or "
        "--train.resume=never"
    )
    if not isinstance(recorded, dict) or not recorded:
        raise BadInput(
            f"{folder / STATE_FILE} records no sha256 of the checkpoint's files (a checkpoint "
            f"of an older chunkwise); {how}"
        )
    names = _listing(accelerator, folder)
    missing = sorted(set(recorded) - set(names))
    if missing:  # a name read from the JSON: quoted when it would break the error's one line
        raise BadInput(f"{_file(folder, missing[0])}: written at save but missing now; {how}")
    extra = sorted(set(names) - set(recorded))
    if extra:
        raise BadInput(f"{_file(folder, extra[0])}: not written by this checkpoint's save; {how}")
    digests = checkpoint_digests(accelerator, folder, names)
    changed = [n for n in names if digests[n] != recorded[n]]
    if changed:
        raise BadInput(
            f"{folder / changed[0]}: its sha256 differs from the one recorded at save in "
            f"{STATE_FILE} (the file changed after the checkpoint was written); {how}"
        )


def resume_point(
    accelerator: Any, root: Path, examples_hash: str, *, trust: bool = False
) -> tuple[int, dict, Path | None]:
    """(step, trainer state, folder) of the latest complete checkpoint under ``root``, checked
    before anything of it is loaded; (0, {}, None) when there is none.

    The checkpoint must be of the same training examples, and its files must be those its save
    recorded (:func:`verify_checkpoint`): ``accelerator.load_state`` then unpickles them
    (``torch.load(weights_only=False)`` for RNG and DeepSpeed optimizer states), so only
    checkpoints of your own runs, in folders only you can write, should be resumed."""
    found = checkpoints(root)
    if not found:
        return 0, {}, None
    step, path = found[-1]
    state = read_json(path / STATE_FILE, "checkpoint state")
    if not isinstance(state, dict):
        raise BadInput(f"{path / STATE_FILE}: not a JSON object; use a new output_dir")
    if state.get("examples_sha256") != examples_hash:
        raise BadInput(
            f"{path}: the training examples changed since this checkpoint (data, "
            "tokenizer or format settings); use a new output_dir or "
            "--train.resume=never"
        )
    verify_checkpoint(accelerator, path, state, trust=trust)
    return step, state, path


def save_checkpoint(
    accelerator: Any, root: Path, step: int, state: dict, limit: int, *, lora: bool = False
) -> None:
    """accelerator.save_state into step-N.tmp, then trainer_state.json (with every file's
    sha256, checked before a resume loads them), then rename: a kill at any moment leaves
    either a complete checkpoint or none. A LoRA run's holds what trains
    (:func:`chunkwise.train.checkpoint_contents.save_state`)."""
    final = root / f"step-{step:08d}"
    tmp = root / f"step-{step:08d}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    save_state(accelerator, str(tmp), lora=lora)
    accelerator.wait_for_everyone()
    digests = checkpoint_digests(accelerator, tmp, _listing(accelerator, tmp))
    if accelerator.is_main_process:
        atomic_write_json(tmp / STATE_FILE, {**state, "files_sha256": digests})
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if limit > 0:
            for _, old in checkpoints(root)[:-limit]:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def save_full_model(model: Any, tokenizer: Any, path: Path, *, is_main: bool) -> None:
    """``save_pretrained`` a model that may be ZeRO-3-partitioned (every rank calls this: the
    weights are gathered first, else a partitioned tensor saves as shape ``(0,)``), into a temp
    folder renamed at the end."""
    partitioned = [p for p in model.parameters() if hasattr(p, "ds_id")]
    gather: Any = contextlib.nullcontext()
    if partitioned:
        import deepspeed

        gather = deepspeed.zero.GatheredParameters(partitioned, modifier_rank=None)
    with gather:
        if is_main:
            tmp = path.with_name(path.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.save_pretrained(tmp, state_dict=state_dict)
            tokenizer.save_pretrained(tmp)
            shutil.rmtree(path, ignore_errors=True)
            tmp.rename(path)


#: files a final save writes into output_dir; ``train_info.json`` is written last (its presence
#: marks a complete final save)
FINAL_TMP = ".final.tmp"
WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "model.safetensors.index.json")


def incomplete_final(out_dir: Path) -> bool:
    """True when ``out_dir`` holds weights but no ``train_info.json``: a final save that did not
    finish (a kill during it); the next run of the same recipe saves it again."""
    has_weights = any((out_dir / f).exists() for f in WEIGHT_FILES)
    return has_weights and not (out_dir / "train_info.json").exists()


def publish(tmp: Path, out_dir: Path) -> None:
    """Move every file of ``tmp`` into ``out_dir``: the old train_info.json goes first, the new
    one last, so a kill at any moment leaves either a complete save or weights without
    train_info.json (:func:`incomplete_final`), never new weights beside an old train_info."""
    (out_dir / "train_info.json").unlink(missing_ok=True)
    names = sorted(p.name for p in tmp.iterdir() if p.name != "train_info.json")
    for name in [*names, "train_info.json"]:
        dst = out_dir / name
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        os.replace(tmp / name, dst)
    tmp.rmdir()


def base_spec(r: Recipe, base_saved: Path | None, prompt_kind: str | None) -> str:
    """The hf: spec of the base a LoRA run's adapter goes on (its saved random base, the
    embedded model, or ``model.name_or_path``), served as it was trained (chat or plain)."""
    from chunkwise.train.modeling import EMBEDDED_NAMES

    if base_saved is not None:
        base = "hf:" + str(base_saved.resolve())
    elif r.model.name_or_path in EMBEDDED_NAMES:
        base = "hf:default"
    else:
        p = Path(r.model.name_or_path).expanduser()
        base = "hf:" + (str(p.resolve()) if p.exists() else r.model.name_or_path)
    # how it was trained is how it is served: chat turns or plain prompts
    chat = "on" if prompt_kind == "chat" else "off"
    return f"{base}?chat={chat}"


def save_final(
    accelerator: Any,
    model: Any,
    tokenizer: Any,
    r: Recipe,
    out_dir: Path,
    base_saved: Path | None,
    summary: dict,
) -> None:
    from chunkwise.llm.hf import BASE_SPEC_FILE

    state_dict = accelerator.get_state_dict(model)  # gathers ZeRO-3 / FSDP shards (all ranks)
    if not accelerator.is_main_process:
        accelerator.wait_for_everyone()
        return
    tmp = out_dir / FINAL_TMP
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    unwrapped = accelerator.unwrap_model(model)
    cfg = getattr(unwrapped, "config", None)
    if cfg is not None:
        cfg.use_cache = True
    unwrapped.save_pretrained(tmp, state_dict=state_dict)
    tokenizer.save_pretrained(tmp)
    if r.model.lora.enabled:
        spec = base_spec(r, base_saved, summary.get("prompt_kind"))
        atomic_write_json(tmp / BASE_SPEC_FILE, {"base": spec})
    dump_yaml(r, tmp / "recipe.yaml")
    atomic_write_json(tmp / "train_info.json", summary)
    publish(tmp, out_dir)
    log.info("saved %s to %s", "LoRA adapter" if r.model.lora.enabled else "model", out_dir)
    accelerator.wait_for_everyone()


__all__ = [
    "FINAL_TMP",
    "LOCK_FILE",
    "TRAIN_MARKER",
    "TRUST_FLAG",
    "base_spec",
    "check_output_dir",
    "checkpoint_digests",
    "checkpoint_files",
    "checkpoints",
    "hold_output_dir",
    "incomplete_final",
    "lock_output_dir",
    "publish",
    "resume_point",
    "save_checkpoint",
    "save_final",
    "save_full_model",
    "trim_metrics",
    "verify_checkpoint",
]
