"""Model calls kept on disk, so that a killed evaluation resumes inside an example (and a
killed synthesis inside a document).

``chunkwise eval`` resumes at the granularity of examples: a prediction line is written when
its example is answered. A MapReduce answer over a 128K-token document is hundreds of map
calls, and with ``--parallel 25`` twenty-five such documents are in flight at once: a run killed
an hour into them (a preempted job, a lost session) used to start those documents again from
their first call. :class:`CachedLLM` keeps each finished call in a JSONL file, and a rerun
replays them instead of asking the model again, so a kill costs at most one *piece* of calls.

* **What is kept.** A call is keyed by the SHA-256 of what decides its output: the model's
  identity (:func:`~chunkwise.llm.loading.model_identity`: a packaged adapter's name is its
  content-hashed folder, so a retrained adapter never replays the old one), the prompt and the
  decoding parameters. Only calls whose output is decided by those are kept: greedy ones, or
  sampled ones with a seed. A sampled call without a seed is a new draw each time (two of them
  in one example are meant to differ), and a completion that failed (``finish_reason ==
  "error"``) is not an answer; neither is ever kept.
* **Once per batch.** Identical replayable requests in one batch (a document of repeated
  filler, as InfiniteBench's passkey is, has many identical chunks) are sent once and share
  the completion; a later batch replays them from the cache.
* **Pieces.** A backend answers a batch all at once (vLLM's offline ``generate`` returns
  when the last sequence ends), so the misses of a batch are sent in pieces of at most
  :data:`PIECE_CALLS` requests, each piece written and fsynced as soon as it returns. On a
  GPU a piece of 512 short calls takes seconds; on a 2-core CPU about ten minutes, which is
  then the most work a kill can lose. The pieces cost little: vLLM on CPU answered 192 calls in
  pieces of 48 within about 1% of the time of one call (``bench/call_pieces.py``, docs/log.md,
  2026-12-06).
* **Files.** One appender per rank (``rank<r>.jsonl``, the :class:`~chunkwise.io.JsonlAppender`
  that writes prediction lines too: a half-written last line from a kill is dropped on
  reopening); lookups read every rank's file, so a rerun with another number of ranks still
  replays what any rank finished. ``chunkwise synth`` keeps one file per document in flight
  (``work/calls/doc-<hash>.jsonl``, read by that document alone) and deletes it once the
  document's ledger line is written, so the folder holds only unfinished documents' calls
  however long the run.
* **Pace.** Each line also carries its piece's number and wall time (``piece``), so
  :func:`kept_pace` can tell how fast a stopped run went, and ``chunkwise eval --plan
  --plan-rates kept`` how long the rest takes at that pace.

Replayed completions carry their first run's token counts and latency: the compute an example
needed is the same, whoever paid for it. :attr:`CachedLLM.replayed` counts them (and the
copies within a batch), :attr:`CachedLLM.computed` the calls the model answered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import JsonlAppender, iter_lines
from chunkwise.io.jsonl import parse_jsonl_line
from chunkwise.llm.base import Completion, Request

#: the most requests sent to the backend in one call, each such piece written when it returns
PIECE_CALLS = 512
#: the clock a piece's wall time is read from (a test sets its own)
_clock = time.perf_counter


def call_key(identity: str, request: Request) -> str:
    """The SHA-256 (hex) of what decides ``request``'s output on the model ``identity``."""
    body = [identity, request.prompt, dataclasses.asdict(request.params)]
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def replayable(request: Request) -> bool:
    """Whether ``request``'s output is decided by its prompt and parameters: greedy, or
    sampled with a seed."""
    return request.params.temperature == 0 or request.params.seed is not None


#: the fields of a kept completion: a record with others (an edited or foreign file) is skipped
_FIELDS = frozenset(f.name for f in dataclasses.fields(Completion))


def _records(path: Path, strict: bool = False) -> Iterator[tuple[str, dict[str, Any], dict]]:
    """``(key, completion, whole record)`` of each kept call in ``path``, in file order; an
    unfinished last line (a writer killed mid-line, or one still writing) or a record that is
    not a whole completion is skipped: its call is made again. ``strict``: a complete line that
    is not JSON is the error that resuming the file gives (the appender that reopens it refuses
    such a line)."""
    with path.open("rb") as f:
        for lineno, raw in iter_lines(f):
            if raw is None or not raw.endswith(b"\n"):
                continue
            try:
                record = parse_jsonl_line(raw)
            except ValueError as e:
                if strict and raw.strip():
                    raise BadInput(
                        f"{path}:{lineno}: not valid JSON ({e}); this file cannot be resumed. "
                        "Fix or delete that line, or write to a new file"
                    ) from None
                continue
            completion = record.get("completion") if isinstance(record, dict) else None
            if isinstance(completion, dict) and set(completion) == _FIELDS:
                yield str(record.get("key")), completion, record


