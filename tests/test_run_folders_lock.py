"""The one folder lock (:class:`chunkwise.run_folders.FolderLock`) that train and eval share
(#47): parameterized by the kind of run and its option, a holder line with pid, host and
time, one-line refusals whatever the lock file holds, O_CLOEXEC, optional removal."""

from __future__ import annotations

import fcntl
import os

import pytest

from chunkwise.errors import BadInput
from chunkwise.eval.run_dir import RunLock
from chunkwise.run_folders import FolderLock
from chunkwise.train.saving import LOCK_FILE


def test_eval_and_train_use_the_one_lock():
    assert issubclass(RunLock, FolderLock)


def test_refusal_names_folder_holder_kind_and_option(tmp_path):
    kind = {"what": "chunkwise train run", "option": "output_dir"}
    with FolderLock(tmp_path, "x.lock", **kind, world=2), pytest.raises(BadInput) as e:
        FolderLock(tmp_path, "x.lock", **kind)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path} is in use by another chunkwise train run (pid {os.getpid()}")
    assert ", rank 0 of 2, since " in msg and "lock file x.lock" in msg
    assert msg.endswith("or pass another output_dir") and "\n" not in msg


def test_a_garbled_lock_file_still_gives_one_line(tmp_path):
    holder = FolderLock(tmp_path, "x.lock", what="run")
    try:
        os.pwrite(holder._fd, b"line one\x1b[2J\nline two\n\xff\xfe", 0)
        with pytest.raises(BadInput) as e:
            FolderLock(tmp_path, "x.lock", what="run")
        assert "\n" not in str(e.value) and "\x1b" not in str(e.value)
        assert "line two" not in str(e.value)
    finally:
        holder.release()


def test_descriptor_is_close_on_exec_and_release_is_idempotent(tmp_path):
    lock = FolderLock(tmp_path, LOCK_FILE, what="run")
    assert fcntl.fcntl(lock._fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    lock.release()
    lock.release()
    assert (tmp_path / LOCK_FILE).read_text() == ""  # kept (remove=False), holder line cleared


def test_remove_deletes_the_file_and_only_the_empty_folders_it_made(tmp_path):
    deep = tmp_path / "a" / "b"
    with FolderLock(deep, LOCK_FILE, what="run", remove=True) as lock:
        assert lock.held and (deep / LOCK_FILE).exists()
    assert not (tmp_path / "a").exists()
    with FolderLock(deep, LOCK_FILE, what="run", remove=True):
        (deep / "marker.json").write_text("{}")
    assert sorted(p.name for p in deep.iterdir()) == ["marker.json"]


def test_lazy_lock_takes_on_with_and_a_file_in_the_way_is_one_clear_error(tmp_path):
    lock = FolderLock(tmp_path / "run", "x.lock", what="run", acquire=False)
    assert not lock.held and not (tmp_path / "run").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(BadInput, match=r"^output_dir .*file: cannot make the run folder"):
        FolderLock(tmp_path / "file", "x.lock", what="run", option="output_dir")
