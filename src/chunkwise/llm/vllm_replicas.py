"""``vllm:MODEL?dp=N``: N engine replicas, each in its own process on its own devices.

vLLM 0.32's offline ``LLM(data_parallel_size=N)`` refuses single-process use ("not supported
for single-process usage and may hang") and points at its multi-process example
(``examples/offline_inference/data_parallel.py``), where every data-parallel rank is a process
that builds its own ``LLM`` over its own GPUs and answers its share of the prompts. For a dense
model the ranks never talk to each other, so this module does just that behind the one
``engine.generate(prompts, params)`` call that :class:`~chunkwise.llm.vllm_llm.VLLMBackend`
makes: each replica is a spawned process pinned by :func:`chunkwise.llm.devices.placement`
(``CUDA_VISIBLE_DEVICES`` = its ``tp`` GPUs, or on CPU its share of the cores), the prompts of a
call are split so that every replica gets about the same number of prompt tokens (longest
first, each to the least loaded), sent to all replicas at once, and the outputs put back in
order. Greedy outputs are those of one engine (tests/vllm_engine/test_dp.py).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from chunkwise.llm.devices import Placement

log = logging.getLogger(__name__)

#: seconds a replica may take to start its engine before the pool gives up
START_TIMEOUT_S = 900


def split_by_tokens(lengths: Sequence[int], parts: int) -> list[list[int]]:
    """Indices of ``lengths`` dealt into ``parts`` groups of about equal total (longest first,
    each to the group with the least so far); each group keeps the original order."""
    groups: list[list[int]] = [[] for _ in range(parts)]
    load = [0] * parts
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        k = min(range(parts), key=lambda k: (load[k], len(groups[k])))
        groups[k].append(i)
        load[k] += lengths[i]
    return [sorted(g) for g in groups]


def _replica_main(conn: Any, kwargs: dict[str, Any], where: Placement, env: dict[str, str]) -> None:
    """One replica: pin, build the engine, then answer ``(prompts, params, kwargs)`` messages."""
    os.environ.update(env)
    if where.gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = where.cuda_visible or ""
    elif hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(where.cpus))
        os.environ["OMP_NUM_THREADS"] = str(len(where.cpus))
    try:
        import vllm

        engine = vllm.LLM(**kwargs)
        n = engine.llm_engine.model_config.max_model_len
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        conn.send(("ready", {"max_model_len": int(n), "cpus": cpus, "gpus": where.cuda_visible}))
    except BaseException as e:  # the parent raises it with the replica named
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            return
        prompts, params, call_kwargs = msg
        try:
            conn.send(("ok", engine.generate(prompts, params, **call_kwargs)))
        except BaseException as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


class ReplicaPool:
    """What :class:`VLLMBackend` needs of an engine (``generate``, ``get_tokenizer``,
    ``model_config``), over N replica processes."""

    def __init__(
        self,
        kwargs: dict[str, Any],
        places: Sequence[Placement],
        env: dict[str, str],
        tokenizer: Any,
    ):
        self._tokenizer = tokenizer
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        ctx = mp.get_context("spawn")  # a forked CUDA or OpenMP runtime is not safe
        for where in places:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_replica_main, args=(child, kwargs, where, env), daemon=False)
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        #: what each replica reported when it started: its window, cores and GPUs
        self.replicas: list[dict[str, Any]] = []
        try:
            for k, conn in enumerate(self._conns):
                if not conn.poll(START_TIMEOUT_S):
                    raise RuntimeError(f"vLLM replica {k} did not start in {START_TIMEOUT_S} s")
                kind, info = conn.recv()
                if kind != "ready":
                    raise RuntimeError(f"vLLM replica {k} failed to start: {info}")
                self.replicas.append(info)
        except BaseException:
            self.close()
            raise
        self.model_config = SimpleNamespace(
            max_model_len=min(r["max_model_len"] for r in self.replicas)
        )
        log.info("vLLM data parallel: %d replicas %s", len(self.replicas), self.replicas)

    def get_tokenizer(self) -> Any:
        return self._tokenizer

    def generate(self, prompts: list[Any], params: Any, **kwargs: Any) -> list[Any]:
        per_prompt = isinstance(params, list)
        lengths = [len(p.get("prompt_token_ids") or ()) for p in prompts]
        groups = split_by_tokens(lengths, len(self._conns))
        busy = []
        for conn, idx in zip(self._conns, groups, strict=True):
            if idx:
                sub = [params[i] for i in idx] if per_prompt else params
                conn.send(([prompts[i] for i in idx], sub, kwargs))
                busy.append((conn, idx))
        outputs: list[Any] = [None] * len(prompts)
        errors = []
        for k, (conn, idx) in enumerate(busy):
            kind, got = conn.recv()
            if kind != "ok":
                errors.append(f"replica {k}: {got}")
                continue
            for i, out in zip(idx, got, strict=True):
                outputs[i] = out
        if errors:
            raise RuntimeError("vLLM data parallel: " + "; ".join(errors))
        return outputs

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(None)
        for proc in self._procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=10)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []


__all__ = ["ReplicaPool", "split_by_tokens"]
