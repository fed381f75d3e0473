"""Know before you start: ``chunkwise eval --plan`` counts what an evaluation will take.

For the benchmark, tasks, strategy, window and data source of the config it loads the data as
the run would, then runs the strategy itself on every example against :class:`DryRunLLM`, a
stand-in that has the real model's tokenizer, window and prompt format but answers every call
at once without a model. So the calls, their prompts and their chunks come from the
strategy's own code (MapReduce's chunker and prompts, Chain-of-Agents' chunk plan, standard
decoding's truncation), not from a formula beside it. It prints per task and per stage the
examples, LLM calls, prefill (prompt) tokens and decode (completion) tokens, and a time
estimate, and ends with the same as one JSON line.

What is exact and what is an estimate (each stage says which, under ``exact``):

* a stage whose prompts do not depend on what the model wrote is counted exactly: standard
  decoding's one call and MapReduce's map wave (one call per chunk, the very prompts sent);
* retrieval's one answer call reads the chunks the embedder ranks first, which no reply
  changes: exact too;
* Chain-of-Agents makes one worker call per chunk and one manager call, exactly, but each
  worker prompt carries the memory the previous worker wrote: its prefill is an estimate;
* everything after a model's reply is an estimate: MapReduce's collapse rounds and its reduce
  prompt, and every decode count. The stand-in writes each reply at the call's whole output
  budget (``--plan-reply-tokens N``: N tokens instead), so by default decode counts are an
  upper bound, and every map reply reads as a finding that reaches collapse and reduce (a real
  map call over a chunk without the answer often says NO INFORMATION and is left out of
  collapse and reduce). MapReduce's decode-time checks and confidence floor would drop every
  filler reply, so the plan runs it without them (``MapReduce.for_planning``): the stages
  after the map are planned as if every finding were kept.

Repeats: a run sends each distinct greedy call to the model once (every finished call is kept,
:mod:`chunkwise.llm.call_cache`, and a repeat is answered from there), and documents of
repeated filler (InfiniteBench's passkey and number_string) map many identical chunks. The plan
counts the calls the model computes beside all calls (``computed``): a call whose prompt was
seen before is a repeat, except one whose prompt holds a stand-in reply, which is counted as new
(what the real replies make of it is not known). For MapReduce's map wave this is exact.

The time is ``computed prefill / prefill rate + computed decode / decode rate``, one call after
another, at the rates of ``--plan-rates prefill=TOK_PER_S,decode=TOK_PER_S`` or, with
``--plan-rates probe``, rates measured on the model with two short calls (a prefill-only call
over text of the first example, a decode call of 64 new tokens). Batched backends run faster
than this serial sum. ``--plan-rates kept`` times what is left of a stopped run at the pace its
own folder's calls were computed (:func:`~chunkwise.llm.call_cache.kept_pace`: their prompt
tokens over the wall time of the batches that answered them, decoding included): on the same
machine and backend, the pace the rerun will go at.

A run folder that already holds part of the run (``--output`` of a killed or stopped run, the
same config) is planned for what is left: examples with a prediction are left out (``done``),
and a call the folder keeps in ``calls/`` is replayed, not computed (``kept``; exact for the
map wave, whose prompts are the very ones the run sends). So ``--plan`` on a run stopped
halfway through its 128K documents says how long the rest takes. A folder made with another
config is not read: the plan is of a new run, and says the run would refuse that folder.

The model is loaded for its tokenizer (and the probe); nothing is written to the run folder.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval.config import EvalConfig
from chunkwise.llm import LLM, Completion, Request
from chunkwise.llm.call_cache import Pace, call_key, kept_keys, kept_pace, replayable
from chunkwise.llm.loading import model_identity

#: stages whose counts the plan knows exactly: (strategy, stage) -> what is exact
EXACT: dict[tuple[str, str], tuple[str, ...]] = {
    ("standard", "generate"): ("calls", "prefill"),
    ("mapreduce", "map"): ("calls", "prefill"),
    ("retrieval", "answer"): ("calls", "prefill"),
    ("chain_of_agents", "worker"): ("calls",),
    ("chain_of_agents", "manager"): ("calls",),
}
#: what each reply of the stand-in is made of (one token per word in common tokenizers)
FILLER = " note"
#: the probe's decode call
PROBE_DECODE_TOKENS = 64
#: the probe's prefill call reads about this many tokens of the first example
PROBE_PREFILL_TOKENS = 1024
_RATE = re.compile(r"\s*(prefill|decode)\s*=\s*([0-9]*\.?[0-9]+)\s*")


class DryRunLLM(LLM):
    """The real model's tokenizer, window and prompt format; every call answered at once with
    filler of ``reply_tokens`` tokens (None: the call's whole ``max_new_tokens``)."""

    def __init__(
        self,
        model: LLM,
        reply_tokens: int | None = None,
        *,
        identity: str = "",
        kept: set[str] | frozenset[str] = frozenset(),
    ):
        self.model = model
        self.reply_tokens = reply_tokens
        #: the keys (under the real model's ``identity``) of the calls a run folder keeps
        self.identity, self.kept = identity, kept
        #: planned calls that the folder keeps: a rerun replays them
        self.replayed_kept = 0
        self.spec = model.spec
        self.chat = model.chat
        self.continues_replies = model.continues_replies
        #: the calls (and their tokens) a run would send to the model: repeats left out
        self.computed = {"calls": 0, "prefill_tokens": 0, "decode_tokens": 0}
        self._seen: set[str] = set()
        self._replies: set[str] = set()

    def _computed(self, request: Request) -> bool:
        """Whether a run would send ``request`` to the model: a sampled call, a call whose
        prompt holds one of this stand-in's replies (the real reply is not known), or the
        first of its kind; a repeat is answered from the run's call cache."""
        if not replayable(request):
            return True
        key = call_key(self.identity, request)  # the run's own key for this call
        if key in self.kept:
            self.replayed_kept += 1
            return False
        prompt = request.prompt
        text = prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)
        if any(reply in text for reply in self._replies):
            return True
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    @property
    def context_window(self) -> int:
        return self.model.context_window

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.model.token_offsets(text)

    def encode(self, text: str) -> list[int]:
        return self.model.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.model.decode(ids)

    def as_prompt(self, text: str) -> Any:
        return self.model.as_prompt(text)

    def continue_reply(self, prompt: Any, partial: str) -> Any:
        return self.model.continue_reply(prompt, partial)

    def prompt_tokens(self, prompt: Any) -> int:
        return self.model.prompt_tokens(prompt)

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for r in requests:
            budget = r.params.max_new_tokens
            k = budget if self.reply_tokens is None else min(budget, self.reply_tokens)
            c = Completion(
                text=(FILLER * k).strip(),
                prompt_tokens=self.model.prompt_tokens(r.prompt),
                completion_tokens=k,
                finish_reason="length" if k >= budget else "stop",
                latency_s=0.0,
            )
            if self._computed(r):
                _add(self.computed, 1, c.prompt_tokens, c.completion_tokens)
            self._replies.add(c.text)
            out.append(c)
        return out


