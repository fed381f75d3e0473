"""MapReduce control flow with the scripted double (fast, deterministic)."""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.mapreduce.collapse import CollapseError, pack_groups
from chunkwise.strategies.mapreduce.intermediate import to_intermediate
from chunkwise.strategies.mapreduce.prompts import NO_RELEVANT
from chunkwise.strategies.protocol import NO_INFO

NOINFO = "Extracted Information: nothing here\nRationale: unrelated\nAnswer: [NO INFORMATION]\nConfidence Score: 0"


def doc_with(n_paras: int, needle_at: int | None = None, words: int = 60) -> str:
    paras = []
    for i in range(n_paras):
        body = " ".join(f"filler{i}w{j}" for j in range(words)) + "."
        if i == needle_at:
            body = "The secret code is 4711. " + body
        paras.append(body)
    return "\n\n".join(paras)


def chat_llm(rules, window=1024, default=NOINFO):
    llm = ScriptedLLM(rules=rules, default=default, window=window)
    llm.chat = True
    return llm


def stage_of(req) -> str:
    text = req.prompt[0]["content"] if isinstance(req.prompt, list) else req.prompt
    if "Part of the document" in text:
        return "map"
    if "Merge the findings" in text:
        return "collapse"
    return "reduce"


def test_needle_found_and_no_info_dropped():
    llm = chat_llm(
        [
            (
                r"Part of the document =====\n(?:(?!=====).)*secret code is 4711",
                "Extracted Information: the code is 4711\nRationale: stated\nAnswer: 4711\nConfidence Score: 5",
            ),
            (
                r"Findings from part (\d+):\n(?:[^\n]*\n)*?Answer: (\S+)",
                r"Rationale: part \1 says so\nAnswer: \2",
            ),
        ]
    )
    ans = get_strategy("mapreduce").answer(
        doc_with(12, needle_at=7), Query("What is the code?"), llm
    )
    assert ans.text == "4711"
    stages = [stage_of(r) for r in llm.calls]
    assert stages.count("reduce") == 1 and stages[-1] == "reduce"
    n_chunks = ans.stats.extra["chunks"]
    assert n_chunks >= 3 and stages.count("map") == n_chunks
    assert ans.stats.extra["map_no_information"] == n_chunks - 1
    assert ans.stats.llm_calls == len(llm.calls)
    m = to_intermediate(ans)
    assert len(m["map"]) == n_chunks and m["collapse"] == []
    assert [r["answer"] for r in m["map"] if not r["no_information"]] == ["4711"]
    needle = next(r["sources"][0] for r in m["map"] if not r["no_information"])
    assert f"Findings from part {needle + 1}:" in llm.calls[-1].prompt[0]["content"]
    assert ans.stats.extra["map_no_answer"] == 0
    assert all(e.round == 0 for e in ans.trace)
    # chat models rate themselves: greedy decoding, no log-probabilities asked for
    assert all(r.params.temperature == 0 and not r.params.logprobs for r in llm.calls)


def test_all_chunks_no_information_reduce_still_runs_on_explicit_context():
    llm = chat_llm([(r"Findings|No part", "Rationale: nothing found\nAnswer: unknown")])
    ans = get_strategy("mapreduce").answer(doc_with(8), Query("What is the code?"), llm)
    reduce_prompt = llm.calls[-1].prompt[0]["content"]
    assert NO_RELEVANT in reduce_prompt
    assert ans.text == "unknown"
    assert ans.stats.extra["map_no_information"] == ans.stats.extra["chunks"]


def test_early_stop_cuts_generation_at_no_information_answer():
    llm = chat_llm([], default=NOINFO + "\nand a lot of extra words " * 20)
    ans = get_strategy("mapreduce").answer(doc_with(6), Query("What is the code?"), llm)
    n = ans.stats.extra["chunks"]
    assert ans.stats.extra["early_stops"] == n
    map_events = [e for e in ans.trace if e.stage == "map"]
    assert all(e.output["no_information"] for e in map_events)
    assert all("extra words" not in e.output["raw"] for e in map_events)
    no_stop = get_strategy("mapreduce", early_stop=False).answer(doc_with(6), Query("code?"), llm)
    saved = sum(e.completion_tokens for e in no_stop.trace if e.stage == "map") - sum(
        e.completion_tokens for e in map_events
    )
    assert saved > 0