def _read(path: Path, strict: bool = False) -> dict[str, dict[str, Any]]:
    """The completions a cache file holds, by key (:func:`_records`)."""
    return {key: completion for key, completion, _ in _records(path, strict)}


def kept_keys(folder: str | Path) -> set[str]:
    """The keys of the calls every rank's file in ``folder`` keeps (read only: nothing is
    written, a torn last line is left as it is); a line that would stop the run resuming the
    folder stops this too."""
    keys: set[str] = set()
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        keys.update(_read(path, strict=True))
    return keys


@dataclasses.dataclass(frozen=True)
class Pace:
    """How fast the calls a run folder keeps were computed: their tokens over the wall time of
    the backend calls that answered them (:func:`kept_pace`)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float

    def __add__(self, other: Pace) -> Pace:
        return Pace(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.seconds + other.seconds,
        )

    @property
    def prompt_tokens_per_s(self) -> float:
        """Prompt tokens per second of model time, the decoding of their replies included."""
        return self.prompt_tokens / self.seconds if self.seconds > 0 else 0.0


def _count(x: Any) -> bool:
    """Whether ``x`` is a number a line may count by (a JSON number, not true/false)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def kept_pace(folder: str | Path) -> Pace:
    """The pace of the calls every rank's file in ``folder`` keeps. Each line carries the wall
    time of the piece that computed it (``piece``: its number and seconds, written by
    :class:`CachedLLM`); each piece is counted once. A line kept before pieces were timed has
    only its completion's ``latency_s``, which vLLM and hf stamp with their whole batch's wall
    time: consecutive lines with the same one are counted as one piece. (A server's calls carry
    their own, overlapping latencies: those lines make the pace slower than it was.) Ranks
    are added up, as if one process had computed every call."""
    calls = prompt = completion = 0
    seconds = 0.0
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        last: Any = None
        for _key, c, record in _records(path):
            piece = record.get("piece")
            stamp = (
                (piece.get("n"), piece.get("seconds"))
                if isinstance(piece, dict)
                else (None, c.get("latency_s"))
            )
            tokens = (c.get("prompt_tokens"), c.get("completion_tokens"))
            if not all(_count(x) for x in (stamp[1], *tokens)):
                continue  # an edited line: no time or no token counts to go by
            calls += 1
            prompt += max(tokens[0], 0)
            completion += max(tokens[1], 0)
            if stamp != last:
                seconds += float(stamp[1])
                last = stamp
    return Pace(calls, prompt, completion, round(seconds, 3))


