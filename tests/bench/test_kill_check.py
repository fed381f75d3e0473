"""bench/kill_check.py: kill -9 at random points, rerun, compare with an uninterrupted run.

One short real run (2 kills each on eval and the oracle synth), and the comparisons on made-up
folders: each kind of damage (a lost, duplicated, torn or changed record, a missing final file,
a wrong step count) must be reported, so a harness that always said "ok" fails here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench_loader import load_bench

kc = load_bench("kill_check")


def test_two_kills_on_eval_and_the_oracle_synth_leave_complete_files(tmp_path, capsys):
    out = tmp_path / "kill.json"
    rc = kc.main(["--kills", "2", "--targets", "eval,synth-oracle", "--json", str(out)])
    printed = capsys.readouterr().out.strip().splitlines()
    result = json.loads(out.read_text())
    assert json.loads(printed[-1]) == result  # the JSON is the last line
    assert printed[0].split()[:3] == ["target", "trials", "kills"]
    assert rc == 0, result
    assert [t["target"] for t in result["targets"]] == ["eval", "synth-oracle"]
    for t in result["targets"]:
        assert t["ok"] and t["problems"] == [] and t["kills"] >= 2
        assert t["reruns"] == t["kills"] and t["ok_trials"] == t["trials"] >= 1
        assert t["reference_seconds"] > 0


# -- the comparisons report every kind of damage -------------------------------------------------
def _write_jsonl(path: Path, recs: list[dict], tail: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in recs) + tail)


def _eval_folder(root: Path, recs: list[dict], *, results: bool = True, tail: bytes = b"") -> Path:
    _write_jsonl(root / "predictions" / "passkey.jsonl", recs, tail)
    if results:
        score = {"passkey": {"score": 100.0, "n": 3}}
        (root / "results.json").write_text(json.dumps({"results": score}))
    return root


PREDS = [{"id": i, "prediction": str(i), "ground_truth": str(i)} for i in range(3)]


def test_eval_comparison_finds_each_kind_of_damage(tmp_path):
    ref = _eval_folder(tmp_path / "ref", PREDS)
    assert kc._eval_compare(ref, ref, {}) == []
    cases = {
        "duplicated ids ['1']": [PREDS[0], PREDS[1], PREDS[1], PREDS[2]],
        "lost ids ['2']": PREDS[:2],
        "1 differ from the reference": [PREDS[0], {**PREDS[1], "prediction": "x"}, PREDS[2]],
    }
    for want, recs in cases.items():
        got = kc._eval_compare(_eval_folder(tmp_path / want[:4], recs), ref, {})
        assert any(want in p for p in got), (want, got)
    torn = _eval_folder(tmp_path / "torn", PREDS, tail=b'{"id": 3, "predic')
    assert any("last line unfinished" in p for p in kc._eval_compare(torn, ref, {}))
    assert any(":4 does not parse" in p for p in kc._eval_compare(torn, ref, {}))
    no_results = _eval_folder(tmp_path / "nores", PREDS, results=False)
    assert kc._eval_compare(no_results, ref, {}) == ["results.json is missing"]


def test_oracle_comparison_compares_whole_records(tmp_path):
    recs = [{"id": f"d{i}", "answer": i} for i in range(3)]
    for name, rs in (("ref", recs), ("out", [recs[0], {"id": "d1", "answer": 9}, recs[2]])):
        _write_jsonl(tmp_path / name / "data" / "oracle.jsonl", rs)
        (tmp_path / name / "stats.json").write_text("{}")
    got = kc._oracle_compare(tmp_path / "out", tmp_path / "ref", {})
    assert got == ["records: 1 differ from the reference, e.g. ['d1']"]
    (tmp_path / "out" / "stats.json").unlink()
    assert "stats.json is missing" in kc._oracle_compare(tmp_path / "out", tmp_path / "ref", {})


def test_train_comparison_checks_the_final_step_and_each_metric_step_once(tmp_path):
    steps = kc.TRAIN_STEPS

    def folder(name: str, metric_steps: list[int], state_step: int) -> Path:
        root = tmp_path / name
        ckpt = root / "checkpoints" / f"step-{steps:08d}"
        ckpt.mkdir(parents=True)
        (ckpt / "trainer_state.json").write_text(
            json.dumps({"step": state_step, "total_steps": steps})
        )
        _write_jsonl(root / "metrics.jsonl", [{"step": s, "train/loss": 1.0} for s in metric_steps])
        (root / "train_info.json").write_text("{}")
        return root

    every = list(range(1, steps + 1))
    ref = folder("ref", every, steps)
    facts: dict = {}  # not known to be deterministic: weights are not compared
    assert kc._train_compare(ref, ref, facts) == []
    got = kc._train_compare(folder("dup", [*every[:3], 3, *every[3:]], steps), ref, facts)
    assert got == ["metrics steps: duplicated ids ['3']"]
    got = kc._train_compare(folder("short", every, steps - 1), ref, facts)
    assert got and got[0].startswith(f"trainer_state: step {steps - 1}")
    shutil.rmtree(ref / "checkpoints")
    assert kc._train_compare(ref, ref, facts)[0].startswith("no final checkpoint")


def test_a_rerun_that_fails_ends_its_trial_as_a_problem(tmp_path):
    fails = kc.Target(
        "fails",
        lambda inputs, out: [sys.executable, "-c", "raise SystemExit('boom: error: refused')"],
        lambda out: 0,
        lambda out, ref, facts: [],
    )
    rng = kc.random.Random(0)
    got = kc.trial(fails, tmp_path, tmp_path, tmp_path / "t", rng, 30.0, max_kills=1)
    assert got.kills == 0  # it exited before its kill
    assert got.problems == ["a rerun after 0 kill(s) exited 1: boom: error: refused"]


def test_kills_land_and_each_rerun_continues_the_same_folder(tmp_path):
    # a "run" that appends one line per start and then hangs until killed, except the 3rd start
    script = (
        "import sys, pathlib, time; p = pathlib.Path(sys.argv[1]); p.mkdir(exist_ok=True); "
        "f = p / 'starts'; n = len(f.read_text()) if f.exists() else 0; "
        "f.write_text('x' * (n + 1)); "
        "n < 2 and time.sleep(600)"
    )
    hangs = kc.Target(
        "hangs",
        lambda inputs, out: [sys.executable, "-c", script, str(out)],
        lambda out: len((out / "starts").read_text()) if (out / "starts").exists() else 0,
        lambda out, ref, facts: [f"starts={(out / 'starts').read_text()}"],
    )
    rng = kc.random.Random(0)
    got = kc.trial(hangs, tmp_path, tmp_path, tmp_path / "t", rng, 1.0, max_kills=5)
    assert got.kills >= 2 and got.kills_on_output >= 2  # (a kill before a start wrote: no output)
    assert got.problems == ["starts=xxx"]  # killed twice, the third run finished


def test_runs_execute_the_copy_of_the_code_taken_at_the_start(tmp_path, monkeypatch):
    code = kc.snapshot(tmp_path)
    assert (code / "src" / "chunkwise" / "cli.py").is_file()
    assert (code / "recipes" / "tiny" / "pyramid_align-standard.yaml").is_file()
    monkeypatch.setattr(kc, "CODE", code)
    where = subprocess.run(
        [sys.executable, "-c", "import chunkwise; print(chunkwise.__file__)"],
        env=kc.child_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where) == code / "src" / "chunkwise" / "__init__.py"


def test_a_torn_tail_is_part_of_a_line_without_its_newline(tmp_path):
    f = tmp_path / "a.jsonl"
    assert not kc.tear([f], kc.random.Random(0))  # nothing written yet: nothing to tear
    _write_jsonl(f, PREDS)
    whole = f.read_bytes()
    assert kc.tear([f], kc.random.Random(0))
    torn = f.read_bytes()[len(whole) :]
    assert torn and b"\n" not in torn and json.dumps(PREDS[-1]).encode().startswith(torn)
    assert not kc.tear([f], kc.random.Random(0))  # already torn: a kill leaves one at most


@pytest.mark.parametrize(
    "argv", [["--targets", "nope"], ["--kills", "0"], ["--tear", "2"], ["--targets", ","]]
)
def test_bad_arguments_are_refused(argv):
    with pytest.raises(SystemExit) as e:
        kc.parse_args(argv)
    assert e.value.code == 2