def test_filter_looks_at_the_answer_field_only():
    reply = (
        "Extracted Information: unlike [NO INFORMATION] elsewhere, code 4711\n"
        "Rationale: the marker above is quoted text\nAnswer: 4711\nConfidence Score: 4"
    )
    llm = chat_llm([(r"Part of the document", reply), (r"Findings", "Answer: 4711")])
    ans = get_strategy("mapreduce").answer(doc_with(4), Query("What is the code?"), llm)
    assert ans.stats.extra["map_no_information"] == 0


def long_finding(m: re.Match) -> str:
    return (
        "Extracted Information: " + "detail " * 60 + "\nRationale: r\nAnswer: 4711\n"
        "Confidence Score: 3"
    )


def test_multi_round_collapse_groups_consecutive_records():
    # Every map record is long, so they cannot all reach reduce; collapse outputs are short.
    llm = chat_llm(
        [
            (r"Part of the document", long_finding),
            (
                r"Merge the findings",
                "Extracted Information: " + "merged " * 40 + "\nAnswer: 4711\nConfidence Score: 4",
            ),
            (r"Findings from", "Answer: 4711"),
        ],
        window=1100,
    )
    ans = get_strategy("mapreduce").answer(doc_with(400, words=40), Query("What is the code?"), llm)
    assert ans.text == "4711"
    rounds = ans.stats.extra["collapse_rounds"]
    assert rounds >= 2
    coll = [e for e in ans.trace if e.stage == "collapse"]
    assert coll
    for e in coll:  # each group covers consecutive chunks
        assert e.inputs == list(range(e.inputs[0], e.inputs[-1] + 1))
    m = to_intermediate(ans)
    assert len(m["collapse"]) == rounds
    covered = sorted(i for r in m["collapse"][0] for i in r["sources"])
    assert covered == list(range(ans.stats.extra["chunks"]))
    # the collapse model's own score (4) is kept, not replaced by the inputs' (3)
    assert all(r["confidence"] == 4 for g in m["collapse"] for r in g)
    # every collapse call fits the window with room for its output
    for r in llm.calls:
        if stage_of(r) == "collapse":
            assert llm.prompt_tokens(r.prompt) + r.params.max_new_tokens <= 1100
            assert r.params.temperature == 0 and not r.params.logprobs
    # collapse_prompt() (what training renders) is what the run sent
    strat = get_strategy("mapreduce")
    p = strat.prompt_set("chat", "qa")
    first_round = [e for e in ans.trace if e.stage == "collapse" and e.round == 1]
    maps = {e.inputs[0]: e for e in ans.trace if e.stage == "map"}
    from chunkwise.strategies.protocol import Record

    inputs = [Record.from_dict(maps[i].output) for i in first_round[0].inputs]
    sent = next(r for r in llm.calls if stage_of(r) == "collapse").prompt[0]["content"]
    assert strat.collapse_prompt(p, inputs, Query("What is the code?")) == sent


def test_collapse_groups_fill_the_budget_exactly_and_keep_order():
    assert pack_groups([3, 3, 4], 10) == [[0, 1, 2]]  # exactly the budget: one group
    assert pack_groups([3, 3, 5], 10) == [[0, 1], [2]]
    assert pack_groups([4, 12, 2, 8, 2], 10) == [[0], [1], [2, 3], [4]]  # oversized: alone
    assert pack_groups([], 10) == []


def test_collapse_bound_raises_clear_error():
    endless = "Extracted Information: " + "detail " * 600  # cut at max_new_tokens: never shrinks
    llm = chat_llm(
        [
            (r"Part of the document", long_finding),
            (r"Merge the findings", endless),
        ],
        window=1100,
    )
    with pytest.raises(CollapseError, match="after 2 collapse rounds"):
        get_strategy("mapreduce", max_collapse_rounds=2).answer(
            doc_with(400, words=40), Query("What is the code?"), llm
        )


