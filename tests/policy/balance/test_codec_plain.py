"""The codec's plain copy of a round's inputs (``policy.balance.codec``): the copy made without
paths gives what the checked walk gives, and anything not plain is refused with its path."""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.balance.codec import MAX_DEPTH, _plain, _plain_checked
from policy.errors import CodecError


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
