"""Load on ``chunkwise serve``: concurrent clients for a bounded time, and what came back.

    .venv/bin/python bench/serve_load.py --model scripted:echo --clients 32 --seconds 20
    .venv/bin/python bench/serve_load.py --model hf:default --clients 8 --seconds 30 --max-tokens 2

Each ``--model`` gets its own ``chunkwise serve`` subprocess on a free loopback port. N clients
(asyncio + httpx, one connection each) send completions and chat requests, streamed and not,
for ``--seconds`` (and at most ``--max-requests``); a share of them hang up mid-request (a
plain request cancelled after a few ms, a stream closed after its first event). Reported per
model: requests/s, p50/p99 latency, errors by kind, the server's RSS (start, peak from
``VmHWM``, end), and the invariants: every accepted (200) request got exactly one complete
answer (one JSON body with every choice finished, or one stream of one id whose every choice
finished, ending in exactly one ``[DONE]``), response ids are unique, answers of
``scripted:echo`` echo their own request (no answer went to the wrong client), and the server
still answers once the load stops. Prints a table, then the JSON as the last line (``--json
FILE`` writes it too); exit 1 if an invariant fails. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from chunkwise.tables import markdown_table

MODES = ("plain", "stream")
#: the whole run may take --seconds + --request-timeout + this (a stuck client is a failure)
GRACE_S = 30.0


# -- checking answers ---------------------------------------------------------------------
def check_plain(body: dict[str, Any], n: int) -> str | None:
    """Why a non-streamed answer is not one complete answer (None: it is)."""
    choices = body.get("choices")
    if not isinstance(choices, list) or sorted(c.get("index") for c in choices) != list(range(n)):
        return "wrong_choices"
    if any(c.get("finish_reason") is None for c in choices):
        return "unfinished_choice"
    return None


def check_stream(events: list[str], n: int) -> tuple[str | None, str | None, dict[int, str]]:
    """Why the ``data:`` payloads of one stream are not one complete answer (None: they are),
    its response id, and the text of each choice."""
    if events.count("[DONE]") != 1:
        return "done_count", None, {}
    if events[-1] != "[DONE]":
        return "data_after_done", None, {}
    ids, texts, finished = set(), {}, set()
    for raw in events[:-1]:
        chunk = json.loads(raw)
        if "error" in chunk:
            return "error_in_stream", None, {}
        ids.add(chunk.get("id"))
        for c in chunk.get("choices", []):
            i = c["index"]
            delta = c.get("delta") or {}
            texts[i] = texts.get(i, "") + (c.get("text") or delta.get("content") or "")
            if c.get("finish_reason") is not None:
                finished.add(i)
    if len(ids) != 1:
        return "mixed_ids", None, {}
    if finished != set(range(n)):
        return "unfinished_choice", None, {}
    return None, ids.pop(), texts


# -- the clients ----------------------------------------------------------------------------
@dataclass
class Tally:
    sent: Counter = field(default_factory=Counter)
    answered: Counter = field(default_factory=Counter)
    hung_up: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    broken: Counter = field(default_factory=Counter)  # accepted, but not one complete answer
    latency_s: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    ids: Counter = field(default_factory=Counter)
    mismatched: int = 0
    count: int = 0


@dataclass
class Plan:
    base_url: str
    deadline: float
    max_requests: int
    max_tokens: int
    stream_share: float
    hangup_share: float
    echo: bool  # the model echoes its prompt: answers can be matched to requests
    timeout_s: float


def _body(rid: str, chat: bool, stream: bool, n: int, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {"max_tokens": max_tokens, "n": n, "temperature": 0}
    if chat:
        body["messages"] = [{"role": "user", "content": f"say {rid}"}]
    else:
        body["prompt"] = f"say {rid}"
    if stream:
        body["stream"] = True
    return body


async def _plain(
    client: httpx.AsyncClient, path: str, body: dict, hang: float | None
) -> httpx.Response:
    """The answer; with ``hang``, TimeoutError if it takes longer (the client hangs up)."""
    if hang is None:
        return await client.post(path, json=body)
    return await asyncio.wait_for(client.post(path, json=body), hang)


async def _stream(
    client: httpx.AsyncClient, path: str, body: dict, hang: bool
) -> tuple[int, list[str]]:
    events: list[str] = []
    async with client.stream("POST", path, json=body) as r:
        if r.status_code != 200:
            await r.aread()
            return r.status_code, []
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                events.append(line[len("data: ") :])
                if hang:
                    return -1, events  # close the stream after its first event
    return 200, events


async def one_request(
    client: httpx.AsyncClient, plan: Plan, tally: Tally, rng: random.Random
) -> bool:
    """Sends one request and tallies what came back; True if it was cancelled mid-flight
    (httpx's pool may then keep the connection's slot: the caller starts a fresh client)."""
    stream = rng.random() < plan.stream_share
    hang = rng.random() < plan.hangup_share
    chat, n = rng.random() < 0.5, rng.choice((1, 1, 2))
    mode = MODES[stream]
    rid = f"r{tally.count:06d}x{rng.randrange(10**6):06d}"
    tally.count += 1
    tally.sent[mode] += 1
    path = "/chat/completions" if chat else "/completions"
    body = _body(rid, chat, stream, n, plan.max_tokens)
    t0 = time.perf_counter()
    try:
        if stream:
            status, events = await _stream(client, path, body, hang)
            if status == -1:
                tally.hung_up[mode] += 1
                return False
        else:
            r = await _plain(client, path, body, rng.uniform(0.001, 0.05) if hang else None)
            status = r.status_code
    except TimeoutError:
        tally.hung_up[mode] += 1
        return True
    except httpx.HTTPError as e:
        tally.errors[type(e).__name__] += 1
        return False
    if status != 200:
        tally.errors[f"http_{status}"] += 1
        return False
    if stream:
        why, rid_seen, texts = check_stream(events, n)
    else:
        data = r.json()
        why, rid_seen = check_plain(data, n), data.get("id")
        texts = {c["index"]: c.get("text") or c["message"]["content"] for c in data["choices"]}
    if why is not None:
        tally.broken[why] += 1
        return False
    tally.answered[mode] += 1
    tally.latency_s[mode].append(time.perf_counter() - t0)
    tally.ids[rid_seen] += 1
    if plan.echo and not all(rid in t for t in texts.values()):
        tally.mismatched += 1
    return False


async def client_loop(plan: Plan, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)

    def new_client() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=plan.base_url, timeout=plan.timeout_s, limits=limits, trust_env=False
        )

    client = new_client()
    try:
        while time.monotonic() < plan.deadline and tally.count < plan.max_requests:
            if await one_request(client, plan, tally, rng):
                await client.aclose()
                client = new_client()
    finally:
        await client.aclose()


# -- the server -----------------------------------------------------------------------------
class Server:
    """``chunkwise serve`` in a subprocess on a free loopback port (``--port 0``; the port is
    read from its start-up line)."""

    def __init__(self, model: str, startup_timeout_s: float, extra: list[str]):
        argv = [sys.executable, "-m", "chunkwise.cli", "serve", "--model", model]
        argv += ["--host", "127.0.0.1", "--port", "0", *extra]
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.log: list[str] = []
        self.base_url = self._wait_for_url(startup_timeout_s)
        self.start_s = time.perf_counter() - t0
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_url(self, timeout_s: float) -> str:
        found: list[str] = []

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r" at (http://127\.0\.0\.1:\d+/v1)", line)
                if m:
                    found.append(m.group(1))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not found:
            self.stop()
            tail = "".join(self.log[-20:])
            raise RuntimeError(f"the server did not start within {timeout_s:g} s:\n{tail}")
        return found[0]

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            del self.log[:-200]

    def rss_mib(self, key: str = "VmRSS") -> float:
        """``VmRSS`` (now) or ``VmHWM`` (peak) of the server process, in MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def alive(self) -> bool:
        try:
            with httpx.Client(base_url=self.base_url, timeout=30, trust_env=False) as c:
                r = c.post("/completions", json={"prompt": "say alive", "max_tokens": 2})
            return r.status_code == 200 and bool(r.json()["choices"])
        except httpx.HTTPError:
            return False

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: the CLI's clean stop
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


