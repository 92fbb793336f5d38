"""A container's anonymous memory per NUMA node as the inputs take it (memory-balancer §4.2,
``policy.balance.decode.anon_by_numa``): the bulk checks give what the per-value checks give,
and refuse what they refuse, naming the value."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.balance import BalanceError, Container
from policy.balance.decode import INT64_MAX, anon_by_numa, as_float, as_int, in_numa_order, int_key

AMOUNTS = st.integers(-5, INT64_MAX + 2**11) | st.floats() | st.booleans()
KEYS = st.integers(-2, 64) | st.from_regex(r"\A(-?[0-9]{1,3}|x)\Z")


def checked_one_by_one(value: dict[Any, Any]) -> dict[int, float] | str:
    """The per-value rules, each value alone: the result, or the refusal's message."""
    out: dict[int, float] = {}
    try:
        for key, raw in value.items():
            numa = int_key(key, "anon") if isinstance(key, str) else as_int(key, "anon key")
            out[numa] = as_float(raw, f"anon[{key!r}]", maximum=float(INT64_MAX))
    except BalanceError as err:
        return str(err)
    return out


@given(st.dictionaries(KEYS, AMOUNTS, max_size=8))
def test_bulk_checks_agree_with_the_per_value_rules(value: dict[Any, Any]) -> None:
    want = checked_one_by_one(value)
    try:
        got: dict[int, float] | str = anon_by_numa(value, "anon")
    except BalanceError as err:
        got = str(err)
    assert got == want


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param({0: -1}, r"anon\[0\]: -1 is outside", id="a negative byte count"),
        pytest.param({0: math.nan}, r"anon\[0\]: expected a finite number", id="not a number"),
        pytest.param({0: True}, r"anon\[0\]: expected a number", id="a boolean"),
        pytest.param({-1: 5}, "anon key: -1 is outside", id="a negative NUMA id"),
    ],
)
def test_what_is_not_a_byte_count_is_refused_by_name(value: dict[Any, Any], message: str) -> None:
    with pytest.raises(BalanceError, match=message):
        anon_by_numa(value, "anon")


def test_integer_byte_counts_become_floats_in_numa_order_given() -> None:
    got = anon_by_numa({3: 4096, 1: 0, 2: INT64_MAX}, "anon")
    assert got == {3: 4096.0, 1: 0.0, 2: float(INT64_MAX)}
    assert all(type(v) is float for v in got.values())


@given(st.dictionaries(st.integers(-1, 64), st.integers(0, 2**40), max_size=10), st.randoms())
def test_amounts_come_out_in_numa_order_whatever_order_they_came_in(
    amounts: dict[int, int], shuffle: Any
) -> None:
    given_order = list(amounts.items())
    shuffle.shuffle(given_order)
    ordered = in_numa_order(dict(given_order))
    assert list(ordered.items()) == sorted(amounts.items())


def test_a_container_keeps_its_anon_in_numa_order() -> None:
    assert list(Container("app", {3: 1.0, 0: 2.0, 1: 0.0}).anon) == [0, 1, 3]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param({0.0: 1, 1: 2}, r"anon key: expected an integer, got 0\.0", id="a float key"),
        pytest.param({0: 1, True: 2}, "anon key: expected an integer, got True", id="a bool key"),
    ],
)
def test_keys_equal_to_a_set_already_seen_are_still_checked_by_type(
    value: dict[Any, Any], message: str
) -> None:
    # The same nodes as ints first: the bulk check remembers that set as valid and ordered.
    assert anon_by_numa({0: 1, 1: 2}, "anon") == {0: 1.0, 1: 2.0}
    with pytest.raises(BalanceError, match=message):
        anon_by_numa(value, "anon")


@pytest.mark.parametrize(
    "given",
    [
        pytest.param({2: 5, 0: 7, 1: 0}, id="integer byte counts out of order"),
        pytest.param({"2": 5, "0": 7.5, "10": 1}, id="JSON keys out of order"),
        pytest.param({0: 7, 1: 0, 2: 5}, id="already in order"),
    ],
)
def test_a_container_built_in_bulk_holds_its_anon_in_numa_order(given: dict[Any, Any]) -> None:
    anon = Container("app", given).anon
    assert list(anon) == sorted(int(k) for k in given)
    assert dict(anon) == {int(k): float(v) for k, v in given.items()}


@pytest.mark.parametrize(
    "given",
    [
        pytest.param({0: 1, 1: 2, 2: 3}, id="ints in order"),
        pytest.param({2: 3, 0: 1, 1: 2}, id="ints out of order"),
        pytest.param({0.0: 1, 1: 2, 2: 3}, id="a float key equal to a known node, in order"),
        pytest.param({2: 3, True: 2, 0: 1}, id="a bool key equal to a known node, out of order"),
    ],
)
def test_amounts_come_out_in_numa_order_once_a_set_of_nodes_is_known(
    given: dict[Any, int],
) -> None:
    in_numa_order({0: 0, 1: 0, 2: 0})  # the set of nodes, known as ascending from now on
    ordered = in_numa_order(given)
    assert list(ordered.items()) == sorted(given.items())