def test_oversized_record_is_truncated_with_warning(caplog):
    huge = "Extracted Information: " + "x " * 2000 + "\nAnswer: 4711\nConfidence Score: 4"
    llm = chat_llm(
        [
            (r"Part of the document", lambda m: huge),
            (r"Merge the findings", "Extracted Information: m\nAnswer: 4711\nConfidence Score: 4"),
            (r"Findings from", "Answer: 4711"),
        ],
        window=1100,
    )
    with caplog.at_level(logging.WARNING):
        ans = get_strategy("mapreduce", max_collapse_rounds=3).answer(
            doc_with(40, words=30), Query("What is the code?"), llm
        )
    assert ans.text == "4711"
    assert any("truncating" in r.message for r in caplog.records)
    collapses = [r for r in llm.calls if stage_of(r) == "collapse"]
    assert collapses  # the truncated record still leaves room for the collapse's output
    assert all(llm.prompt_tokens(r.prompt) + r.params.max_new_tokens <= 1100 for r in collapses)


def _stage_prompts(llm) -> dict[str, str]:
    out = {}
    for r in llm.calls:
        out.setdefault(stage_of(r), r.prompt[0]["content"])
    return out


def test_reduce_sees_confidence_and_calibration_switch():
    llm = chat_llm(
        [(r"Part of the document", "Answer: 1\nConfidence Score: 4/5"), (r"Findings", "Answer: 1")]
    )
    get_strategy("mapreduce").answer(doc_with(3), Query("q?"), llm)
    on = _stage_prompts(llm)
    assert "Maria" in on["map"]  # the worked calibration example
    assert "Maria" in on["reduce"]  # the reduce prompt carries the calibration block too
    assert "Confidence Score: 4" in on["reduce"]
    llm.calls.clear()
    get_strategy("mapreduce", calibration=False).answer(doc_with(3), Query("q?"), llm)
    off = _stage_prompts(llm)
    # calibration=false removes exactly the calibration block: same prompts otherwise
    block = get_strategy("mapreduce").prompt_set("chat", "qa").calibration
    assert block and "Maria" not in off["map"] + off["reduce"]
    for stage in ("map", "reduce"):
        assert off[stage].split() == on[stage].replace(block, "").split()
    assert "Confidence Score: ..." in off["map"]
    assert "Confidence Score: 4" in off["reduce"]
    assert "higher confidence" in off["reduce"]


def test_confidence_off_neither_asks_shows_nor_uses_a_score():
    llm = chat_llm(
        [(r"Part of the document", "Answer: 1\nConfidence Score: 1"), (r"Findings", "Answer: 1")]
    )
    ans = get_strategy("mapreduce", confidence="off", min_confidence="3").answer(
        doc_with(3), Query("q?"), llm
    )
    prompts = _stage_prompts(llm)
    assert "Confidence" not in prompts["map"] and "Maria" not in prompts["map"]
    assert "confidence" not in prompts["reduce"].lower()
    assert ans.stats.extra["confidence_source"] == "none"
    assert "low_confidence_dropped" not in ans.stats.extra  # no floor without scores
    assert all(e.output["confidence"] is None for e in ans.trace if e.stage == "map")


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_map_output_without_answer_field_is_not_shown_as_no_information(finish):
    # the model wrote its findings but no Answer: field (or was cut before it)
    reply = "Extracted Information: the secret code is 4711\nRationale: stated in the text"
    if finish == "length":
        reply += " and " + "more " * 500
    llm = chat_llm([(r"Part of the document", reply), (r"Findings", "Answer: 4711")])
    ans = get_strategy("mapreduce").answer(doc_with(3), Query("What is the code?"), llm)
    reduce_prompt = llm.calls[-1].prompt[0]["content"]
    findings = reduce_prompt.split("Question:")[0]
    assert NO_INFO not in findings
    assert "the secret code is 4711" in findings
    expected = "(cut off before an answer)" if finish == "length" else "(no answer given)"
    assert f"Answer: {expected}" in findings
    n = ans.stats.extra["chunks"]
    assert ans.stats.extra["map_no_answer"] == n
    assert ans.stats.extra["map_truncated"] == (n if finish == "length" else 0)


def test_reduce_cut_before_answer_does_not_return_the_rationale():
    ok = "Extracted Information: code 4711\nRationale: r\nAnswer: 4711\nConfidence Score: 5"
    long_rationale = "Rationale: " + "thinking " * 400
    llm = chat_llm([(r"Part of the document", ok), (r"Findings", long_rationale)])
    ans = get_strategy("mapreduce").answer(doc_with(3), Query("What is the code?"), llm)
    assert ans.text == ""
    assert ans.stats.extra["reduce_no_answer"] and ans.stats.extra["reduce_truncated"]
    assert ans.trace[-1].output["finish_reason"] == "length"


