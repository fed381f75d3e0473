"""Folders built once and shared (chunkwise.llm.built_once): several first uses at once build
it once, nobody sees half a folder, a failed build leaves nothing behind; and the real packaged
adapter folder (hf:default-mr) asked for by several processes at once on a new cache."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chunkwise.llm.built_once import build_once


def ready(folder: Path) -> bool:
    return (folder / "done").is_file()


def test_first_uses_at_once_build_it_once_and_all_get_it_whole(tmp_path):
    out = tmp_path / "models" / "thing"
    builds: list[Path] = []
    start = threading.Barrier(4)

    def build(tmp: Path) -> None:
        builds.append(tmp)
        for i in range(50):
            (tmp / f"part{i}").write_text(str(i))
        (tmp / "done").write_text("")

    got: list[tuple[Path, int]] = []

    def use() -> None:
        start.wait()
        folder = build_once(out, ready, build)
        got.append((folder, len(list(folder.glob("part*")))))

    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1
    assert got == [(out, 50)] * 4
    assert builds[0] != out and not builds[0].exists()  # built aside, moved in whole
    assert sorted(p.name for p in out.parent.iterdir()) == [".thing.lock", "thing"]


def test_a_failed_build_leaves_nothing_and_an_old_folder_is_replaced(tmp_path):
    out = tmp_path / "thing"

    def broken(tmp: Path) -> None:
        (tmp / "half").write_text("")
        raise RuntimeError("killed midway")

    with pytest.raises(RuntimeError):
        build_once(out, ready, broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".thing.lock"]

    out.mkdir()
    (out / "stale").write_text("an older format")  # not ready: built again
    build_once(out, ready, lambda tmp: (tmp / "done").write_text(""))
    assert sorted(p.name for p in out.iterdir()) == ["done"]


ASK = """
import sys
from chunkwise.llm import default_mr
print(default_mr.model_dir())
"""


@pytest.mark.slow
def test_ranks_asking_for_the_adapter_folder_at_once_on_a_new_cache(tmp_path):
    """Four processes (an evaluation's ranks on a new machine) ask for hf:default-mr's folder
    on an empty cache at the same moment: all get the one complete folder."""
    from chunkwise.llm.embedded import converted_dir

    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    base = converted_dir()  # the embedded model, converted once for the whole suite
    os.symlink(base, cache / "models" / base.name)
    env = {**os.environ, "CHUNKWISE_CACHE": str(cache)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ASK],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-2000:] for _, err in outs]
    [folder] = {Path(out.strip()) for out, _ in outs}
    assert (folder / "chunkwise_model.json").is_file()
    assert (folder / "adapter_model.safetensors").stat().st_size > 1_000_000
    assert not list(folder.parent.glob("*.partial"))