def parse_rates(text: str | None) -> dict[str, float] | str | None:
    """``prefill=3000,decode=30`` (tokens per second) as a dict, ``probe``, ``kept``, or
    None."""
    if text is None or not str(text).strip():
        return None
    if str(text).strip() in ("probe", "kept"):
        return str(text).strip()
    rates: dict[str, float] = {}
    for part in str(text).split(","):
        m = _RATE.fullmatch(part)
        if not m or float(m.group(2)) <= 0:
            raise BadInput(
                f"--plan-rates {text!r}: give prefill=TOK_PER_S,decode=TOK_PER_S (both above "
                "0, e.g. prefill=3000,decode=30), probe or kept"
            )
        rates[m.group(1)] = float(m.group(2))
    if set(rates) != {"prefill", "decode"}:
        raise BadInput(f"--plan-rates {text!r}: give both prefill= and decode=, or probe")
    return rates


def pace_rates(folders: Sequence[Path | None]) -> dict[str, Any]:
    """``--plan-rates kept``: the pace of the calls the run ``folders`` keep (their ``calls/``),
    as the rates a plan is timed at; BadInput when none keeps a computed call."""
    pace = Pace(0, 0, 0, 0.0)
    for out in folders:
        if out is not None and (out / "calls").is_dir():
            pace += kept_pace(out / "calls")
    if pace.calls == 0 or pace.seconds <= 0 or pace.prompt_tokens <= 0:
        raise BadInput(
            "--plan-rates kept: --output keeps no timed calls of this run yet (a run keeps "
            "them a piece at a time; a folder of another config is not read), so there is no "
            "pace to time the plan at; give --plan-rates prefill=...,decode=... or probe"
        )
    return {
        "prefill": round(pace.prompt_tokens_per_s, 3),
        "kept": dataclasses.asdict(pace),
    }


