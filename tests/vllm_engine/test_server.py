"""The ``openai:`` backend against a real ``vllm serve`` on loopback, and one stop-string
contract on the real engines: ``hf:default``, ``vllm:default`` and ``openai:`` -> vLLM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.strategies import get_strategy
from chunkwise.strategies.mapreduce import NO_INFO_STOP

pytestmark = pytest.mark.slow


def openai_spec(served: str, api: str = "completions") -> str:
    return f"{served}?api={api}&tokenizer=hf:default&timeout=120"


@pytest.fixture(scope="module")
def served(vllm_server):
    with load_llm(openai_spec(vllm_server)) as llm:
        yield llm


def test_completions_endpoint_and_stop_contract(served, vllm_llm) -> None:
    reqs = [
        Request("1, 2, 3, 4, 5,", GenerationParams(max_new_tokens=20, stop=(" 8", "zz"))),
        Request("The capital of France is", GenerationParams(max_new_tokens=8, logprobs=True)),
    ]
    remote, local = served.generate(reqs), vllm_llm.generate(reqs)
    assert remote[0].stop_reason == local[0].stop_reason == " 8"
    assert remote[0].text == local[0].text and " 8" not in remote[0].text
    assert remote[1].text == local[1].text and remote[1].stop_reason is None
    assert remote[1].token_logprobs and len(remote[1].token_logprobs) == len(remote[1].tokens)


def test_chat_endpoint(vllm_server) -> None:
    with load_llm(openai_spec(vllm_server, api="chat")) as llm:
        out = llm.generate(
            [Request([{"role": "user", "content": "Count: 1, 2, 3,"}], GenerationParams(8))]
        )[0]
    # a base model under a chat template may well say nothing (see ARCHITECTURE's traps);
    # the endpoint answered with a well-formed completion
    assert out.finish_reason in ("stop", "length") and out.prompt_tokens > 5


def _map_outcomes(llm, document: str, query) -> tuple[list[tuple], dict]:
    # base scaffolds: 40-token map calls cut at the line end (chat prompts on this base model
    # write all 384 map tokens on each of three engines: ~8 minutes of CI)
    ans = get_strategy("mapreduce", prompts="base", chunk_tokens=400).answer(document, query, llm)
    maps = [e for e in ans.trace if e.stage == "map"]
    outcomes = [(e.output["no_information"], NO_INFO_STOP in e.output["raw"]) for e in maps]
    keys = ("chunks", "map_no_information", "early_stops")
    return outcomes, {k: ans.stats.extra[k] for k in keys}


#: a few-shot prompt whose greedy continuation is MapReduce's early-stop marker
FEW_SHOT = (
    "".join(
        f"Text: {t}\nQuestion: What is the pass key?\nAnswer: [NO INFORMATION]\n\n"
        for t in ("The grass is green.", "The sky is blue.", "The sun is yellow.")
    )
    + "Text: Here we go.\nQuestion: What is the pass key?\n"
)


def test_one_stop_contract_on_every_real_engine(served, vllm_llm, embedded_llm) -> None:
    from chunkwise.data.synthetic import generate, passkey_query

    engines = (("hf", embedded_llm), ("vllm", vllm_llm), ("openai->vllm", served))
    params = GenerationParams(max_new_tokens=24, stop=("\n\n", NO_INFO_STOP))
    stops = {name: llm.generate([Request(FEW_SHOT, params)])[0] for name, llm in engines}
    for name, out in stops.items():
        assert out.stop_reason == NO_INFO_STOP and out.finish_reason == "stop", (name, out)
        assert NO_INFO_STOP not in out.text, name
    rec = generate(
        "passkey", length_tokens=2400, n=1, seed=5, count_tokens=embedded_llm.count_tokens
    )[0]
    query = passkey_query(rec)
    results = {name: _map_outcomes(llm, rec["context"], query) for name, llm in engines}
    print("\nmap outcomes per engine:", json.dumps({k: v[1] for k, v in results.items()}))
    stats = {name: r[1] for name, r in results.items()}
    assert stats["vllm"] == stats["openai->vllm"] == stats["hf"], stats
    assert results["vllm"][0] == results["openai->vllm"][0] == results["hf"][0]


def test_eval_mapreduce_through_the_server(vllm_server, tmp_path) -> None:
    out = tmp_path / "eval"
    cli = Path(sys.executable).with_name("chunkwise")
    cmd = [str(cli), "eval", "--model", openai_spec(vllm_server), "--strategy", "mapreduce"]
    cmd += ["--tasks", "passkey", "--data", "synthetic:4096", "--limit", "1", "--output", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    pred = json.loads((out / "predictions" / "passkey.jsonl").read_text().splitlines()[0])
    stats = pred["stats"]
    assert stats["chunks"] > 1 and stats["llm_calls"] == stats["chunks"] + 1, stats  # map + reduce
    results = json.loads((out / "results.json").read_text())
    assert "passkey" in json.dumps(results["results"])
