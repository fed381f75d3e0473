"""bench/docs_numbers.py: the measured tables in the docs are what docs/results/ renders, a number
typed over a rendered one is caught, and a block that cannot be rendered is one error naming its
file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench_loader import load_bench

ROOT = Path(__file__).resolve().parents[1]
dn = load_bench("docs_numbers")

BLOCK = """# A page

<!-- numbers: docs/results/cal.json table=mr_trained -->
<!-- /numbers -->

Text after the block.
"""


def test_the_committed_docs_are_what_their_results_render():
    assert dn.check(ROOT) == []


def test_every_results_file_is_shown_and_says_where_it_came_from():
    shown = {
        b.results
        for doc in dn.doc_files(ROOT)
        for b in dn.find_blocks(doc, doc.read_text(encoding="utf-8").split("\n"), ROOT)
    }
    published = {str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "results").glob("*.json")}
    assert published and published == shown
    for name in published:
        source = json.loads((ROOT / name).read_text(encoding="utf-8"))["source"]
        assert all(source.get(k) for k in dn.SOURCE_KEYS), name


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A checkout with one marked block in README.md over a copy of a published result."""
    (tmp_path / "docs" / "results").mkdir(parents=True)
    shutil.copy(
        ROOT / "docs" / "results" / "default-mr-calibration-4k.json",
        tmp_path / "docs" / "results" / "cal.json",
    )
    (tmp_path / "README.md").write_text(BLOCK, encoding="utf-8")
    assert dn.write(tmp_path) == ["README.md"]
    return tmp_path


def test_rendering_fills_the_block_and_a_second_run_changes_nothing(tree):
    text = (tree / "README.md").read_text(encoding="utf-8")
    assert "| conflicting | 100 [100, 100] | 94 [88, 100] | 82 [70, 92] |" in text
    assert (
        "| conflicting_cal_minus_nocal | mr/mapreduce - mr/mapreduce-nocal | 50 | +6 [+0, +12] |"
        in text
    )
    assert text.startswith("# A page\n\n<!-- numbers:") and text.endswith(
        "\nText after the block.\n"
    )
    assert dn.check(tree) == [] and dn.write(tree) == []


def test_a_number_typed_over_a_rendered_one_fails_the_check(tree, capsys):
    readme = tree / "README.md"
    readme.write_text(readme.read_text().replace("94 [88, 100]", "95 [88, 100]"))
    stale = dn.check(tree)
    assert len(stale) == 1
    assert stale[0].startswith("README.md:3: differs from docs/results/cal.json (table=mr_trained)")
    assert "95 [88, 100]" in stale[0] and "94 [88, 100]" in stale[0]
    assert dn.main(["--check", "--root", str(tree)]) == 1
    assert "README.md:3:" in capsys.readouterr().out
    assert dn.write(tree) == ["README.md"] and dn.check(tree) == []  # rendering puts it back


def test_a_changed_json_fails_the_check_until_rendered(tree):
    path = tree / "docs" / "results" / "cal.json"
    data = json.loads(path.read_text())
    data["arms"]["mr/mapreduce-nocal"]["families"]["conflicting"]["accuracy"] = 96.0
    path.write_text(json.dumps(data))
    assert [s.split(":")[:2] for s in dn.check(tree)] == [["README.md", "3"]]
    dn.write(tree)
    assert "| 96 [88, 100] |" in (tree / "README.md").read_text() and dn.check(tree) == []


def _page(tree: Path, text: str) -> None:
    (tree / "docs" / "page.md").write_text(text, encoding="utf-8")


def test_a_missing_results_file_is_one_error_naming_file_and_line(tree, capsys):
    _page(
        tree, "x\n\n<!-- numbers: docs/results/gone.json table=mr_trained -->\n<!-- /numbers -->\n"
    )
    with pytest.raises(dn.NumbersError) as e:
        dn.check(tree)
    assert str(e.value) == "docs/page.md:3: docs/results/gone.json: no such file"
    assert dn.main(["--check", "--root", str(tree)]) == 2
    err = capsys.readouterr().err
    assert err == "docs_numbers: docs/page.md:3: docs/results/gone.json: no such file\n"


def test_a_marker_without_its_end_is_one_error_naming_file_and_line(tree):
    _page(tree, "x\n<!-- numbers: docs/results/cal.json table=mr_trained -->\n| 1 |\n")
    with pytest.raises(
        dn.NumbersError, match=r"^docs/page\.md:2: .*has no <!-- /numbers --> below"
    ):
        dn.check(tree)
    _page(tree, "x\n<!-- /numbers -->\n")
    with pytest.raises(dn.NumbersError, match=r"^docs/page\.md:2: <!-- /numbers --> without"):
        dn.write(tree)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("docs/results/cal.json table=nope", "table=nope: no bench/nope.py"),
        ("docs/results/cal.json table=mr_trained.nope", "has no function nope"),
        ("docs/results/cal.json", "takes one option, table=NAME"),
        ("docs/results/cal.json table=orderings", "table=orderings cannot render"),
    ],
)
def test_a_block_that_cannot_render_names_its_line(tree, marker, message):
    _page(tree, f"<!-- numbers: {marker} -->\n<!-- /numbers -->\n")
    with pytest.raises(dn.NumbersError, match=r"^docs/page\.md:1: ") as e:
        dn.check(tree)
    assert message in str(e.value)


def test_a_results_file_without_its_source_is_refused(tree):
    path = tree / "docs" / "results" / "cal.json"
    data = json.loads(path.read_text())
    del data["source"]["commit"]
    path.write_text(json.dumps(data))
    with pytest.raises(dn.NumbersError, match=r"^README\.md:3: .*source block lacks commit"):
        dn.check(tree)


def test_markers_in_a_fenced_example_are_left_alone(tree):
    _page(tree, "```\n<!-- numbers: docs/results/gone.json table=nope -->\n```\n")
    assert dn.check(tree) == []


def test_publish_puts_a_source_block_first(tmp_path):
    bench_out = tmp_path / "results.json"
    bench_out.write_text(json.dumps({"n_per_cell": 2, "arms": {}}))
    dest = tmp_path / "docs" / "results" / "x.json"
    rc = dn.main(["--publish", str(bench_out), str(dest), "--command", "bench/x.py --n 2"])
    assert rc == 0
    data = json.loads(dest.read_text())
    assert list(data) == ["source", "n_per_cell", "arms"]
    assert data["source"]["command"] == "bench/x.py --n 2"
    assert all(data["source"][k] for k in dn.SOURCE_KEYS)