# -- one run --------------------------------------------------------------------------------
def _ms(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(1000 * s[min(len(s) - 1, round(q * (len(s) - 1)))], 1)


def _summary(tally: Tally, elapsed: float, mode: str | None) -> dict[str, Any]:
    modes = MODES if mode is None else (mode,)
    lat = [x for m in modes for x in tally.latency_s[m]]
    answered = sum(tally.answered[m] for m in modes)
    return {
        "sent": sum(tally.sent[m] for m in modes),
        "answered": answered,
        "hung_up": sum(tally.hung_up[m] for m in modes),
        "requests_per_s": round(answered / elapsed, 1),
        "latency_ms": {"p50": _ms(lat, 0.5), "p99": _ms(lat, 0.99), "max": _ms(lat, 1.0)},
    }


def run_one(model: str, args: argparse.Namespace) -> dict[str, Any]:
    server = Server(model, args.startup_timeout, args.server_arg)
    try:
        rss_start = server.rss_mib()
        tally = Tally()
        t0 = time.monotonic()
        plan = Plan(
            server.base_url,
            t0 + args.seconds,
            args.max_requests,
            args.max_tokens,
            args.stream_share,
            args.hangup_share,
            model.startswith("scripted:echo"),
            args.request_timeout,
        )

        async def drive() -> int:
            """Runs the clients; how many were still stuck at the hard deadline."""
            seeds = [args.seed * 1000 + i for i in range(args.clients)]
            tasks = [asyncio.ensure_future(client_loop(plan, tally, s)) for s in seeds]
            limit = args.seconds + args.request_timeout + GRACE_S
            _, stuck = await asyncio.wait(tasks, timeout=limit)
            for t in stuck:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return len(stuck)

        stuck = asyncio.run(drive())
        elapsed = time.monotonic() - t0
        alive = server.alive()
        rss = {
            "start": round(rss_start, 1),
            "peak": round(server.rss_mib("VmHWM"), 1),
            "end": round(server.rss_mib(), 1),
        }
    finally:
        rc = server.stop()
    invariants = {
        "no_stuck_clients": stuck == 0,
        "one_complete_answer_each": not tally.broken,
        "unique_response_ids": all(v == 1 for v in tally.ids.values()),
        "answers_match_requests": tally.mismatched == 0 if plan.echo else None,
        "server_alive_after": alive,
        "server_stopped_cleanly": rc == 0,
    }
    return {
        "model": model,
        "server_start_s": round(server.start_s, 1),
        "elapsed_s": round(elapsed, 1),
        **_summary(tally, elapsed, None),
        "by_mode": {m: _summary(tally, elapsed, m) for m in MODES},
        "errors": dict(tally.errors),
        "broken": dict(tally.broken),
        "server_rss_mib": rss,
        "invariants": invariants,
        "ok": all(v is not False for v in invariants.values()),
    }


# -- output ---------------------------------------------------------------------------------
COLUMNS = ["model", "mode", "sent", "answered", "hung_up", "req/s", "p50 ms", "p99 ms"]
COLUMNS += ["errors", "peak RSS MiB", "ok"]


def table(result: dict[str, Any]) -> str:
    rows = []
    for run in result["runs"]:
        errors = ", ".join(f"{k} {v}" for k, v in {**run["errors"], **run["broken"]}.items())
        for mode, s in [("all", run), *run["by_mode"].items()]:
            first = mode == "all"
            rows.append(
                [
                    run["model"],
                    mode,
                    s["sent"],
                    s["answered"],
                    s["hung_up"],
                    s["requests_per_s"],
                    s["latency_ms"]["p50"],
                    s["latency_ms"]["p99"],
                    (errors or "none") if first else None,
                    run["server_rss_mib"]["peak"] if first else None,
                    run["ok"] if first else None,
                ]
            )
    return markdown_table(rows, COLUMNS, align="ll" + "r" * 6 + "lrl")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", help="spec to serve (repeatable)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20.0, help="how long clients send")
    ap.add_argument("--max-requests", type=int, default=100_000, help="most requests in all")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--stream-share", type=float, default=0.5)
    ap.add_argument("--hangup-share", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--request-timeout", type=float, default=60.0, help="seconds one request may take"
    )
    ap.add_argument("--startup-timeout", type=float, default=900.0, help="seconds to load")
    ap.add_argument("--server-arg", action="append", default=[], help="passed to chunkwise serve")
    ap.add_argument("--json", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    args.model = args.model or ["scripted:echo"]
    if not 0 < args.seconds <= 3600 or not 1 <= args.clients <= 1024:
        ap.error("--seconds must be in (0, 3600] and --clients in [1, 1024]")
    if not (0 <= args.stream_share <= 1 and 0 <= args.hangup_share <= 1):
        ap.error("--stream-share and --hangup-share must be in [0, 1]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    load_before = os.getloadavg()[0]
    runs = [run_one(m, args) for m in args.model]
    result = {
        "bench": "serve_load",
        "cpus": os.cpu_count(),
        "load_average_before": round(load_before, 2),  # other jobs on the machine
        "load_average_after": round(os.getloadavg()[0], 2),
        "clients": args.clients,
        "seconds": args.seconds,
        "max_tokens": args.max_tokens,
        "stream_share": args.stream_share,
        "hangup_share": args.hangup_share,
        "runs": runs,
        "ok": all(r["ok"] for r in runs),
    }
    print(table(result))
    text = json.dumps(result)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