def test_plain_protocol_ablation_uses_free_text_notes():
    llm = chat_llm(
        [
            (r"Using the notes", "4711"),
            (r"===== Part of the document =====\nfiller0w0", "The code is 4711."),
            (r"Write short notes", "[NO INFORMATION]"),
        ]
    )
    ans = get_strategy("mapreduce", protocol="plain", chunk_tokens=70).answer(
        doc_with(3), Query("code?"), llm
    )
    assert ans.text == "4711"
    reduce_prompt = llm.calls[-1].prompt[0]["content"]
    assert "The code is 4711." in reduce_prompt and NO_INFO not in reduce_prompt
    assert ans.stats.extra["map_no_information"] == 2


def test_base_prompts_for_base_models_and_logprob_confidence_absent():
    llm = ScriptedLLM(
        rules=[
            (r"secret code is 4711(?:(?!Question:).)*Question", "4711"),
            (r"Part \d+ of the text says: 4711", "4711"),
        ],
        default="NO INFORMATION",
    )
    ans = get_strategy("mapreduce").answer(
        doc_with(10, needle_at=3), Query("What is the code?"), llm
    )
    assert ans.text == "4711"
    assert ans.stats.extra["prompt_kind"] == "base"
    assert all(isinstance(r.prompt, str) for r in llm.calls)
    assert llm.calls[-1].prompt.split(" of the text says: ")[1].startswith("4711")
    # a question without its own answer prefix gets "Answer:" for the scaffold to continue
    assert all(r.prompt.rstrip().endswith("\nAnswer:") for r in llm.calls)


def test_bad_options_are_clear():
    from chunkwise.errors import BadInput

    with pytest.raises(BadInput, match="protocol='json' is not valid; expected one of structured"):
        get_strategy("mapreduce", protocol="json")
    with pytest.raises(BadInput, match=r"unknown option\(s\) chunks"):
        get_strategy("mapreduce", chunks=3)
    with pytest.raises(BadInput, match="unknown strategy"):
        get_strategy("nope")


# -- the confidence arithmetic: each mechanism has a test that fails when it is switched off --


@dataclass
class ProbLLM(ScriptedLLM):
    """The scripted double plus per-token log-probabilities: every token of a reply gets the
    probability ``probs[reply.strip()]`` (default 0.5)."""

    probs: dict[str, float] = field(default_factory=dict)

    def _generate(self, requests):
        outs = super()._generate(requests)
        for out in outs:
            p = self.probs.get(out.text.strip(), 0.5)
            out.tokens = self._pieces(out.text)
            out.token_logprobs = [math.log(p)] * len(out.tokens)
        return outs


def per_chunk_llm(confs: dict[int, float | None], chat: bool = True, reduce_reply="Answer: R"):
    """Chunk i (one paragraph each with chunk_tokens=70) answers A<i> with confidence confs[i];
    chunks not in ``confs`` say NO INFORMATION."""

    def map_reply(m: re.Match) -> str:
        i = int(m.group(1))
        if i not in confs:
            return NOINFO if chat else "NO INFORMATION"
        if not chat:
            return f"A{i}"
        c = confs[i]
        tail = "" if c is None else f"\nConfidence Score: {c}"
        return f"Extracted Information: fact {i}\nRationale: r\nAnswer: A{i}{tail}"

    map_rx = (
        r"Part of the document =====\n\D*?filler(\d+)w0"
        if chat
        else r"^\D*?filler(\d+)w0(?:(?!Question:).)*Question"
    )
    rules = [(map_rx, map_reply), (r"Findings from|of the text says", reduce_reply)]
    llm = (ScriptedLLM if chat else ProbLLM)(rules=rules, default=NOINFO, window=1024)
    llm.chat = chat
    return llm


def reduce_answers(llm) -> list[str]:
    """The findings' answers in the order the reduce prompt lists them."""
    p = llm.calls[-1].prompt
    text = p[0]["content"] if isinstance(p, list) else p
    return re.findall(r"\b(A\d+)\b", text.split("Question:")[0])


def run_mr(llm, n=6, **opts):
    return get_strategy("mapreduce", chunk_tokens=70, **opts).answer(
        doc_with(n), Query("What is it?"), llm
    )


