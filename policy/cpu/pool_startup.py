"""The pools every node starts with (cpu-policy §6.2 steps 4–6).

At start-up, after the state is recovered: pools nobody owns are deleted, ``reserve`` is
(re)written with the reserved CPUs, and ``reclaim`` is created when missing — four CPUs spread
over the NUMA nodes from the pooled CPUs that no other pool holds, or, when none is free, four
CPUs anywhere outside the reserve (it may then overlap other pools). On a fresh (16,2,4) node
with reserve ``0,2`` that gives ``reclaim = 1,3,9,11`` and ``reserve = 0,2``.

The start-up decision (:func:`start_pools`) adds two rules of its own around those steps:

* A reserve that holds every CPU is refused with the numbers before anything else
  (``policy.cpu.reserve``, rule 3).
* A reserve that differs from the one the recovered state holds (the daemon restarted with
  another ``--reserved-cpu-cores``) is applied at once and consistently: every pool is
  re-planned on the CPUs outside the new reserve (§9.2), in the same journaled decision. The
  reference only rewrites ``reserve`` and leaves the other pools as they were until the next
  adjustment, so until then the reserve overlaps them. A dedicated container whose CPUs are
  now reserved cannot be moved (its CPUs are its own, §7.5), so such a change is refused,
  naming the container; §3's "containers that already hold reserved CPUs are not touched"
  thus holds for shared containers only.

Whatever the path, the resulting state must keep ``policy.cpu.invariants``: a node never starts
serving pools that overlap the reserve.
"""

from __future__ import annotations

from policy.cpu.context import PolicyContext
from policy.cpu.invariants import require_invariants
from policy.cpu.pool_apply import clean_pools
from policy.cpu.pool_engine import adjust_allocation_entries
from policy.cpu.pool_sizing import PoolError, fallback_reclaim_cpus, reserved_reclaimed_cpus_size
from policy.cpu.reserve import ReserveChangeRefused, require_cpus_outside_reserve
from policy.cpu.txn import Txn
from policy.errors import describe_container
from policy.state.cpu_state import CPUState
from policy.state.entries import (
    FALLBACK_OWNER,
    RECLAIM_POOL,
    RESERVE_POOL,
    RESIDENT_POOLS,
    InPool,
    OwnCPUs,
)
from policy.state.events import ContainerPlaced, CPUEvent, PoolSet
from policy.topology.cpuset import CPUSet
from policy.topology.selection import take_by_numa_balance, take_ht_by_numa_balance

__all__ = [
    "init_reclaim_pool",
    "init_reserve_pool",
    "initialise_pools",
    "replan_for_new_reserve",
    "start_pools",
]


def start_pools(txn: Txn, ctx: PolicyContext) -> tuple[str, ...]:
    """The start-up decision's pools (module docstring): refuse a reserve with no room, run
    §6.2 steps 4–6, re-plan when the reserve changed, then check the invariants.

    Args:
        txn: the decision in progress, on the recovered state.
        ctx: topology, reserve, options.

    Returns:
        Warnings to log (the reserve changed and the pools were re-planned).

    Raises:
        ReserveError: the reserve holds every CPU of the node.
        ReserveChangeRefused: the reserve changed and the state cannot follow it.
        PoolError: no reclaim pool can be made (§15.9).
        InvariantError: the resulting state would break ``policy.cpu.invariants``.
    """
    require_cpus_outside_reserve(ctx.topology, ctx.reserved)
    # A fresh node has no reserve pool yet: nothing was planned, nothing to re-plan.
    previous = txn.cpu.pool_cpus(RESERVE_POOL)
    initialise_pools(txn, ctx)
    warnings: tuple[str, ...] = ()
    if previous is not None and previous != ctx.reserved:
        replan_for_new_reserve(txn, ctx, previous)
        warnings = (
            f"the reserve changed from {_show(previous)} to {_show(ctx.reserved)} since the "
            f"state was written: every pool was re-planned outside the new reserve",
        )
    require_invariants(txn.cpu, ctx, "start-up")
    return warnings


def replan_for_new_reserve(txn: Txn, ctx: PolicyContext, previous: CPUSet) -> None:
    """Re-plan every pool outside a reserve that changed since the state was written.

    Dedicated containers keep their CPUs, so none may hold a CPU of the new reserve; every
    other container follows its pool or the ramp-up cpuset, which the re-plan (§9.2) rewrites.

    Args:
        txn: the decision in progress, after §6.2 steps 4–6.
        ctx: the new reserve.
        previous: the reserve the recovered state held.

    Raises:
        ReserveChangeRefused: a dedicated container holds CPUs of the new reserve, or the
            pools cannot be planned beside it; nothing is to be committed.
    """
    conflicts = _dedicated_in_reserve(txn.cpu, ctx.reserved)
    change = f"the reserve changed from {_show(previous)} to {_show(ctx.reserved)}"
    if conflicts:
        raise ReserveChangeRefused(
            f"{change}, but {'; '.join(conflicts)}: dedicated CPUs cannot be moved. Start with "
            f"the previous reserve ({previous.size()} CPUs: {_show(previous)}), or remove "
            f"those pods first",
            previous=previous,
            reserved=ctx.reserved,
        )
    try:
        adjust_allocation_entries(txn, ctx)
    except PoolError as err:
        raise ReserveChangeRefused(
            f"{change}, but the pools cannot be re-planned beside it: {err}",
            previous=previous,
            reserved=ctx.reserved,
        ) from err


