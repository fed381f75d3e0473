"""`chunkwise demo`: synthesize, train in both modes, evaluate, compare — offline, on a CPU.

Stages (each prints one status line; the long ones show progress bars)::

    documents   generated families with ground truth -> <out>/docs/{train,heldout}.jsonl
                (training seed for training, held-out seeds and unseen families for evaluation)
    synthesis   the oracle teacher: exact map/collapse/reduce targets -> <out>/synth/  (X, Q, M, A)
    split       training records -> <out>/data/train.jsonl; held-out documents checked disjoint
    training    LoRA on the embedded model, standard and mapreduce mode, chat protocol, through
                `python -m chunkwise.train` under `accelerate launch` -> <out>/train/{standard,mapreduce}/
    evaluation  base model, both checkpoints (and the packaged hf:default-mr) x {standard,
                mapreduce} on held-out documents beyond the window, n per task each
                -> <out>/eval/<model>/<decoding>/                 (chunkwise eval --benchmark generated)
    report      table with 95% bootstrap intervals, a PNG with error bars, the verdict in words
                -> <out>/report/                                   (chunkwise.demo.verdict)

Resuming: a finished stage is recorded in ``<out>/demo.json`` and skipped on the next run; an
interrupted one continues through its own tool's resume (synthesis per document, training from
its last checkpoint, evaluation per prediction). The numbers are whatever the models produce.

This module is the stage ledger and the stages; the training runs are in :mod:`.training`, the
evaluation engines in :mod:`.engines`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.demo.engines import (
    EvalModel,
    Progress,
    engine_spec,
    evaluate_in,
    has_vllm,
    reference_available,
    resolve_engine,
    result_cells,
    vllm_python,
)
from chunkwise.demo.errors import DemoError
from chunkwise.demo.sizes import DemoSize
from chunkwise.demo.training import (
    base_name,
    launch_training,
    losses_line,
    package_path,
    read_train_info,
    recipe_template,
    rerun_training,
    training_precision,
    training_summary,
)
from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_json, atomic_write_text

log = logging.getLogger(__name__)

STAGES = ("documents", "synthesis", "split", "training", "evaluation", "report")
TRAIN_MODES = ("standard", "mapreduce")
DECODING = ("standard", "mapreduce")


#: size settings a resumed run may change: they change what is said or how fast it runs, not
#: a result (the time estimate; how many documents are answered at once)
RESUMABLE_SIZE_FIELDS = frozenset({"expected", "eval_parallel"})


def _size_defaults() -> dict[str, Any]:
    import dataclasses

    from chunkwise.demo.sizes import DemoSize

    return {
        f.name: f.default
        for f in dataclasses.fields(DemoSize)
        if f.default is not dataclasses.MISSING
    }


@dataclass
class Demo:
    out: Path
    size: DemoSize
    model: str = "hf:default"
    seed: int = 0
    #: the evaluation engine: hf, vllm (through .venv-vllm when this interpreter lacks it), or
    #: auto (vllm when `make vllm` has set it up)
    engine: str = "auto"
    echo: Callable[[str], None] = print
    state: dict[str, Any] = field(default_factory=dict)
    _counter: Any = None

    # ---------------------------------------------------------------- state

    @property
    def state_file(self) -> Path:
        return self.out / "demo.json"

    def load_state(self) -> None:
        """Start a ledger in --out, or check that the one there is for this same demo (its
        model, seed and every setting of its size) before reusing its finished stages."""
        if self.out.exists() and not self.out.is_dir():
            raise BadInput(f"--out {self.out} is a file; give a folder (new or a demo run's)")
        base_name(self.model)  # a model the demo cannot train fails before any stage runs
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
            if isinstance(have["sizes"], dict):
                have["sizes"] = {
                    **_size_defaults(),  # a setting added since, at the value it meant then
                    **have["sizes"],
                    # what does not change a result may change
                    **{k: v for k, v in sizes.items() if k in RESUMABLE_SIZE_FIELDS},
                }
            if have != want:
                changed = ", ".join(k for k in want if have[k] != want[k])
                raise BadInput(
                    f"{self.out} holds a demo run with other {changed} "
                    f"({ {k: have[k] for k in want if k != 'sizes'} }): pass another --out "
                    "(or --fresh to start this folder over)"
                )
            self.state = {**state, "sizes": sizes}
            self.save_state()
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
            self.close_models()
        self.state["last_run_seconds"] = round(time.perf_counter() - t_all, 1)
        self.save_state()
        return self.state

    def close_models(self) -> None:
        if self._counter is not None:
            self._counter.close()
            self._counter = None

    # ---------------------------------------------------------------- stages

    def counter(self) -> Any:
        """The model's tokenizer and chat template, for sizing documents and for the oracle
        (no weights are loaded for the embedded model)."""
        if self._counter is None:
            if self.model in ("hf:default", "default"):
                from chunkwise.llm.default_mr import counting_llm

                self._counter = counting_llm()
            else:
                from chunkwise.llm import load_llm

                self._counter = load_llm(self.model)
        return self._counter

    def documents(self) -> tuple[dict[str, Any], str]:
        from chunkwise.demo.documents import document_sets, write_documents

        sets = document_sets(self.size, self.seed, self.counter().count_tokens)
        summary = write_documents(self.out / "docs", sets)
        s = self.size
        unseen = s.unseen_families()
        line = (
            f"{len(sets['train'])} training documents ({', '.join(s.train_families)} at "
            f"{'/'.join(map(str, s.train_lengths))} tokens) and {len(sets['heldout'])} held-out "
            f"({s.eval_n} per task at {s.eval_length:,} tokens, held-out seeds"
            + (f"; {', '.join(unseen)} never trained on" if unseen else "")
            + f") in {self.out / 'docs'}"
        )
        return summary, line

    def synthesis(self) -> tuple[dict[str, Any], str]:
        from chunkwise.data.families import TRAIN_SEED
        from chunkwise.synth.oracle import run_oracle

        s = self.size
        stats = run_oracle(
            self.counter(),
            self.out / "synth",
            families=list(s.train_families),
            lengths=list(s.train_lengths),
            n=s.train_docs,
            seed=TRAIN_SEED + self.seed,
            window=s.eval_window,
            mapreduce_args=self.mapreduce_args(),
        )
        stages = stats.get("new_examples_by_stage") or {}
        summary = {k: stats.get(k) for k in ("records", "skipped", "by_family", "seconds")}
        summary["targets_by_stage"] = dict(stages)
        line = (
            f"{stats['records']} oracle records (X, Q, M, A) in {self.out / 'synth'}: exact map, "
            "collapse and reduce targets from each document's ground truth"
        )
        return summary, line

    def mapreduce_args(self) -> dict[str, Any]:
        """The decoding the oracle writes targets for and the trained models are read with."""
        args: dict[str, Any] = {"prompts": "chat", "chunk_tokens": self.size.map_chunk_tokens}
        if self.size.max_new_tokens:
            args["max_new_tokens"] = self.size.max_new_tokens
        return args

    def split(self) -> tuple[dict[str, Any], str]:
        from chunkwise.io import read_jsonl

        records = [
            rec
            for f in sorted((self.out / "synth" / "data").glob("*.jsonl"))
            for _, rec in read_jsonl(f, skip_bad_lines=True)
        ]
        if not records:
            raise DemoError(
                f"synthesis left no records to train on (see {self.out / 'synth' / 'stats.json'})"
            )
        held = [rec for _, rec in read_jsonl(self.out / "docs" / "heldout.jsonl")]
        texts = [r.get("document") for r in records] + [d.get("context") for d in held]
        if not all(isinstance(t, str) for t in texts):  # hand-edited or another tool's
            raise BadInput(
                f"{self.out / 'synth' / 'data'} or {self.out / 'docs' / 'heldout.jsonl'} holds a "
                "record without a 'document' (or held-out 'context') text; rerun with --fresh"
            )
        leaked = set(texts[: len(records)]) & set(texts[len(records) :])
        if leaked:
            raise DemoError(
                f"{len(leaked)} held-out document(s) are also training documents; the demo's "
                "seeds overlap (pass another --seed)"
            )
        data = self.out / "data"
        _write_jsonl(data / "train.jsonl", records)
        s = self.size
        spec = {
            "benchmark": "generated",
            "data": f"heldout:{s.eval_length}",
            "tasks": list(s.eval_tasks),
            "n": s.eval_n,
            "unseen_families": list(s.unseen_families()),
            "seed": self.seed,
        }
        atomic_write_json(data / "heldout.json", spec)
        summary = {"train": len(records), "heldout": len(held), "heldout_spec": spec}
        line = (
            f"{len(records)} training records; {len(held)} held-out documents, none of them "
            "trained on (checked)"
        )
        return summary, line

    def recipe_path(self, mode: str) -> Path:
        return self.out / "recipes" / f"{mode}.yaml"

    def write_recipe(self, mode: str) -> Path:
        import yaml

        from chunkwise.config import load_yaml

        template = recipe_template(mode)
        recipe = load_yaml(template.read_text(encoding="utf-8"), template)
        s = self.size
        recipe["run_name"] = f"demo-{s.name}-{mode}"
        recipe["output_dir"] = str((self.out / "train" / mode).resolve())
        recipe["model"]["name_or_path"] = base_name(self.model)
        recipe["model"]["chat_template"] = str(package_path(recipe["model"]["chat_template"]))
        recipe["model"]["lora"].update(r=s.lora_r, alpha=2 * s.lora_r)
        recipe["data"]["paths"] = [str((self.out / "data" / "train.jsonl").resolve())]
        # standard mode sees what standard decoding sees: the document's middle cut to the window
        length = (
            s.train_max_length if mode == "mapreduce" else min(s.train_max_length, s.eval_window)
        )
        recipe["data"]["max_length"] = length
        recipe["data"]["window"] = s.eval_window
        recipe["batching"]["max_tokens"] = s.train_max_length
        if mode == "mapreduce":
            recipe["data"]["mapreduce"] = self.mapreduce_args()
        steps = s.steps(mode)
        recipe["train"]["max_steps"] = steps
        recipe["train"]["lr"] = s.lr
        recipe["train"]["warmup_steps"] = max(1, steps // 6)
        recipe["train"]["save_steps"] = max(1, steps // 3)
        recipe["train"]["seed"] = self.seed
        recipe["train"]["precision"] = training_precision()
        head = (
            f"# written by `chunkwise demo --size {s.name}` from chunkwise/recipes/demo/{template.name}"
            f"\n# rerun alone: {rerun_training(self.recipe_path(mode))}\n"
        )
        path = self.recipe_path(mode)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, head + yaml.safe_dump(recipe, sort_keys=False))
        return path

    def training(self) -> tuple[dict[str, Any], str]:
        self.close_models()  # free their memory for the training processes
        summary: dict[str, Any] = {}
        for mode in TRAIN_MODES:
            recipe = self.write_recipe(mode)
            out_dir = self.out / "train" / mode
            info = out_dir / "train_info.json"
            if not info.exists():
                launch_training(recipe, out_dir, self.size.steps(mode), f"train {mode}")
            summary[mode] = training_summary(out_dir, read_train_info(info))
        line = "; ".join(f"{m}: {losses_line(s)}" for m, s in summary.items())
        return summary, line + f" (LoRA adapters in {self.out / 'train'})"

    def eval_models(self) -> list[EvalModel]:
        """(label, spec, decodings and their options): the base model as users get it, both
        checkpoints in the decoding they were trained for, and the packaged reference."""
        mr = self.mapreduce_args()
        # its own (base) scaffolds, which write at most 40 tokens a call
        base_mr = {"chunk_tokens": self.size.map_chunk_tokens}
        models = [
            EvalModel("base", self.model, {"standard": {}, "mapreduce": base_mr}),
            *(
                EvalModel(
                    f"sft-{m}",
                    str((self.out / "train" / m).resolve()),
                    {"standard": {"prompts": "chat"}, "mapreduce": mr},
                )
                for m in TRAIN_MODES
            ),
        ]
        if self.size.reference and reference_available(self.size.reference):
            models.append(EvalModel("reference", self.size.reference, {"mapreduce": mr}))
        return models

    def eval_configs(self, m: EvalModel, engine: str = "hf") -> list[Any]:
        from chunkwise.eval.runner import EvalConfig

        s = self.size
        return [
            EvalConfig(
                model=engine_spec(m.spec, engine),
                strategy=strategy,
                strategy_args=args,
                context_window=s.eval_window,
                seed=self.seed,
                benchmark="generated",
                tasks=list(s.eval_tasks),
                data=f"heldout:{s.eval_length}",
                limit=s.eval_n,
                parallel=s.eval_parallel,
                output=str(self.out / "eval" / m.label / strategy),
            )
            for strategy, args in m.decodings.items()
        ]

    def eval_engine(self) -> str:
        """hf or vllm: what ``engine`` resolves to here."""
        return resolve_engine(self.engine)

    def evaluate_model(self, m: EvalModel, engine: str) -> None:
        """Run ``m``'s unfinished evaluations in this process, on one loaded model."""
        from chunkwise.eval.runner import run_eval
        from chunkwise.llm import load_llm

        todo = self.pending(m, engine)
        if not todo:
            return
        llm = load_llm(todo[0].model)
        try:
            for cfg in todo:
                run_eval(cfg, llm=llm)
        finally:
            llm.close()

    def evaluation(self) -> tuple[dict[str, Any], str]:
        engine = self.eval_engine()
        models = self.eval_models()
        todo = [m for m in models if self.pending(m, engine)]
        if todo:
            labels = ", ".join(f"{m.label} ({engine_spec(m.spec, engine)})" for m in todo)
            if engine == "vllm" and not has_vllm():
                # one process for every model: vLLM's import and first start are paid once
                self.echo(f"    evaluating {labels} in the vLLM environment")
                evaluate_in(
                    vllm_python(), self.out, [m.label for m in todo], self.progress(todo, engine)
                )
            else:
                self.echo(f"    evaluating {labels}")
                for m in todo:
                    self.evaluate_model(m, engine)
        summary: dict[str, Any] = {}
        for m in models:
            for cfg in self.eval_configs(m, engine):
                cells = result_cells(Path(cfg.output) / "results.json")
                summary.update({f"{m.label}/{cfg.strategy}/{t}": c for t, c in cells.items()})
        summary = {"engine": engine, "cells": summary}
        line = (
            f"{len(summary['cells'])} cells of {self.size.eval_n} documents each on {engine} "
            f"in {self.out / 'eval'}"
        )
        return summary, line

    def pending(self, m: EvalModel, engine: str) -> list[Any]:
        """``m``'s evaluation configs without a results.json yet."""
        configs = self.eval_configs(m, engine)
        return [c for c in configs if not (Path(c.output) / "results.json").exists()]

    def progress(self, models: list[EvalModel], engine: str) -> Progress:
        """Answered documents of ``models``' evaluations, counted from their prediction files."""
        outputs = [Path(c.output) for m in models for c in self.eval_configs(m, engine)]
        total = len(outputs) * len(self.size.eval_tasks) * self.size.eval_n
        return Progress(outputs, total)

    def report(self) -> tuple[dict[str, Any], str]:
        from chunkwise.demo.verdict import build_report

        rep = self.out / "report"
        report = build_report(
            self.state["stages"]["evaluation"]["summary"]["cells"], self.size, rep
        )
        return report, f"table, verdict and chart in {rep}"


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


__all__ = ["DECODING", "STAGES", "TRAIN_MODES", "Demo", "DemoError"]
