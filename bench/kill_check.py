"""kill -9 at random points: eval, synth (model and oracle teachers) and train leave files that
a rerun completes, with nothing lost or duplicated (issue #47).

    python bench/kill_check.py [--kills 20] [--targets eval,synth-model,synth-oracle,train]
                               [--seed 0] [--json FILE] [--workdir DIR] [--max-kills-per-trial 3]
                               [--tear 0.5] [--live]

For each target, first one uninterrupted reference run (its wall time T, start-up included).
Then trials, each in a fresh folder: the command is started as a subprocess and SIGKILLed (its
whole process group) after a delay drawn uniformly from [0, T) by a seeded RNG, then run again
with a new drawn kill, until a run completes; after ``--max-kills-per-trial`` kills the next run
is left alone. The finished folder is compared with the reference. Trials go on until the target
has taken ``--kills`` kills. A rerun that exits with an error ends its trial as a problem. T is
re-measured whenever a trial's first run finishes before its kill (the machine is shared).

A random kill almost never lands inside a ``write()`` (a record is one short system call), so
after a kill, with probability ``--tear``, the check leaves what such a kill would: part of a
line without its newline at the end of a file the run appends to (predictions, the kept model
calls of eval and synth, the synth ledger, oracle.jsonl, metrics.jsonl). The runs execute a
copy of the chunkwise package taken at the start (``--live``: the working tree, which others
may be editing meanwhile).

Compared, per target:
  eval          predictions: every line parses, each id once, the same ids and predictions as
                the reference; results.json present with the reference's scores; no calls/
                folder left
  synth-model   ``chunkwise synth`` with a scripted teacher: every record line parses, each id
                once, the same (id, question, answer, intermediate) as the reference; every
                document once in the work ledger; stats.json present; no work/calls/ folder
                left
  synth-oracle  ``chunkwise synth --teacher oracle``: every line parses, each id once, the same
                records as the reference; stats.json present
  train         ``chunkwise train`` on recipes/tiny: the final checkpoint is step-S with
                trainer_state step == total_steps == S, metrics.jsonl has each step once (and
                the reference's losses), train_info.json present; the final weights equal the
                reference's when two uninterrupted runs give equal weights (reported as
                ``deterministic``), else their largest difference is reported

"kills on output" counts the kills that landed after the run had written part of its output.
Prints a table (target, trials, kills, kills on output, torn tails, reruns, ok, problems) and
JSON last; exits 1 when a target has a problem.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("eval", "synth-model", "synth-oracle", "train")
CLI = [sys.executable, "-m", "chunkwise.cli"]
TEACHER = "kill-check-teacher"

# sizes: on 2 idle CPU cores a reference run takes 2-4 s (train: ~15 s), most of it after the
# first output is written, so most uniform kills land on partial output
EVAL_EXAMPLES = 1000
SYNTH_DOCS = 40
ORACLE_LENGTH, ORACLE_N = "6000", 10
TRAIN_STEPS, TRAIN_SAVE_STEPS = 24, 2
TRAIN_RECIPE = "recipes/tiny/pyramid_align-standard.yaml"


# --------------------------------------------------------------------------------------------
# reading outputs


def jsonl(path: Path) -> tuple[list[Any], list[str]]:
    """Records of a JSONL file and the problems of its lines (a line that does not parse, a
    last line without its newline)."""
    if not path.exists():
        return [], [f"{path.name} is missing"]
    raw = path.read_bytes()
    problems = [] if not raw or raw.endswith(b"\n") else [f"{path.name}: last line unfinished"]
    out = []
    for n, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            problems.append(f"{path.name}:{n} does not parse: {line[:80]!r}")
    return out, problems


def lines_written(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def id_problems(name: str, ids: list[Any], want: list[Any]) -> list[str]:
    problems = []
    dup = sorted(str(i) for i, n in Counter(ids).items() if n > 1)
    if dup:
        problems.append(f"{name}: duplicated ids {dup[:5]}")
    lost = sorted(str(i) for i in set(want) - set(ids))
    if lost:
        problems.append(f"{name}: lost ids {lost[:5]} ({len(lost)} in all)")
    extra = sorted(str(i) for i in set(ids) - set(want))
    if extra:
        problems.append(f"{name}: ids not in the reference {extra[:5]}")
    return problems


def differing(name: str, got: dict[Any, Any], want: dict[Any, Any]) -> list[str]:
    bad = sorted(str(k) for k in want if k in got and got[k] != want[k])
    return [f"{name}: {len(bad)} differ from the reference, e.g. {bad[:3]}"] if bad else []


# --------------------------------------------------------------------------------------------
# targets


@dataclass
class Target:
    name: str
    command: Callable[[Path, Path], list[str]]  # (inputs folder, output folder) -> argv
    progress: Callable[[Path], int]  # output units written so far (lines, steps)
    compare: Callable[[Path, Path, dict[str, Any]], list[str]]  # (out, reference, facts)
    setup: Callable[[Path], None] = lambda inputs: None
    #: the files the run appends to record by record (a kill mid-write tears their last line)
    appends: Callable[[Path], list[Path]] = lambda out: []
    facts: Callable[[Path, Path], dict[str, Any]] = lambda ref, ref2: {}
    second_reference: bool = False  # run the reference twice (is the run deterministic?)


def _eval_cmd(inputs: Path, out: Path) -> list[str]:
    return [
        *CLI,
        "eval",
        "--model=scripted:passkey",
        "--data=synthetic:2000",
        "--tasks=passkey",
        f"--limit={EVAL_EXAMPLES}",
        f"--output={out}",
        "--no-progress",
    ]


PRED_KEYS = ("prediction", "raw_output", "ground_truth", "question", "strategy", "model")


def _eval_compare(out: Path, ref: Path, facts: dict[str, Any]) -> list[str]:
    recs, problems = jsonl(out / "predictions" / "passkey.jsonl")
    want, _ = jsonl(ref / "predictions" / "passkey.jsonl")
    problems += id_problems("predictions", [r.get("id") for r in recs], [r["id"] for r in want])
    problems += [f"predictions: id {r['id']!r} failed: {r['error']}" for r in recs if "error" in r]
    if (out / "calls").exists():
        problems.append("calls/ is still there after the run completed")
    key = lambda r: {k: r.get(k) for k in PRED_KEYS}  # noqa: E731
    problems += differing(
        "predictions", {r.get("id"): key(r) for r in recs}, {r["id"]: key(r) for r in want}
    )
    res = out / "results.json"
    if not res.exists():
        return [*problems, "results.json is missing"]
    scores = lambda p: {  # noqa: E731
        t: (r["score"], r["n"]) for t, r in json.loads(p.read_text())["results"].items()
    }
    if scores(res) != scores(ref / "results.json"):
        problems.append(f"results.json: {scores(res)} != reference {scores(ref / 'results.json')}")
    return problems


# -- synth with a scripted model teacher ----------------------------------------------------
SUMMARY_CUE = "In short, the text above says that"
QUESTION_CUE = "A question that the text above answers:"


def register_teacher() -> None:
    """``scripted:kill-check-teacher``: plays every synthesis role (as tests/synth's helper)."""
    from chunkwise.llm.scripted import SCRIPTS, ScriptedLLM

    def summary(m: re.Match[str]) -> str:
        keys = [ln[2:] for ln in m.group(1).splitlines() if ln.startswith("- ")]
        return " " + " ".join(keys[:2])

    def question(m: re.Match[str]) -> str:
        words = list(dict.fromkeys(w.lower() for w in re.findall(r"[A-Za-z]{6,}", m.group(1))))
        return " is said about " + " and ".join(words[:2] or ["thing"]) + "?"

    SCRIPTS[TEACHER] = lambda: ScriptedLLM(
        rules=[
            (r"Key sentences:\n(.*?)\n\n" + re.escape(SUMMARY_CUE) + "$", summary),
            (r"(.*)\n\n" + re.escape(QUESTION_CUE) + r"\n[A-Z]\w*(?: \w+)*$", question),
            (r"Question: .*\nAnswer:$", " the answer is forty two"),
        ],
        window=1024,
    )


def topic_text(words: int, topic: str, seed: int) -> str:
    rng = random.Random(f"{topic}:{seed}")
    verbs = ["describes", "changes", "follows", "supports", "explains", "limits", "extends"]
    nouns = ["harbor", "engine", "garden", "ledger", "bridge", "market", "lantern", "orchard"]
    out, n = [], 0
    while n < words:
        s = (
            f"The {topic} {rng.choice(verbs)} the {rng.choice(nouns)} near the "
            f"{rng.choice(nouns)} every {rng.choice(['morning', 'season', 'year', 'week'])}."
        )
        out.append(s)
        n += len(s.split())
    return " ".join(out)


def _synth_setup(inputs: Path) -> None:
    docs = inputs / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    topics = ["harbor", "council", "treaty", "river", "mill", "guild", "ferry", "market", "winter"]
    for i in range(SYNTH_DOCS):
        text = "\n\n".join(topic_text(110, t, i) for t in topics[i % 3 : i % 3 + 3])
        (docs / f"doc{i:02d}.txt").write_text(text)


def _synth_cmd(inputs: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "synth",
        f"--docs={inputs / 'docs'}",
        f"--model=scripted:{TEACHER}",
        f"--out={out}",
        "--window=1024",
        "--questions-per-doc=2",
        "--embedder=hashing",
        "--concurrency=2",
        "--no-progress",
    ]


def _synth_records(out: Path) -> tuple[list[Any], list[str]]:
    parts = sorted((out / "data").glob("part-*.jsonl"))
    if not parts:
        return [], ["data/part-*.jsonl is missing"]
    recs, problems = [], []
    for p in parts:
        r, pr = jsonl(p)
        recs += r
        problems += pr
    return recs, problems


def _synth_compare(out: Path, ref: Path, facts: dict[str, Any]) -> list[str]:
    recs, problems = _synth_records(out)
    want, _ = _synth_records(ref)
    problems += id_problems("records", [r.get("id") for r in recs], [r["id"] for r in want])
    key = lambda r: (r.get("question"), r.get("answer"), r.get("intermediate"))  # noqa: E731
    problems += differing(
        "records", {r.get("id"): key(r) for r in recs}, {r["id"]: key(r) for r in want}
    )
    ledger: list[Any] = []
    for p in sorted((out / "work").glob("docs-part-*.jsonl")):
        got, pr = jsonl(p)
        ledger += [e.get("source_id") for e in got]
        problems += pr
    want_docs = [f"doc{i:02d}.txt" for i in range(SYNTH_DOCS)]
    problems += id_problems("ledger", [str(s).rsplit("/", 1)[-1] for s in ledger], want_docs)
    if not (out / "stats.json").exists():
        problems.append("stats.json is missing")
    if (out / "work" / "calls").exists():
        problems.append("work/calls/ is still there after the run completed")
    return problems


def _synth_progress(out: Path) -> int:
    """Documents done (the work ledger) and records written (data/, at the end)."""
    files = [*(out / "work").glob("docs-part-*.jsonl"), *(out / "data").glob("part-*.jsonl")]
    return sum(lines_written(p) for p in files)


# -- synth with the oracle teacher ------------------------------------------------------------
def _oracle_cmd(inputs: Path, out: Path) -> list[str]:
    return [
        *CLI,
        "synth",
        "--teacher=oracle",
        "--model=scripted:echo",
        "--families=all",
        f"--lengths={ORACLE_LENGTH}",
        f"--n={ORACLE_N}",
        f"--out={out}",
        "--no-progress",
    ]


def _oracle_compare(out: Path, ref: Path, facts: dict[str, Any]) -> list[str]:
    recs, problems = jsonl(out / "data" / "oracle.jsonl")
    want, _ = jsonl(ref / "data" / "oracle.jsonl")
    problems += id_problems("records", [r.get("id") for r in recs], [r["id"] for r in want])
    problems += differing("records", {r.get("id"): r for r in recs}, {r["id"]: r for r in want})
    if not (out / "stats.json").exists():
        problems.append("stats.json is missing")
    return problems


# -- train --------------------------------------------------------------------------------------
def _train_cmd(inputs: Path, out: Path) -> list[str]:
    return [
        *CLI,
        "train",
        TRAIN_RECIPE,
        f"--output_dir={out}",
        "--wandb.mode=disabled",
        f"--train.max_steps={TRAIN_STEPS}",
        f"--train.save_steps={TRAIN_SAVE_STEPS}",
    ]


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def weight_diff(a: Path, b: Path) -> float | None:
    """Largest absolute difference between two saved models (None: not comparable)."""
    try:
        wa, wb = _weights(a), _weights(b)
    except (OSError, RuntimeError, ValueError):
        return None
    if wa.keys() != wb.keys() or any(wa[k].shape != wb[k].shape for k in wa):
        return None
    return max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)