def test_confidence_floor_drops_low_scored_records():
    llm = per_chunk_llm({0: 4, 1: 2, 2: 5, 3: 1, 4: 3})
    ans = run_mr(llm, min_confidence="3")
    assert ans.stats.extra["chunks"] == 6
    assert reduce_answers(llm) == ["A0", "A2", "A4"]  # a score at the floor passes
    assert ans.stats.extra["low_confidence_dropped"] == 2
    llm.calls.clear()
    run_mr(llm, min_confidence="0")
    assert reduce_answers(llm) == ["A0", "A1", "A2", "A3", "A4"]
    low = per_chunk_llm({0: 0.2, 1: 0.7})
    run_mr(low, min_confidence="0.5")
    assert reduce_answers(low) == ["A1"]
    chat_default = per_chunk_llm({0: 0.5, 1: 4})
    run_mr(chat_default)  # chat prompt sets have no floor
    assert reduce_answers(chat_default) == ["A0", "A1"]


def test_chat_retrieval_questions_drop_weak_sources_by_default():
    """Chat prompts put a floor of 2.5 (an inference) on retrieval questions only: a plain
    statement (5), an inferred step (2.5) and a hedged or retracted source (2, 1) reach reduce
    as the first two; a qa question keeps every finding; with none at 2.5, the most confident
    are kept."""

    def run(llm, task, **opts):
        return get_strategy("mapreduce", chunk_tokens=70, **opts).answer(
            doc_with(6), Query("What is the code?", task=task), llm
        )

    confs = {1: 2, 2: 2.5, 3: 5, 4: 1}
    llm = per_chunk_llm(confs)
    ans = run(llm, "retrieval")
    assert reduce_answers(llm) == ["A2", "A3"]
    assert ans.stats.extra["low_confidence_dropped"] == 2
    llm = per_chunk_llm(confs)
    run(llm, "qa")
    assert reduce_answers(llm) == ["A1", "A2", "A3", "A4"]
    llm = per_chunk_llm({1: 2, 4: 1})
    run(llm, "retrieval")  # only weak sources: reduce still sees them
    assert reduce_answers(llm) == ["A1", "A4"]
    llm = per_chunk_llm(confs)
    run(llm, "retrieval", min_confidence="0")  # an explicit 0 turns it off
    assert reduce_answers(llm) == ["A1", "A2", "A3", "A4"]


def test_keep_when_all_low_keeps_the_most_confident_in_document_order():
    five = per_chunk_llm({0: 1, 1: 2.5, 2: 0.5, 3: 2, 4: 1.5})
    run_mr(five, min_confidence="3")  # default: the three most confident
    assert reduce_answers(five) == ["A1", "A3", "A4"]
    llm = per_chunk_llm({0: 1, 1: 2.5, 2: 0.5, 3: 2})
    run_mr(llm, min_confidence="3", keep_when_all_low=2)
    assert reduce_answers(llm) == ["A1", "A3"]
    llm.calls.clear()
    run_mr(llm, min_confidence="3", keep_when_all_low=0)
    assert reduce_answers(llm) == []


@pytest.mark.parametrize("policy", ["keep", "drop"])
def test_unscored_records_are_counted_and_treated_as_the_option_says(policy):
    llm = per_chunk_llm({0: 4, 1: None, 2: 1})
    ans = run_mr(llm, min_confidence="3", unscored=policy)
    assert reduce_answers(llm) == (["A0", "A1"] if policy == "keep" else ["A0"])
    assert ans.stats.extra[f"unscored_{'kept' if policy == 'keep' else 'dropped'}"] == 1
    assert ans.stats.extra["unscored_records"] == 1
    assert ans.stats.extra["confidence_source"] == "self+none"


def test_stats_do_not_claim_logprob_when_the_backend_gave_none():
    llm = per_chunk_llm({0: 4}, chat=False, reduce_reply="A0")
    plain = ScriptedLLM(rules=llm.rules, default="NO INFORMATION")  # no log-probabilities
    ans = run_mr(plain, n=3, min_confidence="0")
    assert ans.stats.extra["confidence_requested"] == "logprob"
    assert ans.stats.extra["confidence_source"] == "none"
    ans = run_mr(llm, n=3, min_confidence="0")
    assert ans.stats.extra["confidence_source"] == "logprob"


