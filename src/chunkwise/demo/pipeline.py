"""`chunkwise demo`: synthesize, train in both modes, evaluate, compare — offline, on a CPU.

Stages (each prints one status line; the long ones show progress bars)::

    documents   Python reference topics -> <out>/docs/*.txt                (chunkwise.demo.documents)
    synthesis   Pyramid-Align records with hf:default -> <out>/synth/      (chunkwise synth)
    split       whole documents held out -> <out>/data/{train,heldout}.jsonl
    training    LoRA on hf:default, standard and mapreduce mode, through train/sft.py under
                `accelerate launch` -> <out>/train/{standard,mapreduce}/   (recipes/demo/*.yaml)
    evaluation  base model and both checkpoints x {standard, mapreduce} decoding on passkey and
                kv_retrieval beyond the window and on the held-out questions
                -> <out>/eval/<model>/<strategy>/{retrieval,heldout}/      (chunkwise eval)
    report      chunkwise compare table + PNG -> <out>/report/

Resuming: a finished stage is recorded in ``<out>/demo.json`` and skipped on the next run; an
interrupted one continues through its own tool's resume (synthesis per document, training from
its last checkpoint, evaluation per prediction). The numbers are whatever the models produce.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.demo.sizes import DemoSize
from chunkwise.errors import BadInput, ChunkwiseError
from chunkwise.io import atomic_write_json, atomic_write_text

log = logging.getLogger(__name__)

STAGES = ("documents", "synthesis", "split", "training", "evaluation", "report")
TRAIN_MODES = ("standard", "mapreduce")
DECODING = ("standard", "mapreduce")


class DemoError(ChunkwiseError):
    """A stage could not finish; the message says which and where its log is."""


def repo_root() -> Path:
    """The source checkout the demo runs from (it needs train/sft.py and recipes/demo/)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "train" / "sft.py").is_file() or not (root / "recipes" / "demo").is_dir():
        raise DemoError(
            "chunkwise demo runs from a source checkout (it launches train/sft.py with the "
            f"recipes in recipes/demo/); none found at {root}"
        )
    return root