def _losses(out: Path) -> dict[int, float]:
    recs, _ = jsonl(out / "metrics.jsonl")
    return {r["step"]: r["train/loss"] for r in recs if isinstance(r, dict) and "step" in r}


def _train_facts(ref: Path, ref2: Path) -> dict[str, Any]:
    diff = weight_diff(ref, ref2)
    return {
        "deterministic": diff == 0.0 and _losses(ref) == _losses(ref2),
        "reference_weight_diff": diff,
    }


def _train_compare(out: Path, ref: Path, facts: dict[str, Any]) -> list[str]:
    problems = []
    ckpts = sorted((out / "checkpoints").glob("step-*"))
    final = out / "checkpoints" / f"step-{TRAIN_STEPS:08d}"
    if not final.is_dir():
        problems.append(f"no final checkpoint {final.name} (have {[p.name for p in ckpts]})")
    else:
        state = json.loads((final / "trainer_state.json").read_text())
        if not state.get("step") == state.get("total_steps") == TRAIN_STEPS:
            problems.append(
                f"trainer_state: step {state.get('step')}, total_steps "
                f"{state.get('total_steps')}, want {TRAIN_STEPS}"
            )
    recs, pr = jsonl(out / "metrics.jsonl")
    problems += pr
    steps = [r.get("step") for r in recs if isinstance(r, dict)]
    problems += id_problems("metrics steps", steps, list(range(1, TRAIN_STEPS + 1)))
    if not (out / "train_info.json").exists():
        problems.append("train_info.json is missing")
    diff = weight_diff(out, ref)
    facts.setdefault("weight_diffs", []).append(diff)
    if facts.get("deterministic"):
        if diff != 0.0:
            problems.append(f"final weights differ from the reference (max |diff| {diff})")
        if _losses(out) != _losses(ref):
            problems.append("losses differ from the reference's")
    return problems


