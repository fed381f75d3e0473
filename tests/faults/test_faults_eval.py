"""Attacks on `chunkwise eval`, `score` and `compare` (issue #15 items 4, 6 and 7): every one
exits 2 with one line naming the input, and no credential from a model spec is ever stored,
sent to wandb or logged."""

from __future__ import annotations

import json
import logging

import pytest
from tests.faults.conftest import BAD_LINES

from chunkwise.errors import LLMRequestError
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm import load_llm, scripted
from chunkwise.redact import redact, redact_obj

SECRET_SPEC = "openai:m@http://alice:hunter2@127.0.0.1:1/v1?api_key=sk-topsecret&retries=0"
SECRETS = ("hunter2", "alice", "sk-topsecret")


def _no_secret(text: str) -> None:
    for s in SECRETS:
        assert s not in text, (s, text[:300])


# --------------------------------------------------------------------------------------------
# item 7: credentials in a base URL


def test_redact_masks_user_info_and_secret_parameters():
    assert redact(SECRET_SPEC) == ("openai:m@http://***@127.0.0.1:1/v1?api_key=***&retries=0")
    assert redact("hf:default?ctx=8192") == "hf:default?ctx=8192"
    assert redact("see https://u:p@h.example/v1?token=abc, then") == (
        "see https://***@h.example/v1?token=***, then"
    )
    assert redact_obj({"a": [SECRET_SPEC], "b": 3}) == {"a": [redact(SECRET_SPEC)], "b": 3}


def test_credentials_never_reach_the_run_folder_or_wandb(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    for key in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_DIR"):
        monkeypatch.delenv(key, raising=False)
    out = tmp_path / "run"
    cfg = EvalConfig(
        model=SECRET_SPEC,
        data="synthetic:400",
        limit=2,
        log_samples=True,
        wandb=True,
        output=str(out),
    )
    res = run_eval(cfg, llm=scripted.SCRIPTS["passkey"](), progress=False)
    _no_secret(json.dumps(res))
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in written)  # the offline wandb run is there too
    for p in written:
        _no_secret(p.read_bytes().decode("utf-8", "replace"))
    pred = json.loads((out / "predictions" / "passkey.jsonl").open().readline())
    assert pred["model"] == redact(SECRET_SPEC) and "***" in pred["model"]
    # resuming compares the masked spec: the same command resumes
    assert run_eval(cfg, llm=scripted.SCRIPTS["passkey"](), progress=False)["timing"]["resumed"]


def test_credentials_are_not_logged_or_raised(caplog):
    # nothing listens on port 1: a real refused connection
    llm = load_llm("openai:m@http://alice:hunter2@127.0.0.1:1/v1?retries=1&backoff=0")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LLMRequestError) as err:
        llm.complete("hello", max_new_tokens=2)
    llm.close()
    _no_secret(str(err.value))
    _no_secret(repr(llm))
    _no_secret("\n".join(r.getMessage() for r in caplog.records))


def test_cli_error_about_a_spec_masks_its_secrets(cli, tmp_path):
    line = cli("eval", f"--model={SECRET_SPEC}", "--data=synthetic:400", f"--output={tmp_path}/r")
    text = line.error_line()
    assert "unknown option(s) api_key" in text and "***" in text
    _no_secret(text)


# --------------------------------------------------------------------------------------------
# item 6: failures after the work, and runs that answer nothing


def test_context_window_that_fits_nothing_exits_2_and_leaves_nothing(cli, tmp_path):
    out = tmp_path / "run"
    args = ("--model=scripted:passkey", "--data=synthetic:400", "--limit=2", f"--output={out}")
    line = cli("eval", *args, "--context-window=50").error_line()
    assert "every one of the 2 examples failed" in line and "nothing was scored" in line
    assert not out.exists()  # no config.yaml to refuse the corrected command
    assert cli("eval", *args).rc == 0


def test_eval_output_under_a_file_is_refused_before_the_model_loads(cli, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")

    def no_model(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("chunkwise.llm.load_llm", no_model)
    line = cli(
        "eval", "--model=scripted:passkey", "--data=synthetic:400", f"--output={tmp_path}/file/run"
    ).error_line()
    assert "is a file" in line


def test_a_model_that_fails_to_load_leaves_no_config(cli, tmp_path):
    out = tmp_path / "run"
    line = cli("eval", "--model=scripted:nosuch", "--data=synthetic:400", f"--output={out}")
    assert "unknown scripted model" in line.error_line()
    assert not (out / "config.yaml").exists()


# --------------------------------------------------------------------------------------------
# item 4: deeply nested JSON in `score` and `eval --data`


@pytest.mark.parametrize("name", ["deep_array", "deep_object"])
def test_score_deep_json_exits_2(cli, tmp_path, name):
    good = json.dumps({"id": 0, "prediction": "1", "ground_truth": "1"}).encode() + b"\n"
    f = tmp_path / "p.jsonl"
    f.write_bytes(good + BAD_LINES[name] + good)
    line = cli("score", "--task=passkey", f"--predictions={f}").error_line()
    assert f"{f}:2" in line and "nested deeper" in line
    res = cli("score", "--task=passkey", f"--predictions={f}", "--skip-bad-lines")
    assert res.rc == 0 and json.loads(res.out)["skipped"] == 1


def test_score_file_of_only_deep_lines_with_skip_exits_2(cli, tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_bytes(BAD_LINES["deep_array"])
    line = cli("score", "--task=passkey", f"--predictions={f}", "--skip-bad-lines").error_line()
    assert "no scorable predictions (1 bad lines skipped)" in line


def test_eval_data_with_deep_json_exits_2_before_the_model(cli, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "passkey.jsonl").write_bytes(BAD_LINES["deep_array"])

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the data was checked")

    monkeypatch.setattr("chunkwise.llm.load_llm", no_model)
    line = cli(
        "eval", "--model=scripted:passkey", f"--data={data}", f"--output={tmp_path / 'r'}"
    ).error_line()
    assert "passkey.jsonl:1" in line and "nested deeper" in line
    assert not (tmp_path / "r").exists()
