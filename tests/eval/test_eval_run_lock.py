"""Issue #47 item 3: one `chunkwise eval` run per run folder at a time.

Two runs on one folder used to interleave: one replaced ``predictions/<task>.jsonl``
(``drop_errored`` / ``merge``) while the other appended to the unlinked file, whose predictions
then vanished. The run folder is now locked (``flock``, per rank) from before it is read until
results.json is written; the second run is refused naming the holder; the kernel frees the lock
when the holder exits or is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise.errors import BadInput
from chunkwise.eval.run_dir import RunLock
from two_ranks import ACCELERATE, launch_eval

REPO = Path(__file__).resolve().parents[2]

#: `chunkwise eval` whose model ``scripted:gate`` (scripted:passkey) prints "ready" at its first
#: call, while the run holds its folder, and waits for a line on stdin before answering
HOLDER = """
import sys
from chunkwise import cli
from chunkwise.llm import scripted

original = scripted.SCRIPTS["passkey"]

def gate():
    llm = original()
    inner, state = llm._generate, {"first": True}

    def generate(requests):
        if state.pop("first", False):
            print("ready", flush=True)
            sys.stdin.readline()
        return inner(requests)

    llm._generate = generate
    return llm

scripted.SCRIPTS["gate"] = gate
sys.exit(cli.main(sys.argv[1:]))
"""
RUN = "import sys; from chunkwise import cli; sys.exit(cli.main(sys.argv[1:]))"


def eval_args(out: Path, model: str = "scripted:passkey") -> list[str]:
    return [
        "eval",
        f"--model={model}",
        "--tasks=passkey",
        "--data=synthetic:400",
        "--limit=3",
        f"--output={out}",
        "--no-progress",
    ]


def start_holder(out: Path) -> subprocess.Popen:
    """A real eval process that holds ``out`` (it has printed "ready") until told to go on."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *eval_args(out, "scripted:gate")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def run_eval_process(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUN, *eval_args(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


def lock_files(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob(".eval.*.lock"))


def test_second_run_on_a_busy_folder_is_refused_and_the_first_finishes(tmp_path):
    out = tmp_path / "run"
    holder = start_holder(out)
    try:
        second = run_eval_process(out)
    finally:
        holder.stdin.write("go\n")
        holder.stdin.close()
        holder.wait(timeout=300)
    assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr
    errors = [ln for ln in second.stderr.splitlines() if ": error: " in ln]
    assert len(errors) == 1
    assert f"{out} is in use by another `chunkwise eval` run (pid {holder.pid} on host" in errors[0]
    assert "pass another --output" in errors[0]
    assert holder.returncode == 0, holder.stderr.read()
    results = json.loads((out / "results.json").read_text())
    assert results["results"]["passkey"]["n"] == 3
    preds = (out / "predictions" / "passkey.jsonl").read_text().splitlines()
    assert [json.loads(p)["id"] for p in preds] == [0, 1, 2]  # nothing lost, nothing twice
    assert lock_files(out) == []  # released and removed with results.json written
    later = subprocess.run(  # the folder is free again: a rerun resumes (rescoring)
        [sys.executable, "-c", HOLDER, *eval_args(out, "scripted:gate")],
        input="go\n",
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert later.returncode == 0, later.stderr


def test_a_killed_holder_leaves_no_lock(tmp_path):
    out = tmp_path / "run"
    holder = start_holder(out)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    holder.stdin.close()
    assert holder.returncode == -signal.SIGKILL
    assert lock_files(out) == [".eval.rank0.lock"]  # the file stays, the kernel freed its lock
    after = run_eval_process(out)
    assert after.returncode == 0, after.stderr
    assert json.loads((out / "results.json").read_text())["results"]["passkey"]["n"] == 3
    assert lock_files(out) == []


@pytest.mark.skipif(not ACCELERATE.exists(), reason="accelerate CLI not installed")
def test_a_sharded_run_on_a_busy_folder_is_refused_before_any_rank_writes(tmp_path):
    """Every run has a rank 0, so a data-parallel run collides with any other run; its other
    ranks wait for rank 0 at a barrier and stop with it, before reading or writing."""
    out = tmp_path / "run"
    with RunLock(out):
        res = launch_eval(out)
        assert res.returncode != 0
        assert f"{out} is in use by another `chunkwise eval` run (pid {os.getpid()}" in res.stderr
        assert sorted(p.name for p in out.iterdir()) == [".eval.rank0.lock"]
    assert not out.exists()  # the lock made the folder, and nothing else was written there


# --------------------------------------------------------------------------------------------
# RunLock in one process (flock locks open files, so two locks in one process collide too)


def test_second_lock_is_refused_naming_folder_pid_and_host(tmp_path):
    out = tmp_path / "run"
    with RunLock(out):
        with pytest.raises(BadInput) as e, RunLock(out):
            pass
        msg = str(e.value)
        assert str(out) in msg and f"pid {os.getpid()} on host " in msg and "\n" not in msg
    with RunLock(out):  # released: free again
        pass


def test_ranks_of_one_run_lock_their_own_files_and_any_two_runs_collide(tmp_path):
    out = tmp_path / "run"
    with RunLock(out, 0, 2), RunLock(out, 1, 2):
        assert lock_files(out) == [".eval.rank0.lock", ".eval.rank1.lock"]
        with pytest.raises(BadInput, match=r"rank 0 of 2"), RunLock(out, 0, 1):
            pass
        with pytest.raises(BadInput, match=r"rank 1 of 2"), RunLock(out, 1, 4):
            pass


def test_release_removes_what_the_lock_made_and_only_that(tmp_path):
    deep = tmp_path / "a" / "b" / "run"
    with RunLock(deep):
        assert deep.is_dir()
    assert not (tmp_path / "a").exists()  # made for the lock, empty again: removed
    kept = tmp_path / "kept"
    kept.mkdir()
    with RunLock(kept / "run") as lock:
        (lock.out / "results.json").write_text("{}")
    assert sorted(p.name for p in (kept / "run").iterdir()) == ["results.json"]


def test_a_stale_lock_file_from_a_killed_run_is_taken_over(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / ".eval.rank0.lock").write_text("pid 999999 on host gone, since yesterday")
    with RunLock(out) as lock:
        assert f"pid {os.getpid()}" in lock.path.read_text()


def test_a_lock_on_a_file_no_longer_at_the_path_does_not_count(tmp_path):
    """What makes removing lock files safe: a process that opened the old file before it was
    removed must not hold the folder with it."""
    out = tmp_path / "run"
    lock = RunLock(out)
    out.mkdir()
    fd = os.open(lock.path, os.O_RDWR | os.O_CREAT)
    os.unlink(lock.path)
    assert lock._lock(fd) is False  # and fd is closed
    with pytest.raises(OSError):
        os.fstat(fd)
    lock.path.write_text("")
    fd = os.open(lock.path, os.O_RDWR)
    assert lock._lock(fd) is True
    os.close(fd)


def test_a_lock_file_that_cannot_be_made_is_one_clear_error(tmp_path, monkeypatch):
    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(BadInput) as e, RunLock(tmp_path / "run"):
        pass
    assert "cannot make the run folder and its lock file (Permission denied: " in str(e.value)
