"""§9.8 placement with few events equals the reference's rewrite of every container.

``apply_pools_and_isolated`` emits events only for containers whose placement changes; the
oracle here is §9.8 step 6 taken literally over every container's full AllocationInfo (the
O(pods) way the reference does it). On random states and random pool results, the records
derived from the new state must equal the oracle's, field by field.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.context import PolicyContext
from policy.cpu.pool_apply import apply_pools_and_isolated
from policy.cpu.txn import Txn
from policy.state.entries import (
    DEDICATED_CORES,
    RAMPING,
    RECLAIMED_CORES,
    SHARED_CORES,
    AllocationInfo,
    InPool,
    OwnCPUs,
    Placement,
    requested_cores,
)
from policy.state.events import ContainerAllocated, Event, PoolSet, RampCPUsSet
from policy.state.sections import empty_state
from policy.topology.cpuset import CPUSet
from tests.policy.pool_fixtures import decide, with_events
from tests.policy.state_fixtures import container
from tests.topologies import SYNTH_16_2_4

TOPOLOGY = SYNTH_16_2_4
RESERVED = CPUSet.parse("0,2")
POOL_NAMES = ("batch", "flink", "share")
ALL = (1 << 16) - 1


@dataclass(frozen=True)
class Expected:
    owner: str
    result: CPUSet
    original: CPUSet
    request_quantity: float


def cpusets(min_size: int = 0) -> st.SearchStrategy[CPUSet]:
    return st.integers(0, ALL).map(CPUSet.from_mask).filter(lambda c: c.size() >= min_size)


Scenario = tuple[list[Event], dict[str, CPUSet], dict[str, dict[str, CPUSet]]]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    pools = {name: draw(cpusets()) for name in POOL_NAMES if draw(st.booleans())}
    pools["reclaim"] = draw(cpusets(1))
    pools["reserve"] = RESERVED
    events: list[Event] = [PoolSet(name, cpus) for name, cpus in sorted(pools.items())]
    ramp = draw(st.none() | cpusets())
    if ramp is not None:
        events.append(RampCPUsSet(ramp))
    dedicated_pods: list[str] = []
    for i in range(draw(st.integers(0, 10))):
        pod = f"pod-{i}"
        kind = draw(st.sampled_from(["pooled", "ramping", "own", "reclaimed", "dnb", "isolated"]))
        ramp_up = draw(st.booleans())
        quantity = draw(st.sampled_from([0.0, 0.5, 2.0]))
        pool = draw(st.sampled_from(["", *POOL_NAMES]))
        placement: Placement
        if kind == "pooled" and pool in pools:
            placement, owner, qos = InPool(pool), pool, SHARED_CORES
        elif kind == "ramping" and ramp is not None:
            placement, owner, qos, ramp_up = RAMPING, "", SHARED_CORES, True
        elif kind == "reclaimed":
            placement, owner, qos = InPool("reclaim"), "reclaim", RECLAIMED_CORES
        elif kind in ("dnb", "isolated"):
            placement, qos = OwnCPUs.of(draw(cpusets())), DEDICATED_CORES
            owner = draw(st.sampled_from(["", "dedicated", "fallback"]))
            dedicated_pods.append(pod)
        else:
            placement, owner, qos = OwnCPUs(draw(cpusets()), draw(cpusets())), pool, SHARED_CORES
        events.append(
            ContainerAllocated(
                container(
                    pod,
                    "c",
                    placement,
                    qos=qos,
                    ramp_up=ramp_up,
                    owner=owner,
                    quantity=quantity,
                    numa_binding=kind == "dnb",
                    cpuset_pool=pool,
                    container_type=draw(st.sampled_from(["MAIN", "SIDECAR"])),
                )
            )
        )
    new_pools = {name: draw(cpusets()) for name in POOL_NAMES if draw(st.booleans())}
    new_pools["reclaim"] = draw(cpusets(1))
    new_pools["reserve"] = RESERVED
    chosen = draw(st.lists(st.sampled_from(dedicated_pods), unique=True)) if dedicated_pods else []
    iso = {pod: {"c": draw(cpusets(1))} for pod in chosen}
    return events, new_pools, iso


def oracle(
    infos: list[AllocationInfo],
    pools_cs: dict[str, CPUSet],
    iso_cs: dict[str, dict[str, CPUSet]],
    adjustable: CPUSet,
    ctx: PolicyContext,
) -> dict[tuple[str, str], Expected]:
    """§9.8 steps 2, 5 and 6, literally, over every container."""
    by_key = {(ai.pod_uid, ai.container_name): ai for ai in infos}
    new: dict[tuple[str, str], Expected] = {}
    iso_union = CPUSet()
    for pod, containers in iso_cs.items():
        for name, cs in containers.items():
            ai = by_key.get((pod, name))
            if ai is None or not (ai.is_dedicated() and not ai.is_numa_binding()):
                continue
            new[(pod, name)] = Expected("dedicated", cs, cs, ai.request_quantity)
            iso_union = iso_union | cs
    ramp = adjustable - iso_union
    out: dict[tuple[str, str], Expected] = {}
    for key, ai in by_key.items():
        if key in new:
            found = new[key]
            out[key] = Expected(
                found.owner,
                found.result,
                found.original,
                requested_cores(ai, ctx.requested_millicpu),
            )
        elif ai.is_dedicated():
            if ai.is_numa_binding():
                out[key] = Expected(
                    ai.pool_name(),
                    ai.allocation_result,
                    ai.original_allocation_result,
                    ai.request_quantity,
                )
            else:
                out[key] = Expected("fallback", ramp, ramp, ai.request_quantity)
        else:
            pool = ai.pool_name()
            if ai.ramp_up:
                out[key] = Expected("", ramp, ramp, ai.request_quantity)
            elif pool not in pools_cs:
                out[key] = Expected(
                    ai.owner_pool_name,
                    ai.allocation_result,
                    ai.original_allocation_result,
                    ai.request_quantity,
                )
            else:
                out[key] = Expected(pool, pools_cs[pool], pools_cs[pool], ai.request_quantity)
    return out


@settings(max_examples=150, deadline=None)
@given(scenario=scenarios(), looked_up=st.sampled_from([None, 1500.0]))
def test_apply_matches_the_reference_rewrite(
    scenario: Scenario,
    looked_up: float | None,
) -> None:
    events, pools_cs, iso_cs = scenario
    ctx = PolicyContext(
        topology=TOPOLOGY, reserved=RESERVED, requested_millicpu=lambda _p, _c: looked_up
    )
    state = with_events(empty_state(TOPOLOGY), *events)
    before = list(state.cpu.allocation_infos())
    want = oracle(before, pools_cs, iso_cs, state.cpu.adjustable_cpus(RESERVED), ctx)
    txn, _ = decide(state, apply_pools_and_isolated, ctx, pools_cs, iso_cs)
    after = {(ai.pod_uid, ai.container_name): ai for ai in txn.state.cpu.allocation_infos()}
    got = {
        key: Expected(
            ai.owner_pool_name,
            ai.allocation_result,
            ai.original_allocation_result,
            ai.request_quantity,
        )
        for key, ai in after.items()
    }
    assert got == want
    assert dict(txn.state.cpu.pools) == pools_cs
    # ramp flags never change here, and every other field is kept
    assert all(after[(ai.pod_uid, ai.container_name)].ramp_up == ai.ramp_up for ai in before)


def test_nothing_changes_when_applying_the_same_result_twice() -> None:
    events = [
        PoolSet("reserve", RESERVED),
        PoolSet("reclaim", CPUSet.parse("7-8,10,15")),
        PoolSet("share", CPUSet.parse("1,3-6,9,11-14")),
        ContainerAllocated(container("pod-1", "c", InPool("share"), owner="share")),
    ]
    state = with_events(empty_state(TOPOLOGY), *events)
    pools = dict(state.cpu.pools)
    ctx = PolicyContext(topology=TOPOLOGY, reserved=RESERVED)
    txn = Txn(state)
    apply_pools_and_isolated(txn, ctx, pools, {})
    assert len(txn) == 1  # the ramp-up cpuset, set once
    again = Txn(txn.state)
    apply_pools_and_isolated(again, ctx, pools, {})
    assert again.events == ()
