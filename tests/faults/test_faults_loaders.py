"""Every benchmark loader checks its records before any model call: a malformed record (not an
object, a field missing or of the wrong type, a list id, a repeated id) is one BadInput naming
``file:line`` and the field, never a traceback, and never after predictions were written.

Each format is loaded through its registered benchmark (``get_benchmark(name).load``), as the
runner loads it. A hypothesis test per format puts random JSON values into every field and
accepts only BadInput or examples the runner can use (its questions build and its answers
score)."""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkwise.benchmarks import discover, get_benchmark
from chunkwise.errors import BadInput

from .attacks import field_paths

STORY = "Once upon a time Marie lived in Paris. She discovered radium in her small shed."
DELETE = object()  # a mutation that removes the field

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Format:
    """One loader's file format: a valid record, where its fields are, what --data names."""

    name: str
    bench: str
    task: str
    file: str  # the data file, relative to the data folder
    record: Callable[[int], dict[str, Any]]  # a valid record; i gives distinct ids
    missing: Path_  # a required field
    wrong: tuple[Path_, Any]  # a field and a value of the wrong type
    id_path: Path_ | None  # where the example id is (None: the loader numbers examples)
    data_is_file: bool = False  # --data names the file (else its folder)

    def write(self, root: Path, lines: list[Any]) -> tuple[str, Path]:
        """(the --data value, the file) with ``lines`` (objects or raw text) written."""
        path = root / self.file
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
        path.write_text(text, encoding="utf-8")
        return str(path if self.data_is_file else root), path

    def load(self, data: str) -> Any:
        bench = get_benchmark(self.bench)
        return bench.load(self.task, bench.parse_data(data), limit=None)


def _ib(i: int) -> dict[str, Any]:
    return {"id": i, "context": STORY, "input": "What is the pass key?", "answer": [str(i)]}


def _ib_choice(i: int) -> dict[str, Any]:
    opts = ["Rome", "Paris", "Oslo", "Lima"]
    return {"id": i, "context": STORY, "input": "Where?", "answer": ["Paris"], "options": opts}


def _ruler(i: int) -> dict[str, Any]:
    meta = {"form": "one", "query": f"key-{i}", "kind": "number", "kind_one": "number"}
    return {"id": i, "context": STORY, "input": "Q?", "answer": [str(i)], "meta": meta}


def _nqa(i: int) -> dict[str, Any]:
    return {
        "id": f"n{i}",
        "document": {"id": "d1", "text": STORY, "word_count": 15},
        "question": {"text": "Where was the shed?"},
        "answers": [{"text": "In Paris"}, {"text": "Paris"}],
    }


ANSWER = {
    "unanswerable": False,
    "extractive_spans": ["radium"],
    "yes_no": None,
    "free_form_answer": "",
    "evidence": ["She discovered radium."],
    "highlighted_evidence": [],
}


def _qasper_hf(i: int) -> dict[str, Any]:
    return {
        "id": f"p{i}",
        "title": "A Paper",
        "abstract": "We study things.",
        "full_text": {"section_name": ["Intro"], "paragraphs": [[STORY]]},
        "qas": {
            "question": ["What did she discover?"],
            "question_id": [f"q{i}"],
            "answers": [{"answer": [dict(ANSWER)], "annotation_id": ["a"]}],
        },
    }


def _leval(instruction: str, output: Any) -> Callable[[int], dict[str, Any]]:
    return lambda i: {"input": STORY, "instructions": [instruction], "outputs": [output]}


MC = "Where did Marie live?\n (A) Rome\n (B) Paris\n (C) Oslo\n (D) Lima"


def _quality(i: int) -> dict[str, Any]:
    question = {
        "question": "Where did Marie live?",
        "options": ["Rome", "Paris", "Oslo", "Lima"],
        "gold_label": 2,
        "difficult": 1,
        "question_unique_id": f"q{i}",
    }
    return {
        "article_id": f"a{i}",
        "set_unique_id": f"a{i}_s",
        "article": STORY,
        "questions": [question],
    }


def _pyramid(i: int) -> dict[str, Any]:
    return {"id": f"r{i}", "source_id": "d", "document": STORY, "question": "Q?", "answer": "A"}


