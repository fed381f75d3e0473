"""UMAP's numba kernels run on the workqueue threading layer unless the caller picks one.

numba's OpenMP pool, once started in a process that also holds a vLLM engine, made MiniLM
embeddings in that process 10x slower (see :mod:`chunkwise.strategies.clustering`). Each case
runs in a fresh interpreter: numba picks its layer once per process.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("umap")

PROBE = """
import numba
from chunkwise.strategies import clustering
clustering._umap_module()

@numba.njit(parallel=True)
def total(n):
    s = 0
    for i in numba.prange(n):
        s += i
    return s

total(10)
print(numba.threading_layer())
"""


def layer_in_fresh_process(extra_env: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    env.update(extra_env)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_umap_kernels_use_the_workqueue_layer_by_default():
    assert layer_in_fresh_process({}) == "workqueue"


def test_a_callers_numba_threading_layer_wins():
    # "threadsafe" = tbb or OpenMP ("omp" itself pynndescent turns into tbb or workqueue)
    assert layer_in_fresh_process({"NUMBA_THREADING_LAYER": "threadsafe"}) in ("omp", "tbb")