def _train_progress(out: Path) -> int:
    return lines_written(out / "metrics.jsonl")


def targets() -> dict[str, Target]:
    return {
        "eval": Target(
            "eval",
            _eval_cmd,
            lambda out: lines_written(out / "predictions" / "passkey.jsonl"),
            _eval_compare,
            appends=lambda out: [
                out / "predictions" / "passkey.jsonl",
                *sorted((out / "calls").glob("rank*.jsonl")),  # the calls of unfinished examples
            ],
        ),
        "synth-model": Target(
            "synth-model",
            _synth_cmd,
            _synth_progress,
            _synth_compare,
            setup=_synth_setup,
            appends=lambda out: [
                *sorted((out / "work").glob("docs-part-*.jsonl")),
                *sorted((out / "work" / "calls").glob("doc-*.jsonl")),  # unfinished documents
            ],
        ),
        "synth-oracle": Target(
            "synth-oracle",
            _oracle_cmd,
            lambda out: lines_written(out / "data" / "oracle.jsonl"),
            _oracle_compare,
            appends=lambda out: [out / "data" / "oracle.jsonl"],
        ),
        "train": Target(
            "train",
            _train_cmd,
            _train_progress,
            _train_compare,
            facts=_train_facts,
            second_reference=True,
            appends=lambda out: [out / "metrics.jsonl"],
        ),
    }


