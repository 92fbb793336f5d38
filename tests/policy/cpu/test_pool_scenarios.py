"""Pool-engine scenarios on bigger synthetic hosts: a 2-socket 96-CPU HT machine and an 8-NUMA
256-CPU one (cpu-policy §6.2, §9, §10.1, §10.6; checklist 25, 26).

Each step checks that replaying its events equals its state (``decide``) and the placement
invariants: pools of shared containers avoid the reserve, NUMA nodes hosting a dedicated
NUMA-binding container and every dedicated container's CPUs; dedicated containers do not
share CPUs; reclaim avoids the reserve; an adjustment commits events for the containers that
move, not for the ones that follow their pool.
"""

from __future__ import annotations

from policy.cpu.allocation_listing import resources_allocation
from policy.cpu.context import PolicyContext
from policy.cpu.pool_engine import adjust_allocation_entries
from policy.cpu.remove import remove_pod
from policy.state.entries import InPool
from policy.state.events import ContainerPlaced, RampUpFinished
from policy.state.sections import State
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.selection import take_by_topology, take_ht_by_numa_balance
from tests.policy.pool_fixtures import (
    T0,
    check_invariants,
    decide,
    dedicated,
    fresh_state,
    ramping,
    with_events,
)
from tests.topologies import SYNTH_96_2_2, SYNTH_256_2_8


def context(topology: CPUTopology, reserved_count: int) -> PolicyContext:
    everything = CPUSet.from_mask(topology.cpu_details.mask)
    reserved, _ = take_ht_by_numa_balance(topology, everything, reserved_count)
    return PolicyContext(topology=topology, reserved=reserved)


def ramp_pods(state: State, ctx: PolicyContext, pods: dict[str, tuple[float, str]]) -> State:
    for pod, (quantity, pool) in pods.items():
        state = with_events(state, ramping(state, pod, ctx, quantity=quantity, pool=pool))
    return state


def allocate_numa_binding(
    state: State, ctx: PolicyContext, pod: str, numa: int, count: int | None = None
) -> State:
    """A dedicated NUMA-binding container as §7.5.1 places it, then the pool adjustment."""
    available = state.cpu.numa_available(numa, ctx.reserved)
    cpus = available if count is None else take_by_topology(ctx.topology, available, count)
    state = with_events(
        state, dedicated(pod, str(cpus), exclusive=count is None, ramp_up=True, quantity=2.0)
    )
    txn, _ = decide(state, adjust_allocation_entries, ctx)
    check_invariants(txn.state, ctx)
    return txn.state


def test_two_socket_96_cpu_host() -> None:
    ctx = context(SYNTH_96_2_2, 4)
    state = fresh_state(ctx)
    assert state.cpu.pools["reclaim"].size() == 4
    pods = {f"pod-{i:02}": (1.5, "") for i in range(30)}
    pods |= {f"bat-{i:02}": (2.0, "batch") for i in range(10)}
    state = ramp_pods(state, ctx, pods)
    # every container ends ramp-up at once and joins its pool
    txn, reply = decide(state, resources_allocation, ctx, T0 + 31)
    assert reply.warnings == ()
    state = txn.state
    check_invariants(state, ctx)
    sizes = {name: cpus.size() for name, cpus in state.cpu.pools.items()}
    # 45 and 20 cores, then the 23 CPUs above reclaim's floor shared out by truncated
    # proportion (15 and 7): reclaim keeps one more than its floor
    assert sizes == {"batch": 27, "reclaim": 5, "reserve": 4, "share": 60}
    assert sum(isinstance(e, RampUpFinished) for e in txn.events) == 40
    # a dedicated NUMA-binding container takes NUMA 1: pools shrink onto NUMA 0 (65 cores on
    # 46 CPUs: share 31, batch 15), the containers follow their pools without an event each
    state = allocate_numa_binding(state, ctx, "ded-1", 1)
    assert (state.cpu.pools["share"].size(), state.cpu.pools["batch"].size()) == (31, 15)
    in_share = [state.cpu.require_entry(pod, "c").placement for pod in list(pods)[:30]]
    assert in_share == [InPool("share")] * 30
    # pods leave: the pools grow back within NUMA 0
    for i in range(20):
        txn, warnings = decide(state, remove_pod, ctx, f"pod-{i:02}")
        assert warnings == ()
        assert not any(isinstance(e, ContainerPlaced) for e in txn.events)
        state = txn.state
        check_invariants(state, ctx)
    # the dedicated pod leaves: pools spread over both NUMA nodes again
    txn, _ = decide(state, remove_pod, ctx, "ded-1")
    check_invariants(txn.state, ctx)
    numa1 = ctx.topology.numa_masks()[1]
    assert txn.state.cpu.pools["share"].mask & numa1


def test_eight_numa_256_cpu_host_with_many_pods() -> None:
    ctx = context(SYNTH_256_2_8, 8)
    state = fresh_state(ctx)
    state = allocate_numa_binding(state, ctx, "ded-0", 0)
    state = allocate_numa_binding(state, ctx, "ded-3", 3)
    state = allocate_numa_binding(state, ctx, "ded-5", 5, count=8)
    pools = ("", "batch", "flink")
    pods = {f"pod-{i:03}": (0.2, pools[i % 3]) for i in range(500)}
    state = ramp_pods(state, ctx, pods)
    txn, reply = decide(state, resources_allocation, ctx, T0 + 31)
    assert reply.warnings == ()
    state = txn.state
    check_invariants(state, ctx)
    # the dedicated containers' ramp-up ended too, without moving them
    assert not state.cpu.ramping_containers()
    # one more pod: its ramp-up end commits a handful of events, whatever the pod count
    state = with_events(state, ramping(state, "pod-new", ctx, quantity=3.0))
    txn, _ = decide(state, resources_allocation, ctx, T0 + 62)
    placed = [e for e in txn.events if isinstance(e, ContainerPlaced)]
    assert placed == [ContainerPlaced("pod-new", "c", InPool("share"), "share")]
    assert len(txn.events) <= 6, txn.events
    state = txn.state
    check_invariants(state, ctx)
    # removing one pod is as cheap
    txn, _ = decide(state, remove_pod, ctx, "pod-new")
    assert len(txn.events) <= 5, txn.events
    check_invariants(txn.state, ctx)
