"""The training command leaves torch.distributed cleanly: after a saved run the default process
group is destroyed (a real gloo group of one rank), and without torch imported there is nothing
to close. A rank of a multi-process launch then ends without interpreter teardown (where gloo
threads the engines still hold could abort it), its output flushed; one process exits as usual."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_process_group_is_destroyed_after_the_run():
    dist = pytest.importorskip("torch.distributed")
    from chunkwise.train.loop import _close_process_group

    if dist.is_initialized():
        pytest.skip("a process group is already open in this test process")
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1
    )
    assert dist.is_initialized()
    _close_process_group()
    assert not dist.is_initialized()
    _close_process_group()  # closing twice is a no-op


def test_nothing_to_close_without_torch(monkeypatch):
    from chunkwise.train.loop import _close_process_group

    monkeypatch.setitem(sys.modules, "torch.distributed", None)
    _close_process_group()


ENDING = textwrap.dedent(
    """
    import atexit, logging, sys
    from chunkwise.train.loop import exit_rank
    atexit.register(lambda: print("interpreter teardown ran"))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    logging.getLogger("x").info("saved the run")
    sys.stdout.write('{"output_dir": "out"}')  # no newline, no flush: still buffered
    exit_rank(3)
    """
)


@pytest.mark.parametrize("world", ["2", "1", None])
def test_a_launched_rank_ends_without_teardown_and_loses_no_output(world):
    # stdout block-buffered, as a launcher's pipe leaves it
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "PYTHONUNBUFFERED")}
    if world is not None:
        env["WORLD_SIZE"] = world
    proc = subprocess.run(
        [sys.executable, "-c", ENDING], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 3
    assert proc.stdout.startswith('{"output_dir": "out"}'), proc.stdout
    assert "saved the run" in proc.stderr
    launched = world is not None and int(world) > 1
    assert ("interpreter teardown ran" in proc.stdout) is not launched, proc.stdout
