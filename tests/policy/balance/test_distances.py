"""The distance lists checked once (memory-balancer §4.4, ``policy.balance.distances``): the
same checks and messages as inputs built from a plain map, and a round on checked lists is
the round on the plain map."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.balance import BalanceError, RoundInputs, plan_round
from policy.balance.distances import DistanceLists, NumaDistance
from tests.policy.balance.examples import EX2_B, EX2_L, EX2_PODS, make_inputs

INPUTS = make_inputs(EX2_L, EX2_B, EX2_PODS)


@pytest.mark.parametrize(
    ("lists", "message"),
    [
        pytest.param({}, "distances: the distance map holds no NUMA node", id="no node at all"),
        pytest.param({0: (NumaDistance(1, 11), NumaDistance(1, 21))},
                     r"distances\[0\]: a NUMA id appears twice in \[1, 1\]", id="an id twice"),
        pytest.param({0: (NumaDistance(1, 0),)},
                     r"distances\[0\] distance to NUMA 1: 0 is outside", id="a zero distance"),
    ],
)  # fmt: skip
def test_checked_lists_refuse_what_round_inputs_refuse(
    lists: dict[int, tuple[NumaDistance, ...]], message: str
) -> None:
    with pytest.raises(BalanceError, match=message):
        DistanceLists(lists)
    with pytest.raises(BalanceError, match=message):
        replace(INPUTS, distances=lists)


def test_inputs_keep_checked_lists_and_equal_inputs_on_the_plain_map() -> None:
    plain = {numa: tuple(entries) for numa, entries in reversed(list(INPUTS.distances.items()))}
    checked = DistanceLists(plain)
    assert list(checked) == sorted(plain) and checked == plain
    on_checked = replace(INPUTS, distances=checked)
    on_plain = replace(INPUTS, distances=plain)
    assert on_checked.distances is checked
    assert isinstance(on_plain.distances, DistanceLists)
    assert on_checked == on_plain and on_checked.to_json() == on_plain.to_json()
    assert plan_round(on_checked) == plan_round(on_plain)
    assert RoundInputs.from_json(on_checked.to_json()) == on_checked


def test_checked_lists_cannot_be_changed() -> None:
    checked = DistanceLists({0: (NumaDistance(0, 10),)})
    with pytest.raises(TypeError):
        checked[1] = ()  # type: ignore[index]
    with pytest.raises(AttributeError):
        checked.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "lists",
    [
        pytest.param({0: (NumaDistance(0, 10), NumaDistance(1, 21)), 1: (NumaDistance(0, 21),)},
                     id="a sysfs list with the node itself, and one without"),
        pytest.param({3: (NumaDistance(2, 11),), 1: (NumaDistance(3, 31), NumaDistance(2, 11))},
                     id="nodes given out of order, entries kept in the source's order"),
    ],
)  # fmt: skip
def test_the_kept_plain_form_is_the_form_of_the_lists_every_time(
    lists: dict[int, tuple[NumaDistance, ...]],
) -> None:
    # The form is made once and handed out again; it must be the one a fresh reading of the
    # lists gives, in the inputs' form too, at every call.
    checked = DistanceLists(lists)
    expected = {str(n): [[e.numa_id, e.distance] for e in lists[n]] for n in sorted(lists)}
    for _ in range(2):
        assert checked.to_json() == expected
        assert list(checked.to_json()) == list(expected)
        form = replace(INPUTS, distances=checked).to_json()
        assert form["distances"] == expected
        assert RoundInputs.from_json(form).distances == checked