FORMATS = [
    Format("infinitebench", "infinitebench", "passkey", "passkey.jsonl", _ib,
           ("context",), (("input",), 5), ("id",)),
    Format("infinitebench_choice", "infinitebench", "longbook_choice_eng",
           "longbook_choice_eng.jsonl", _ib_choice, ("answer",), (("options",), "Paris"), ("id",)),
    Format("ruler", "ruler", "niah_single_1", "niah_single_1.jsonl", _ruler,
           ("answer",), (("meta", "form"), ["one"]), ("id",)),
    Format("longqa_en_qa", "longqa", "en_qa", "longbook_qa_eng.jsonl", _ib,
           ("context",), (("answer",), {"a": 1}), ("id",)),
    Format("longqa_narrativeqa", "longqa", "narrativeqa", "narrativeqa.jsonl", _nqa,
           ("question",), (("answers", 0, "text"), 5), ("id",)),
    Format("narrativeqa", "narrativeqa", "narrativeqa", "rows.jsonl", _nqa,
           ("answers",), (("document", "text"), ["x"]), ("id",), data_is_file=True),
    Format("qasper", "qasper", "qasper", "qasper.jsonl", _qasper_hf,
           ("qas", "question_id"), (("full_text", "paragraphs", 0), 5),
           ("qas", "question_id", 0), data_is_file=True),
    Format("leval_quality", "leval", "quality", "quality.jsonl", _leval(MC, "(B) Paris"),
           ("input",), (("instructions",), MC), None),
    Format("leval_scientific_qa", "leval", "scientific_qa", "scientific_qa.jsonl",
           _leval("What did she discover?", "radium"), ("outputs",), (("outputs", 0), 5), None),
    Format("leval_narrative_qa", "leval", "narrative_qa", "narrative_qa.jsonl",
           _leval("Who lived in Paris?", "Marie"), ("instructions",), (("input",), None), None),
    Format("quality", "quality", "quality", "QuALITY.v1.0.1.htmlstripped.dev", _quality,
           ("article",), (("questions", 0, "gold_label"), True),
           ("questions", 0, "question_unique_id")),
    Format("pyramid_align", "pyramid_align", "qa", "records.jsonl", _pyramid,
           ("question",), (("answer",), ["A"]), ("id",), data_is_file=True),
]  # fmt: skip
BY_NAME = {f.name: f for f in FORMATS}


def test_every_registered_benchmark_that_reads_files_is_covered():
    """A new file-reading benchmark must join FORMATS (generated builds its documents)."""
    covered = {f.bench for f in FORMATS}
    assert set(discover()) - covered == {"generated"}