def _dedicated_in_reserve(state: CPUState, reserved: CPUSet) -> list[str]:
    """Each dedicated container (``fallback`` ones aside: they sit on the ramp-up cpuset)
    holding reserved CPUs, described with the CPUs."""
    out = []
    for key in sorted(state.dedicated_containers()):
        entry = state.require_entry(*key)
        if entry.owner_pool_name == FALLBACK_OWNER:
            continue
        cpus, _ = state.placement_cpus(entry.placement)
        inside = cpus.intersection(reserved)
        if not inside.is_empty():
            who = describe_container(
                entry.pod_uid,
                entry.container_name,
                pod_namespace=entry.pod_namespace,
                pod_name=entry.pod_name,
            )
            out.append(f"dedicated {who} holds {inside} of it (its CPUs: {cpus})")
    return out


def _show(cpus: CPUSet) -> str:
    return str(cpus) if not cpus.is_empty() else "none"


def initialise_pools(txn: Txn, ctx: PolicyContext) -> None:
    """Start-up steps 4–6 of §6.2: ``clean_pools``, ``init_reserve_pool``, ``init_reclaim_pool``.

    Emits nothing when the recovered state already has these pools as they should be.

    Raises:
        PoolError: no reclaim pool can be made (§15.9: fewer than four non-reserved CPUs and
            none available); start-up must then fail.
    """
    clean_pools(txn, ctx)
    init_reserve_pool(txn, ctx)
    init_reclaim_pool(txn, ctx)


def init_reserve_pool(txn: Txn, ctx: PolicyContext) -> None:
    """Write pool ``reserve`` with the reserved CPUs, unconditionally (§6.2 step 5).

    The reference rewrites the pool entry without touching the containers that copied its old
    CPUs, so a container placed in ``reserve`` (a shared ``cpuset_pool: reserve``) first keeps
    its CPUs as its own. Emits nothing when the pool already holds the reserved CPUs.
    """
    state = txn.cpu
    if state.pools.get(RESERVE_POOL) == ctx.reserved:
        return
    events: list[CPUEvent] = []
    for key in sorted(state.containers_owned_by(RESERVE_POOL)):
        entry = state.require_entry(*key)
        if entry.placement == InPool(RESERVE_POOL):
            result, original = state.placement_cpus(entry.placement)
            events.append(ContainerPlaced(key[0], key[1], OwnCPUs(result, original), RESERVE_POOL))
    events.append(PoolSet(RESERVE_POOL, ctx.reserved))
    txn.emit(*events)


def init_reclaim_pool(txn: Txn, ctx: PolicyContext) -> None:
    """Create pool ``reclaim`` when it does not exist (§6.2 step 6).

    a. CPUs no non-resident pool holds, among the pooled CPUs;
    b. up to four of them by ``take_by_numa_balance``;
    c. none: four of all non-reserved CPUs, overlap allowed.

    At v0.5.47 (spec cpu-policy-v0.5.47 (c) 1) b and c take single hyper-threads by NUMA
    balance and the floor is max(4, NUMA nodes): ``1,3-4,6`` on the (16,2,4) node.

    Raises:
        PoolError: "fallback takeByNUMABalance faild in initReclaimPool for reclaim with
            error: ..." (sic) when even the fallback fails.
    """
    state = txn.cpu
    if RECLAIM_POOL in state.pools:
        return
    # a. Pooled CPUs that no other pool holds.
    non_resident = state.filtered_pools_cpuset(RESIDENT_POOLS)
    available = state.pooled_cpus(ctx.reserved).difference(non_resident)
    # b. Up to four of them, spread over the NUMA nodes.
    wanted = min(reserved_reclaimed_cpus_size(ctx), available.size())
    take = take_ht_by_numa_balance if ctx.at_v0_5_47 else take_by_numa_balance
    cpus, _ = take(ctx.topology, available, wanted)
    # c. Nothing free: four anywhere.
    if cpus.is_empty():
        cpus = fallback_reclaim_cpus(ctx, "initReclaimPool for reclaim")
    txn.emit(PoolSet(RECLAIM_POOL, cpus))