def test_logprob_confidence_is_five_times_the_mean_answer_token_probability():
    llm = per_chunk_llm({0: 0, 1: 0}, chat=False, reduce_reply="A1")
    llm.probs = {"A0": 0.9, "A1": 0.3}
    ans = run_mr(llm, n=2, min_confidence="0")
    confs = [e.output["confidence"] for e in ans.trace if e.stage == "map"]
    assert confs == [pytest.approx(4.5), pytest.approx(1.5)]
    # log-probabilities are asked for in map only; reduce shows the scores
    assert [r.params.logprobs for r in llm.calls] == [True, True, False]
    assert "(confidence 4.5 of 5)" in llm.calls[-1].prompt
    # and the base floor (3.5) keeps only the probable one
    llm.calls.clear()
    run_mr(llm, n=2)
    assert reduce_answers(llm) == ["A0"]


def test_both_averages_self_score_and_logprob():
    llm = per_chunk_llm({0: 2}, chat=True)
    prob = ProbLLM(rules=llm.rules, default=NOINFO, window=1024)
    prob.chat = True
    prob.probs = {}  # every token 0.5 -> logprob confidence 2.5
    ans = run_mr(prob, n=1, confidence="both")
    conf = next(e.output["confidence"] for e in ans.trace if e.stage == "map")
    assert conf == pytest.approx((2 + 2.5) / 2)


def test_logprob_confidence_of_a_finding_without_an_answer_is_none():
    llm = ProbLLM(
        rules=[(r"Part of the document", "Extracted Information: fact\nRationale: r")],
        default="Answer: R",
        window=1024,
    )
    llm.chat = True
    ans = run_mr(llm, n=2, confidence="logprob")  # the map replies never reach "Answer:"
    maps = [e.output for e in ans.trace if e.stage == "map"]
    assert len(maps) == 2 and all(m["answer"] is None for m in maps)
    assert all(m["confidence"] is None for m in maps)


def test_reduce_order_confidence_puts_the_most_confident_last():
    llm = per_chunk_llm({0: 0, 1: 0, 2: 0}, chat=False)
    llm.probs = {"A0": 0.95, "A1": 0.75, "A2": 0.85}
    run_mr(llm, n=3, min_confidence="0")  # auto: confidence order for base models
    assert reduce_answers(llm) == ["A1", "A2", "A0"]
    llm.calls.clear()
    run_mr(llm, n=3, min_confidence="0", reduce_order="document")
    assert reduce_answers(llm) == ["A0", "A1", "A2"]
    chat = per_chunk_llm({0: 5, 1: 3, 2: 4})
    run_mr(chat, n=3, reduce_order="confidence")
    assert reduce_answers(chat) == ["A1", "A2", "A0"]


def test_reduce_order_confidence_puts_unscored_findings_below_a_zero_score():
    chat = per_chunk_llm({0: 0, 1: None, 2: 5})
    run_mr(chat, n=3, reduce_order="confidence")
    assert reduce_answers(chat) == ["A1", "A0", "A2"]  # no score ranks under the lowest one


def test_collapsed_confidence_from_inputs_when_collapse_gives_none():
    from chunkwise.strategies.mapreduce.collapse import combined_confidence
    from chunkwise.strategies.protocol import Record

    inputs = [Record(answer="4711", confidence=3), Record(answer="42", confidence=5)]
    assert combined_confidence(Record(answer="4711."), inputs) == 3
    assert combined_confidence(Record(answer="other"), inputs) == 4.0
    assert combined_confidence(Record(answer="x"), [Record(answer="y")]) is None
    thirds = [Record(answer=a, confidence=c) for a, c in (("a", 1), ("b", 2), ("c", 2))]
    assert combined_confidence(Record(answer="z"), thirds) == 1.667  # three decimals


def test_collapse_without_a_score_inherits_the_inputs_confidence_in_the_flow():
    llm = chat_llm(
        [
            (r"Part of the document", long_finding),  # confidence 3, answer 4711
            (r"Merge the findings", "Extracted Information: merged\nAnswer: 4711"),
            (r"Findings from", "Answer: 4711"),
        ],
        window=1100,
    )
    ans = get_strategy("mapreduce").answer(doc_with(400, words=40), Query("What is the code?"), llm)
    coll = [e.output for e in ans.trace if e.stage == "collapse"]
    assert coll and all(r["confidence"] == 3 for r in coll)
    assert "Confidence Score: 3" in llm.calls[-1].prompt[0]["content"]