# --------------------------------------------------------------------------------------------
# running


#: the frozen copy of the code the runs execute (set by :func:`snapshot`); None: the live tree
CODE: Path | None = None


def snapshot(work: Path) -> Path:
    """Copy the chunkwise package (the one this Python imports) and the tiny recipe's files
    into ``work/code``: every run of the check executes the same code, even when the working
    tree is edited while it runs (a reference made with other code would blame the kills)."""
    import chunkwise

    code = work / "code"
    shutil.rmtree(code, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(chunkwise.__file__).parent, code / "src" / "chunkwise", ignore=ignore)
    for sub in ("recipes/tiny", "tests/fixtures/train"):
        shutil.copytree(REPO / sub, code / sub, ignore=ignore)
    return code


def child_env() -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if CODE is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            x for x in (str(CODE / "src"), os.environ.get("PYTHONPATH")) if x
        )
    return env


def tear(files: list[Path], rng: random.Random) -> bool:
    """Leave what a kill in the middle of ``write()`` leaves: part of a line, no newline (a
    random kill almost never lands inside the write itself). Returns whether one was torn."""
    whole = [f for f in files if f.exists() and f.read_bytes().endswith(b"\n")]
    if not whole:
        return False
    f = rng.choice(whole)
    last = f.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    with f.open("ab") as fh:
        fh.write(last[: max(1, rng.randrange(len(last)))])
    return True


