"""Cost of the pool engine's decisions with 50, 500 and 5,000 pods (cpu-policy §9, §10.1).

Run: ``PYTHONPATH=. python bench/bench_pools.py``. For each pod count it builds, on a 256-CPU
8-NUMA synthetic node with reserve one CPU per NUMA node and one dedicated NUMA-binding pod on
NUMA 0, a state with that many shared pods in pool ``share``, then times (ms per decision,
best of 5 rounds) and counts the events of:

* ``put_allocations_and_adjust`` for one more container whose ramp-up just ended (§9.1);
* ``adjust_allocation_entries`` on the settled state (§9.2, RemovePod's re-sizing);
* ``resources_allocation``, GetResourcesAllocation over every container (§10.1).

The first two should not grow with the pod count (the engine reads the state's indexes and
moves only the containers that change placement); the third lists every container, so it is
linear in them.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from policy.cpu.allocation_listing import resources_allocation
from policy.cpu.context import PolicyContext
from policy.cpu.pool_engine import adjust_allocation_entries, put_allocations_and_adjust
from policy.cpu.pool_startup import initialise_pools
from policy.cpu.timestamps import format_qrm_time
from policy.cpu.txn import Txn
from policy.state.entries import SHARED_CORES, ContainerEntry, InPool, OwnCPUs
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.sections import State, empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.selection import take_ht_by_numa_balance
from policy.topology.synthetic import generate_dummy_cpu_topology

TOPOLOGY = generate_dummy_cpu_topology(256, 2, 8)
T0 = 1_715_000_000.0


def _context() -> PolicyContext:
    everything = CPUSet.from_mask(TOPOLOGY.cpu_details.mask)
    reserved, _ = take_ht_by_numa_balance(TOPOLOGY, everything, 8)
    return PolicyContext(topology=TOPOLOGY, reserved=reserved)


def _shared(pod: str, placement: InPool | OwnCPUs, owner: str) -> ContainerEntry:
    labels = {"katalyst.kubewharf.io/qos_level": SHARED_CORES}
    return ContainerEntry(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=pod,
        container_name="app",
        container_type="MAIN",
        owner_pool_name=owner,
        placement=placement,
        init_timestamp=format_qrm_time(T0),
        labels=labels,
        annotations=labels,
        qos_level=SHARED_CORES,
        request_quantity=0.02,
    )


def _dedicated(ctx: PolicyContext, state: State) -> ContainerEntry:
    annotations = {
        "katalyst.kubewharf.io/qos_level": "dedicated_cores",
        "numa_binding": "true",
        "numa_exclusive": "true",
    }
    return ContainerEntry(
        pod_uid="dedicated-0",
        container_name="app",
        container_type="MAIN",
        owner_pool_name="dedicated",
        placement=OwnCPUs.of(state.cpu.numa_available(0, ctx.reserved)),
        init_timestamp=format_qrm_time(T0),
        annotations=annotations,
        qos_level="dedicated_cores",
        request_quantity=2.0,
    )


def node(ctx: PolicyContext, pods: int) -> tuple[State, ContainerEntry]:
    """The settled node, and one more container whose ramp-up has just ended."""
    txn = Txn(empty_state(TOPOLOGY))
    initialise_pools(txn, ctx)
    txn.emit(ContainerAllocated(_dedicated(ctx, txn.state)))
    adjust_allocation_entries(txn, ctx)
    txn.emit(PoolSet("share", txn.cpu.adjustable_cpus(ctx.reserved)))
    txn.emit(
        *(ContainerAllocated(_shared(f"pod-{i:05}", InPool("share"), "share")) for i in range(pods))
    )
    adjust_allocation_entries(txn, ctx)
    newcomer = _shared("pod-new", OwnCPUs.of(txn.cpu.pooled_cpus(ctx.reserved)), "")
    txn.emit(ContainerAllocated(newcomer))
    return txn.state, newcomer


def _time(decide: Callable[[Txn], object], state: State) -> tuple[float, int]:
    events = Txn(state)
    decide(events)
    rounds = timeit.repeat(lambda: decide(Txn(state)), number=5, repeat=5)
    return min(rounds) / 5 * 1000, len(events)


def main() -> None:
    ctx = _context()
    header = ("pods", "put+adjust ms", "ev", "adjust ms", "ev", "reconcile ms")
    print("{:>6} {:>14} {:>3} {:>10} {:>3} {:>13}".format(*header))
    for pods in (50, 500, 5000):
        state, newcomer = node(ctx, pods)
        joining = [newcomer]
        put = _time(lambda t, c=joining: put_allocations_and_adjust(t, ctx, c, True), state)
        adjust = _time(lambda t: adjust_allocation_entries(t, ctx), state)
        listing = _time(lambda t: resources_allocation(t, ctx, T0 + 10), state)
        print(
            f"{pods:>6} {put[0]:>14.3f} {put[1]:>3} {adjust[0]:>10.3f} {adjust[1]:>3} "
            f"{listing[0]:>13.3f}"
        )


if __name__ == "__main__":
    main()