def mutate(rec: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    """A deep copy of ``rec`` with the field at ``path`` set to ``value`` (or deleted)."""
    rec = copy.deepcopy(rec)
    node: Any = rec
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return rec


def field_name(path: Path_) -> str:
    return next(str(k) for k in reversed(path) if isinstance(k, str))


def refused(fmt: Format, tmp_path: Path, second: Any) -> tuple[str, Path]:
    """The one-line error for a file of a valid record then ``second``, and the file."""
    data, path = fmt.write(tmp_path, [fmt.record(0), second])
    with pytest.raises(BadInput) as e:
        fmt.load(data)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg, path


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_valid_records_load(fmt, tmp_path):
    data, _ = fmt.write(tmp_path, [fmt.record(0), fmt.record(1)])
    examples = fmt.load(data).examples
    assert len(examples) == 2 and len({e["id"] for e in examples}) == 2


FAULTS = ["not_an_object", "missing_field", "wrong_type", "list_id", "duplicate_id"]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_a_malformed_record_is_one_line_naming_file_line_and_field(fmt, fault, tmp_path):
    if fault in ("list_id", "duplicate_id") and fmt.id_path is None:
        pytest.skip(f"{fmt.name} numbers its examples itself")
    second = {
        "not_an_object": lambda: "[1, 2]",
        "missing_field": lambda: mutate(fmt.record(1), fmt.missing, DELETE),
        "wrong_type": lambda: mutate(fmt.record(1), *fmt.wrong),
        "list_id": lambda: mutate(fmt.record(1), fmt.id_path, ["x"]),
        "duplicate_id": lambda: mutate(
            fmt.record(1), fmt.id_path, _get(fmt.record(0), fmt.id_path)
        ),
    }[fault]()
    msg, path = refused(fmt, tmp_path, second)
    assert f"{path}:2" in msg, msg
    if fault == "duplicate_id":
        assert "duplicate" in msg and f"{path}:1" in msg, msg
    elif fault != "not_an_object":
        path_ = {"missing_field": fmt.missing, "wrong_type": fmt.wrong[0], "list_id": fmt.id_path}
        assert field_name(path_[fault]) in msg, msg


def _get(rec: Any, path: Path_) -> Any:
    for key in path:
        rec = rec[key]
    return rec


# -- the cases of the issue, one by one -----------------------------------------------------


def _official(tmp_path: Path, papers: Any) -> str:
    path = tmp_path / "qasper-dev-v0.3.json"
    path.write_text(json.dumps(papers))
    return str(path)


def _paper(qid: str = "q1", **over: Any) -> dict[str, Any]:
    paper = {
        "title": "A Paper",
        "abstract": "We study things.",
        "full_text": [{"section_name": "Intro", "paragraphs": [STORY]}],
        "qas": [{"question": "What?", "question_id": qid, "answers": [{"answer": dict(ANSWER)}]}],
    }
    return {**paper, **over}


@pytest.mark.parametrize(
    "papers, needle",
    [
        ({"p1": _paper(), "p2": 5}, "paper 'p2': the paper must be a JSON object, got number"),
        (
            {"p1": _paper(qas=[{"question": "What?", "answers": []}])},
            "paper 'p1': 'qas[0].question_id' is missing",
        ),
        ({"p1": _paper(full_text=[5])}, "paper 'p1': 'full_text[0]' must be a JSON object"),
        ({"p1": _paper(), "p2": _paper()}, "paper 'p2': duplicate question_id 'q1'"),
        ({"p1": _paper(qas=[{"question": "What?", "question_id": ["q"]}])}, "question_id"),
        (
            {"p1": _paper(qas=[{"question": "?", "question_id": "q", "answers": [{"answer": 5}]}])},
            "'qas[0].answers[0].answer' must be a JSON object",
        ),
        (
            {
                "p1": _paper(
                    qas=[{"question": "?", "question_id": "q", "answers": [{"answer": {}}]}]
                )
            },
            "has no answer",
        ),
        ([_paper()], "expected an object of paper id -> paper, got an array"),
    ],
)
def test_qasper_official_file_names_the_paper_and_field(tmp_path, papers, needle):
    data = _official(tmp_path, papers)
    with pytest.raises(BadInput) as e:
        BY_NAME["qasper"].load(data)
    assert needle in str(e.value) and "qasper-dev-v0.3.json" in str(e.value)


def test_leval_line_without_input_names_file_line(tmp_path):
    fmt = BY_NAME["leval_scientific_qa"]
    msg, path = refused(fmt, tmp_path, mutate(fmt.record(1), ("input",), DELETE))
    assert f"{path}:2: 'input' is missing" in msg


@pytest.mark.parametrize("bad_id", [["r0"], "r0"])  # a list id; the id of line 1 again
def test_pyramid_align_list_or_duplicate_id(tmp_path, bad_id):
    fmt = BY_NAME["pyramid_align"]
    msg, path = refused(fmt, tmp_path, {**fmt.record(1), "id": bad_id})
    assert f"{path}:2" in msg and "id" in msg


# -- end to end: the command exits with one line and writes no predictions -----------------


def test_eval_on_a_bad_qasper_file_exits_2_and_writes_nothing(cli, tmp_path):
    data = _official(tmp_path, {"p1": _paper(), "p2": _paper(full_text=[5])})
    out = tmp_path / "run"
    res = cli(
        "eval", "--benchmark=qasper", "--tasks=qasper", f"--data={data}", "--model=scripted:echo",
        f"--output={out}",
    )  # fmt: skip
    line = res.error_line()
    assert "qasper-dev-v0.3.json: paper 'p2': 'full_text[0]' must be a JSON object" in line
    assert not list(out.rglob("*.jsonl"))  # no predictions
    assert not (out / "results.json").exists()


# -- random values in every field: BadInput or usable examples, nothing else ---------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["", "one", "many", "A", "(B) Paris", "Paris", "q0", "r0", "n0"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def usable(fmt: Format, examples: list[dict[str, Any]]) -> None:
    """The runner's use of each example: its question builds (or is one BadInput, which the
    runner records as that example's error) and its ground truth scores."""
    bench = get_benchmark(fmt.bench)
    ids = [ex["id"] for ex in examples]
    assert len(set(ids)) == len(ids)  # hashable and unique: the runner keys on them
    for ex in examples:
        assert isinstance(ex["context"], str) and isinstance(ex.get("input", ""), str)
        with contextlib.suppress(BadInput):  # recorded as that example's error
            bench.build_query(fmt.task, ex, "chat", 4096)
        score = bench.score(fmt.task, "Paris", ex["answer"], "official", "none")
        assert 0.0 <= score <= 1.0


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_field_values_give_bad_input_or_usable_examples(fmt, data):
    rec = fmt.record(1)
    path = data.draw(st.sampled_from(field_paths(rec)), label="field")
    value = data.draw(st.one_of(st.just(DELETE), JSON), label="value")
    with tempfile.TemporaryDirectory() as root:
        where, file = fmt.write(Path(root), [fmt.record(0), mutate(rec, path, value)])
        try:
            examples = fmt.load(where).examples
        except BadInput as e:  # from the loader's own checks: it names the line
            assert f"{file}:2" in str(e) and "\n" not in str(e), str(e)
            return
        usable(fmt, examples)
