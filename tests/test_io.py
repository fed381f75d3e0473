from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkwise.io.atomic as atomic
from chunkwise.errors import BadInput
from chunkwise.io import (
    JsonlAppender,
    atomic_write_json,
    atomic_write_text,
    pending,
    read_jsonl,
)


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# ---------------------------------------------------------------- atomic writes


def test_atomic_write_creates_parents_and_replaces(tmp_path: Path) -> None:
    p = tmp_path / "a" / "b" / "results.json"
    atomic_write_json(p, {"x": 1, "ü": "ß"})
    assert json.loads(p.read_text(encoding="utf-8")) == {"x": 1, "ü": "ß"}
    assert p.read_text(encoding="utf-8").endswith("\n")
    atomic_write_text(p, "new")
    assert p.read_text() == "new"
    assert leftovers(p.parent, {"results.json"}) == []


def test_atomic_write_gives_ordinary_permissions(tmp_path: Path) -> None:
    p = tmp_path / "f.txt"
    atomic_write_text(p, "x")
    mode = stat.S_IMODE(p.stat().st_mode)
    assert mode == 0o666 & ~atomic._UMASK  # not mkstemp's 0600
    os.chmod(p, 0o640)
    atomic_write_text(p, "y")
    assert stat.S_IMODE(p.stat().st_mode) == 0o640  # an existing file keeps its mode


def test_failure_before_replace_keeps_old_content(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "results.json"
    atomic_write_json(p, {"old": True})
    before = p.read_bytes()

    def failing_fsync(fd: int) -> None:
        raise OSError("simulated crash after a partial write")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="simulated crash"):
        atomic_write_json(p, {"new": "x" * 100_000})
    assert p.read_bytes() == before
    assert leftovers(tmp_path, {"results.json"}) == []  # the temp file is cleaned up


def test_serialisation_failure_keeps_old_content(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "results.json"
    atomic_write_json(p, [1, 2, 3])
    before = p.read_bytes()
    with pytest.raises(TypeError):
        atomic_write_json(p, {"bad": {1, 2}})  # a set is not JSON
    assert p.read_bytes() == before

    def failing_dumps(*a, **k):
        raise RuntimeError("mid-write")

    monkeypatch.setattr(json, "dumps", failing_dumps)
    with pytest.raises(RuntimeError, match="mid-write"):
        atomic_write_json(p, {"new": 1})
    assert p.read_bytes() == before
    assert leftovers(tmp_path, {"results.json"}) == []


def test_replace_failure_keeps_old_content(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "out.txt"
    atomic_write_text(p, "old")

    def failing_replace(src, dst):
        raise OSError("no space left")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="no space"):
        atomic_write_text(p, "new")
    assert p.read_text() == "old"
    assert leftovers(tmp_path, {"out.txt"}) == []


# ---------------------------------------------------------------- read_jsonl


def test_read_jsonl_numbers_lines_and_skips_blanks(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"id": 1}\n\n   \n{"id": 2}\n{"id": 3}', encoding="utf-8")
    assert list(read_jsonl(p)) == [(1, {"id": 1}), (4, {"id": 2}), (5, {"id": 3})]


def test_read_jsonl_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "preds.jsonl"
    p.write_text('{"id": 1}\n{"id": 2\n{"id": 3}\n', encoding="utf-8")
    it = read_jsonl(p)
    assert next(it) == (1, {"id": 1})
    with pytest.raises(BadInput) as e:
        next(it)
    msg = str(e.value)
    assert f"{p}:2:" in msg and "at column 9" in msg and "\n" not in msg
    assert "skip_bad_lines" not in msg  # a Python argument means nothing on the command line
    with pytest.raises(BadInput, match="pass --skip-bad-lines to skip it"):
        list(read_jsonl(p, skip_flag="--skip-bad-lines"))


def test_read_jsonl_refuses_non_objects_and_bad_utf8(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"x\.jsonl:1: a JSON list, not an object"):
        list(read_jsonl(p))
    p.write_bytes(b'{"id": 1}\n{"id": "\xff"}\n')
    with pytest.raises(BadInput, match=r"x\.jsonl:2: not valid JSON"):
        list(read_jsonl(p))


def test_read_jsonl_skip_bad_lines(tmp_path: Path, caplog) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"id": 1}\nnot json\n7\n{"id": 2}\n{"id": 3, "trunc', encoding="utf-8")
    assert [r["id"] for _, r in read_jsonl(p, skip_bad_lines=True)] == [1, 2]
    assert "x.jsonl:2" in caplog.text and "x.jsonl:5" in caplog.text


def test_read_jsonl_missing_and_directory_fail_at_call(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not found"):
        read_jsonl(tmp_path / "nope.jsonl")  # no next(): the call itself raises
    with pytest.raises(BadInput, match="directory"):
        read_jsonl(tmp_path)


def test_read_jsonl_tolerates_bom(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"id": 1}\n')
    assert list(read_jsonl(p)) == [(1, {"id": 1})]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(), kids, max_size=3),
    max_leaves=8,
)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    payloads=st.lists(
        st.dictionaries(st.text(), json_values, max_size=4).filter(lambda d: "id" not in d),
        max_size=8,
    ),
)
def test_jsonl_round_trip(tmp_path: Path, payloads: list[dict]) -> None:
    p = tmp_path / "rt.jsonl"
    p.unlink(missing_ok=True)
    records = [{"id": f"r{i}", **d} for i, d in enumerate(payloads)]
    with JsonlAppender(p) as out:
        for r in records:
            out.write(r)
    got = list(read_jsonl(p))
    assert [r for _, r in got] == records
    assert [n for n, _ in got] == list(range(1, len(records) + 1))  # one line per record
    with JsonlAppender(p) as again:
        assert again.done == {r["id"] for r in records}


