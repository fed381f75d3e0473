"""`chunkwise demo`'s evaluation on the real vLLM engine: the process the demo starts in
.venv-vllm (``python -m chunkwise.demo.evaluate OUT LABEL``) reads the demo's ledger, turns the
hf specs into vllm ones and scores the held-out documents."""

from __future__ import annotations

import json

import pytest

from chunkwise.demo import Demo, get_size
from chunkwise.demo.evaluate import main
from chunkwise.errors import BadInput
from chunkwise.synth.calls import Delegate


class Shared(Delegate):
    """The session's engine, generating, and left open for the other tests."""

    def _generate(self, requests):
        return self.inner.generate(requests)

    def close(self) -> None:
        pass


def test_demo_evaluates_the_base_model_on_vllm(vllm_llm, tmp_path, monkeypatch) -> None:
    import chunkwise.llm as llm_pkg

    out = tmp_path / "demo"
    size = get_size("smoke")
    demo = Demo(out, size, engine="vllm")
    demo.load_state()
    asked = []

    def load(spec, **kw):
        asked.append(spec)
        return Shared(vllm_llm)

    monkeypatch.setattr(llm_pkg, "load_llm", load)
    assert main([str(out), "base"]) == 0
    assert asked == ["vllm:default"]
    for decoding in ("standard", "mapreduce"):
        res = json.loads((out / "eval" / "base" / decoding / "results.json").read_text())
        assert res["config"]["model"] == "vllm:default"
        assert res["config"]["benchmark"] == "generated"
        assert set(res["results"]) == set(size.eval_tasks)
        assert all(r["n"] == size.eval_n and r["errors"] == 0 for r in res["results"].values())
    assert main([str(out), "base"]) == 0 and asked == ["vllm:default"]  # finished: not reloaded
    with pytest.raises(BadInput, match="no model 'nobody'"):
        main([str(out), "nobody"])