@dataclass
class Run:
    rc: int | None  # None: killed
    seconds: float
    progress: int  # output units when it ended


def run_once(argv: list[str], out: Path, log: Path, kill_after: float | None, t: Target) -> Run:
    """Run ``argv`` (its own process group); SIGKILL the group after ``kill_after`` seconds."""
    t0 = time.monotonic()
    with log.open("ab") as f:
        proc = subprocess.Popen(
            argv, cwd=CODE or REPO, env=child_env(), stdout=f, stderr=f, start_new_session=True
        )
        try:
            rc: int | None = proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return Run(rc, time.monotonic() - t0, t.progress(out))


def last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ": error: " in ln or "Error" in ln]
    return (errors or lines or ["(no output)"])[-1][:300]


@dataclass
class Report:
    target: str
    reference_seconds: float = 0.0
    trials: int = 0
    kills: int = 0
    kills_on_output: int = 0
    torn_tails: int = 0
    reruns: int = 0
    ok_trials: int = 0
    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.trials > 0 and self.ok_trials == self.trials and not self.problems


def reference(t: Target, inputs: Path, root: Path) -> tuple[Path, float, dict[str, Any]]:
    """An uninterrupted run (two, for a target that checks it is deterministic)."""
    ref = root / "reference"
    r = run_once(t.command(inputs, ref), ref, root / "reference.log", None, t)
    if r.rc != 0:
        raise SystemExit(f"{t.name}: the reference run failed: {last_line(root / 'reference.log')}")
    facts: dict[str, Any] = {}
    if t.second_reference:
        ref2 = root / "reference2"
        r2 = run_once(t.command(inputs, ref2), ref2, root / "reference2.log", None, t)
        if r2.rc != 0:
            raise SystemExit(f"{t.name}: the second reference run failed")
        facts = t.facts(ref, ref2)
    return ref, r.seconds, facts


@dataclass
class Trial:
    kills: int = 0
    kills_on_output: int = 0
    torn_tails: int = 0
    first_run_seconds: float | None = None  # the first run finished before its kill: a full run
    problems: list[str] = field(default_factory=list)


def trial(
    t: Target,
    inputs: Path,
    ref: Path,
    folder: Path,
    rng: random.Random,
    span: float,
    max_kills: int,
    facts: dict[str, Any] | None = None,
    tear_p: float = 0.0,
) -> Trial:
    """One folder: kill, rerun, ... until a run completes; then compare with ``ref``. After a
    kill, with probability ``tear_p`` a torn last line is left in one of the appended files."""
    folder.mkdir(parents=True)
    out, log = folder / "out", folder / "runs.log"
    tr = Trial()
    while True:
        kill_after = rng.uniform(0, span) if tr.kills < max_kills else None
        r = run_once(t.command(inputs, out), out, log, kill_after, t)
        if r.rc is None:
            tr.kills += 1
            tr.kills_on_output += r.progress > 0
            if rng.random() < tear_p:
                tr.torn_tails += tear(t.appends(out), rng)
            continue
        if tr.kills == 0:
            tr.first_run_seconds = r.seconds
        if r.rc != 0:
            tr.problems = [f"a rerun after {tr.kills} kill(s) exited {r.rc}: {last_line(log)}"]
        else:
            tr.problems = t.compare(out, ref, {} if facts is None else facts)
        return tr


