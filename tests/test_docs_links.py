"""Every relative link in the project's Markdown leads somewhere: the file or folder exists, and
an anchor (`page.md#a-heading`) names a heading of that page, spelled as GitHub spells it.

Pages move (a model card's tables go to a history page when its adapter is replaced) and
headings get reworded; a link left behind fails here, not in a reader's browser. Links are read
with markdown-it (CommonMark), so a link in a code block or code span is not a link."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
MD = MarkdownIt("commonmark").enable("table")


def markdown_files(root: Path) -> list[Path]:
    """The Markdown files git tracks when ``root`` is a checkout (a fresh clone's), else every
    one outside build folders (a test's page tree, which may sit inside some other checkout)."""
    if (root / ".git").exists():
        try:
            out = subprocess.run(
                ["git", "ls-files", "*.md"], cwd=root, capture_output=True, text=True, check=True
            ).stdout
            return [root / p for p in out.split()]
        except (OSError, subprocess.CalledProcessError):
            pass  # no git on this machine: walk the tree instead
    skip = {".venv", ".venv-vllm", "runs", "node_modules", ".git"}
    return [p for p in root.rglob("*.md") if not skip & set(p.relative_to(root).parts)]


def _text(inline) -> str:
    return "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    tokens = MD.parse(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open":
            continue
        base = slug(_text(tokens[i + 1]))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line, href) of every link in a page, code blocks and spans left out."""
    found = []
    for tok in MD.parse(path.read_text(encoding="utf-8")):
        if tok.type != "inline":
            continue
        for child in tok.children or []:
            if child.type == "link_open":
                found.append(((tok.map or [0])[0] + 1, str(child.attrs.get("href", ""))))
    return found


def broken_links(root: Path) -> list[str]:
    problems = []
    cache: dict[Path, set[str]] = {}
    for page in markdown_files(root):
        for line, href in links(page):
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("mailto:"):
                continue  # the web is not checked: the tests run offline
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            where = f"{page.relative_to(root)}:{line}: {href}"
            if not target.exists():
                problems.append(f"{where}: no such file")
            elif parts.fragment and target.suffix == ".md":
                if target not in cache:
                    cache[target] = anchors(target)
                if parts.fragment not in cache[target]:
                    problems.append(f"{where}: no heading '{parts.fragment}' there")
    return problems


def test_every_relative_link_in_the_docs_leads_somewhere():
    assert broken_links(ROOT) == []


@pytest.fixture
def pages(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "card.md").write_text(
        "# Model card: `x`\n\n## InfiniteBench's own format\n\n## Data\n\n## Data\n",
        encoding="utf-8",
    )
    return tmp_path


@pytest.mark.parametrize(
    ("href", "problem"),
    [
        ("docs/card.md", None),
        ("docs/card.md#infinitebenchs-own-format", None),
        ("docs/card.md#model-card-x", None),
        ("docs/card.md#data-1", None),
        ("docs/", None),
        ("https://example.org/missing", None),
        ("docs/gone.md", "no such file"),
        ("docs/card.md#infinitebench-own-format", "no heading 'infinitebench-own-format' there"),
        ("docs/card.md#data-2", "no heading 'data-2' there"),
    ],
)
def test_a_link_is_checked_for_its_file_and_heading(pages, href, problem):
    (pages / "README.md").write_text(f"See [this]({href}).\n\n`[not a link](gone.md)`\n")
    found = broken_links(pages)
    assert found == ([] if problem is None else [f"README.md:1: {href}: {problem}"])


def test_a_link_inside_a_code_block_is_not_checked(pages):
    (pages / "README.md").write_text("```\n[x](nowhere.md)\n```\n\n[y](#nowhere)\n")
    assert broken_links(pages) == ["README.md:5: #nowhere: no heading 'nowhere' there"]
