"""Every reader of a JSON/JSONL/YAML file chunkwise did not just write itself, under hypothesis
(issue #47): random JSON values, a valid file with a field changed or removed, random bytes,
truncation, deep nesting. Each reader either succeeds or raises one :class:`BadInput` line
naming the file (or the folder it reads it for); never another exception.

Inventory (``grep -rn "json.load\\|read_json\\|read_jsonl\\|load_yaml\\|yaml\\.\\|np.load\\|
safe_open" src/chunkwise``): reader -> the test that fuzzes it.

Already fuzzed elsewhere:
  io.parse_json / read_json / read_jsonl / JsonlAppender ...... test_faults_json_readers.py
  benchmark loaders (infinitebench, ruler, longqa, narrativeqa, qasper, leval, quality,
    pyramid_align; data/* and eval/*_benchmarks.py) ......... test_faults_loaders.py
  eval compare: results.json of each run ...................... test_faults_compare.py
  serve: request bodies (JSON) ................................ test_faults_serve.py
  train example cache (np.load + its JSON meta) ............... train/test_train_example_cache.py

Fuzzed here (none was before):
  config.load_config: eval config YAML, run folder config.yaml . test_eval_config_yaml
  train.recipe.load_recipe: recipe YAML ........................ test_recipe_yaml
  eval.run_dir.read_records / drop_errored / merge,
    eval.rescore.answered_ids: predictions/<task>.jsonl ....... test_run_folder_predictions
  eval.run_dir.prepare_run_dir: config.yaml of a run folder .... test_run_folder_config_yaml
  eval.results.results_path, eval.rescore.stored_model_info:
    results*.json of a run folder .............................. test_run_folder_results_json
  eval metrics (`chunkwise score`): a predictions file ......... test_score_predictions_file
  experiments.ledger.Ledger: bench ledgers (JSONL) ............ test_eval_ledger
  benchmarks.answer_relevance.score_predictions_file .......... test_answer_relevance_file
  eval.provenance (chunkwise_model.json, adapter_config.json) .. test_model_folder_metadata
  llm.hf._base_of_adapter, llm.vllm_backend._adapter_base /
    _adapter_rank, llm.merged.adapter_config / needs_merge:
    chunkwise_model.json, adapter_config.json ................. test_model_folder_metadata
  llm.embedded._current: converted model marker ............... test_model_folder_metadata
  llm.model_defaults.strategy_defaults (strategies.resolve):
    a model folder's strategy.json, or its run's recipe.yaml .. test_model_strategy_defaults
  digests: the sha256 cache entries ............................ test_digest_cache_entry
  llm.default_mr.install: recipe.yaml of a training run ........ test_default_mr_install
  strategies.trees cache: tree JSON files ...................... test_tree_cache_file
  train.saving.trim_metrics: metrics.jsonl ..................... test_train_metrics_jsonl
  train.saving.resume_point: trainer_state.json ................ test_trainer_state_json
  train.formats.build_examples: LongAlign and Pyramid-Align
    training records ........................................... test_training_records
  demo: demo.json ledger (Demo.load_state, fresh.check_removable,
    demo.evaluate) ............................................. test_demo_ledger
  demo.training.training_summary: train_info.json, metrics.jsonl test_demo_training_summary
  demo.engines.result_cells: results.json of each evaluation ... test_demo_eval_results
  demo.pipeline.Demo.split: synth/data/*.jsonl, docs/heldout.jsonl test_demo_split
  synth.settings.check_settings: config.json of a synth --out .. test_synth_settings_json
  synth.sources.iter_source: documents JSONL ................... test_synth_source_jsonl

Not fuzzed (not user-supplied): package data read with load_yaml (prompts/*.yaml, the
infinitebench and ruler prompt files, the demo recipe templates), llm.default_mr.strategy_args
(the packaged strategy.json), the tokenizer_config.json llm.default_mr.model_dir copies from
the converted model it made, parse_override (a command-line value, not a file).

  synth.outputs.export: a run's work ledger (work/docs-part-*.jsonl) test_synth_work_ledger
  synth.outputs._merged_stats: shards' stats/part-*.json ....... test_synth_shard_stats
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chunkwise.errors import BadInput

from .attacks import BAD_LINES, field_paths

REPO = Path(__file__).resolve().parents[2]

#: examples per reader (CHUNKWISE_FUZZ_EXAMPLES=1000 for a longer hunt than `make test`'s)
FUZZ = settings(
    max_examples=int(os.environ.get("CHUNKWISE_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)
DELETE = object()  # a mutation that removes the field


def mutate(value: Any, path: tuple, new: Any) -> Any:
    """A deep copy of ``value`` with the field at ``path`` set to ``new`` (or deleted)."""
    if not path:
        return new
    value = copy.deepcopy(value)
    node = value
    for key in path[:-1]:
        node = node[key]
    if new is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = new
    return value


@st.composite
def mutated(draw: Any, valid: Any) -> Any:
    """``valid`` with one or two fields set to random JSON values or removed."""
    value = valid
    for _ in range(draw(st.integers(1, 2))):
        paths = field_paths(value)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        value = mutate(value, path, draw(st.one_of(st.just(DELETE), JSON)))
    return value


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def json_bytes(valid: Any) -> st.SearchStrategy[bytes]:
    """A file meant to hold ``valid``: changed fields, any JSON, random bytes, cut short."""
    text = dumps(valid)
    return st.one_of(
        mutated(valid).map(dumps),
        mutated(valid).map(dumps),
        JSON.map(dumps),
        st.binary(max_size=120),
        st.integers(0, max(len(text) - 1, 0)).map(lambda n: text[:n]),
        st.sampled_from(sorted(BAD_LINES.values())),
    )


def jsonl_bytes(valid: list[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    """A JSONL file meant to hold the records ``valid``, with some lines damaged."""
    line = st.one_of(
        st.sampled_from(valid).map(dumps),
        st.sampled_from(valid).flatmap(mutated).map(dumps),
        JSON.map(dumps),
        st.binary(max_size=60).filter(lambda b: b"\n" not in b),
        st.sampled_from(sorted(v.rstrip(b"\n") for v in BAD_LINES.values())),
    )
    return st.tuples(st.lists(line, min_size=1, max_size=4), st.booleans()).map(
        lambda t: b"\n".join(t[0]) + (b"\n" if t[1] else b"")
    )


def yaml_bytes(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """A YAML file meant to hold ``valid``: changed fields, any data, random bytes."""
    text = yaml.safe_dump(valid).encode()
    return st.one_of(
        mutated(valid).map(
            lambda v: yaml.safe_dump(v, allow_unicode=True).encode("utf-8", "replace")
        ),
        mutated(valid).map(
            lambda v: yaml.safe_dump(v, allow_unicode=True).encode("utf-8", "replace")
        ),
        JSON.map(lambda v: yaml.safe_dump(v).encode()),
        st.binary(max_size=120),
        st.integers(0, max(len(text) - 1, 0)).map(lambda n: text[:n]),
        st.sampled_from(
            [
                b"a: [" * 3000,
                b"- " * 3000 + b"x",
                b"a: !!python/object:os.system x",
                b"a: 1\na: 2\n",
                b"\xff\xfe",
            ]
        ),
    )


def refused_or_done(fn: Callable[[], Any], *names: Any, errors: tuple = (BadInput,)) -> Any:
    """``fn()``'s value, or None when it raised one BadInput line (or one of ``errors``)
    naming one of ``names``."""
    try:
        return fn()
    except errors as e:
        msg = str(e)
        assert "\n" not in msg, msg
        assert any(names_it(msg, n) for n in names), f"names none of {names}: {msg}"
        return None


def names_it(msg: str, name: Any) -> bool:
    """Whether ``msg`` names ``name``: its path, or its folder and its file name."""
    path = Path(name) if isinstance(name, Path) else None
    if str(name) in msg:
        return True
    return path is not None and str(path.parent) in msg and path.name in msg


@pytest.fixture
def root():
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def fresh(root: Path, name: str) -> Path:
    """An empty folder ``name`` under ``root`` (a new one per example)."""
    folder = Path(tempfile.mkdtemp(prefix=name, dir=root))
    return folder


# ------------------------------------------------------------------ YAML configs


EVAL_YAML = yaml.safe_load((REPO / "recipes" / "eval" / "passkey-smoke.yaml").read_text())
RECIPE_YAML = yaml.safe_load((REPO / "recipes" / "tiny" / "longalign-standard.yaml").read_text())


@FUZZ
@given(raw=yaml_bytes(EVAL_YAML))
def test_eval_config_yaml(root, raw):
    from chunkwise.config import load_config
    from chunkwise.eval.config import EvalConfig

    path = fresh(root, "cfg") / "eval.yaml"
    path.write_bytes(raw)
    cfg = refused_or_done(lambda: load_config(EvalConfig, path), path)
    if cfg is not None:  # checks across keys name the key (the value may be an override's)
        refused_or_done(cfg.resolved, "")


@FUZZ
@given(raw=yaml_bytes(RECIPE_YAML))
def test_recipe_yaml(root, raw):
    from chunkwise.config import load_config
    from chunkwise.train.recipe import Recipe, check_recipe

    path = fresh(root, "recipe") / "recipe.yaml"
    path.write_bytes(raw)
    recipe = refused_or_done(lambda: load_config(Recipe, path), path)
    if recipe is not None:  # load_recipe's checks across keys name the key, as above
        refused_or_done(lambda: check_recipe(recipe, check_paths=False), "")


# ------------------------------------------------------------------ eval run folders


PREDICTION = {
    "id": 0,
    "prediction": "71432",
    "ground_truth": ["71432"],
    "strategy": "standard",
    "raw_output": "The pass key is 71432.",
    "error": None,
}
PREDICTIONS = [{**PREDICTION, "id": i} for i in range(3)] + [
    {**PREDICTION, "id": 1, "error": "timeout", "prediction": ""}
]


@FUZZ
@given(main=jsonl_bytes(PREDICTIONS), shard=st.one_of(st.none(), jsonl_bytes(PREDICTIONS)))
def test_run_folder_predictions(root, main, shard):
    from chunkwise.eval.rescore import answered_ids
    from chunkwise.eval.run_dir import drop_errored, main_file, merge, read_records, shard_file

    out = fresh(root, "run")
    path = main_file(out, "passkey")
    path.parent.mkdir(parents=True)
    path.write_bytes(main)
    files = [path]
    if shard is not None:
        files.append(shard_file(out, "passkey", 1))
        files[-1].parent.mkdir(parents=True)
        files[-1].write_bytes(shard)
    refused_or_done(lambda: read_records(path), path)
    refused_or_done(lambda: answered_ids(out, "passkey"), *files)
    refused_or_done(lambda: drop_errored(path), path)
    refused_or_done(lambda: merge(out, "passkey", [0, 1, 2]), *files, "passkey")


@FUZZ
@given(raw=yaml_bytes(dict(EVAL_YAML, output="runs/x", tasks=["passkey"])))
def test_run_folder_config_yaml(root, raw):
    from chunkwise.eval.config import EvalConfig
    from chunkwise.eval.run_dir import prepare_run_dir

    out = fresh(root, "run")
    (out / "config.yaml").write_bytes(raw)
    cfg = EvalConfig(**{**EVAL_YAML, "output": str(out)}).resolved()
    refused_or_done(lambda: prepare_run_dir(out, cfg), out)


RESULTS = {
    "results": {"passkey": {"score": 100.0, "n": 3, "scorer": "official", "extract": "auto"}},
    "model": {"spec": "scripted:passkey", "prompt_kind": "chat", "strategy_window": 4096},
}


@FUZZ
@given(raw=json_bytes(RESULTS))
def test_run_folder_results_json(root, raw):
    from chunkwise.eval.rescore import stored_model_info
    from chunkwise.eval.results import results_path

    out = fresh(root, "run")
    (out / "results.json").write_bytes(raw)
    refused_or_done(lambda: results_path(out, "official", "auto"), out / "results.json")
    refused_or_done(lambda: stored_model_info(out, "scripted:passkey"), out / "results.json")


@FUZZ
@given(raw=jsonl_bytes(PREDICTIONS), skip=st.booleans())
def test_score_predictions_file(root, cli, raw, skip):
    path = fresh(root, "score") / "predictions.jsonl"
    path.write_bytes(raw)
    flags = ["--skip-bad-lines"] if skip else []
    res = cli("score", "--task=passkey", f"--predictions={path}", *flags)
    if res.rc != 0:  # exit 2 with one error line naming the file, no traceback
        assert names_it(res.error_line(), path), res.err


# ------------------------------------------------------------------ eval side files


LEDGER_ROWS = [{"key": f'["m", {i}]', "score": 0.5, "n": 3} for i in range(3)]


@FUZZ
@given(raw=jsonl_bytes(LEDGER_ROWS), readonly=st.booleans())
def test_eval_ledger(root, raw, readonly):
    from chunkwise.experiments.ledger import Ledger

    path = fresh(root, "ledger") / "ledger.jsonl"
    path.write_bytes(raw)

    def read() -> None:
        with Ledger(path, readonly=readonly) as ledger:
            for key in ledger.rows:
                assert ledger.get(key) is not None

    refused_or_done(read, path)


class _Judge:
    """Stands in for the judge: every answer gets a score of 0.5."""

    def score_many(self, pairs):
        from chunkwise.benchmarks.answer_relevance import Relevance

        return [Relevance(0.5, [q], [0.5]) for q, _ in pairs]


@FUZZ
@given(raw=jsonl_bytes([{"id": i, "question": "Who?", "prediction": "Marie"} for i in range(3)]))
def test_answer_relevance_file(root, raw):
    from chunkwise.benchmarks.answer_relevance import score_predictions_file

    path = fresh(root, "rel") / "predictions.jsonl"
    path.write_bytes(raw)
    refused_or_done(lambda: score_predictions_file(path, _Judge()), path)


# ------------------------------------------------------------------ model folders


MODEL_JSON = {"base": "hf:default?chat=on"}
ADAPTER_CONFIG = {"base_model_name_or_path": "google/gemma-3-270m", "r": 8, "peft_type": "LORA"}


@FUZZ
@given(model=st.one_of(st.none(), json_bytes(MODEL_JSON)), adapter=json_bytes(ADAPTER_CONFIG))
def test_model_folder_metadata(root, model, adapter):
    from chunkwise.eval.provenance import model_provenance
    from chunkwise.llm import embedded, hf, merged, vllm_backend

    folder = fresh(root, "adapter")
    (folder / "adapter_config.json").write_bytes(adapter)
    names = [folder / "adapter_config.json"]
    if model is not None:
        (folder / "chunkwise_model.json").write_bytes(model)
        names.append(folder / "chunkwise_model.json")
    refused_or_done(lambda: hf._base_of_adapter(folder), *names)
    refused_or_done(lambda: vllm_backend._adapter_base(folder, str(folder)), *names)
    refused_or_done(lambda: vllm_backend._adapter_rank(str(folder)), *names)
    refused_or_done(lambda: merged.adapter_config(folder), *names)
    refused_or_done(lambda: merged.needs_merge(folder), *names)
    refused_or_done(lambda: model_provenance(f"hf:{folder}"), *names)
    marker = fresh(root, "converted")
    (marker / embedded._MARKER).write_bytes(adapter)
    assert embedded._current(marker) in (True, False)


STRATEGY_JSON = {"mapreduce": {"chunk_tokens": 500, "grounding": True}, "standard": {}}
TRAIN_RECIPE = {"data": {"mode": "mapreduce", "window": 4096, "mapreduce": {"chunk_tokens": 500}}}


@FUZZ
@given(
    strategy=st.one_of(st.none(), json_bytes(STRATEGY_JSON)),
    recipe=yaml_bytes(TRAIN_RECIPE),
    name=st.sampled_from(["mapreduce", "standard"]),
)
def test_model_strategy_defaults(root, strategy, recipe, name):
    from chunkwise.strategies.resolve import resolve_options

    folder = fresh(root, "model")
    (folder / "train_info.json").write_text("{}")
    (folder / "recipe.yaml").write_bytes(recipe)
    names = [folder / "recipe.yaml"]
    if strategy is not None:
        (folder / "strategy.json").write_bytes(strategy)
        names = [folder / "strategy.json"]
    refused_or_done(lambda: resolve_options(name, f"hf:{folder}", {}).build(), *names)


@FUZZ
@given(raw=json_bytes({"path": "/x", "stamp": [1, 2, 3, 4, 5], "sha256": "0" * 64}))
def test_digest_cache_entry(root, raw):
    from chunkwise import digests

    folder = fresh(root, "digest")
    target = folder / "weights.bin"
    target.write_bytes(b"weights")
    cache = folder / "cache"
    want = digests.file_sha256(target)
    assert digests.cached_file_sha256(target, cache) == want
    for entry in cache.glob("*.json"):
        entry.write_bytes(raw)
    assert digests.cached_file_sha256(target, cache) == want


@FUZZ
@given(raw=yaml_bytes({"data": {"window": 4096, "mapreduce": {"chunk_tokens": 1024}}}))
def test_default_mr_install(root, raw):
    import torch
    from safetensors.torch import save_file

    from chunkwise.llm import default_mr

    run = fresh(root, "train")
    (run / "adapter_config.json").write_text(json.dumps(ADAPTER_CONFIG))
    save_file({"w": torch.zeros(2)}, str(run / "adapter_model.safetensors"))
    (run / "recipe.yaml").write_bytes(raw)
    refused_or_done(lambda: default_mr.install(run, fresh(root, "dest")), run / "recipe.yaml")


# ------------------------------------------------------------------ strategy caches


def _tree_json() -> dict[str, Any]:
    import numpy as np

    from chunkwise.strategies.trees.nodes import Node, Tree

    nodes = [Node(0, "a leaf", 0, 2), Node(1, "another", 0, 1), Node(2, "summary", 1, 1, (0, 1))]
    tree = Tree(nodes, np.ones((3, 2), dtype=np.float32), [[0, 1], [2]], {"k": 1})
    return json.loads(tree.to_json())


TREE = _tree_json()


@FUZZ
@given(raw=json_bytes(TREE))
def test_tree_cache_file(root, raw):
    from chunkwise.strategies.trees.cache import TreeCache

    folder = fresh(root, "trees")
    (folder / "k.json").write_bytes(raw)
    tree = refused_or_done(lambda: TreeCache(folder).get("k"), folder / "k.json")
    if tree is not None:  # what a cached tree is used for: leaves, layers, embeddings
        assert len(tree.embeddings) == len(tree.nodes)
        tree.leaves_only()
        assert tree.summary_nodes >= 0


# ------------------------------------------------------------------ training runs


@FUZZ
@given(raw=jsonl_bytes([{"step": i, "train/loss": 2.5 - i / 10} for i in range(1, 5)]))
def test_train_metrics_jsonl(root, raw):
    from chunkwise.train.saving import trim_metrics

    path = fresh(root, "metrics") / "metrics.jsonl"
    path.write_bytes(raw)
    refused_or_done(lambda: trim_metrics(path, 2), path)


class _OneProcess:
    """The accelerator of a one-process run, as resume_point uses it."""

    is_main_process = True
    num_processes = 1
    process_index = 0


@FUZZ
@given(raw=json_bytes({"step": 1, "examples_sha256": "abc", "files_sha256": {"a.bin": "0" * 64}}))
@example(raw=b'{"step": 1, "examples_sha256": "abc", "files_sha256": {"\\n": null}}')  # was 2 lines
def test_trainer_state_json(root, raw):
    from chunkwise.train.saving import STATE_FILE, resume_point

    ckpts = fresh(root, "ckpt")
    step = ckpts / "step-00000001"
    step.mkdir()
    (step / "a.bin").write_bytes(b"weights")
    (step / STATE_FILE).write_bytes(raw)
    refused_or_done(lambda: resume_point(_OneProcess(), ckpts, "abc"), step)


TRAIN_FIXTURES = REPO / "tests" / "fixtures" / "train"
LONGALIGN = json.loads((TRAIN_FIXTURES / "longalign.jsonl").read_text().splitlines()[0])
PYRAMID = json.loads((TRAIN_FIXTURES / "pyramid_align.jsonl").read_text().splitlines()[0])


@pytest.fixture(scope="module")
def tokenizer():
    from chunkwise.train.tokenizer import train_bpe

    return train_bpe([(TRAIN_FIXTURES / "pyramid_align.jsonl").read_text()[:20000]], 400)


@pytest.mark.parametrize(
    "recipe, record",
    [
        ("longalign-standard", LONGALIGN),
        ("pyramid_align-standard", PYRAMID),
        ("pyramid_align-mapreduce", PYRAMID),
    ],
)
@FUZZ
@given(data=st.data())
def test_training_records(root, tokenizer, recipe, record, data):
    from chunkwise.train.formats import build_examples
    from chunkwise.train.recipe import load_recipe

    path = fresh(root, "records") / "train.jsonl"
    path.write_bytes(data.draw(jsonl_bytes([record]), label="file"))
    r = load_recipe(
        REPO / "recipes" / "tiny" / f"{recipe}.yaml",
        [f"--data.paths=[{path}]", "--data.max_length=100000", "--batching.max_tokens=100000"],
    )
    refused_or_done(lambda: build_examples(r.data, tokenizer, "chat", [path]), path)


# ------------------------------------------------------------------ demo and synth folders


def _ledger() -> dict[str, Any]:
    from chunkwise.demo import get_size

    sizes = json.loads(json.dumps(get_size("smoke").to_dict()))
    stages = {"documents": {"done": True}}
    return {"size": "smoke", "model": "hf:default", "seed": 0, "sizes": sizes, "stages": stages}


LEDGER = _ledger()


@FUZZ
@given(raw=json_bytes(LEDGER))
def test_demo_ledger(root, raw):
    from chunkwise.demo import Demo, get_size
    from chunkwise.demo import evaluate as demo_evaluate
    from chunkwise.demo.fresh import check_removable

    out = fresh(root, "demo")
    (out / "demo.json").write_bytes(raw)
    demo = Demo(out, get_size("smoke"), echo=lambda line: None)
    refused_or_done(demo.load_state, out)
    (out / "demo.json").write_bytes(raw)
    refused_or_done(lambda: check_removable(out), out)
    refused_or_done(lambda: demo_evaluate.main([str(out), "nosuch"]), out, "no model 'nosuch'")


@FUZZ
@given(
    info=json_bytes({"steps": 4, "seconds": 1.5, "final": {"train/loss": 1.25}}),
    metrics=jsonl_bytes([{"step": i, "train/loss": 2.0 - i / 10} for i in range(1, 4)]),
)
def test_demo_training_summary(root, info, metrics):
    from chunkwise.demo.training import losses_line, read_train_info, training_summary

    out = fresh(root, "train")
    (out / "train_info.json").write_bytes(info)
    (out / "metrics.jsonl").write_bytes(metrics)

    def summary() -> None:
        losses_line(training_summary(out, read_train_info(out / "train_info.json")))

    refused_or_done(summary, out / "train_info.json", out / "metrics.jsonl")


@FUZZ
@given(
    records=jsonl_bytes([{**PYRAMID, "id": f"r{i}"} for i in range(2)]),
    held=jsonl_bytes([{"id": "h0", "context": "A held-out document.", "input": "Q?"}]),
)
def test_demo_split(root, records, held):
    from chunkwise.demo import Demo, get_size
    from chunkwise.demo.errors import DemoError

    out = fresh(root, "demo")
    (out / "synth" / "data").mkdir(parents=True)
    (out / "synth" / "data" / "part-0.jsonl").write_bytes(records)
    (out / "docs").mkdir()
    (out / "docs" / "heldout.jsonl").write_bytes(held)
    demo = Demo(out, get_size("smoke"), echo=lambda line: None)
    names = [out / "synth" / "data", out / "docs" / "heldout.jsonl", out / "synth" / "stats.json"]
    refused_or_done(demo.split, *names, errors=(BadInput, DemoError))  # the stage's own error


@FUZZ
@given(raw=json_bytes({"embedder": "hashing", "seed": 0, "chunk_tokens": 512}))
def test_synth_settings_json(root, raw):
    from chunkwise.synth.settings import check_settings

    path = fresh(root, "synth") / "config.json"
    path.write_bytes(raw)
    want = {"embedder": "hashing", "seed": 0, "chunk_tokens": 512}
    # other settings are refused naming the --out folder they were recorded for
    refused_or_done(lambda: check_settings(path, want), path, path.parent)
    path.write_bytes(raw)
    refused_or_done(lambda: check_settings(path, want, override=True), path)


@FUZZ
@given(raw=jsonl_bytes([{"id": f"d{i}", "text": "A short document."} for i in range(3)]))
def test_synth_source_jsonl(root, raw):
    from chunkwise.synth.sources import iter_source

    path = fresh(root, "docs") / "docs.jsonl"
    path.write_bytes(raw)
    refused_or_done(lambda: list(iter_source(str(path))), path)


@FUZZ
@given(raw=json_bytes({**RESULTS, "timing": {"session_seconds": 12.5}}))
def test_demo_eval_results(root, raw):
    from chunkwise.demo.engines import result_cells

    path = fresh(root, "eval") / "results.json"
    path.write_bytes(raw)
    cells = refused_or_done(lambda: result_cells(path), path)
    for cell in (cells or {}).values():
        float(cell["score"])


LEDGER_ENTRY = {
    "source_id": "d0",
    "document": "A short document about the moon.",
    "status": "done",
    "records": [{"id": "d0-q0", "question": "What is it about?", "answer": "The moon."}],
    "pyramid": {"levels": [["A short document about the moon."]]},
    "stats": {"leaves": 1, "levels": 1, "summary_calls": 0, "questions": {"generated": 1}},
}


@FUZZ
@given(raw=jsonl_bytes([LEDGER_ENTRY, {**LEDGER_ENTRY, "source_id": "d1"}]))
def test_synth_work_ledger(root, raw):
    """A hand-edited line of a synth run's work ledger, read back when the shard's files are
    exported (records, pyramids, stats)."""
    from chunkwise.synth.config import SynthConfig
    from chunkwise.synth.outputs import export

    out = fresh(root, "synth-out")
    ledger = out / "work" / "docs-part-00000-of-00001.jsonl"
    ledger.parent.mkdir(parents=True)
    ledger.write_bytes(raw)
    cfg = SynthConfig(docs="docs.jsonl", out=str(out))
    refused_or_done(lambda: export(cfg), ledger)


@FUZZ
@given(
    raw=json_bytes(
        {
            "documents": {"total": 1, "with_examples": 1, "pyramids_built": 1},
            "chunks_per_document": {
                "pyramid_leaves": {"mean": 1.0, "min": 1, "max": 1, "total": 1},
                "mapreduce_chunks": {"mean": 2.0, "min": 2, "max": 2, "total": 2},
            },
            "llm": {"by_stage": {"summary": {"calls": 1}}},
            "seconds": {"wall": 1.5},
        }
    )
)
def test_synth_shard_stats(root, raw):
    """A damaged ``stats/part-*.json`` of one shard, read when the last shard merges them."""
    from chunkwise.synth.outputs import _merged_stats

    folder = fresh(root, "stats")
    good = folder / "part-00000-of-00002.json"
    good.write_text(
        json.dumps(
            {
                "documents": {"total": 1, "with_examples": 1, "pyramids_built": 1},
                "chunks_per_document": {
                    "pyramid_leaves": {"mean": 1.0, "min": 1, "max": 1, "total": 1},
                    "mapreduce_chunks": {"mean": 2.0, "min": 2, "max": 2, "total": 2},
                },
                "llm": {"by_stage": {"summary": {"calls": 1}}},
                "seconds": {"wall": 1.5},
            }
        )
    )
    bad = folder / "part-00001-of-00002.json"
    bad.write_bytes(raw)
    refused_or_done(lambda: _merged_stats([good, bad]), folder)
