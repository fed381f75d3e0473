from __future__ import annotations

import dataclasses
import enum
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise.config import config_to_dict, dump_yaml, load_config, parse_override
from chunkwise.errors import BadInput


class Precision(enum.Enum):
    BF16 = "bf16"
    FP32 = "fp32"


@dataclass
class Train:
    lr: float = 2e-5
    epochs: int = 1
    packing: bool = True
    grad_accum: int | None = None


@dataclass
class Eval:
    tasks: list[str] = field(default_factory=lambda: ["passkey"])
    limit: int | None = None


@dataclass
class Recipe:
    model: str = "hf:default"
    strategy: Literal["standard", "mapreduce"] = "mapreduce"
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    out_dir: Path = Path("runs/x")
    precision: Precision = Precision.BF16
    extra: dict[str, int] = field(default_factory=dict)
    train: Train = field(default_factory=Train)
    eval: Eval | None = None


@dataclass(frozen=True)
class Required:
    name: str
    size: int = 1

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")


def write(tmp_path: Path, text: str, name: str = "cfg.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_defaults_without_file() -> None:
    assert load_config(Recipe, None) == Recipe()


def test_yaml_and_overrides_are_merged_and_coerced(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
model: vllm:meta-llama/Llama-3.1-8B?tp=8
train:
  lr: 1e-5          # PyYAML reads this as a string; the field says float
  epochs: 3
eval:
  tasks: [passkey, kv_retrieval]
""",
    )
    cfg = load_config(Recipe, p, ["--train.epochs=5", "strategy=standard", "--train.packing=no"])
    assert cfg.model == "vllm:meta-llama/Llama-3.1-8B?tp=8"
    assert cfg.train == Train(lr=1e-5, epochs=5, packing=False)
    assert isinstance(cfg.train.lr, float)
    assert cfg.strategy == "standard"
    assert cfg.eval == Eval(tasks=["passkey", "kv_retrieval"])


def test_later_override_wins_and_section_override_keeps_file_values(tmp_path: Path) -> None:
    p = write(tmp_path, "train:\n  lr: 0.1\n  epochs: 2\n")
    cfg = load_config(Recipe, p, ["--train.epochs=3", "--train.epochs=4"])
    assert cfg.train.lr == 0.1 and cfg.train.epochs == 4


def test_override_fills_an_optional_section_absent_from_the_file() -> None:
    cfg = load_config(Recipe, None, ["--eval.limit=10"])
    assert cfg.eval == Eval(limit=10)
    assert load_config(Recipe, None, ["--eval={tasks: [a], limit: 2}"]).eval == Eval(["a"], 2)
    assert load_config(Recipe, None, ["--eval=none"]).eval is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("False", False), ("yes", True), ("no", False), ("1", True), ("0", False)],
)
def test_bool_texts(text: str, value: bool) -> None:
    assert load_config(Recipe, None, [f"--train.packing={text}"]).train.packing is value


def test_bad_bool_names_key_and_type() -> None:
    with pytest.raises(BadInput) as e:
        load_config(Recipe, None, ["--train.packing=maybe"])
    msg = str(e.value)
    assert (
        msg == "--train.packing: option train.packing='maybe' is not valid; expected true or false"
    )


def test_optional_int() -> None:
    assert load_config(Recipe, None, ["--seed=none"]).seed is None
    assert load_config(Recipe, None, ["--seed=null"]).seed is None
    assert load_config(Recipe, None, ["--seed=7"]).seed == 7
    assert load_config(Recipe, None, ["--train.grad_accum=4"]).train.grad_accum == 4


def test_int_accepts_integral_float_text_but_not_fractions() -> None:
    assert load_config(Recipe, None, ["--train.epochs=1e2"]).train.epochs == 100
    with pytest.raises(BadInput, match=r"option train\.epochs='1\.5' .*expected a whole number"):
        load_config(Recipe, None, ["--train.epochs=1.5"])


def test_type_mismatch_in_yaml_names_key_file_and_type(tmp_path: Path) -> None:
    p = write(tmp_path, "train:\n  epochs: three\n")
    with pytest.raises(BadInput) as e:
        load_config(Recipe, p)
    msg = str(e.value)
    assert msg == f"{p}:2: option train.epochs='three' is not valid; expected a whole number"


def test_bool_is_not_an_int(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="epochs=True is not valid; expected a whole number"):
        load_config(Recipe, write(tmp_path, "train:\n  epochs: true\n"))


def test_lists_from_commas_yaml_flow_and_files(tmp_path: Path) -> None:
    assert load_config(Recipe, None, ["--eval.tasks=a, b,c"]).eval.tasks == ["a", "b", "c"]
    assert load_config(Recipe, None, ["--eval.tasks=[x, y]"]).eval.tasks == ["x", "y"]
    assert load_config(Recipe, None, ["--eval.tasks="]).eval.tasks == []
    assert load_config(Recipe, None, ["--stop=END,###"]).stop == ("END", "###")
    p = write(tmp_path, 'stop: ["\\n\\n", "Q:"]\n')
    assert load_config(Recipe, p).stop == ("\n\n", "Q:")


def test_list_given_a_scalar_in_yaml_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r":2: option eval\.tasks=\{'a': 1\} .*expected a list"):
        load_config(Recipe, write(tmp_path, "eval:\n  tasks: {a: 1}\n"))


def test_literal_checked_against_allowed_values() -> None:
    with pytest.raises(BadInput) as e:
        load_config(Recipe, None, ["--strategy=raptor"])
    msg = str(e.value)
    assert msg == (
        "--strategy: option strategy='raptor' is not valid; expected one of standard, mapreduce"
    )


def test_path_enum_and_dict_fields(tmp_path: Path) -> None:
    cfg = load_config(
        Recipe, None, ["--out_dir=/tmp/run", "--precision=fp32", "--extra.a=1", "--extra.b=2"]
    )
    assert cfg.out_dir == Path("/tmp/run")
    assert cfg.precision is Precision.FP32
    assert cfg.extra == {"a": 1, "b": 2}
    with pytest.raises(
        BadInput, match=r"^--extra\.a: option extra\.a='x' is not valid; expected a whole"
    ):
        load_config(Recipe, None, ["--extra.a=x"])


def test_bad_list_item_is_named(tmp_path: Path) -> None:
    p = write(tmp_path, "eval:\n  tasks: [a, [b]]\n")
    with pytest.raises(
        BadInput,
        match=r"cfg\.yaml:2: option eval\.tasks\[1\]=\['b'\] is not valid; expected any text",
    ):
        load_config(Recipe, p)


def test_unknown_yaml_key_names_key_file_and_valid_keys(tmp_path: Path) -> None:
    p = write(tmp_path, "modle: hf:default\n")
    with pytest.raises(BadInput) as e:
        load_config(Recipe, p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:1: unknown option(s) modle")
    assert "did you mean 'model'" in msg
    for key in ("model", "strategy", "train", "eval"):
        assert key in msg


def test_unknown_nested_key(tmp_path: Path) -> None:
    p = write(tmp_path, "train:\n  lrr: 0.1\n")
    with pytest.raises(BadInput) as e:
        load_config(Recipe, p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:2: unknown option(s) train.lrr (did you mean 'train.lr'?)")
    assert "train.epochs" in msg


def test_unknown_override_key() -> None:
    with pytest.raises(BadInput) as e:
        load_config(Recipe, None, ["--train.learning_rate=1"])
    msg = str(e.value)
    assert msg.startswith("--train.learning_rate: unknown option(s) train.learning_rate")
    assert "lr" in msg and "packing" in msg


def test_override_into_a_scalar_is_refused() -> None:
    with pytest.raises(BadInput, match="not a section"):
        load_config(Recipe, None, ["--model.name=x"])


@pytest.mark.parametrize("arg", ["--seed", "--=3", "--train..lr=1", "seed"])
def test_malformed_overrides(arg: str) -> None:
    with pytest.raises(BadInput, match="override"):
        load_config(Recipe, None, [arg])


def test_parse_override() -> None:
    assert parse_override("--a.b=c=d") == (["a", "b"], "c=d")
    assert parse_override("x=") == (["x"], "")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not found"):
        load_config(Recipe, tmp_path / "missing.yaml")
    with pytest.raises(BadInput, match="directory"):
        load_config(Recipe, tmp_path)
    with pytest.raises(BadInput, match="mapping"):
        load_config(Recipe, write(tmp_path, "- a\n- b\n"))
    bad = write(tmp_path, "model: [unclosed\n", "bad.yaml")
    with pytest.raises(BadInput, match=r"bad\.yaml:\d+: invalid YAML"):
        load_config(Recipe, bad)
    assert load_config(Recipe, write(tmp_path, "# only a comment\n", "empty.yaml")) == Recipe()


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "seed: 1\ntrain:\n  lr: 0.1\nseed: 2\n")
    with pytest.raises(
        BadInput, match=r"duplicate key 'seed' \(first on line 1, again on line 4\)"
    ):
        load_config(Recipe, p)


def test_required_fields_and_post_init_validation() -> None:
    with pytest.raises(BadInput, match=r"missing required option\(s\) name.*--name="):
        load_config(Required, None)
    assert load_config(Required, None, ["--name=x"]) == Required("x")
    with pytest.raises(BadInput, match="size must be >= 1"):
        load_config(Required, None, ["--name=x", "--size=0"])


def test_config_to_dict_is_plain() -> None:
    d = config_to_dict(Recipe(stop=("a",), eval=Eval()))
    assert d["stop"] == ["a"]
    assert d["out_dir"] == "runs/x"
    assert d["precision"] == "bf16"
    assert d["train"] == {"lr": 2e-5, "epochs": 1, "packing": True, "grad_accum": None}
    assert d["eval"] == {"tasks": ["passkey"], "limit": None}


def test_dump_yaml_is_atomic_and_keeps_old_file_on_error(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "config.yaml"
    dump_yaml(Recipe(seed=3), p)
    before = p.read_text()
    assert "seed: 3" in before

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        dump_yaml(Recipe(seed=4), p)
    assert p.read_text() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["config.yaml"]


text_st = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=60, deadline=None)
@given(
    model=text_st,
    strategy=st.sampled_from(["standard", "mapreduce"]),
    seed=st.none() | st.integers(-(2**40), 2**40),
    stop=st.lists(text_st, max_size=3).map(tuple),
    lr=st.floats(allow_nan=False, allow_infinity=False, width=64),
    epochs=st.integers(0, 10**6),
    packing=st.booleans(),
    tasks=st.lists(text_st, max_size=3),
    extra=st.dictionaries(st.text("abcxyz", min_size=1, max_size=5), st.integers(), max_size=3),
)
def test_dump_then_load_round_trips(tmp_path_factory, **kw) -> None:
    cfg = Recipe(
        model=kw["model"],
        strategy=kw["strategy"],
        seed=kw["seed"],
        stop=kw["stop"],
        extra=kw["extra"],
        train=Train(lr=kw["lr"], epochs=kw["epochs"], packing=kw["packing"]),
        eval=Eval(tasks=kw["tasks"]),
    )
    p = tmp_path_factory.mktemp("rt") / "c.yaml"
    dump_yaml(cfg, p)
    assert load_config(Recipe, p) == cfg


def test_override_does_not_mutate_shared_defaults() -> None:
    a = load_config(Recipe, None, ["--eval.tasks=a"])
    b = load_config(Recipe, None)
    assert a.eval.tasks == ["a"] and b.eval is None
    assert dataclasses.replace(Recipe()).train == Train()