def test_family_calibration_rule_is_part_of_the_calibration_block():
    strat = get_strategy("mapreduce")
    p = strat.prompt_set("chat", "retrieval")
    q = Query("What is the pass key?", "retrieval")
    assert "never score [NO INFORMATION] 5" in p.calibration
    assert "never score [NO INFORMATION] 5" in strat.map_prompt(p, "text", q)
    off = get_strategy("mapreduce", calibration=False).prompt_set("chat", "retrieval")
    assert "never score" not in get_strategy("mapreduce").map_prompt(off, "text", q)


def test_record_target_is_what_the_stage_should_write():
    from chunkwise.strategies.protocol import Record

    rec = Record("facts", "because", "4711", 4.0)
    strat = get_strategy("mapreduce")
    chat = strat.record_target(strat.prompt_set("chat", "qa"), rec)
    assert (
        chat
        == "Extracted Information: facts\nRationale: because\nAnswer: 4711\nConfidence Score: 4"
    )
    assert strat.record_target(strat.prompt_set("base", "qa"), rec) == " 4711"
    off = get_strategy("mapreduce", confidence="off")
    assert "Confidence" not in off.record_target(off.prompt_set("chat", "qa"), rec)
    plain = get_strategy("mapreduce", protocol="plain")
    assert plain.record_target(plain.prompt_set("chat", "qa"), Record("notes")) == " notes"


def test_early_stop_on_base_scaffolds_where_the_prompt_already_ends_in_answer():
    """The base map scaffold ends in "Answer:", so the model writes only the marker: the early
    stop must match the marker alone (matching "Answer: [NO INFORMATION]" never fires)."""
    llm = ScriptedLLM(rules=[], default=" [NO INFORMATION] and then a lot more words", window=1024)
    ans = get_strategy("mapreduce", prompts="base", chunk_tokens=120).answer(
        doc_with(6), Query("The code?"), llm
    )
    n = ans.stats.extra["chunks"]
    assert n >= 2 and ans.stats.extra["early_stops"] == n
    assert ans.stats.extra["map_no_information"] == n
    maps = [e for e in ans.trace if e.stage == "map"]
    assert all("more words" not in e.output["raw"] for e in maps)


def test_chat_map_prompts_of_one_question_share_everything_but_the_chunk():
    """The map wave goes to the engine as one batch; with the chunk last, every map prompt of a
    question starts with the same instructions, question and calibration block, which a
    prefix cache (vLLM's) prefills once."""
    llm = chat_llm([(r"Findings|No part", "Rationale: none\nAnswer: unknown")])
    get_strategy("mapreduce", chunk_tokens=150).answer(doc_with(8), Query("What is the code?"), llm)
    maps = [r.prompt[0]["content"] for r in llm.calls if stage_of(r) == "map"]
    assert len(maps) >= 3
    heads = {m.split("===== Part of the document")[0] for m in maps}
    assert len(heads) == 1, "everything before the chunk is the same for every map call"
    (head,) = heads
    assert "What is the code?" in head and "How to score confidence" in head
    assert "Reply in exactly this format" in head and "filler" not in head
    assert all(len(head) > 0.3 * len(m) for m in maps)  # a prefix worth caching


def asked_llm(confs: dict[int, float | None], score: str = " 4"):
    """per_chunk_llm that also answers a continued reply ending in the confidence header."""
    llm = per_chunk_llm(confs)
    llm.rules.insert(0, (r"assistant: [^\n]*\n(?:.*\n)*Confidence Score:$", score))
    llm.__post_init__()
    return llm