def probe_rates(
    llm: LLM, text: str, *, decode_tokens: int = PROBE_DECODE_TOKENS
) -> dict[str, float]:
    """Prefill and decode tokens per second of ``llm``, from one prefill-only call over the
    start of ``text`` and one decode call of up to ``decode_tokens`` new tokens."""
    from chunkwise.llm import GenerationParams

    ids_text = text
    try:
        ids = llm.encode(text)[:PROBE_PREFILL_TOKENS]
        ids_text = llm.decode(ids)
    except NotImplementedError:
        ids_text = text[: 4 * PROBE_PREFILL_TOKENS]
    t0 = time.perf_counter()
    pre = llm.generate([Request(llm.as_prompt(ids_text), GenerationParams(max_new_tokens=1))])[0]
    pre_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dec = llm.generate(
        [
            Request(
                llm.as_prompt("Count from one to two hundred, in words: one, two, three,"),
                GenerationParams(max_new_tokens=decode_tokens),
            )
        ]
    )[0]
    dec_s = time.perf_counter() - t0
    if dec.completion_tokens < 2:
        raise BadInput(
            "--plan-rates probe: the model stopped after "
            f"{dec.completion_tokens} token(s), so no decode rate could be measured; give "
            "--plan-rates prefill=...,decode=..."
        )
    return {
        "prefill": round(pre.prompt_tokens / max(pre_s, 1e-9), 1),
        "decode": round(dec.completion_tokens / max(dec_s, 1e-9), 1),
        "probe_prefill_tokens": pre.prompt_tokens,
        "probe_decode_tokens": dec.completion_tokens,
    }


def _add(block: dict[str, Any], calls: int, prefill: int, decode: int) -> None:
    block["calls"] = block.get("calls", 0) + calls
    block["prefill_tokens"] = block.get("prefill_tokens", 0) + prefill
    block["decode_tokens"] = block.get("decode_tokens", 0) + decode


def plan_task(
    plan: Any, task: str, llm: DryRunLLM, progress: bool, out: Path | None = None
) -> dict[str, Any]:
    """One task's counts: examples, totals (from the strategy's own stats), per stage (from
    its trace), and the largest prompt; the examples run folder ``out`` has answered are left
    out (``done``)."""
    from tqdm import tqdm

    from chunkwise.eval.run_dir import answered
    from chunkwise.eval.runner import _load

    cfg = plan.cfg
    td = _load(plan, task, llm.count_tokens)
    done = answered(out, task) if out is not None else set()
    examples = [ex for ex in td.examples if ex["id"] not in done]
    kind = cfg.prompts if cfg.prompts != "auto" else ("chat" if llm.chat else "base")
    window = plan.strategy.effective_window(llm)
    extra = {"templates": plan.templates} if plan.templates is not None else {}
    total: dict[str, Any] = {}
    stages: dict[str, dict[str, Any]] = {}
    largest = 0
    before, kept_before = dict(llm.computed), llm.replayed_kept
    for ex in tqdm(examples, desc=f"plan {task}", unit="ex", disable=not progress):
        query = plan.bench.build_query(task, ex, kind, window, **extra)
        if cfg.truncation != query.truncation:
            query = dataclasses.replace(query, truncation=cfg.truncation)
        ans = plan.strategy.answer(ex["context"], query, llm)
        st = ans.stats
        _add(total, st.llm_calls, st.prompt_tokens, st.completion_tokens)
        for e in ans.trace:
            _add(stages.setdefault(e.stage, {}), 1, e.prompt_tokens, e.completion_tokens)
            largest = max(largest, e.prompt_tokens)
    n = len(examples)
    for name, block in stages.items():
        block["exact"] = list(EXACT.get((cfg.strategy, name), ()))
    return {
        "examples": n,
        "done": len(td.examples) - n,
        **total,
        "computed": {k: v - before[k] for k, v in llm.computed.items()},
        "kept": llm.replayed_kept - kept_before,
        "per_example": {k: round(v / n, 1) for k, v in total.items()} if n else {},
        "largest_prompt_tokens": largest,
        "stages": stages,
    }


