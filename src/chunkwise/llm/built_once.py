"""Folders that chunkwise builds once and then shares: the embedded model converted to
safetensors, a packaged adapter's model folder, an adapter merged into its base for vLLM.

Several processes can ask for the same folder at the same moment: the ranks of an ``accelerate
launch`` evaluation on a new machine, two test workers, two users' jobs on one node. So a folder
is built by one process at a time, under an exclusive ``flock`` on a lock file beside it; the
others wait on the lock and then find it built. The builder writes into a temporary folder of its
own beside the target and moves it into place whole (``os.replace``), so a reader never sees half
a folder, and a build killed midway leaves only its temporary folder (removed, or, after a
``kill -9``, ignored: the next build makes a new one). Before this, each builder wrote into the
same ``<name>.partial`` folder and deleted it first, so two first uses at once could delete each
other's half-written files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Held while ``out`` is built: an exclusive ``flock`` on ``.<name>.lock`` beside it (freed
    by the kernel if the holder dies, so a killed build never blocks the next)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # another process building it: wait for that one
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(out: Path, ready: Callable[[Path], bool], build: Callable[[Path], None]) -> Path:
    """``out``, built by ``build(folder)`` into a new folder unless ``ready(out)`` already; one
    process builds at a time, and ``out`` appears whole or not at all. An earlier folder at
    ``out`` that is not ``ready`` (an older format) is replaced."""
    if ready(out):
        return out
    with build_lock(out):
        if ready(out):  # built by the process we waited for
            return out
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
        try:
            build(tmp)
            if out.exists():
                shutil.rmtree(out)
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


__all__ = ["build_lock", "build_once"]
