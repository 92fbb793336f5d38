"""NUMA-bound blocks at Katalyst v0.5.47 (``generateBlockCPUSet``) next to v0.5.3.

Provenance: kubewharf/katalyst-core v0.5.47
``pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_advisor_handler.go:871-992``. The reference's
own tests at v0.5.47 (``TestAllocateByQoSAwareServerListAndWatchResp`` in ``policy_test.go``)
have no shared-NUMA-binding, isolation or dedicated-reuse block, so these cases are worked out
from that source on the spec's example node (16,2,4), reserve ``0,2``: NUMA 0 is ``0-1,8-9``,
NUMA 1 ``2-3,10-11``, NUMA 2 ``4-5,12-13``, NUMA 3 ``6-7,14-15``; CPU ``i`` and ``i+8`` are
one core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.advisor.blocks import BlockError, generate_block_cpusets
from policy.cpu.advisor.decision import AdvisorSettings, apply_advice
from policy.cpu.advisor.validation import get_blocks
from policy.cpu.reference import V0_5_47 as V0_5_47_VERSION
from policy.state.events import Event, PoolSet
from policy.state.sections import apply_all
from tests.policy.cpu.advisor.fixtures import SETTINGS, info, pool, response
from tests.policy.pool_fixtures import (
    CTX,
    cpus,
    dedicated,
    fresh_state,
    ramping,
    result_of,
    with_events,
)

RESERVE = pool("reserve", 2, block_id="reserve-block")


def dedicated_entry(pod: str, numas: Mapping[int, list[tuple[int, str]]]) -> dict[str, Any]:
    return {pod: {"c": info("dedicated", numas)}}


@dataclass(frozen=True)
class Case:
    id: str
    parts: tuple[Mapping[str, Any], ...]
    at_v0_5_3: Mapping[str, str] | str
    at_v0_5_47: Mapping[str, str] | str
    events: tuple[Event, ...] = field(default=())


CASES = [
    Case(
        "a shared NUMA binding pool withholds the rest of its NUMA node from non-binding pools",
        # share-NUMA1 takes the free whole core 3/11; CPU 10 is left in NUMA 1. At v0.5.3 a
        # 12-CPU share pool still reaches it; at v0.5.47 NUMA 1 is withheld (:976-991).
        (RESERVE, pool("share-NUMA1", 2, numa=1), pool("share", 11)),
        {"reserve-block": "0,2", "share-NUMA1-block": "3,11", "share-block": "1,4-9,12-15"},
        {"reserve-block": "0,2", "share-NUMA1-block": "3,11", "share-block": "1,4-9,12-15"},
    ),
    Case(
        "a non-binding pool that needs the withheld CPUs is refused at v0.5.47 only",
        (RESERVE, pool("share-NUMA1", 2, numa=1), pool("share", 12)),
        {"reserve-block": "0,2", "share-NUMA1-block": "3,11", "share-block": "1,4-10,12-15"},
        "allocate cpuset for non NUMA Aware block: share-block failed with error",
    ),
    Case(
        "an isolation pool withholds its NUMA node as a shared NUMA binding pool does",
        (RESERVE, pool("isolation0", 2, numa=2), pool("share", 10)),
        {"reserve-block": "0,2", "isolation0-block": "4,12", "share-block": "1,3,5-7,9,11,13-15"},
        {"reserve-block": "0,2", "isolation0-block": "4,12", "share-block": "1,3,6-11,14-15"},
    ),
    Case(
        "a plain pool with a NUMA block does not withhold its NUMA node",
        (RESERVE, pool("share", 2, numa=1), pool("batch", 12)),
        {"reserve-block": "0,2", "share-block": "3,11", "batch-block": "1,4-10,12-15"},
        {"reserve-block": "0,2", "share-block": "3,11", "batch-block": "1,4-10,12-15"},
    ),
    Case(
        "a dedicated block keeps the CPUs its container already has in that NUMA node",
        # The container holds 10,11 (not one core). v0.5.3 takes the best fit, the whole core
        # 3/11; v0.5.47 keeps 10,11 (:913-925).
        (RESERVE, dedicated_entry("pod-d", {1: [(2, "d")]})),
        {"reserve-block": "0,2", "d": "3,11"},
        {"reserve-block": "0,2", "d": "10-11"},
        (dedicated("pod-d", "10-11"),),
    ),
    Case(
        "a dedicated block that grows keeps its CPUs and adds the missing ones of its NUMA node",
        (RESERVE, dedicated_entry("pod-d", {1: [(3, "d")]})),
        {"reserve-block": "0,2", "d": "3,10-11"},
        {"reserve-block": "0,2", "d": "3,10-11"},
        (dedicated("pod-d", "11"),),
    ),
    Case(
        "a dedicated block withholds its NUMA node from non-binding pools",
        (RESERVE, dedicated_entry("pod-d", {1: [(2, "d")]}), pool("share", 12)),
        {"reserve-block": "0,2", "d": "3,11", "share-block": "1,4-10,12-15"},
        "allocate cpuset for non NUMA Aware block: share-block failed with error",
        (dedicated("pod-d", "10-11"),),
    ),
    Case(
        "a dedicated block whose container has no CPUs in that NUMA node is left without CPUs",
        (RESERVE, dedicated_entry("pod-d", {1: [(2, "d")]})),
        {"reserve-block": "0,2", "d": "3,11"},
        {"reserve-block": "0,2"},
        (dedicated("pod-d", "1,9"),),
    ),
]


def blocks_of(case: Case, *, at_v0_5_47: bool) -> dict[str, str]:
    state = with_events(fresh_state(), *case.events) if case.events else fresh_state()
    resp = response(*case.parts)
    mapped = generate_block_cpusets(state.cpu, resp, get_blocks(resp), at_v0_5_47=at_v0_5_47)
    return {block: str(cpuset) for block, cpuset in mapped.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_at_v0_5_47(case: Case) -> None:
    if isinstance(case.at_v0_5_47, str):
        with pytest.raises(BlockError, match=case.at_v0_5_47):
            blocks_of(case, at_v0_5_47=True)
        return
    assert blocks_of(case, at_v0_5_47=True) == dict(case.at_v0_5_47)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_at_v0_5_3_nothing_changes(case: Case) -> None:
    assert isinstance(case.at_v0_5_3, Mapping)
    assert blocks_of(case, at_v0_5_47=False) == dict(case.at_v0_5_3)


def test_withheld_numa_nodes_never_reach_a_non_binding_block() -> None:
    resp = response(
        RESERVE,
        pool("share-NUMA1", 1, numa=1),
        pool("isolation3", 1, numa=3),
        pool("share", 4),
    )
    mapped = generate_block_cpusets(fresh_state().cpu, resp, get_blocks(resp), at_v0_5_47=True)
    assert mapped["share-block"].intersection(cpus("2-3,6-7,10-11,14-15")).is_empty()


# Ramp-up CPUs without the shared-binding NUMA nodes: v0.5.47 ``applyBlocks``
# (``policy_advisor_handler.go:1146-1156``) with ``GetSharedBindingNUMAs``
# (``cpuadvisor/helper.go:53-86``), which recognises such an entry by its shape (a pool entry
# with one NUMA key and no NUMA -1 result), not by its name.
V0_5_47 = AdvisorSettings(replace(CTX, reference_version=V0_5_47_VERSION))

RAMP_CASES = [
    pytest.param(
        (RESERVE, pool("share-NUMA1", 2, numa=1), pool("share", 4)),
        "1,3-15",
        "1,4-9,12-15",
        id="a shared NUMA binding pool keeps its NUMA node out of the ramp-up CPUs",
    ),
    pytest.param(
        (RESERVE, pool("isolation0", 2, numa=2), pool("share", 4)),
        "1,3-15",
        "1,3,6-11,14-15",
        id="any pool entry with a single NUMA block counts as shared binding, whatever its name",
    ),
    pytest.param(
        (RESERVE, pool("share", 4)),
        "1,3-15",
        "1,3-15",
        id="without a single-NUMA pool entry the ramp-up CPUs are as at v0.5.3",
    ),
]


@pytest.mark.parametrize(("parts", "at_v0_5_3", "at_v0_5_47"), RAMP_CASES)
def test_ramp_up_cpus(
    parts: tuple[Mapping[str, Any], ...], at_v0_5_3: str, at_v0_5_47: str
) -> None:
    state = with_events(fresh_state(), PoolSet("share", cpus("4-7")))
    state = with_events(state, ramping(state, "pod-r"))
    resp = response(*parts)
    for level, expected in ((SETTINGS, at_v0_5_3), (V0_5_47, at_v0_5_47)):
        decision = apply_advice(state, resp, level, 0.0)
        assert decision.error is None, decision.error
        after = apply_all(state, decision.events)
        assert result_of(after, "pod-r") == expected


def test_a_pool_entry_with_only_a_nil_numa_minus_one_result_is_refused_at_v0_5_47_only() -> None:
    # GetSharedBindingNUMAs takes the entry for a shared-binding one (its NUMA -1 result is
    # nil) and refuses its negative NUMA id; v0.5.3 has no such check.
    state = with_events(fresh_state(), PoolSet("share", cpus("4-7")))
    resp = response(RESERVE, pool("share", 4), {"batch": {"": info("batch", {-1: None})}})
    assert apply_advice(state, resp, SETTINGS, 0.0).error is None
    assert str(apply_advice(state, resp, V0_5_47, 0.0).error) == (
        "applyBlocks failed with error: GetSharedBindingNUMAs failed with error: "
        "SharedNUMABindingPoolEntry has invalid numaID: -1"
    )


def test_reclaim_falls_back_on_the_start_up_reserved_reclaimed_set_at_v0_5_47() -> None:
    # reviseReclaimPool (policy_advisor_handler.go:1344-1349) takes p.reservedReclaimedCPUSet,
    # TakeHTByNUMABalance of max(4, NUMAs) CPUs at start-up: 1,3-4,6 on this node; v0.5.3
    # takes four NUMA-balanced CPUs, 1,3,9,11 (test_application).
    state = with_events(fresh_state(), PoolSet("share", cpus("4-7")))
    resp = response(RESERVE, pool("share", 14))
    for level, expected in ((SETTINGS, "1,3,9,11"), (V0_5_47, "1,3-4,6")):
        decision = apply_advice(state, resp, level, 0.0)
        assert decision.error is None, decision.error
        assert str(apply_all(state, decision.events).cpu.pools["reclaim"]) == expected


@settings(max_examples=200, deadline=None)
@given(
    bound=st.dictionaries(
        st.sampled_from(["share-NUMA0", "share-NUMA1", "isolation2", "isolation3", "batch-NUMA3"]),
        st.integers(0, 4),
        max_size=4,
    ),
    share=st.integers(0, 14),
)
def test_non_binding_blocks_never_share_a_numa_node_with_numa_bound_pools(
    bound: dict[str, int], share: int
) -> None:
    numa_of = {"share-NUMA0": 0, "share-NUMA1": 1, "isolation2": 2, "isolation3": 3,
               "batch-NUMA3": 3}  # fmt: skip
    parts = [pool(name, size, numa=numa_of[name]) for name, size in bound.items()]
    resp = response(RESERVE, *parts, pool("share", share))
    topology = fresh_state().cpu.topology
    try:
        mapped = generate_block_cpusets(fresh_state().cpu, resp, get_blocks(resp), at_v0_5_47=True)
    except BlockError:
        return
    blocks = list(mapped.values())
    for i, one in enumerate(blocks):
        for other in blocks[i + 1 :]:
            assert one.intersection(other).is_empty()
    bound_numas = sorted({numa_of[name] for name in bound})
    withheld = topology.cpu_details.cpus_in_numa_nodes(*bound_numas)
    assert mapped["share-block"].intersection(withheld).is_empty()
