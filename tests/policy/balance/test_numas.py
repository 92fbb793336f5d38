"""Source and destination NUMA selection, step by step (spec memory-balancer §7.3–§7.9)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.balance import BalanceLevel, BalancerConfig, BandwidthLevel
from policy.balance.gojson import to_nanos
from policy.balance.numas import (
    bandwidth_level,
    candidates_by_bandwidth,
    candidates_by_distance_and_latency,
    destinations,
    latency_pressure,
    max_bandwidth_numa,
    max_latency_numa,
    nanos,
)
from tests.policy.balance.examples import NOW, D, N, distances, last_round

CFG = BalancerConfig().resolve("GenuineIntel")


def test_max_picks_lowest_id_on_ties() -> None:
    raw = [N(0, 50, 10), N(1, 70, 30), N(2, 70, 30)]
    assert max_latency_numa(raw).numa_id == 1
    assert max_bandwidth_numa(raw).numa_id == 1


def test_candidates_sort_by_distance_then_latency_and_skip_unknown_nodes() -> None:
    raw = [N(0, 90, 1), N(1, 50, 2), N(2, 30, 3), N(3, 40, 4)]
    entries = distances({0: [(7, 11), (1, 11), (2, 21), (3, 11)]})[0]
    assert [n.numa_id for n in candidates_by_distance_and_latency(raw, entries)] == [3, 1, 2]
    assert [n.numa_id for n in candidates_by_bandwidth(raw, entries)] == [1, 2, 3]


@pytest.mark.parametrize(
    ("latency", "nearest", "want"),
    [
        pytest.param(80.5, D(1, 79, 1, 11), BalanceLevel.FORCE, id="above 80 is force"),
        pytest.param(80, D(1, 79, 1, 11), BalanceLevel.GRACE, id="80 is not above 80: grace"),
        pytest.param(70, D(1, 29, 1, 11), BalanceLevel.GRACE, id="gap 41 within distance 19"),
        pytest.param(70, D(1, 30, 1, 11), BalanceLevel.NONE, id="gap of exactly 40 is not over"),
        pytest.param(70, D(1, 0, 1, 19), BalanceLevel.GRACE, id="distance 19 still counts"),
        pytest.param(70, D(1, 0, 1, 20), BalanceLevel.NONE, id="distance 20 is too far"),
    ],
)
def test_latency_pressure(latency: float, nearest: object, want: BalanceLevel) -> None:
    hottest = N(0, latency, 1)
    assert latency_pressure(hottest, [nearest], CFG) is want  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("hot_bw", "want"),
    [
        pytest.param(801, BandwidthLevel.HIGH, id="ratio 0.801 is high"),
        pytest.param(800, BandwidthLevel.MEDIUM, id="ratio 0.8 is medium"),
        pytest.param(501, BandwidthLevel.MEDIUM, id="ratio 0.501 is medium"),
        pytest.param(500, BandwidthLevel.LOW, id="ratio 0.5 is low"),
    ],
)
def test_bandwidth_level_boundaries(hot_bw: float, want: BandwidthLevel) -> None:
    assert bandwidth_level(N(0, 90, hot_bw), N(1, 10, 1000)) is want


def test_same_node_is_high_whatever_the_numbers() -> None:
    assert bandwidth_level(N(0, 90, 0.5), N(0, 90, 0.5)) is BandwidthLevel.HIGH


def test_grace_filter_stops_at_the_first_far_node_force_filter_does_not() -> None:
    cands = [D(1, 10, 1, 11), D(2, 10, 1, 21), D(3, 10, 1, 11)]
    source = N(0, 100, 1)
    grace = destinations(
        cands,
        source,
        level=BalanceLevel.GRACE,
        bandwidth_pressure=False,
        cfg=CFG,
        last=None,
        now_ns=0,
    )
    force = destinations(
        cands,
        source,
        level=BalanceLevel.FORCE,
        bandwidth_pressure=False,
        cfg=CFG,
        last=None,
        now_ns=0,
    )
    assert [n.numa_id for n in grace] == [1]
    assert [n.numa_id for n in force] == [1, 2, 3]


def test_bandwidth_pressure_filters_by_bandwidth() -> None:
    source = N(2, 30, 1000)
    cands = [D(1, 999, 869, 11), D(3, 999, 870, 11)]  # 869.57 * 1.15 = 1000 is the limit
    kept = destinations(
        cands,
        source,
        level=BalanceLevel.FORCE,
        bandwidth_pressure=True,
        cfg=CFG,
        last=None,
        now_ns=0,
    )
    assert [n.numa_id for n in kept] == [1]


def test_ping_pong_needs_the_exact_reverse() -> None:
    last = last_round(1, [0, 3], 1)
    cands = [D(1, 10, 1, 11), D(2, 10, 1, 21)]
    kept = destinations(
        cands,
        N(0, 100, 1),
        level=BalanceLevel.FORCE,
        bandwidth_pressure=False,
        cfg=CFG,
        last=last,
        now_ns=to_nanos(NOW),
    )
    assert [n.numa_id for n in kept] == [2]
    kept = destinations(
        cands,
        N(2, 100, 1),
        level=BalanceLevel.FORCE,
        bandwidth_pressure=False,
        cfg=CFG,
        last=last,
        now_ns=to_nanos(NOW),
    )
    assert [n.numa_id for n in kept] == [1], "source 2 was not a destination of the last round"


# Times converted over and over (a round's and the last emitted round's), interleaved with
# others, of both number types the inputs may carry.
_TIMES = st.lists(
    st.one_of(
        st.floats(min_value=0, max_value=253_402_300_799, allow_nan=False),
        st.integers(min_value=0, max_value=253_402_300_799),
        st.sampled_from([NOW, NOW + 5.0, 1.0, 1, 0.0, -0.0]),
    ),
    min_size=1,
    max_size=30,
)


@given(_TIMES)
def test_remembered_nanoseconds_are_to_nanos_own(times: list[float]) -> None:
    for time_s in times:
        assert nanos(time_s) == to_nanos(time_s)


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(math.nan, id="not a number is refused every time"),
        pytest.param(math.inf, id="infinity is refused every time"),
        pytest.param(True, id="a bool after the number 1 is refused, not taken for 1"),
    ],
)
def test_a_time_to_nanos_refuses_is_refused_again_not_remembered(refused: float) -> None:
    nanos(1)
    for _ in range(2):
        with pytest.raises((ValueError, OverflowError, ArithmeticError)):
            to_nanos(refused)
        with pytest.raises((ValueError, OverflowError, ArithmeticError)):
            nanos(refused)