def test_a_finding_without_a_confidence_line_is_asked_for_it_by_continuing_the_reply():
    llm = asked_llm({0: None, 1: 5, 2: None})
    ans = run_mr(llm, n=4, ask_confidence=True)
    conf = {tuple(e.inputs): e.output["confidence"] for e in ans.trace if e.stage == "map"}
    assert conf[(0,)] == 4 and conf[(1,)] == 5 and conf[(2,)] == 4
    assert ans.stats.extra["confidence_asked"] == ans.stats.extra["confidence_filled"] == 2
    assert ans.stats.extra["unscored_records"] == 0
    assert ans.stats.extra["confidence_source"] == "self"
    asks = [c for c in llm.calls if c.prompt[-1]["role"] == "assistant"]
    assert len(asks) == 2 and all(c.params.max_new_tokens <= 4 for c in asks)
    assert asks[0].prompt[-1]["content"] == (
        "Extracted Information: fact 0\nRationale: r\nAnswer: A0\nConfidence Score:"
    )
    assert asks[0].prompt[:-1] == llm.calls[0].prompt  # the same map prompt, continued
    # the reply itself stays as the model wrote it; the follow-up is its own trace event
    raws = [e.output["raw"] for e in ans.trace if e.stage == "map"]
    assert not raws[0].endswith("Confidence Score: 4")
    assert [e.output["confidence"] for e in ans.trace if e.stage == "ask_confidence"] == [4, 4]
    assert "Confidence Score: 4" in llm.calls[-1].prompt[0]["content"]  # reduce sees it


def test_asking_for_confidence_is_skipped_when_off_cut_or_unanswerable():
    llm = asked_llm({0: None})
    ans = run_mr(llm, n=3)  # off by default
    assert "confidence_asked" not in ans.stats.extra
    assert ans.stats.extra["unscored_records"] == 1
    ans = run_mr(asked_llm({0: None}), n=3, confidence="off", ask_confidence=True)
    assert "confidence_asked" not in ans.stats.extra
    # a reply that says nothing usable when asked stays unscored, and is counted
    ans = run_mr(asked_llm({0: None}, score=" unsure"), n=3, ask_confidence=True)
    assert ans.stats.extra["confidence_asked"] == 1
    assert ans.stats.extra["confidence_filled"] == 0
    assert ans.stats.extra["unscored_records"] == 1
    # an engine that cannot continue a reply is not asked (nothing to continue)
    stiff = asked_llm({0: None})
    stiff.continues_replies = False
    ans = run_mr(stiff, n=3, ask_confidence=True)
    assert "confidence_asked" not in ans.stats.extra
    assert not [c for c in stiff.calls if c.prompt[-1]["role"] == "assistant"]
    # a reply cut by max_new_tokens is not continued with a header it never reached
    cut = asked_llm({0: None})
    rambling = "Extracted Information: fact\nRationale: r\nAnswer: A0 " + "and more " * 400
    cut.rules[1] = (cut.rules[1][0], rambling)
    cut.__post_init__()
    ans = run_mr(cut, n=3, ask_confidence=True)
    assert ans.stats.extra["map_truncated"] == 3 and ans.stats.extra["map_no_answer"] == 0
    asked = [e.output["of"] for e in ans.trace if e.stage == "ask_confidence"]
    assert asked == ["collapse"] * 3  # only the collapse replies, which ended on their own


def test_max_new_tokens_caps_every_stage_and_frees_room_for_chunks():
    def run(**opts):
        llm = chat_llm([], window=2048)
        ans = get_strategy("mapreduce", **opts).answer(
            doc_with(30, needle_at=7), Query("What is the code?"), llm
        )
        return ans, {stage_of(r): r.params.max_new_tokens for r in llm.calls}

    ans, budgets = run()
    assert budgets["map"] == 384  # the chat prompt set's own
    capped, budgets = run(max_new_tokens=40)
    assert budgets["map"] == 40 and budgets["reduce"] == 40
    assert capped.stats.extra["chunk_budget"] > ans.stats.extra["chunk_budget"]
    with pytest.raises(BadInput, match="max_new_tokens"):
        get_strategy("mapreduce", max_new_tokens=-1)


def test_the_confidence_floor_in_force():
    """The floor the strategy reports (what the real-model tests read): the prompt set's own
    under ``auto``, the user's when given, none when confidence is off."""
    auto = get_strategy("mapreduce")
    chat_retrieval = auto.prompt_set("chat", "retrieval")
    assert auto.min_confidence_for(chat_retrieval) == float(
        chat_retrieval.templates.get("min_confidence", 0)
    )
    assert get_strategy("mapreduce", min_confidence="3").min_confidence_for(chat_retrieval) == 3.0
    off = get_strategy("mapreduce", confidence="off", min_confidence="3")
    assert off.min_confidence_for(off.prompt_set("chat", "retrieval")) == 0.0
