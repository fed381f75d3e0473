"""The training command leaves torch.distributed cleanly: after a saved run the default process
group is destroyed (a real gloo group of one rank), and without torch imported there is nothing
to close."""

from __future__ import annotations

import socket
import sys

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
