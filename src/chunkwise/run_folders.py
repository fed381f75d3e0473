"""Folders a chunkwise run writes into: only ones chunkwise made, and one run at a time.

The rule (``demo --fresh``, ``synth`` and ``train`` share it): a run writes into its output
folder only when the folder is absent, empty, or holds the marker file that kind of run writes
first (demo: ``demo.json``; synth: ``config.json``; train: ``chunkwise-train.json``). Anything
else is someone else's folder (a model, a data set, a home folder) and is refused with a
one-line :class:`BadInput` before anything is written.

:class:`FolderLock` (the one lock every kind of run uses: ``train`` on
``.chunkwise-train.lock``, each rank of ``eval`` on ``.eval.rank<r>.lock``) holds an exclusive
``fcntl.flock`` on a lock file inside the folder for as long as a run writes there; a second
run is refused at once, naming the folder and the process that holds it (pid, host, rank,
since when). The kernel frees a flock when its holder dies, even by ``kill -9``, so no stale
lock is ever left to clean up; a lock file may be removed on release because the lock counts
only while the file locked is still the one at the path (re-checked after every ``flock``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from chunkwise.errors import BadInput

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: tries to lock a lock file that a finishing run removes under us (each try is immediate)
_LOCK_TRIES = 20


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
    """An exclusive, non-blocking ``flock`` on the lock file ``folder/name``: one run of a
    kind writes into ``folder`` at a time.

    ``what`` names the kind of run in the refusal (``"chunkwise train run"``), ``option`` the
    option that gives the folder (``"--output"``, ``"output_dir"``). The lock is taken by
    :meth:`acquire`: at once when ``acquire=True`` (the default), else on ``with`` or an
    explicit call. The folder and its missing parents are made on the way. The lock file
    holds one line naming the holder: ``pid N on host H[, rank r of w], since T``; a second
    run is refused with one line naming the folder, that holder and what to do.

    With ``remove=True``, :meth:`release` deletes the lock file and then the folders
    :meth:`acquire` made, when they are empty again (a run refused or failed before it wrote
    anything leaves no folder behind). That is safe because a lock counts only while the file
    locked is still the one at the path, checked after every ``flock``: a process that opened
    the old file before it was removed finds it gone and locks the new one.

    The descriptor is opened ``O_CLOEXEC``: a child process (a tokenizer worker, a launched
    engine) does not keep the folder locked after its parent ends.
    """

    def __init__(
        self,
        folder: Path,
        name: str,
        *,
        what: str,
        option: str = "output folder",
        rank: int = 0,
        world: int = 1,
        remove: bool = False,
        acquire: bool = True,
    ) -> None:
        self.folder = Path(folder)
        self.path = self.folder / name
        self.what, self.option = what, option
        self.rank, self.world = rank, world
        self.remove = remove
        self._fd: int | None = None
        self._made: list[Path] = []
        if acquire:
            self.acquire()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FolderLock:
        """Take the lock (a no-op while held); :class:`BadInput` when another run holds it or
        the folder or its lock file cannot be made."""
        if self._fd is not None:
            return self
        for _ in range(_LOCK_TRIES):
            try:
                _make_folders(self.folder, self._made)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:  # a finishing run removed a folder on the way just now
                continue
            except OSError as e:
                self._remove_made()
                where = f"{e.strerror}: {e.filename}" if e.filename else str(e)
                raise BadInput(
                    f"{self.option} {self.folder}: cannot make the run folder and its lock file "
                    f"({where}); give a folder you can write to"
                ) from None
            try:
                locked = self._lock(fd)
            except BaseException:
                self._remove_made()
                raise
            if locked:
                self._fd = fd
                os.ftruncate(fd, 0)
                os.pwrite(fd, self.holder().encode(), 0)
                return self
        self._remove_made()
        raise BadInput(
            f"{self.folder}: could not lock {self.path.name} (it kept being replaced); is "
            "another run starting and stopping there? Try again"
        )

    def _lock(self, fd: int) -> bool:
        """Lock ``fd``; False (and ``fd`` closed) when the path no longer names that file."""
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _first_line(os.pread(fd, 512, 0))
            os.close(fd)
            raise BadInput(
                f"{self.folder} is in use by another {self.what} "
                f"({holder or 'a process that is just starting'}; lock file {self.path.name}); "
                f"wait for it to finish, or pass another {self.option}"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
        return same

    def holder(self) -> str:
        """The line this process writes into the lock file it holds."""
        where = f", rank {self.rank} of {self.world}" if self.world > 1 else ""
        since = time.strftime("%Y-%m-%d %H:%M:%S")
        return f"pid {os.getpid()} on host {socket.gethostname()}{where}, since {since}"

    def release(self) -> None:
        """Free the lock (closing the last descriptor frees the flock); with ``remove``, also
        delete the lock file, while still held, and the folders acquiring made if empty."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self.remove:
                self.path.unlink(missing_ok=True)  # while still held: see the class docstring
            else:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        if self.remove:
            self._remove_made()
        self._made = []

    def _remove_made(self) -> None:
        for folder in reversed(self._made):
            try:
                folder.rmdir()  # only when empty: a run that wrote anything keeps its folder
            except OSError:
                break
        self._made = []

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _first_line(raw: bytes) -> str:
    """The holder line of a lock file, as one printable line (whatever the file holds)."""
    text = raw.decode("utf-8", "replace").strip()
    line = text.splitlines()[0] if text else ""
    return "".join(c if c.isprintable() else "?" for c in line)[:300]


def _make_folders(folder: Path, made: list[Path]) -> None:
    """Make ``folder`` and its missing parents, adding the ones made here to ``made``."""
    for f in [*reversed(folder.parents), folder]:
        try:
            f.mkdir()
        except FileExistsError:
            continue
        made.append(f)


__all__ = ["FolderLock", "check_run_folder", "foreign_entries"]