def plan_eval(
    cfg: EvalConfig, llm: LLM, *, progress: bool = True, rates: Any = None
) -> dict[str, Any]:
    """The plan of one evaluation on the loaded model ``llm`` (:mod:`.plan`)."""
    from chunkwise.eval.runner import _plan

    cfg = cfg.resolved()
    plan = _plan(cfg)
    plan = dataclasses.replace(plan, strategy=plan.strategy.for_planning())
    out, kept, refused = _resumed(cfg)
    dry = DryRunLLM(llm, cfg.plan_reply_tokens, identity=model_identity(cfg.model), kept=kept)
    tasks = {t: plan_task(plan, t, dry, progress, out) for t in plan.tasks}
    total: dict[str, Any] = {
        "examples": sum(t["examples"] for t in tasks.values()),
        "done": sum(t["done"] for t in tasks.values()),
    }
    for t in tasks.values():
        _add(total, t.get("calls", 0), t.get("prefill_tokens", 0), t.get("decode_tokens", 0))
    total["computed"] = dict(dry.computed)
    total["kept"] = dry.replayed_kept
    report: dict[str, Any] = {
        "benchmark": cfg.benchmark,
        "strategy": cfg.strategy,
        "model": llm.spec or cfg.model,
        "data": cfg.data,
        "window": plan.strategy.effective_window(llm),
        "reply_tokens": cfg.plan_reply_tokens or "each call's whole output budget (upper bound)",
        "resumes": str(out) if out is not None else None,
        "refused": refused,
        "tasks": tasks,
        "total": total,
    }
    if rates is not None:
        computed = total["computed"]
        seconds = computed["prefill_tokens"] / rates["prefill"]
        if "decode" in rates:  # a kept pace has its replies' decoding in its prefill rate
            seconds += computed["decode_tokens"] / rates["decode"]
        report["rates"] = rates
        report["estimated_seconds"] = round(seconds, 1)
        report["estimated_hours"] = round(seconds / 3600, 2)
    return report


def _resumed(cfg: EvalConfig) -> tuple[Path | None, set[str], str | None]:
    """The run folder this plan continues (``cfg.output`` when it holds part of this run), the
    keys of the calls it keeps, and why a folder that exists is not continued (it holds a run
    of another config, which the run would refuse); (None, empty, None) for a new folder."""
    from chunkwise.eval.run_dir import prepare_run_dir

    out = Path(cfg.output) if cfg.output else None
    if out is None or not out.is_dir():
        return None, set(), None
    try:
        prepare_run_dir(out, cfg)  # reads only
    except BadInput as e:
        return None, set(), str(e)
    return out, kept_keys(out / "calls"), None


