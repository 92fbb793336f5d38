"""Pool-engine invariants on random synthetic nodes (cpu-policy §9; checklist 25, 26).

A random node: a synthetic topology, a reserve, dedicated NUMA-binding containers on some
NUMA nodes, dedicated containers without binding (isolation candidates, §15.15), and shared
containers in two pools, some still ramping. After ``adjust_allocation_entries``:

* the placement invariants hold (``check_invariants``);
* no pool is left that no container owns, except reserve and reclaim;
* replaying the events equals the state (``decide``);
* without sys-advisor the adjustment is a fixpoint: running it again commits nothing.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.context import PolicyContext
from policy.cpu.pool_apply import unowned_pools
from policy.cpu.pool_engine import adjust_allocation_entries, put_allocations_and_adjust
from policy.state.events import Event, RampUpFinished
from policy.state.sections import State
from policy.topology.cpuset import CPUSet
from policy.topology.selection import take_ht_by_numa_balance
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.pool_fixtures import (
    check_invariants,
    decide,
    dedicated,
    entry_of,
    fresh_state,
    ramping,
    with_events,
)


@st.composite
def nodes(draw: st.DrawFn) -> tuple[State, PolicyContext]:
    sockets = draw(st.integers(1, 2))
    numas = sockets * draw(st.integers(1, 2))
    per_numa = 2 * draw(st.integers(2, 6))
    topology = generate_dummy_cpu_topology(numas * per_numa, sockets, numas)
    everything = CPUSet.from_mask(topology.cpu_details.mask)
    # at least four CPUs outside the reserve, or no reclaim can exist (§15.9)
    count = draw(st.integers(0, min(numas, everything.size() - 4)))
    reserved, _ = take_ht_by_numa_balance(topology, everything, count)
    ctx = PolicyContext(topology=topology, reserved=reserved)
    state = fresh_state(ctx)
    events: list[Event] = []
    # dedicated NUMA-binding containers own whole NUMA nodes (never all of them)
    bound = draw(st.sets(st.integers(0, numas - 1), max_size=numas - 1))
    for numa in sorted(bound):
        cpus = state.cpu.numa_available(numa, reserved)
        if cpus:
            events.append(dedicated(f"dnb-{numa}", str(cpus), ramp_up=draw(st.booleans())))
    # dedicated containers without NUMA binding, from an old checkpoint
    for i in range(draw(st.integers(0, 2))):
        cpus = CPUSet.from_mask(draw(st.integers(1, topology.cpu_details.mask)))
        events.append(
            dedicated(
                f"iso-{i}",
                str(cpus),
                numa_binding=False,
                owner="",
                quantity=float(draw(st.integers(1, 4))),
            )
        )
    state = with_events(state, *events)
    # shared containers: ramping, then some settle into their pools
    pods = [f"pod-{i:02}" for i in range(draw(st.integers(0, 12)))]
    for pod in pods:
        quantity = draw(st.sampled_from([0.5, 1.0, 2.0, 3.5]))
        pool = draw(st.sampled_from(["", "batch"]))
        state = with_events(state, ramping(state, pod, ctx, quantity=quantity, pool=pool))
    settled = [pod for pod in pods if draw(st.booleans())]
    if settled:
        state = with_events(state, *(RampUpFinished(pod, "c") for pod in settled))
        entries = [entry_of(state, pod) for pod in settled]
        txn, _ = decide(state, put_allocations_and_adjust, ctx, entries, True)
        state = txn.state
    return state, ctx


@settings(max_examples=60, deadline=None)
@given(node=nodes())
def test_adjustment_keeps_the_invariants_and_is_a_fixpoint(
    node: tuple[State, PolicyContext],
) -> None:
    state, ctx = node
    txn, _ = decide(state, adjust_allocation_entries, ctx)
    check_invariants(txn.state, ctx)
    assert unowned_pools(txn.state.cpu) == []
    again, _ = decide(txn.state, adjust_allocation_entries, ctx)
    assert again.events == ()
