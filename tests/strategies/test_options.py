"""Issue #47 item 14: strategy options given as text (``--strategy-args k=v``) are converted by
their declared types (:mod:`chunkwise.options`), for every option of every registered strategy,
options whose default is None included; a value that does not fit is one clear BadInput naming
the key, the value and what is allowed (never a TypeError from deep inside a strategy)."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Literal

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm import scripted
from chunkwise.options import convert_option, convert_options, describe, option_types
from chunkwise.strategies import STRATEGIES, get_strategy

#: text that fits each basic type, and text that does not
VALID = {int: ["7", "1e3", " 12 "], float: ["0.25", "3", "1e-5"], bool: ["yes", "off", "1"]}
VALID[str] = ["abc", "7", ""]
BAD = {int: ["seven", "1.5", "true", ""], float: ["x", "1,5", ""], bool: ["maybe", "2"]}
OPTIONS = [(name, key) for name in sorted(STRATEGIES) for key in option_types(STRATEGIES[name])]


def _parts(tp: Any) -> tuple[Any, bool]:
    """(the basic type, whether None is allowed) of an option's annotation."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, f"option type {tp} is not covered by this test"
        return args[0], True
    return tp, False


def _default_text(name: str, key: str) -> str:
    default = inspect.signature(STRATEGIES[name].__init__).parameters[key].default
    if default is None:
        return "none"
    return str(default).lower() if isinstance(default, bool) else str(default)


def test_every_option_has_a_type_this_test_knows():
    assert len(STRATEGIES) >= 6 and len(OPTIONS) > 60
    for name, key in OPTIONS:
        base, _ = _parts(option_types(STRATEGIES[name])[key])
        assert base in VALID, f"{name}.{key}: {base}"


@pytest.mark.parametrize(("name", "key"), OPTIONS)
def test_valid_text_converts_to_the_declared_type(name, key):
    tp = option_types(STRATEGIES[name])[key]
    base, optional = _parts(tp)
    for text in VALID[base]:
        value = convert_options(f"strategy {name!r}", STRATEGIES[name], {key: text})[key]
        assert type(value) is base, (key, text, value)
    if optional:
        for text in ("none", "None", "null"):
            assert convert_options("s", STRATEGIES[name], {key: text})[key] is None


@pytest.mark.parametrize(("name", "key"), OPTIONS)
def test_bad_text_is_one_clear_error_from_get_strategy(name, key):
    base, optional = _parts(option_types(STRATEGIES[name])[key])
    for text in BAD.get(base, []):
        with pytest.raises(BadInput) as e:
            get_strategy(name, **{key: text})
        msg = str(e.value)
        assert f"strategy {name!r}" in msg and f"{key}={text!r}" in msg, msg
        assert f"expected {describe(base)}" in msg and ("or none" in msg) == optional, msg


@pytest.mark.parametrize(("name", "key"), OPTIONS)
def test_the_default_given_as_text_builds_the_strategy(name, key):
    """Every option's own default, written as text, is accepted end to end (no TypeError)."""
    assert type(get_strategy(name, **{key: _default_text(name, key)})) is STRATEGIES[name]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_window_as_text_caps_the_window_under_every_strategy(name):
    llm = scripted.SCRIPTS["echo"]()
    strategy = get_strategy(name, window="100")
    assert strategy.window == 100
    assert strategy.effective_window(llm) == min(100, llm.context_window)


@pytest.mark.parametrize("name", ["dtcrs", "raptor", "mapreduce"])
def test_several_options_at_once_as_the_cli_gives_them(name):
    from chunkwise.strategies import parse_strategy_args

    types_of = option_types(STRATEGIES[name])
    texts = {k: ("none" if _parts(t)[1] else _default_text(name, k)) for k, t in types_of.items()}
    line = ",".join(f"{k}={v}" for k, v in texts.items())
    assert type(get_strategy(name, **parse_strategy_args(line))) is STRATEGIES[name]


def test_unknown_option_names_the_valid_ones():
    with pytest.raises(
        BadInput,
        match=r"^strategy 'standard': unknown option\(s\) windw \(did you mean 'window'\?\); valid options: ",
    ):
        get_strategy("standard", windw="100")


def test_values_set_from_python_pass_unchanged():
    assert convert_options("s", STRATEGIES["standard"], {"window": 100, "temperature": 0}) == {
        "window": 100,
        "temperature": 0,
    }


class _Odd:
    def __init__(
        self,
        mode: Literal["fast", "slow"] = "fast",
        tags: list[str] | None = None,
        ratio: float | None = None,
        plain=3,
    ):
        pass


def test_literal_list_and_unannotated_options():
    assert option_types(_Odd) == {
        "mode": Literal["fast", "slow"],
        "tags": list[str] | None,
        "ratio": float | None,
        "plain": int,
    }
    got = convert_options("x", _Odd, {"mode": "slow", "tags": "a, b", "ratio": "0.5", "plain": "4"})
    assert got == {"mode": "slow", "tags": ["a", "b"], "ratio": 0.5, "plain": 4}
    with pytest.raises(BadInput, match=r"x: option mode='medium' .*expected one of fast, slow"):
        convert_option("x", "mode", "medium", Literal["fast", "slow"])
    with pytest.raises(BadInput, match=r"option ratio='half' .*expected a number or none"):
        convert_options("x", _Odd, {"ratio": "half"})


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_option_is_documented_once_in_its_strategy(name):
    """The docstring's Options table documents exactly the constructor's options (#46)."""
    from chunkwise.options import option_docs

    docs = option_docs(STRATEGIES[name])
    assert sorted(docs) == sorted(option_types(STRATEGIES[name]))
    assert all(len(text) > 5 for text in docs.values()), docs
