"""A container's anonymous memory held columnar (``policy.balance.amounts``): it reads,
compares and prints as the read-only map it stands for, and the containers with the same
nodes share one index."""

from __future__ import annotations

from typing import Any

import pytest

from policy.balance import Container, RoundInputs
from policy.balance.amounts import NumaAmounts


@pytest.mark.parametrize(
    ("given", "want"),
    [
        pytest.param({0: 5, 1: 0, 3: 7}, {0: 5.0, 1: 0.0, 3: 7.0}, id="byte counts in order"),
        pytest.param({3: 7, 0: 5.5}, {0: 5.5, 3: 7.0}, id="amounts out of order"),
        pytest.param({"1": 2, "01": 3}, {1: 3.0}, id="two JSON keys naming one node"),
        pytest.param({}, {}, id="no sample on any node"),
    ],
)
def test_amounts_read_like_the_map_they_stand_for(
    given: dict[Any, Any], want: dict[int, float]
) -> None:
    anon = Container("app", given).anon
    assert isinstance(anon, NumaAmounts)
    assert dict(anon) == want and anon == want and want == anon
    assert list(anon) == sorted(want) and len(anon) == len(want)
    assert [anon.get(n) for n in want] == list(want.values()) and anon.get(9) is None
    assert (9 in anon) is False and all(n in anon for n in want)
    assert repr(anon) == f"NumaAmounts({dict(sorted(want.items()))!r})"
    with pytest.raises(KeyError):
        anon[9]


def test_containers_on_the_same_nodes_share_one_index_and_compare_by_value() -> None:
    a = Container("a", {0: 1, 1: 2}).anon
    b = Container("b", {1: 2, 0: 1}).anon
    assert isinstance(a, NumaAmounts) and isinstance(b, NumaAmounts)
    assert a.index is b.index and a == b
    assert a != Container("c", {0: 1, 1: 3}).anon
    assert a.to_json() == {"0": 1.0, "1": 2.0}


def test_amounts_cannot_be_changed() -> None:
    anon = Container("app", {0: 1}).anon
    with pytest.raises(TypeError):
        anon[0] = 2.0  # type: ignore[index]


@pytest.mark.parametrize(
    ("anon", "want"),
    [
        pytest.param({"0": 1, "1": 2}, {0: 1.0, 1: 2.0}, id="keys in NUMA order"),
        pytest.param({"10": 1, "2": 2}, {2: 2.0, 10: 1.0}, id="keys in text order"),
        pytest.param({"1": 2, "01": 3}, {1: 3.0}, id="two keys naming one node, the last holds"),
    ],
)
def test_a_journaled_containers_amounts_are_read_in_numa_order(
    anon: dict[str, int], want: dict[int, float]
) -> None:
    plain = {"uid": "p", "namespace": "ns", "name": "p", "pool": "share"}
    inputs = RoundInputs.from_json(
        {
            "now": 1.0,
            "numaMetrics": [],
            "distances": {"0": []},
            "pools": {},
            "pods": [{**plain, "containers": [{"name": "a", "anon": anon}]}],
        }
    )
    got = inputs.pods[0].containers[0].anon
    assert list(got.items()) == sorted(want.items())
