"""``vllm:default`` in-process on CPU: the batch contract, stop strings, tokens, parity with HF."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.parity import PARITY_PROMPTS

pytestmark = pytest.mark.slow


def test_stop_string_contract_and_batch(vllm_llm) -> None:
    outs = vllm_llm.generate(
        [
            Request("1, 2, 3, 4, 5,", GenerationParams(max_new_tokens=20, stop=(" 8", "zz"))),
            Request("The capital of France is", GenerationParams(max_new_tokens=8, logprobs=True)),
            Request("1, 2, 3, 4, 5,", GenerationParams(max_new_tokens=3)),
        ]
    )
    stopped, lp, short = outs
    assert stopped.stop_reason == " 8" and stopped.finish_reason == "stop"
    assert " 8" not in stopped.text and stopped.text.startswith(" 6, 7,")
    assert lp.stop_reason is None and lp.token_logprobs and len(lp.tokens) == len(lp.token_logprobs)
    assert "".join(lp.tokens) == lp.text and lp.completion_tokens == len(lp.token_logprobs)
    assert short.finish_reason == "length" and short.completion_tokens == 3
    assert vllm_llm.context_window == 8192 and vllm_llm.chat is False
    assert vllm_llm.count_tokens("hello world") == 2
    text = "Long documents, short models."
    assert "".join(text[s:e] for s, e in vllm_llm.token_offsets(text)) == text


def test_greedy_parity_with_hf(vllm_llm, embedded_llm, record_property) -> None:
    params = GenerationParams(max_new_tokens=12)
    reqs = [Request(p, params) for p in PARITY_PROMPTS]
    ours = [o.text for o in vllm_llm.generate(reqs)]
    theirs = [o.text for o in embedded_llm.generate(reqs)]
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    diffs = [(p, a, b) for p, a, b in zip(PARITY_PROMPTS, ours, theirs, strict=True) if a != b]
    record_property("parity", f"{same}/{len(reqs)}")
    print(f"\ngreedy parity vllm:default vs hf:default: {same}/{len(reqs)} identical; {diffs}")
    assert same >= 0.9 * len(reqs), diffs


def test_same_passkey_answer_as_hf(vllm_llm, embedded_llm) -> None:
    from chunkwise.data.synthetic import generate, passkey_query
    from chunkwise.strategies import get_strategy

    records = generate(
        "passkey", length_tokens=3000, n=1, seed=3, count_tokens=embedded_llm.count_tokens
    )
    for rec in records:
        answers = [
            get_strategy("standard").answer(rec["context"], passkey_query(rec), llm).text
            for llm in (vllm_llm, embedded_llm)
        ]
        assert rec["answer"][0] in answers[0] and answers[0] == answers[1], answers


def test_training_folder_with_lora_in_chunkwise_eval(save_random_lora, tmp_path) -> None:
    """``--model vllm:RUN_DIR`` on a LoRA training output runs the adapter through vLLM's LoRA
    support: a random adapter wrecks the base model's passkey answer (which the test above
    shows it finds), so an ignored adapter fails here."""
    from chunkwise.llm.embedded import converted_dir

    run = save_random_lora(converted_dir(), tmp_path / "run")
    out = tmp_path / "eval"
    cli = Path(sys.executable).with_name("chunkwise")
    cmd = [str(cli), "eval", "--model", f"vllm:{run}", "--strategy", "standard"]
    cmd += ["--tasks", "passkey", "--data", "synthetic:1500", "--limit", "1", "--output", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    pred = json.loads((out / "predictions" / "passkey.jsonl").read_text().splitlines()[0])
    truth = (
        pred["ground_truth"] if isinstance(pred["ground_truth"], list) else [pred["ground_truth"]]
    )
    assert truth and not any(str(t) in str(pred["prediction"]) for t in truth), pred
    assert f"vllm:{run}" in (out / "results.json").read_text()


def test_adapter_with_trained_token_rows_is_merged_and_matches_hf(embedded_llm, tmp_path) -> None:
    """An adapter that trained an embedding row (``model.lora.trainable_tokens``) runs merged on
    vLLM: the row that gives the base model's greedy next token is zeroed, so the base answer
    can no longer come out. vLLM's LoRA would drop the row and answer like the base model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from chunkwise.llm.embedded import converted_dir

    prompt = "The capital of France is"
    req = [Request(prompt, GenerationParams(max_new_tokens=6, temperature=0.0))]
    base_text = embedded_llm.generate(req)[0].text
    first = embedded_llm.encode(base_text)[0]
    torch.manual_seed(0)  # the same adapter every run: one merged folder in the cache
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(converted_dir(), dtype=torch.float32),
        LoraConfig(r=4, target_modules=["q_proj"], trainable_token_indices=[first]),
    )
    params = dict(model.named_parameters())
    row = next(p for n, p in params.items() if n.endswith("token_adapter.base_layer.weight"))
    with torch.no_grad():
        delta = next(p for n, p in params.items() if "trainable_tokens_delta" in n)
        delta.copy_(-row[first][None])
    run = tmp_path / "run"
    model.save_pretrained(run)
    (run / "chunkwise_model.json").write_text(json.dumps({"base": "hf:default"}))
    with (
        load_llm(f"hf:{run}") as hf,
        load_llm(
            f"vllm:{run}?max_model_len=2048&dtype=float32"  # as hf runs it: compare engines
        ) as vl,
    ):
        hf_text, vl_text = (m.generate(req)[0].text for m in (hf, vl))
    assert hf_text != base_text and vl_text == hf_text, (base_text, hf_text, vl_text)


