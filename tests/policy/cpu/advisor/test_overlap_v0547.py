"""Katalyst v0.5.47's ``allow_shared_cores_overlap_reclaimed_cores``: kept from an applied
response, then reclaim overlapping the share-type pools by ratio (``policy.cpu.advisor.overlap``,
``policy.cpu.numa_pools``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.cpu.advisor.decision import AdvisorSettings, apply_advice
from policy.cpu.advisor.overlap import (
    is_share_type_pool,
    reclaim_overlap_share_ratio,
    take_by_numa_balance_reversely,
)
from policy.cpu.pool_engine import adjust_allocation_entries
from policy.cpu.pool_sizing import PoolError
from policy.cpu.reference import V0_5_47
from policy.cpu.txn import Txn
from policy.decision import Event
from policy.state.advisor_section import AdvisorOverlapAllowed
from policy.state.codec import decode_state, encode_state
from policy.state.entries import InPool, OwnCPUs
from policy.state.events import PoolRemoved, PoolSet
from policy.state.sections import empty_state
from tests.policy.cpu.advisor.fixtures import SETTINGS, pool, response
from tests.policy.pool_fixtures import CTX, cpus, fresh_state, pools_of, shared, with_events
from tests.topologies import SYNTH_16_2_4

CTX_V0547 = replace(CTX, reference_version=V0_5_47, advisor_enabled=True, enable_reclaim=True)
EMPTY = empty_state(SYNTH_16_2_4)


@pytest.mark.parametrize(
    ("events", "ratios"),
    [
        # TestDynamicPolicy_getReclaimOverlapShareRatio, policy_allocation_handlers_test.go:73
        # at tag v0.5.47: "overlap enabled, reclaim and share normal"
        pytest.param(
            (PoolSet("reclaim", cpus("0-3")), PoolSet("share", cpus("0-7"))),
            {"share": 0.5},
            id="a share pool half inside reclaim overlaps by half",
        ),
        # same test, :111: "overlap enabled, reclaim and share ramp up"
        pytest.param(
            (
                PoolSet("reclaim", cpus("0-3")),
                shared("pod1", OwnCPUs.of(cpus("0-7")), quantity=4),
            ),
            {"share": 0.5},
            id="no pool overlaps: one minus the requests over the cpusets",
        ),
        pytest.param(
            (PoolSet("reclaim", cpus("0-3")), PoolSet("isolation0", cpus("0-7"))),
            {},
            id="isolation pools are not share-type",
        ),
    ],
)
def test_the_overlap_ratio_of_share_type_pools(
    events: tuple[Event, ...], ratios: dict[str, float]
) -> None:
    assert reclaim_overlap_share_ratio(with_events(EMPTY, *events).cpu) == ratios


def test_without_a_reclaim_pool_the_ratio_fails():
    # same test, :61: "overlap enabled, no reclaim"
    with pytest.raises(PoolError, match="reclaim pool misses in current entries"):
        reclaim_overlap_share_ratio(EMPTY.cpu)


@pytest.mark.parametrize(
    ("name", "share"),
    [
        ("share", True),
        ("share-NUMA1", True),
        ("flink", True),
        ("isolation3", False),
        ("system-x", False),
        ("reclaim", False),
        ("reserve", False),
        ("interrupt", False),
    ],
)
def test_share_type_pools_are_every_pool_but_the_typed_ones(name: str, share: bool) -> None:
    assert is_share_type_pool(name) == share


@pytest.mark.parametrize(
    ("available", "n", "taken"),
    [
        pytest.param("0-15", 5, "1,3,8-9,11", id="highest free core per NUMA, then CPUs"),
        pytest.param("4-7,12-15", 3, "5,12-13", id="NUMA nodes without CPUs are passed by"),
        pytest.param("1,3-15", 7, "1,3,5,8-9,11,13", id="a core with a reserved CPU is not free"),
        pytest.param("4-7", 1, "5", id="one CPU: the first NUMA node's highest"),
    ],
)
def test_take_by_numa_balance_reversely(available: str, n: int, taken: str) -> None:
    # calculator.TakeByNUMABalanceReversely (cpu_assignment.go:527-634 at tag v0.5.47) on
    # the (16,2,4) dummy topology: NUMA n holds cores 2n and 2n+1, core c is CPUs c, c+8.
    got, rest = take_by_numa_balance_reversely(SYNTH_16_2_4, cpus(available), n)
    assert got == cpus(taken) and rest == cpus(available).difference(cpus(taken))


def test_taking_more_than_available_fails():
    with pytest.raises(PoolError, match="not enough cpus available"):
        take_by_numa_balance_reversely(SYNTH_16_2_4, cpus("4-5"), 3)


BASE = with_events(
    fresh_state(CTX_V0547),
    PoolSet("share", cpus("4-7")),
    shared("pod-a", InPool("share"), quantity=2),
)


@pytest.mark.parametrize(
    ("allowed", "pools"),
    [
        pytest.param(
            False,
            {"reclaim": "4-8,10,12-15", "reserve": "0,2", "share": "1,3,9,11"},
            id="not allowed: share gets its size, reclaim the rest",
        ),
        pytest.param(
            True,
            {"reclaim": "1,3,5,8-9,11,13", "reserve": "0,2", "share": "1,3-15"},
            id="allowed: share gets every CPU and reclaim half of them, reversely",
        ),
    ],
)
def test_the_pool_engine_lets_reclaim_overlap_share_while_allowed(
    allowed: bool, pools: dict[str, str]
) -> None:
    # share holds 4-7 and none of reclaim, pod-a asks 2: ratio 1 - 2/4 = 0.5, of 14 CPUs: 7.
    state = with_events(BASE, AdvisorOverlapAllowed(True)) if allowed else BASE
    txn = Txn(state)
    adjust_allocation_entries(txn, CTX_V0547)
    assert pools_of(txn.state) == pools


def test_allowed_without_a_reclaim_pool_the_adjustment_fails_before_sizing():
    state = with_events(BASE, AdvisorOverlapAllowed(True), PoolRemoved("reclaim"))
    with pytest.raises(PoolError, match=r"reclaimOverlapShareRatio failed with error: reclaim"):
        adjust_allocation_entries(Txn(state), CTX_V0547)


GOOD = replace(
    response(pool("share", 6), pool("reserve", 2)),
    allow_shared_cores_overlap_reclaimed_cores=True,
)
EXAMPLE = with_events(fresh_state(), PoolSet("share", cpus("4-7")), shared("p1", InPool("share")))


@pytest.mark.parametrize(
    ("settings", "kept"),
    [
        pytest.param(SETTINGS, False, id="v0.5.3 ignores the flag"),
        pytest.param(AdvisorSettings(replace(CTX, reference_version=V0_5_47)), True, id="v0.5.47"),
    ],
)
def test_an_applied_response_keeps_the_flag_at_v0547_only(
    settings: AdvisorSettings, kept: bool
) -> None:
    decision = apply_advice(EXAMPLE, GOOD, settings, 1.0)
    assert decision.reply.applied
    assert (AdvisorOverlapAllowed(True) in decision.events) == kept
    after = with_events(EXAMPLE, *decision.events)
    assert after.advisor.allow_shared_cores_overlap_reclaimed_cores == kept
    assert decode_state(encode_state(after), SYNTH_16_2_4) == after
    again = apply_advice(after, GOOD, settings, 2.0)
    assert again.events == ()  # kept once: the same response again commits nothing
