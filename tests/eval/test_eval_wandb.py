"""wandb logging of an eval: metric names, and offline run files (the one test with wandb on)."""

from __future__ import annotations

import json
import os

from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.eval.wandb_log import metrics_of


def test_metric_names_are_stable(tmp_path):
    cfg = EvalConfig(
        model="scripted:passkey",
        tasks=["passkey", "kv_retrieval"],
        data="synthetic:400",
        limit=2,
        output=str(tmp_path / "r"),
    )
    m = metrics_of(run_eval(cfg, progress=False))
    assert m["eval/passkey/score"] == 100.0 and m["eval/kv_retrieval/score"] == 0.0
    assert m["eval/passkey/n"] == 2 and m["eval/average/score"] == 50.0
    assert m["eval/passkey/llm_calls_per_example"] == 1.0
    assert "eval/kv_retrieval/tokens_per_example" in m


def test_disabled_in_tests_by_default(tmp_path):
    assert os.environ["WANDB_MODE"] == "disabled"  # tests/conftest.py
    cfg = EvalConfig(
        model="scripted:passkey",
        data="synthetic:400",
        limit=1,
        wandb=True,
        output=str(tmp_path / "r"),
    )
    run_eval(cfg, progress=False)
    assert not list((tmp_path / "r").rglob("*.wandb"))


def test_offline_by_default_writes_run_files(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    for key in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_DIR"):
        monkeypatch.delenv(key, raising=False)
    out = tmp_path / "run"
    cfg = EvalConfig(
        model="scripted:passkey",
        data="synthetic:400",
        limit=3,
        wandb=True,
        wandb_entity="my-team",
        wandb_tags=["ckpt-16"],
        wandb_step=16,
        output=str(out),
    )
    run_eval(cfg, progress=False)
    assert os.environ["WANDB_MODE"] == "offline"  # never online unless the user sets it
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    files = list(runs[0].glob("run-*.wandb"))
    assert len(files) == 1
    log = files[0].read_bytes()  # the offline run log: config, metrics and summary records
    assert b"scripted:passkey" in log and b"git_hash" in log and b"eval/passkey/score" in log
    assert b"my-team" in log and b"ckpt-16" in log  # entity and tags
    assert b"eval_results" in log and b"results.json" in log  # the artifact
    # logged at --wandb-step 16 (wandb names media files after their step)
    tables = list(runs[0].glob("files/media/table/eval/samples_16_*.table.json"))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    cols = table["columns"]
    assert cols[:7] == ["task", "id", "question", "prediction", "extracted", "reference", "score"]
    assert [row[1] for row in table["data"]] == [0, 1, 2]
    assert all(row[6] == 1.0 and row[3] == row[5] for row in table["data"])