def to_text(report: dict[str, Any]) -> str:
    """The plan as a markdown table (per task and stage) and a few lines."""
    from chunkwise.tables import markdown_table

    def f(v: Any) -> Any:
        return f"{v:,}" if isinstance(v, int) else v

    rows = []
    for task, t in report["tasks"].items():
        rows.append([task, "all", f(t["examples"]), f(t["calls"]), f(t["prefill_tokens"]),
                     f(t["decode_tokens"]), ""])  # fmt: skip
        for stage, s in t["stages"].items():
            exact = ", ".join(s["exact"]) or "estimate"
            rows.append(["", stage, "", f(s["calls"]), f(s["prefill_tokens"]),
                         f(s["decode_tokens"]), exact])  # fmt: skip
    tot = report["total"]
    rows.append(["**total**", "", f(tot["examples"]), f(tot["calls"]),
                 f(tot["prefill_tokens"]), f(tot["decode_tokens"]), ""])  # fmt: skip
    head = ["task", "stage", "examples", "LLM calls", "prefill tokens", "decode tokens", "exact"]
    lines = [
        f"plan: {report['benchmark']} / {report['strategy']} / {report['model']} / "
        f"data {report['data']} / window {report['window']}",
    ]
    if report.get("refused"):
        lines.append(f"planned as a new run: {report['refused']}")
    if report.get("resumes"):
        lines.append(
            f"what is left of the run in {report['resumes']}: {f(tot['done'])} examples "
            f"answered there are left out, and {f(tot['kept'])} of the planned calls are kept "
            "there (replayed, not computed)"
        )
    lines += [
        markdown_table(rows, head, align="llrrrrl"),
        f"decode counts assume replies of {report['reply_tokens']} tokens"
        if isinstance(report["reply_tokens"], int)
        else "decode counts assume every reply fills its output budget: an upper bound",
    ]
    c = tot["computed"]
    lines.append(
        f"the model computes {f(c['calls'])} of the {f(tot['calls'])} calls "
        f"({f(c['prefill_tokens'])} prefill tokens): a repeated call is answered from the "
        "run's kept calls"
    )
    if "estimated_seconds" in report and "kept" in report["rates"]:
        r, k = report["rates"], report["rates"]["kept"]
        lines.append(
            f"time at the pace of the {f(k['calls'])} calls kept in the run folder "
            f"({f(k['prompt_tokens'])} prompt tokens in {k['seconds']:,.0f} s of model time, "
            f"their replies included: {r['prefill']:g} prompt tokens/s): "
            f"{report['estimated_seconds']:,.0f} s ({report['estimated_hours']:g} h)"
        )
    elif "estimated_seconds" in report:
        r = report["rates"]
        lines.append(
            f"time at prefill {r['prefill']:g} tok/s and decode {r['decode']:g} tok/s, the "
            f"computed calls one after another: {report['estimated_seconds']:,.0f} s "
            f"({report['estimated_hours']:g} h)"
        )
    else:
        lines.append("no time estimate: give --plan-rates prefill=...,decode=..., probe or kept")
    return "\n\n".join(lines)


def print_plan(cfg: EvalConfig, *, progress: bool = True) -> list[dict[str, Any]]:
    """``chunkwise eval --plan``: load the model, plan (each length of ``--lengths``), print;
    returns the plans."""
    import json

    from chunkwise.llm import load_llm

    rates = parse_rates(cfg.plan_rates)
    cfgs = [cfg]
    if cfg.lengths:
        from chunkwise.eval.lengths import length_points

        cfgs = [p.cfg for p in length_points(cfg.resolved())]
    from chunkwise.llm import parse_spec

    parse_spec(cfg.model)
    reports = []
    if rates == "kept":  # every length's folder, pooled: one machine's pace
        rates = pace_rates([_resumed(one.resolved())[0] for one in cfgs])
    with load_llm(cfg.model) as llm:
        if rates == "probe":  # once, on the first length's first example
            rates = probe_rates(llm, _first_context(cfgs[0], llm))
        for one in cfgs:
            report = plan_eval(one, llm, progress=progress, rates=rates)
            print(to_text(report))
            print(json.dumps(report, ensure_ascii=False))
            reports.append(report)
    return reports


def _first_context(cfg: EvalConfig, llm: LLM) -> str:
    from chunkwise.eval.runner import _load, _plan

    plan = _plan(cfg.resolved())
    return _load(plan, plan.tasks[0], llm.count_tokens).examples[0]["context"]


__all__ = [
    "EXACT",
    "DryRunLLM",
    "pace_rates",
    "parse_rates",
    "plan_eval",
    "plan_task",
    "print_plan",
    "probe_rates",
    "to_text",
]
