"""Pool sizing (cpu-policy §9.4, §9.5): quantities to cpusets, on the spec's (16,2,4) node."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.context import PolicyContext
from policy.cpu.pool_sizing import (
    PoolError,
    apportion_reclaimed_pool,
    generate_pools_and_isolation,
    proportional,
    shrink_proportionally,
    take_cpus_for_containers,
)
from policy.topology.cpuset import CPUSet
from tests.policy.pool_fixtures import CTX
from tests.topologies import SYNTH_16_2_4, SYNTH_96_2_2, cpus

ADJUSTABLE = cpus("1,3-15")  # the fresh node's adjustable CPUs (all but the reserve 0,2)


def _strs(pools: dict[str, CPUSet]) -> dict[str, str]:
    return {name: str(cs) for name, cs in sorted(pools.items())}


@pytest.mark.parametrize(
    ("old", "old_total", "new_total", "ceil", "want"),
    [
        pytest.param(2, 2, 8, False, 8, id="the whole extra for the only pool"),
        pytest.param(1, 4, 10, False, 2, id="2.5 truncates to 2"),
        pytest.param(1, 4, 10, True, 3, id="2.5 rounds up to 3"),
        pytest.param(14, 50, 25, True, 8, id="IEEE: 25*(14/50) is 7.000000000000001, ceil 8"),
        pytest.param(13, 23, 23, False, 12, id="IEEE: 23*(13/23) is 12.999999999999998, trunc 12"),
    ],
)
def test_proportional(old: int, old_total: int, new_total: int, ceil: bool, want: int) -> None:
    assert proportional(old, old_total, new_total, ceil=ceil) == want


@pytest.mark.parametrize(
    ("quantities", "available", "want"),
    [
        pytest.param(
            {"a": 3, "b": 3, "c": 3}, 4, {"a": 1, "b": 1, "c": 2},
            id="ties shrink by name and stop as soon as the total fits",
        ),
        pytest.param(
            {"a": 14, "b": 36}, 25, {"a": 8, "b": 17},
            id="IEEE ceil gives a 8 not 7; the biggest pool gives one back",
        ),
        pytest.param(
            {"a": 5, "b": 5, "c": 5}, 2, {"a": 1, "b": 1, "c": 1},
            id="more pools than CPUs: one each, still too many",
        ),
        pytest.param({"a": 10, "b": 10}, 14, {"a": 7, "b": 7}, id="halves"),
    ],
)  # fmt: skip
def test_shrink_proportionally(
    quantities: dict[str, int], available: int, want: dict[str, int]
) -> None:
    assert shrink_proportionally(quantities, available) == want


# (pools_q, iso_q, available, enable_reclaim) -> (pools, isolated)
GENERATE_CASES = [
    pytest.param(
        {"share": 2}, {}, ADJUSTABLE, False,
        {"reclaim": "7-8,10,15", "reserve": "0,2", "share": "1,3-6,9,11-14"}, {},
        id="spec 9.10: share 2 takes 1,9, then reclaim's surplus above 4",
    ),
    pytest.param(
        {"share": 2}, {}, ADJUSTABLE, True,
        {"reclaim": "3-8,10-15", "reserve": "0,2", "share": "1,9"}, {},
        id="checklist 19: enable_reclaim keeps the surplus in reclaim",
    ),
    pytest.param(
        {"share": 2}, {"pod-a": {"c": 4}}, ADJUSTABLE, False,
        {"reclaim": "7-8,10,15", "reserve": "0,2", "share": "4-6,12-14"},
        {"pod-a": {"c": "1,3,9,11"}},
        id="everything fits: the isolated container first, then the pools",
    ),
    pytest.param(
        {"share": 6}, {"pod-a": {"c": 10}}, ADJUSTABLE, False,
        {"reclaim": "7-8,10,15", "reserve": "0,2", "share": "1,3-6,9,11-14"}, {},
        id="only the pools fit: the isolated container gets nothing",
    ),
    pytest.param(
        {"a": 10, "b": 10}, {}, ADJUSTABLE, False,
        {"a": "1,3-4,6,9,11-12", "b": "5,7-8,10,13-15", "reclaim": "1,3,9,11", "reserve": "0,2"},
        {},
        id="pools shrink to 7 each; nothing left, reclaim falls back onto four CPUs",
    ),
    pytest.param(
        {"a": 3, "b": 3, "c": 3}, {}, cpus("1,3,9,11"), False,
        {"a": "1", "b": "9", "c": "3,11", "reclaim": "1,3,9,11", "reserve": "0,2"}, {},
        id="proportional shrink on 4 CPUs: c keeps 2 by name order",
    ),
    pytest.param(
        {"a": 5, "b": 5, "c": 5}, {}, cpus("1,3"), False,
        {"a": "1,3", "b": "1,3", "c": "1,3", "reclaim": "1,3", "reserve": "0,2"}, {},
        id="quirk 15.8: pools that cannot get one CPU each all get everything",
    ),
    pytest.param(
        {"share": 0, "x": 2}, {"pod-a": {"c": 0}}, ADJUSTABLE, True,
        {"reclaim": "3-8,10-15", "reserve": "0,2", "x": "1,9"}, {},
        id="zero quantities take nothing and make no pool",
    ),
    pytest.param(
        {"reclaim": 2}, {}, ADJUSTABLE, False,
        {"reclaim": "1,3-15", "reserve": "0,2"}, {},
        id="a shared pool named reclaim adds its take to the leftovers",
    ),
    pytest.param(
        {}, {}, CPUSet(), False,
        {"reclaim": "1,3,9,11", "reserve": "0,2"}, {},
        id="nothing available: reclaim falls back onto four CPUs anyway",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pools_q", "iso_q", "available", "enable_reclaim", "want_pools", "want_iso"),
    GENERATE_CASES,
)
def test_generate_pools_and_isolation(
    pools_q: dict[str, int],
    iso_q: dict[str, dict[str, int]],
    available: CPUSet,
    enable_reclaim: bool,
    want_pools: dict[str, str],
    want_iso: dict[str, dict[str, str]],
) -> None:
    ctx = dataclasses.replace(CTX, enable_reclaim=enable_reclaim)
    pools, isolated = generate_pools_and_isolation(ctx, pools_q, iso_q, available)
    assert _strs(pools) == want_pools
    assert {p: _strs(cs) for p, cs in isolated.items()} == want_iso


def test_twenty_overlapping_pools_still_leave_reclaim_four_cpus() -> None:
    pools_q = {f"p{i:02}": 1 for i in range(20)}
    pools, _ = generate_pools_and_isolation(CTX, pools_q, {}, ADJUSTABLE)
    assert all(pools[name] == ADJUSTABLE for name in pools_q)
    # apportion takes one CPU per pool from reclaim (NUMA 0 first) until four are left
    assert str(pools["reclaim"]) == "6-7,14-15"


@pytest.mark.parametrize(
    ("ctx", "pools_q", "available", "message"),
    [
        pytest.param(
            CTX, {"reserve": 2}, ADJUSTABLE,
            "static pool reserve result: 1,9 is generated dynamically",
            id="a shared pool named reserve is refused",
        ),
        pytest.param(
            dataclasses.replace(CTX, reserved=cpus("0-12")), {}, CPUSet(),
            "fallback takeByNUMABalance faild in generatePoolsAndIsolation for reclaimedCPUSet "
            "with error: not enough cpus available to satisfy request: requested=4, available=3",
            id="no reclaim fallback on three non-reserved CPUs",
        ),
    ],
)  # fmt: skip
def test_generate_errors(
    ctx: PolicyContext, pools_q: dict[str, int], available: CPUSet, message: str
) -> None:
    with pytest.raises(PoolError) as err:
        generate_pools_and_isolation(ctx, pools_q, {}, available)
    assert str(err.value) == message


def test_isolated_containers_are_taken_by_pod_then_container() -> None:
    taken, rest = take_cpus_for_containers(
        SYNTH_16_2_4, {"pod-b": {"x": 1}, "pod-a": {"z": 1, "y": 1}}, ADJUSTABLE
    )
    assert {p: _strs(cs) for p, cs in taken.items()} == {
        "pod-a": {"y": "1", "z": "8"},
        "pod-b": {"x": "9"},
    }  # each single-CPU take starts again at NUMA 0
    assert str(rest) == "3-7,10-15"


def test_isolated_take_failure_names_the_container() -> None:
    with pytest.raises(PoolError, match="take cpu for pod: pod-a container: c of req: 20"):
        take_cpus_for_containers(SYNTH_16_2_4, {"pod-a": {"c": 20}}, ADJUSTABLE)


@pytest.mark.parametrize(
    ("pools", "reclaim", "want_pools", "want_reclaim"),
    [
        pytest.param(
            {"share": "1,9"}, "3-8,10-15", {"share": "1,3-6,9,11-14"}, "7-8,10,15",
            id="spec 9.10: the only pool takes all 8 surplus CPUs",
        ),
        pytest.param(
            {"share": "1,9"}, "3-6", {"share": "1,9"}, "3-6",
            id="no surplus above four: unchanged",
        ),
        pytest.param(
            {"reserve": "0,2"}, "1,3-15", {"reserve": "0,2"}, "1,3-15",
            id="no non-resident pool: unchanged",
        ),
        pytest.param(
            {"a": "1", "b": "3,9,11"}, "4-8,10,12-15", {"a": "1,8", "b": "3-4,6,9,11-12,14"},
            "5,7,10,13,15",
            id="by name: a takes trunc(1.5) = 1 CPU, b trunc(4.5) = 4; reclaim ends with 5",
        ),
    ],
)  # fmt: skip
def test_apportion_reclaimed_pool(
    pools: dict[str, str], reclaim: str, want_pools: dict[str, str], want_reclaim: str
) -> None:
    given_pools = {name: cpus(text) for name, text in pools.items()}
    out, left = apportion_reclaimed_pool(SYNTH_16_2_4, given_pools, cpus(reclaim))
    assert _strs(out) == want_pools
    assert str(left) == want_reclaim
    assert {name: str(cs) for name, cs in given_pools.items()} == pools  # inputs untouched


def test_apportion_truncates_in_ieee_doubles() -> None:
    # a has 13 of 23 pooled CPUs and the surplus is 23: 23*(13/23) = 12.999999999999998 → 12.
    all_cpus = CPUSet(range(96))
    a, rest = all_cpus.ids()[:13], all_cpus.ids()[13:]
    b, reclaim = rest[:10], rest[10:37]
    out, left = apportion_reclaimed_pool(
        SYNTH_96_2_2, {"a": CPUSet(a), "b": CPUSet(b)}, CPUSet(reclaim)
    )
    assert (out["a"].size(), out["b"].size(), left.size()) == (25, 20, 5)


@settings(max_examples=60, deadline=None)
@given(
    pools_q=st.dictionaries(st.sampled_from(["a", "b", "c", "share"]), st.integers(0, 20)),
    iso=st.dictionaries(st.sampled_from(["p1", "p2"]), st.integers(0, 6)),
    available_bits=st.integers(0, (1 << 16) - 1),
    enable_reclaim=st.booleans(),
)
def test_generated_pools_keep_their_invariants(
    pools_q: dict[str, int],
    iso: dict[str, int],
    available_bits: int,
    enable_reclaim: bool,
) -> None:
    ctx = dataclasses.replace(CTX, enable_reclaim=enable_reclaim)
    available = CPUSet.from_mask(available_bits).difference(ctx.reserved)
    iso_q = {pod: {"c": q} for pod, q in iso.items()}
    pools, isolated = generate_pools_and_isolation(ctx, pools_q, iso_q, available)
    # reserve is the reserve; reclaim is never empty; pools wanting 0 are absent
    assert pools["reserve"] == ctx.reserved and not pools["reclaim"].is_empty()
    assert all(name in pools for name, q in pools_q.items() if q)
    assert all(name in ("reserve", "reclaim") or pools_q.get(name) for name in pools)
    iso_union = CPUSet.union_all(cs for c in isolated.values() for cs in c.values())
    wanted = sum(pools_q.values())
    # isolated containers get exactly what they ask, from the available CPUs, never shared
    for pod, containers in isolated.items():
        for name, cs in containers.items():
            assert cs.size() == iso_q[pod][name] and cs.is_subset_of(available)
    non_resident = [cs for name, cs in pools.items() if name not in ("reserve", "reclaim")]
    if wanted <= available.size():
        # pools are disjoint from each other and from isolated CPUs, within what was available
        union = CPUSet.union_all(non_resident)
        assert union.size() == sum(cs.size() for cs in non_resident)
        assert union.is_subset_of(available) and not (union & iso_union)
