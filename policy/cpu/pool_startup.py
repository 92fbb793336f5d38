"""The pools every node starts with (cpu-policy §6.2 steps 4–6).

At start-up, after the state is recovered: pools nobody owns are deleted, ``reserve`` is
(re)written with the reserved CPUs, and ``reclaim`` is created when missing — four CPUs spread
over the NUMA nodes from the pooled CPUs that no other pool holds, or, when none is free, four
CPUs anywhere outside the reserve (it may then overlap other pools). On a fresh (16,2,4) node
with reserve ``0,2`` that gives ``reclaim = 1,3,9,11`` and ``reserve = 0,2``.
"""

from __future__ import annotations

from policy.cpu.context import PolicyContext
from policy.cpu.pool_apply import clean_pools
from policy.cpu.pool_sizing import RESERVED_RECLAIMED_CPUS_SIZE, fallback_reclaim_cpus
from policy.cpu.txn import Txn
from policy.state.entries import RECLAIM_POOL, RESERVE_POOL, RESIDENT_POOLS, InPool, OwnCPUs
from policy.state.events import ContainerPlaced, CPUEvent, PoolSet
from policy.topology.selection import take_by_numa_balance

__all__ = ["init_reclaim_pool", "init_reserve_pool", "initialise_pools"]


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
    wanted = min(RESERVED_RECLAIMED_CPUS_SIZE, available.size())
    cpus, _ = take_by_numa_balance(ctx.topology, available, wanted)
    # c. Nothing free: four anywhere.
    if cpus.is_empty():
        cpus = fallback_reclaim_cpus(ctx, "initReclaimPool for reclaim")
    txn.emit(PoolSet(RECLAIM_POOL, cpus))
