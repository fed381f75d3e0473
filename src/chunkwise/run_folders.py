"""Folders a chunkwise run writes into: only ones chunkwise made, and one run at a time.

The rule (``demo --fresh``, ``synth`` and ``train`` share it): a run writes into its output
folder only when the folder is absent, empty, or holds the marker file that kind of run writes
first (demo: ``demo.json``; synth: ``config.json``; train: ``chunkwise-train.json``). Anything
else is someone else's folder (a model, a data set, a home folder) and is refused with a
one-line :class:`BadInput` before anything is written.

:class:`FolderLock` holds an exclusive ``fcntl.flock`` on a lock file inside the folder for as
long as a run writes there; a second run is refused at once, naming the process that holds it.
The kernel frees a flock when its holder dies, even by ``kill -9``, so no stale lock is ever
left to clean up (the lock file itself stays: deleting it would let two runs lock two files).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from chunkwise.errors import BadInput

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def foreign_entries(folder: Path, ignore: Sequence[str] = ()) -> list[str]:
    """Names in ``folder`` other than those starting with one of ``ignore``."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(tuple(ignore)))


def check_run_folder(
    folder: Path,
    markers: Sequence[str],
    *,
    made_by: str,
    option: str,
    ignore: Sequence[str] = (),
) -> bool:
    """Whether ``folder`` is one ``made_by`` made (it holds one of ``markers``); False when it
    is absent or empty (entries starting with ``ignore`` do not count). Raises
    :class:`BadInput` naming ``option`` when it is a file or holds other files."""
    if not folder.exists():
        return False
    if not folder.is_dir():
        raise BadInput(f"{option} {folder} is a file, not a folder; give a folder")
    if any((folder / m).exists() for m in markers):
        return True
    others = foreign_entries(folder, ignore)
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise BadInput(
            f"{option} {folder} already holds files that {made_by} did not write ({shown}; no "
            f"{' or '.join(markers)}); give a new or empty folder"
        )
    return False


class FolderLock:
    """An exclusive, non-blocking ``flock`` on ``folder/name``, held until :meth:`release`
    (or the process ends). The holder's pid is written into the lock file, so a refused
    run can say who holds it."""

    def __init__(self, folder: Path, name: str, *, what: str) -> None:
        self.path = folder / name
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise BadInput(
                f"{folder} is in use by another {what} (pid {holder}; lock {self.path}); wait "
                "for it to finish, or give another output folder"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the last descriptor frees the flock
            self._fd = None

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["FolderLock", "check_run_folder", "foreign_entries"]