# ---------------------------------------------------------------- JsonlAppender


def test_appender_writes_flushes_and_reports_done(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "out.jsonl"
    with JsonlAppender(p) as out:
        assert out.done == set()
        out.write({"id": "a", "v": 1})
        # visible to another reader before close (flushed), one line per record
        assert p.read_text(encoding="utf-8") == '{"id":"a","v":1}\n'
        out.write({"id": 2, "text": "line1\nline2\u2028"})
        assert out.done == {"a", 2} and "a" in out and len(out) == 2
    assert [r["id"] for _, r in read_jsonl(p)] == ["a", 2]


def test_appender_fsyncs_every_write(tmp_path: Path, monkeypatch) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    with JsonlAppender(tmp_path / "o.jsonl") as out:
        n0 = len(calls)
        out.write({"id": 1})
        out.write({"id": 2})
        assert len(calls) - n0 == 2


def test_duplicates_refused_in_session_and_after_reopen(tmp_path: Path) -> None:
    p = tmp_path / "o.jsonl"
    with JsonlAppender(p) as out:
        out.write({"id": "x"})
        with pytest.raises(ValueError, match="already written"):
            out.write({"id": "x", "other": 1})
    with JsonlAppender(p) as out:
        with pytest.raises(ValueError, match="'x' was already written"):
            out.write({"id": "x"})
        out.write({"id": "y"})
    assert p.read_text().count("\n") == 2


def test_custom_key_and_missing_key(tmp_path: Path) -> None:
    with JsonlAppender(tmp_path / "o.jsonl", key="uid") as out:
        out.write({"uid": 5})
        with pytest.raises(ValueError, match="no 'uid' field"):
            out.write({"id": 5})
        with pytest.raises(ValueError, match="string or number"):
            out.write({"uid": [1]})
        assert out.done == {5}


def test_partial_last_line_is_truncated_on_reopen(tmp_path: Path) -> None:
    p = tmp_path / "o.jsonl"
    with JsonlAppender(p) as out:
        out.write({"id": 1, "answer": "a"})
        out.write({"id": 2, "answer": "b"})
    good = p.read_bytes()
    # a crash in the middle of writing record 3
    line3 = json.dumps({"id": 3, "answer": "c" * 50}).encode()
    p.write_bytes(good + line3[: len(line3) // 2])
    with JsonlAppender(p) as out:
        assert out.recovered_partial_line
        assert out.done == {1, 2}
        assert p.read_bytes() == good  # truncated back to the last complete line
        out.write({"id": 3, "answer": "c"})
    assert [r["id"] for _, r in read_jsonl(p)] == [1, 2, 3]


def test_partial_multibyte_last_line_is_truncated(tmp_path: Path) -> None:
    p = tmp_path / "o.jsonl"
    p.write_bytes(b'{"id": 1}\n' + '{"id": 2, "t": "日本'.encode()[:-1])
    with JsonlAppender(p) as out:
        assert out.done == {1}
    assert p.read_bytes() == b'{"id": 1}\n'


def test_complete_last_record_without_newline_is_kept(tmp_path: Path) -> None:
    p = tmp_path / "o.jsonl"
    p.write_bytes(b'{"id": 1}\n{"id": 2}')
    with JsonlAppender(p) as out:
        assert out.done == {1, 2} and not out.recovered_partial_line
        out.write({"id": 3})
    assert [r["id"] for _, r in read_jsonl(p)] == [1, 2, 3]


def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path: Path) -> None:
    p = tmp_path / "o.jsonl"
    p.write_text('{"id": 1}\n{oops\n{"id": 3}\n')
    with pytest.raises(BadInput, match=r"o\.jsonl:2: not valid JSON"):
        JsonlAppender(p)
    assert p.read_text() == '{"id": 1}\n{oops\n{"id": 3}\n'  # nothing destroyed
    p.write_text('{"id": 1}\n{"name": "no id"}\n')
    with pytest.raises(BadInput, match=r"o\.jsonl:2: record has no usable 'id'"):
        JsonlAppender(p)


def test_second_writer_on_the_same_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "o.jsonl"
    with JsonlAppender(p), pytest.raises(BadInput, match="already open"):
        JsonlAppender(p)
    with JsonlAppender(p) as out:  # released on close
        out.write({"id": 1})


def test_write_after_close_and_directory_path(tmp_path: Path) -> None:
    out = JsonlAppender(tmp_path / "o.jsonl")
    out.close()
    out.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        out.write({"id": 1})
    with pytest.raises(BadInput, match="directory"):
        JsonlAppender(tmp_path)


def test_unserialisable_record_writes_nothing(tmp_path: Path) -> None:
    p = tmp_path / "o.jsonl"
    with JsonlAppender(p) as out:
        with pytest.raises(TypeError):
            out.write({"id": 1, "bad": object()})
        assert out.done == set()
        out.write({"id": 1})
    assert p.read_text() == '{"id":1}\n'


def test_pending_and_resume_flow(tmp_path: Path) -> None:
    p = tmp_path / "preds.jsonl"
    records = [{"id": f"q{i}", "x": i} for i in range(10)]

    def run(stop_after: int | None) -> int:
        done = 0
        with JsonlAppender(p) as out:
            for r in pending(records, out):
                if stop_after is not None and done == stop_after:
                    return done  # "killed"
                out.write({"id": r["id"], "prediction": r["x"] * 2})
                done += 1
        return done

    assert run(stop_after=4) == 4
    assert run(stop_after=None) == 6  # only the rest
    assert run(stop_after=None) == 0  # nothing left
    got = [r for _, r in read_jsonl(p)]
    assert sorted(r["id"] for r in got) == sorted(r["id"] for r in records)
    assert len(got) == len({r["id"] for r in got})


def test_pending_with_plain_sets_objects_and_missing_keys() -> None:
    class Ex:
        def __init__(self, id: str):
            self.id = id

    assert [e.id for e in pending([Ex("a"), Ex("b")], {"a"})] == ["b"]
    assert list(pending([{"k": 1}, {"k": 2}], [2], key="k")) == [{"k": 1}]
    with pytest.raises(BadInput, match=r"record #1 has no usable 'id'"):
        list(pending([{"id": 1}, {"x": 2}], set()))


def test_survives_sigkill_mid_run(tmp_path: Path) -> None:
    """A real kill: a child appends forever; we SIGKILL it, reopen and continue."""
    p = tmp_path / "o.jsonl"
    child = textwrap.dedent(
        f"""
        from chunkwise.io import JsonlAppender
        with JsonlAppender({str(p)!r}) as out:
            i = 0
            while True:
                out.write({{"id": i, "pad": "x" * 3000}})
                i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if p.exists() and p.stat().st_size > 50_000:
                break
            time.sleep(0.02)
        else:
            pytest.fail("child never wrote")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    with JsonlAppender(p) as out:
        n = len(out.done)
        assert n >= 15 and out.done == set(range(n))  # a prefix of ids, none lost mid-file
        out.write({"id": n})
    ids = [r["id"] for _, r in read_jsonl(p)]
    assert ids == list(range(n + 1))