def test_bad_spec_is_a_clean_error() -> None:
    with pytest.raises(Exception, match="max_model_len"):
        load_llm("vllm:default?max_model_len=0")


def test_default_mr_adapter_on_vllm_follows_the_protocol(embedded_llm, vllm_llm) -> None:
    """``vllm:default-mr``: the shipped MapReduce adapter (merged into the base once, since it
    trains the end-of-turn embedding row, which vLLM's LoRA would drop), with the chat template
    it was trained under, answers a held-out passkey document with the
    four-field protocol (NO INFORMATION where the needle is not)."""
    from chunkwise.data.families import HELDOUT_SEED, get_family
    from chunkwise.errors import BadInput
    from chunkwise.llm import default_mr
    from chunkwise.strategies import get_strategy

    if not (default_mr.package_dir() / "adapter_model.safetensors").is_file():
        pytest.skip("no hf:default-mr adapter committed yet: run `make default-mr`")
    args = dict(default_mr.strategy_args())
    strategy = get_strategy("mapreduce", window=int(args.pop("window", 4096)), **args)
    fam = get_family("passkey")
    # the wording the shipped adapter was trained on (wordings.yaml's first templates)
    doc = fam.make(n=1, seed=HELDOUT_SEED + 1, length_tokens=4000,
                   count_tokens=embedded_llm.count_tokens, templates="original")[0]  # fmt: skip
    before = vllm_llm.complete("The capital of France is", max_new_tokens=6).text
    with load_llm("vllm:default-mr?max_model_len=8192") as llm:
        assert llm.chat  # the adapter's own template, not the base model's plain prompts
        # this one runs in this process (the session's engine has its own processes), and
        # only one may: vLLM keeps its parallel groups in module globals
        assert llm.inproc and not vllm_llm.inproc
        with pytest.raises(BadInput, match="already runs in this process"):
            load_llm("vllm:default?max_model_len=2048&inproc=1")
        ans = strategy.answer(doc.context, doc.query(), llm)
    # the engine beside it is untouched by its start and its close
    assert vllm_llm.complete("The capital of France is", max_new_tokens=6).text == before
    maps = [e.output for e in ans.trace if e.stage == "map"]
    assert len(maps) >= 3 and ans.stats.extra["confidence_source"] == "self"
    assert 1 <= sum(not r["no_information"] for r in maps) < len(maps), maps
    assert fam.score(doc, ans.text) == 1.0, ans.text
