"""bench/mutation_check.py --recheck: only an earlier run's survivors run again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench_loader import load_bench

ROOT = Path(__file__).resolve().parents[2]


def test_recheck_runs_only_the_listed_survivors(tmp_path):
    bench = load_bench("mutation_check")
    source = (ROOT / "src/chunkwise/strategies/protocol.py").read_text(encoding="utf-8")
    mutants = [m for m, _ in bench.mutants_of(source)]
    pick = next(m for m in mutants if m.what == "return ... -> return None")
    same = [m for m in mutants if (m.line, m.what) == (pick.line, pick.what)]
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({
        "survivors": [f"src/chunkwise/strategies/protocol.py:{pick.line}: {pick.what}"]
    }))  # fmt: skip
    assert bench.recheck_sites(earlier) == {("strategies/protocol.py", pick.line, pick.what)}
    out = tmp_path / "again.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench/mutation_check.py"), "--files",
         "strategies/protocol.py", "--tests", "tests/strategies/test_protocol.py",
         "--recheck", str(earlier), "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["mutants"] == len(same) < len(mutants)
    assert res["files"]["strategies/protocol.py"]["mutants"] == len(same)


def test_recheck_of_a_missing_empty_or_malformed_result_says_so(tmp_path):
    def recheck(path) -> str:
        r = subprocess.run(
            [sys.executable, str(ROOT / "bench/mutation_check.py"), "--recheck", str(path)],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
        )  # fmt: skip
        assert r.returncode != 0
        return r.stderr

    assert "--recheck no/such.json: no such file" in recheck("no/such.json")
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert f"--recheck {empty}: not a mutation_check --json result" in recheck(empty)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"survivors": ["src/chunkwise/strategies/mapreduce.py no line"]}))
    assert f"--recheck {bad}: not a mutation_check --json result" in recheck(bad)


def test_the_default_files_and_tests_exist():
    """A moved test file would fail the unmutated baseline (the check refuses to start), and a
    moved source file would be mutated nowhere: both lists must follow the code."""
    bench = load_bench("mutation_check")
    missing = [t for t in bench.DEFAULT_TESTS if not (ROOT / t).is_file()]
    missing += [f for f in bench.DEFAULT_FILES if not (ROOT / "src" / "chunkwise" / f).is_file()]
    assert not missing, missing
