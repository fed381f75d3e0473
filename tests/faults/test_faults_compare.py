"""Issue #47 item 13: `chunkwise compare` on results.json files of odd shapes. What compare needs
(an object of task results, each with a numeric score) is refused in one line naming the file
and the field; odd descriptive fields are left out with a note; a score that is not a finite
number is a gap in the table and the chart. Never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkwise import cli
from chunkwise.eval.compare import compare, plot, to_markdown

GOOD = {
    "results": {"passkey": {"alias": "PassKey", "score": 90.0, "n": 10, "extract": "none"}},
    "config": {"model": "hf:default", "strategy": "standard", "scorer": "official"},
}


def run_cli(*args: object) -> tuple[int, str, str]:
    """``chunkwise compare ARGS`` in-process: exit code, stdout, stderr (a traceback escapes)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(cli.COMMANDS, {"compare": "compare"}, clear=True),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        rc = cli.main(["compare", *map(str, args)])
    return rc, out.getvalue(), err.getvalue()


def write_run(root: Path, name: str, data: object) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(data, allow_nan=False))
    return folder


def refused(rc: int, err: str, folder: Path) -> str:
    assert rc == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(folder / "results.json") in lines[0], err
    return lines[0]


# --------------------------------------------------------------------------------------------
# the defects as reported


@pytest.mark.parametrize(
    ("field", "value", "note"),
    [
        ("templates", "x", "field 'templates' is text, not an object: left out"),
        ("config", [], "field 'config' is a list, not an object: left out"),
        ("benchmark", 5, "field 'benchmark' is a number, not an object: left out"),
    ],
)
def test_odd_descriptive_fields_are_left_out_with_a_note(tmp_path, field, value, note):
    a = write_run(tmp_path, "a", {**GOOD, field: value})
    b = write_run(tmp_path, "b", GOOD)
    rc, out, err = run_cli(a, b, "--plot", tmp_path / "c.png", "--json", tmp_path / "c.json")
    assert rc == 0, err
    assert f"- a: {note}" in out
    assert "| passkey | 90.00 | 90.00 | 90.00 |" in out
    assert (tmp_path / "c.png").stat().st_size > 1000
    assert json.loads((tmp_path / "c.json").read_text())["runs"][0]["notes"] == [note]


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity", "1e999"])
def test_non_finite_score_is_a_gap_in_table_and_plot(tmp_path, score):
    a = write_run(
        tmp_path,
        "a",
        {"results": {"passkey": {"score": score}, "kv": {"score": 40}}, "config": {}},
    )
    b = write_run(tmp_path, "b", {"results": {"passkey": {"score": 80}, "kv": {"score": 60}}})
    rc, out, err = run_cli(a, b, "--plot", tmp_path / "c.png")
    assert rc == 0, err
    assert "| passkey | – | 80.00 | 80.00 |" in out
    assert "| **average** | **40.00** | **60.00** | **50.00** |" in out  # over kv only
    assert f"results.passkey.score is {score!r}, not a finite number: a gap" in out
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_plot_draws_non_finite_values_in_a_table_as_gaps(tmp_path):
    """plot() itself: a table built elsewhere with NaN / inf in it still draws."""
    table = compare([write_run(tmp_path, "a", GOOD)])
    table["scores"]["passkey"]["a"] = float("nan")
    table["run_average"]["a"] = float("inf")
    assert plot(table, tmp_path / "x.png").stat().st_size > 1000
    assert "| passkey | nan |" in to_markdown(table)


def test_interval_bars_leave_non_finite_bars_as_gaps(tmp_path):
    from chunkwise.eval.plots import interval_bars

    nan, inf = float("nan"), float("inf")
    series = {"s": [(nan, 0.0, 1.0), (50.0, 40.0, 60.0)], "t": [(inf, 1.0, 2.0), None]}
    png = interval_bars(tmp_path / "bars.png", ["a", "b"], series)
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ([1, 2], "the top level is a list, not an object"),
        ({"config": {}}, "field 'results' is missing"),
        ({"results": [1]}, "field 'results' is a list, not an object of tasks"),
        ({"results": {"passkey": 5}}, "results.passkey is a number, not an object"),
        ({"results": {"passkey": {"n": 3}}}, "results.passkey has no 'score'"),
        ({"results": {"passkey": {"score": "high"}}}, "results.passkey.score is 'high', not a"),
        ({"results": {"passkey": {"score": True}}}, "results.passkey.score is True, not a num"),
        ({"results": {"passkey": {"score": [1]}}}, "results.passkey.score is [1], not a number"),
    ],
)
def test_missing_or_unusable_scores_are_refused_naming_file_and_field(tmp_path, data, why):
    a = write_run(tmp_path, "a", data)
    rc, _, err = run_cli(a)
    assert why in refused(rc, err, a)


# --------------------------------------------------------------------------------------------
# any shape

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
SCORE = (
    st.sampled_from(["nan", "inf", "-inf", "1e999", "50", "x", ""])
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**400)
    | st.floats(allow_nan=False, allow_infinity=False)
    | JSON
)
NAME = st.text(max_size=12)  # "$", "|", newlines and the empty name included


def _task():
    return st.one_of(
        JSON,
        st.fixed_dictionaries(
            {"score": SCORE}, optional={"n": JSON, "alias": JSON | NAME, "extract": JSON}
        ),
    )


RESULTS = st.fixed_dictionaries(
    {"results": st.one_of(JSON, st.dictionaries(NAME, _task(), max_size=4))},
    optional={
        "config": st.one_of(
            JSON,
            st.fixed_dictionaries(
                {}, optional={k: JSON for k in ("model", "strategy", "scorer", "data", "extract")}
            ),
        ),
        "templates": st.one_of(
            JSON,
            st.fixed_dictionaries(
                {},
                optional={
                    "kind": st.just("official") | JSON,
                    "family": JSON,
                    "templates_sha256": JSON,
                    "version": JSON,
                },
            ),
        ),
        "benchmark": st.one_of(JSON, st.fixed_dictionaries({}, optional={"prompt_version": JSON})),
    },
)


def check_any_shape(data: object, with_plot: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        a = write_run(root, "a", data)
        b = write_run(root, "b", GOOD)
        extra = ["--plot", root / "c.png"] if with_plot else []
        rc, out, err = run_cli(a, b, "--json", root / "c.json", *extra)
        if rc == 2:
            refused(rc, err, a)
            return
        assert rc == 0 and out.startswith("| task | a"), err
        table = json.loads((root / "c.json").read_text())
        assert [r["label"] for r in table["runs"]] == ["a", "b"]
        if with_plot:
            assert (root / "c.png").read_bytes()[:4] == b"\x89PNG"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(RESULTS, JSON))
def test_any_results_shape_is_a_table_or_one_line(data):
    check_any_shape(data, with_plot=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RESULTS)
def test_any_results_shape_with_plot_is_a_chart_or_one_line(data):
    check_any_shape(data, with_plot=True)
