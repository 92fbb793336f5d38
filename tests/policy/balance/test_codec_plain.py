"""The codec's plain form of a round's inputs (``policy.balance.codec``): a value plain in exact
types is kept as it is, anything else is copied, the copy made without paths gives what the
checked walk gives, and anything not plain is refused with its path."""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.balance import BalanceInfo, RoundInputs, plan_round
from policy.balance.codec import (
    MAX_DEPTH,
    _is_plain,
    _plain,
    _plain_checked,
    encode_balance_event,
)
from policy.balance.events import BalanceRoundFailed, BalanceRoundRecorded
from policy.errors import CodecError
from tests.policy.balance.test_properties import round_inputs


class Level(enum.StrEnum):
    HIGH = "high"


numbers = st.integers() | st.floats(allow_nan=False)
scalars = st.none() | st.booleans() | numbers | st.text(max_size=4)
plain_values = st.recursive(
    scalars | st.just(Level.HIGH),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=4)
        | st.dictionaries(st.text(max_size=3), inner, max_size=4).map(MappingProxyType)
    ),
    max_leaves=30,
)


@given(plain_values)
def test_the_copy_equals_the_checked_walk(value: Any) -> None:
    assert _plain(value, "inputs", 0) == _plain_checked(value, "inputs", 0)


exact_plain_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(exact_plain_values)
def test_a_value_plain_in_exact_types_is_kept_as_it_is(value: Any) -> None:
    assert _is_plain(value, 0)
    assert _plain(value, "inputs", 0) is value


def _exact(value: Any) -> bool:
    """The rule, value by value: exact dicts with str keys, exact lists, exact scalars."""
    if type(value) in (type(None), bool, int, float, str):
        return True
    if type(value) is dict:
        return all(type(k) is str for k in value) and all(map(_exact, value.values()))
    return type(value) is list and all(map(_exact, value))


@given(plain_values)
def test_the_bulk_check_agrees_with_the_rule_value_by_value(value: Any) -> None:
    assert _is_plain(value, 0) == _exact(value)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"pods": [{"anon": {"0": 1.0}}, ({"anon": {"0": 2.0}},)]},
                     id="a tuple deep inside"),
        pytest.param({"pods": [{"anon": MappingProxyType({"0": 1.0})}]},
                     id="a read-only map deep inside"),
        pytest.param({"pods": [{"pool": Level.HIGH}]}, id="a str subclass deep inside"),
        pytest.param({"pods": [{"anon": {1: 2.0}}]}, id="a number key deep inside"),
    ],
)  # fmt: skip
def test_anything_else_is_not_taken_as_plain(value: Any) -> None:
    assert not _is_plain(value, 0)


def test_the_copy_is_a_copy_in_plain_types() -> None:
    anon = {"0": 1.0, "1": 2.0}
    inputs = {"pods": ({"anon": anon},), "frozen": MappingProxyType({"a": [1, 2]})}
    copied = _plain(inputs, "inputs", 0)
    assert copied == {"pods": [{"anon": anon}], "frozen": {"a": [1, 2]}}
    assert type(copied["pods"]) is list and type(copied["frozen"]) is dict
    assert copied["pods"][0]["anon"] is not anon


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param({"pods": [{"anon": {1: 2.0}}]},
                     r"inputs\.pods\[0\]\.anon: keys must be strings",
                     id="a number key deep inside names its path"),
        pytest.param({"pods": [{"anon": {"0": object()}}]},
                     r"inputs\.pods\[0\]\.anon\.0: object is not a plain value",
                     id="an object deep inside names its path"),
        pytest.param({"pods": {1, 2}}, r"inputs\.pods: set is not a plain value",
                     id="a set is not plain"),
        pytest.param(_nested(MAX_DEPTH + 1), "nested deeper than", id="too deep a nesting"),
    ],
)  # fmt: skip
def test_what_is_not_plain_is_refused_with_its_path(value: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        _plain(value, "inputs", 0)


def test_a_nesting_at_the_limit_is_plain() -> None:
    assert _plain(_nested(MAX_DEPTH), "inputs", 0) == _nested(MAX_DEPTH)


def test_the_bulk_check_keeps_the_depth_limit() -> None:
    at_limit = _nested(MAX_DEPTH)
    assert _is_plain(at_limit, 0) and _plain(at_limit, "inputs", 0) is at_limit
    assert not _is_plain(_nested(MAX_DEPTH + 1), 0)


@given(round_inputs())
def test_a_rounds_inputs_are_plain_by_construction_and_packed_in_their_journal_form(
    inputs: RoundInputs,
) -> None:
    # The codec packs a live round's PlainInputs without walking it: to_json and to_journal
    # must build nothing but exact plain types; the event packs the journal form (the pods
    # as columns), while the live value still reads as the dict form.
    form, journal = inputs.to_json(), inputs.to_journal()
    assert _is_plain(form, 0) and _is_plain(journal, 0)
    plain = inputs.plain()
    assert plain == form and form == plain
    record = plan_round(inputs).record or BalanceInfo(inputs.now)
    assert encode_balance_event(BalanceRoundRecorded(record, plain))["inputs"] == journal
    assert encode_balance_event(BalanceRoundFailed(plain, "x")) == {"inputs": journal, "error": "x"}
    # A dict form (a round decoded from a journal written before the columns) is kept as is.
    assert encode_balance_event(BalanceRoundFailed(form, "x")) == {"inputs": form, "error": "x"}


def test_plain_inputs_cannot_be_changed() -> None:
    plain = RoundInputs(now=1.0, numa_metrics={}, distances={0: ()}, pools={}, pods=()).plain()
    with pytest.raises(TypeError):
        plain["now"] = 2.0  # type: ignore[index]