@dataclass
class Demo:
    out: Path
    size: DemoSize
    model: str = "hf:default"
    seed: int = 0
    echo: Callable[[str], None] = print
    state: dict[str, Any] = field(default_factory=dict)
    _teacher: Any = None

    # ---------------------------------------------------------------- state

    @property
    def state_file(self) -> Path:
        return self.out / "demo.json"

    def load_state(self) -> None:
        """Start a ledger in --out, or check that the one there is for this same demo (its
        model, seed and every setting of its size) before reusing its finished stages."""
        if self.out.exists() and not self.out.is_dir():
            raise BadInput(f"--out {self.out} is a file; give a folder (new or a demo run's)")
        _base_name(self.model)  # a model the demo cannot train fails before any stage runs
        # the size as JSON reads it back (tuples become lists), so a reloaded ledger compares equal
        sizes = json.loads(json.dumps(self.size.to_dict()))
        want = {"size": self.size.name, "model": self.model, "seed": self.seed, "sizes": sizes}
        if self.state_file.exists():
            from chunkwise.io import read_json

            state = read_json(self.state_file, "demo ledger")
            if not isinstance(state, dict) or not isinstance(state.get("stages"), dict):
                raise BadInput(
                    f"{self.state_file} is not a demo ledger; pass another --out (or delete it)"
                )
            have = {k: state.get(k) for k in want}
            if have != want:
                changed = ", ".join(k for k in want if have[k] != want[k])
                raise BadInput(
                    f"{self.out} holds a demo run with other {changed} "
                    f"({ {k: have[k] for k in want if k != 'sizes'} }): pass another --out "
                    "(or --fresh to start this folder over)"
                )
            self.state = state
        else:
            self.state = {**want, "stages": {}}
            self.save_state()

    def save_state(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.state_file, self.state)

    def done(self, stage: str) -> bool:
        return self.state.get("stages", {}).get(stage, {}).get("status") == "done"

    # ---------------------------------------------------------------- running

    def run(self) -> dict[str, Any]:
        self.load_state()
        steps: dict[str, Callable[[], tuple[dict[str, Any], str]]] = {
            "documents": self.documents,
            "synthesis": self.synthesis,
            "split": self.split,
            "training": self.training,
            "evaluation": self.evaluation,
            "report": self.report,
        }
        t_all = time.perf_counter()
        try:
            for i, name in enumerate(STAGES, 1):
                tag = f"[{i}/{len(STAGES)}] {name:<10}"
                if self.done(name):
                    rec = self.state["stages"][name]
                    self.echo(f"{tag} done before ({rec.get('line', '')}); reused")
                    continue
                self.echo(f"{tag} ...")
                t0 = time.perf_counter()
                try:
                    summary, line = steps[name]()
                except BaseException as e:
                    self.state["stages"][name] = {
                        "status": "failed" if isinstance(e, Exception) else "interrupted",
                        "error": f"{type(e).__name__}: {e}",
                        "seconds": round(time.perf_counter() - t0, 1),
                    }
                    self.save_state()
                    raise
                seconds = round(time.perf_counter() - t0, 1)
                self.state["stages"][name] = {
                    "status": "done",
                    "seconds": seconds,
                    "line": line,
                    "summary": summary,
                }
                self.save_state()
                self.echo(f"{tag} {line} ({seconds:.0f} s)")
        finally:
            if self._teacher is not None:
                self._teacher.close()
                self._teacher = None
        self.state["last_run_seconds"] = round(time.perf_counter() - t_all, 1)
        self.save_state()
        return self.state

    def teacher(self) -> Any:
        if self._teacher is None:
            from chunkwise.llm import load_llm

            self._teacher = load_llm(self.model)
        return self._teacher

    # ---------------------------------------------------------------- stages

    def documents(self) -> tuple[dict[str, Any], str]:
        from chunkwise.demo.documents import LICENSE, write_documents

        paths = write_documents(self.out / "docs", self.size.documents, self.size.document_tokens)
        chars = [p.stat().st_size for p in paths]
        summary = {"files": [str(p) for p in paths], "chars": chars, "license": LICENSE}
        line = (
            f"{len(paths)} documents of ~{self.size.document_tokens:,} tokens from Python's "
            f"reference topics ({LICENSE.split(' (')[0]}) in {self.out / 'docs'}"
        )
        return summary, line

    def synth_config(self) -> Any:
        from chunkwise.synth import SynthConfig

        return SynthConfig(
            docs=str(self.out / "docs"),
            out=str(self.out / "synth"),
            model=self.model,
            questions_per_doc=self.size.questions_per_doc,
            window=self.size.synth_window,
            seed=self.seed,
            concurrency=2,
            mapreduce_args={"chunk_tokens": self.size.map_chunk_tokens},
        )

    def synthesis(self) -> tuple[dict[str, Any], str]:
        from chunkwise.synth import run_synth

        stats = run_synth(self.synth_config(), llm=self.teacher())
        summary = {
            k: stats.get(k)
            for k in ("documents", "examples", "skipped", "levels", "llm", "seconds")
            if k in stats
        }
        n = _count_lines(sorted((self.out / "synth" / "data").glob("*.jsonl")))
        summary["records"] = n
        line = f"{n} Pyramid-Align records in {self.out / 'synth'} (stats.json has calls by stage)"
        return summary, line

    def split(self) -> tuple[dict[str, Any], str]:
        from chunkwise.io import read_jsonl

        records = [
            rec
            for f in sorted((self.out / "synth" / "data").glob("*.jsonl"))
            for _, rec in read_jsonl(f, skip_bad_lines=True)
        ]
        train, heldout, how = split_records(records, self.size.heldout_documents)
        if not train:
            raise DemoError(
                f"synthesis left no records to train on (see {self.out / 'synth' / 'stats.json'} "
                "for why documents or questions were skipped)"
            )
        data = self.out / "data"
        _write_jsonl(data / "train.jsonl", train)
        _write_jsonl(data / "heldout.jsonl", heldout)
        summary = {"train": len(train), "heldout": len(heldout), "held_out": how}
        return summary, f"{len(train)} training records, {len(heldout)} held out ({how})"

    def recipe_path(self, mode: str) -> Path:
        return self.out / "recipes" / f"{mode}.yaml"

    def write_recipe(self, mode: str) -> Path:
        import yaml

        template = repo_root() / "recipes" / "demo" / f"pyramid_align-{mode}.yaml"
        recipe = yaml.safe_load(template.read_text(encoding="utf-8"))
        s = self.size
        recipe["run_name"] = f"demo-{s.name}-{mode}"
        recipe["output_dir"] = str((self.out / "train" / mode).resolve())
        recipe["model"]["name_or_path"] = _base_name(self.model)
        recipe["model"]["lora"].update(r=s.lora_r, alpha=2 * s.lora_r)
        recipe["data"]["paths"] = [str((self.out / "data" / "train.jsonl").resolve())]
        recipe["data"]["max_length"] = s.train_max_length
        recipe["batching"]["max_tokens"] = s.train_max_length
        if mode == "mapreduce":
            recipe["data"]["mapreduce"] = {"chunk_tokens": s.map_chunk_tokens}
        recipe["train"]["max_steps"] = s.train_steps
        recipe["train"]["save_steps"] = max(1, s.train_steps // 3)
        recipe["train"]["seed"] = self.seed
        head = (
            f"# written by `chunkwise demo --size {s.name}` from {template.relative_to(repo_root())}"
            f"\n# rerun alone: accelerate launch train/sft.py {self.recipe_path(mode)}\n"
        )
        path = self.recipe_path(mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, head + yaml.safe_dump(recipe, sort_keys=False))
        return path

    def training(self) -> tuple[dict[str, Any], str]:
        if self._teacher is not None:  # free its memory for the training processes
            self._teacher.close()
            self._teacher = None
        summary: dict[str, Any] = {}
        for mode in TRAIN_MODES:
            recipe = self.write_recipe(mode)
            out_dir = self.out / "train" / mode
            info = out_dir / "train_info.json"
            if not info.exists():
                _launch_training(recipe, out_dir, self.size.train_steps, f"train {mode}")
            train_info = json.loads(info.read_text(encoding="utf-8"))
            summary[mode] = _training_summary(out_dir, train_info)
        line = "; ".join(
            f"{m}: {s['steps']} steps, loss {fmt3(s['first_loss'])} -> {fmt3(s['final_loss'])}"
            for m, s in summary.items()
        )
        return summary, line + f" (LoRA adapters in {self.out / 'train'})"

    def eval_models(self) -> list[tuple[str, str]]:
        return [
            ("base", self.model),
            *((f"sft-{m}", str((self.out / "train" / m).resolve())) for m in TRAIN_MODES),
        ]

    def eval_configs(self, spec: str, folder: Path) -> list[Any]:
        from chunkwise.eval.runner import EvalConfig

        s = self.size
        configs = []
        heldout = self.out / "data" / "heldout.jsonl"
        for strategy in DECODING:
            args = {"chunk_tokens": s.map_chunk_tokens} if strategy == "mapreduce" else {}
            common = dict(
                model=spec,
                strategy=strategy,
                strategy_args=args,
                context_window=s.eval_window,
                seed=self.seed,
            )
            configs.append(
                EvalConfig(
                    **common,
                    benchmark="infinitebench",
                    tasks=list(s.retrieval_tasks),
                    data=f"synthetic:{s.eval_length}",
                    limit=s.eval_n,
                    output=str(folder / strategy / "retrieval"),
                )
            )
            if heldout.exists() and heldout.stat().st_size > 0:
                configs.append(
                    EvalConfig(
                        **common,
                        benchmark="pyramid_align",
                        tasks=["qa"],
                        data=str(heldout.resolve()),
                        limit=s.heldout_questions,
                        output=str(folder / strategy / "heldout"),
                    )
                )
        return configs

    def evaluation(self) -> tuple[dict[str, Any], str]:
        from chunkwise.eval.runner import run_eval
        from chunkwise.llm import load_llm

        summary: dict[str, Any] = {}
        for label, spec in self.eval_models():
            configs = self.eval_configs(spec, self.out / "eval" / label)
            todo = [c for c in configs if not (Path(c.output) / "results.json").exists()]
            if todo:
                self.echo(f"    evaluating {label} ({spec}): {len(todo)} run(s)")
                llm = load_llm(spec)
                try:
                    for cfg in todo:
                        run_eval(cfg, llm=llm)
                finally:
                    llm.close()
            for cfg in configs:
                res = json.loads((Path(cfg.output) / "results.json").read_text(encoding="utf-8"))
                for task, r in res["results"].items():
                    summary[f"{label}/{cfg.strategy}/{task}"] = r["score"]
        line = f"{len(summary)} scores in {self.out / 'eval'}"
        return summary, line

    def report(self) -> tuple[dict[str, Any], str]:
        from chunkwise.eval.compare import compare, plot, to_markdown

        runs = [
            self.out / "eval" / label / strategy
            for label, _ in self.eval_models()
            for strategy in DECODING
        ]
        table = compare(runs)
        rep = self.out / "report"
        rep.mkdir(parents=True, exist_ok=True)
        s = self.size
        title = (
            f"chunkwise demo ({s.name}): base vs LoRA-trained hf:default, "
            f"standard vs mapreduce decoding ({s.eval_window}-token window)"
        )
        png = plot(table, rep / "compare.png", title=title)
        md = to_markdown(table)
        atomic_write_json(rep / "compare.json", table)
        atomic_write_text(rep / "compare.md", md + "\n")
        return {"png": str(png), "markdown": str(rep / "compare.md"), "table": table}, (
            f"table and chart in {rep}"
        )


# ------------------------------------------------------------------------------ helpers


def check_model(model: str) -> str:
    """The recipe's base model name for ``--model``; a spec the demo cannot use (bad syntax,
    options, an adapter, another backend) fails here, before anything is made or deleted."""
    from chunkwise.llm.spec import parse_spec

    if model != "default":  # the one alias _base_name takes that is not a spec
        parse_spec(model)
    return _base_name(model)


def _base_name(model: str) -> str:
    """The training recipe's ``model.name_or_path`` for a decoding spec (hf only)."""
    if model in ("hf:default", "default"):
        return "default"
    if model.startswith("hf:") and "?" not in model and "+adapter=" not in model:
        return model[3:]
    raise BadInput(
        f"the demo trains LoRA adapters on --model; {model!r} must be hf:default or "
        "hf:<folder or hub id> without options"
    )


def split_records(
    records: list[dict[str, Any]], heldout_documents: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(train, held-out, how): whole documents are held out — the last ``heldout_documents``
    (by name) of those that yielded records — so evaluation reads documents training never
    saw. When too few documents yielded records for that, the last question is held out
    instead (its document is then seen in training, the question is not); with one record
    nothing is held out."""
    by_doc: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        by_doc.setdefault(_doc_name(rec), []).append(rec)
    names = sorted(by_doc)
    if heldout_documents < 1:
        return list(records), [], "nothing held out"
    if len(names) > heldout_documents:
        held = set(names[-heldout_documents:])
        train = [r for r in records if _doc_name(r) not in held]
        heldout = [r for r in records if _doc_name(r) in held]
        return train, heldout, f"documents {', '.join(sorted(held))}"
    if len(records) >= 2:
        return (
            list(records[:-1]),
            [records[-1]],
            (f"question {records[-1].get('id')}: only {len(names)} document(s) yielded records"),
        )
    return list(records), [], "nothing held out: synthesis yielded one record"


def _doc_name(record: dict[str, Any]) -> str:
    """The document a record came from (its source file's stem)."""
    sid = str(record.get("source_id") or "")
    return Path(sid).stem if sid else ""


def _count_lines(files: list[Path]) -> int:
    return sum(1 for f in files for line in f.read_text(encoding="utf-8").splitlines() if line)


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def fmt3(v: Any) -> str:
    return "?" if v is None else f"{float(v):.3f}"


def _training_summary(out_dir: Path, train_info: dict[str, Any]) -> dict[str, Any]:
    losses = []
    metrics = out_dir / "metrics.jsonl"
    if metrics.exists():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            if line.strip():
                loss = json.loads(line).get("train/loss")
                if loss is not None:
                    losses.append(loss)
    final = train_info.get("final") or {}
    return {
        "steps": train_info.get("steps"),
        "seconds": train_info.get("seconds"),
        "first_loss": losses[0] if losses else None,
        "final_loss": final.get("train/loss", losses[-1] if losses else None),
        "losses": losses,
        "output_dir": str(out_dir),
    }


def training_command(recipe: Path) -> list[str]:
    """``accelerate launch`` of train/sft.py on one process (GPU when there is one, else CPU)."""
    accelerate = Path(sys.executable).with_name("accelerate")
    launcher = [str(accelerate)] if accelerate.exists() else [shutil.which("accelerate") or ""]
    if not launcher[0]:
        raise DemoError("accelerate is not installed (pip install accelerate)")
    return [
        *launcher,
        "launch",
        "--num_processes",
        "1",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(repo_root() / "train" / "sft.py"),
        str(recipe),
    ]


def _launch_training(recipe: Path, out_dir: Path, steps: int, desc: str) -> None:
    """Run one recipe to completion in a child process, with a progress bar read from the
    run's metrics.jsonl; the child's output goes to ``<out_dir>.log``."""
    from tqdm import tqdm

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = out_dir.with_suffix(".log")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.setdefault("WANDB_MODE", "offline")
    metrics = out_dir / "metrics.jsonl"
    cmd = training_command(recipe)
    with (
        open(log_path, "a", encoding="utf-8") as logf,
        tqdm(total=steps, desc=desc, unit="step", dynamic_ncols=True) as bar,
    ):
        logf.write(f"\n$ {' '.join(cmd)}\n")
        logf.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=repo_root(),
        )
        try:
            while proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)
                done = _count_lines([metrics]) if metrics.exists() else 0
                bar.update(max(0, min(done, steps) - bar.n))
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise DemoError(
            f"{desc} failed (exit {proc.returncode}); last lines of {log_path}:\n{tail}"
        )


__all__ = ["STAGES", "Demo", "DemoError", "repo_root", "training_command"]