class CallCache:
    """The calls of one run folder: ``folder/rank<rank>.jsonl`` written, every
    ``folder/rank*.jsonl`` read. With ``name``, the calls of one unit of work (``chunkwise
    synth``'s document): ``folder/<name>.jsonl`` alone written and read."""

    def __init__(
        self, folder: str | Path, identity: str, rank: int = 0, *, name: str | None = None
    ):
        self.folder = Path(folder)
        self.identity = identity
        self.path = self.folder / f"{name if name is not None else f'rank{rank}'}.jsonl"
        # opened at the first write (a run that fails before any call leaves no file), or now
        # when an earlier run left one: reopening drops a line a kill cut short
        self._app: JsonlAppender | None = None
        if self.path.is_file():
            self._open()
        self._held: dict[str, dict[str, Any]] = {}
        #: pieces this cache has kept, numbered on their lines (a rerun counts from 1 again:
        #: kept_pace tells its first piece from the run before's last by their seconds too)
        self._pieces = 0
        reads = [self.path] if name is not None else sorted(self.folder.glob("rank*.jsonl"))
        for path in reads:
            if path.is_file():
                self._held.update(_read(path))

    def _open(self) -> JsonlAppender:
        if self._app is None or self._app.closed:
            self._app = JsonlAppender(self.path, key="key", fsync=False)
        return self._app

    def __len__(self) -> int:
        return len(self._held)

    def get(self, request: Request) -> Completion | None:
        """The completion kept for ``request``, or None."""
        if not replayable(request):
            return None
        got = self._held.get(call_key(self.identity, request))
        if got is None:
            return None
        if got.get("token_logprobs"):  # JSON holds a NaN log-probability as null
            nan = float("nan")
            got = {
                **got,
                "token_logprobs": [nan if x is None else x for x in got["token_logprobs"]],
            }
        return Completion(**got)

    def put(
        self, pairs: Sequence[tuple[Request, Completion]], seconds: float | None = None
    ) -> None:
        """Keep each finished, replayable completion, then make the file durable. ``seconds``:
        the wall time of the backend call that answered ``pairs`` (one piece), kept on each
        line with the piece's number (:func:`kept_pace`)."""
        app = None
        piece = None
        if seconds is not None:
            self._pieces += 1
            piece = {"n": self._pieces, "seconds": round(seconds, 4)}
        for request, completion in pairs:
            if completion.finish_reason == "error" or not replayable(request):
                continue
            key = call_key(self.identity, request)
            if key in self._held or (self._app is not None and key in self._app):
                continue  # the same call twice in one batch, or a skipped line's call
            record = dataclasses.asdict(completion)
            app = self._open()
            line: dict[str, Any] = {"key": key, "completion": record}
            if piece is not None:
                line["piece"] = piece
            app.write(line)
            self._held[key] = record
        if app is not None:
            app.sync()

    def close(self) -> None:
        """Close the file (an empty one is deleted)."""
        if self._app is not None:
            self._app.close()
        if self.path.is_file() and self.path.stat().st_size == 0:
            self.remove()

    def remove(self) -> None:
        """Close and delete this rank's file (the run it served is complete); the folder goes
        too once no rank's file is left in it."""
        if self._app is not None:
            self._app.close()
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # another rank's file is still there, or no folder
            self.folder.rmdir()


class CachedLLM:
    """Forwards everything to ``inner``; :meth:`generate` answers from ``cache`` what it holds
    and sends the rest to ``inner`` in pieces of at most ``piece`` requests, keeping each
    piece's completions as soon as it returns."""

    def __init__(self, inner: Any, cache: CallCache, piece: int | None = None):
        self._inner = inner
        self.cache = cache
        self.piece = piece or PIECE_CALLS
        #: calls answered from the cache, and calls sent to the model
        self.replayed = 0
        self.computed = 0
        #: called after each piece the model answered and each batch answered from the cache
        #: (from the thread that sent it): a progress bar shows the run is alive while the
        #: examples in flight take hours to finish
        self.on_progress: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        requests = list(requests)
        out: list[Completion | None] = [self.cache.get(r) for r in requests]
        # the misses, each replayable one once (a document of repeated filler, InfiniteBench's
        # passkey, has many identical chunks): key -> the positions it answers
        todo: dict[Any, list[int]] = {}
        for i, c in enumerate(out):
            if c is None:
                key = call_key(self.cache.identity, requests[i]) if replayable(requests[i]) else i
                todo.setdefault(key, []).append(i)
        firsts = [where[0] for where in todo.values()]
        with self._lock:
            self.replayed += len(requests) - len(firsts)
        for start in range(0, len(firsts), self.piece):
            piece = firsts[start : start + self.piece]
            t0 = _clock()
            got = self._inner.generate([requests[i] for i in piece])
            wall = _clock() - t0
            with self._lock:
                pairs = [(requests[i], c) for i, c in zip(piece, got, strict=True)]
                self.cache.put(pairs, seconds=wall)
                self.computed += len(piece)
            for i, c in zip(piece, got, strict=True):
                out[i] = c
            self._progress()
        if not firsts:
            self._progress()
        for where in todo.values():  # the copies take their first's completion
            for i in where[1:]:
                out[i] = dataclasses.replace(out[where[0]])  # type: ignore[type-var]
        return [c for c in out if c is not None]

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress()

    def describe(self) -> str:
        """The calls so far, for a progress bar: ``1,024`` (computed), or ``1,024 + 2,560
        replayed``."""
        replayed = f" + {self.replayed:,} replayed" if self.replayed else ""
        return f"{self.computed:,}{replayed}"

    def complete(self, prompt: Any, **params: object) -> Completion:
        from chunkwise.llm.base import GenerationParams

        return self.generate([Request(prompt, GenerationParams(**params))])[0]  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the cache file and the model."""
        self.cache.close()
        self._inner.close()


__all__ = [
    "PIECE_CALLS",
    "CachedLLM",
    "CallCache",
    "Pace",
    "call_key",
    "kept_keys",
    "kept_pace",
    "replayable",
]