def check_target(
    name: str,
    kills: int,
    seed: int,
    work: Path,
    max_kills: int = 3,
    log: Callable[[str], None] = print,
    tear_p: float = 0.0,
) -> Report:
    t = targets()[name]
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    inputs = root / "inputs"
    inputs.mkdir()
    t.setup(inputs)
    ref, span, facts = reference(t, inputs, root)
    rep = Report(name, round(span, 2), facts=facts)
    rng = random.Random(f"{seed}:{name}")
    while rep.kills < kills:
        n = rep.trials + 1
        tr = trial(t, inputs, ref, root / f"trial-{n:03d}", rng, span, max_kills, rep.facts, tear_p)
        if tr.first_run_seconds is not None:  # runs got faster or slower (a shared machine)
            span = tr.first_run_seconds
        rep.trials = n
        rep.kills += tr.kills
        rep.kills_on_output += tr.kills_on_output
        rep.torn_tails += tr.torn_tails
        rep.reruns += tr.kills
        rep.ok_trials += not tr.problems
        rep.problems += [f"trial {n}: {p}" for p in tr.problems]
        torn = f", {tr.torn_tails} torn" if tr.torn_tails else ""
        log(f"  {name} trial {n}: {tr.kills} kill(s){torn}, {'; '.join(tr.problems) or 'ok'}")
        if n >= 10 * kills + 10:  # kills never land (the runs are too short)
            rep.problems.append(f"only {rep.kills} kills landed in {n} trials")
            break
    return rep


def table(reports: list[Report]) -> str:
    head = (
        "target",
        "trials",
        "kills",
        "kills on output",
        "torn tails",
        "reruns",
        "ok",
        "problems",
    )
    rows = [head] + [
        (
            r.target,
            str(r.trials),
            str(r.kills),
            str(r.kills_on_output),
            str(r.torn_tails),
            str(r.reruns),
            "yes" if r.ok else "NO",
            str(len(r.problems)) + (f": {r.problems[0]}" if r.problems else ""),
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    )


def child(argv: list[str]) -> int:
    """``--child VERB ARGS``: ``chunkwise VERB ARGS`` with the scripted teacher registered."""
    register_teacher()
    from chunkwise.cli import main

    return main(argv)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=20, help="kills per target (default: 20)")
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated subset")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill delays (default: 0)")
    p.add_argument("--max-kills-per-trial", type=int, default=3, help="(default: 3)")
    p.add_argument("--json", metavar="FILE", help="also write the JSON there")
    p.add_argument("--workdir", help="where runs are written (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    p.add_argument(
        "--tear",
        type=float,
        default=0.5,
        metavar="P",
        help="after a kill, with probability P leave a torn last line in a file the run appends "
        "to, as a kill inside write() would (default: 0.5)",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="run the working tree's code as it changes, not a copy taken at the start",
    )
    args = p.parse_args(argv)
    names = [n.strip() for n in args.targets.split(",") if n.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        p.error(f"--targets: unknown {unknown}; known: {', '.join(TARGETS)}")
    if args.kills < 1 or args.max_kills_per_trial < 1:
        p.error("--kills and --max-kills-per-trial must be at least 1")
    if not 0 <= args.tear <= 1:
        p.error(f"--tear must be a probability in [0, 1], got {args.tear}")
    args.names = names
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    args = parse_args(argv)
    global CODE
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kill_check-"))
    work.mkdir(parents=True, exist_ok=True)
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    reports = []
    try:
        CODE = None if args.live else snapshot(work)
        for name in args.names:
            log(f"{name}: reference run, then kills until {args.kills}")
            reports.append(
                check_target(
                    name, args.kills, args.seed, work, args.max_kills_per_trial, log, args.tear
                )
            )
    finally:
        CODE = None
        if not args.workdir and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "seed": args.seed,
        "kills_per_target": args.kills,
        "max_kills_per_trial": args.max_kills_per_trial,
        "tear": args.tear,
        "code": "live working tree" if args.live else "a copy taken at the start",
        "ok": all(r.ok for r in reports),
        "targets": [{**vars(r), "ok": r.ok} for r in reports],
    }
    print(table(reports))
    text = json.dumps(result)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
