"""Placing containers after pools are sized, and deleting unowned pools (cpu-policy §9.8, §9.9).

The reference rewrites every container entry when it applies new pools: isolated containers
get their own CPUs, dedicated NUMA-binding containers keep theirs, other dedicated containers
fall back onto the ramp-up CPUs, ramping containers get the ramp-up CPUs, every other shared or
reclaimed container copies its pool's CPUs (or keeps its old ones when the pool is gone), and
pools missing from the result are dropped.

Here pooled containers *refer* to their pool (``InPool``) and ramping ones to the ramp-up
cpuset (``RAMPING``), so most of that rewrite is free: a ``PoolSet`` per changed pool and one
``RampCPUsSet`` move every container that follows them. Only containers whose placement or
owner actually changes get a ``ContainerPlaced``, and the state's index views find them
without walking the pods:

* ramp-flagged non-dedicated containers not already shared or reclaimed on the ramp-up cpuset
  with no owner (``unsettled_ramping_containers``): a settled one is exactly where this step
  would put it, of a level it accepts, so skipping it changes no event and no refusal;
* shared/reclaimed containers without the ramp-up flag that follow no pool
  (``unflagged_unpooled_containers``): O(their number);
* dedicated containers (``dedicated_containers``): O(dedicated);
* containers in a pool that is dropped (``containers_owned_by``): O(their number).

Every other container is ``InPool`` of a pool that survives, which is exactly what the
reference would copy into it. The events are computed first and emitted together, so a
refusal leaves the transaction as it was (the reference writes nothing when this step fails).
"""

from __future__ import annotations

from collections.abc import Mapping

from policy.cpu.context import PolicyContext
from policy.cpu.pool_sizing import IsolatedCPUs, PoolError
from policy.cpu.rnb import non_actual_numas, reclaimed_entries
from policy.cpu.rnb_allocate import reclaimed_placement
from policy.cpu.snb import adjustable_cpus, numa_of_pool
from policy.cpu.system_cores import SYSTEM_CORES, system_pool_cpus
from policy.cpu.txn import Txn
from policy.errors import PolicyError
from policy.state.cpu_state import ContainerKey, CPUState
from policy.state.entries import (
    DEDICATED_OWNER,
    FALLBACK_OWNER,
    RAMPING,
    RECLAIM_POOL,
    RESIDENT_POOLS,
    ContainerEntry,
    InPool,
    OwnCPUs,
    Placement,
    requested_cores,
)
from policy.state.events import (
    ContainerPlaced,
    CPUEvent,
    PoolRemoved,
    PoolSet,
    RampCPUsSet,
    RequestQuantitySet,
)
from policy.topology.cpuset import CPUSet

__all__ = ["apply_pools_and_isolated", "clean_pools", "unowned_pools"]


def apply_pools_and_isolated(
    txn: Txn, ctx: PolicyContext, pools_cs: Mapping[str, CPUSet], iso_cs: IsolatedCPUs
) -> None:
    """Make the state hold exactly these pools and place every container accordingly (§9.8).

    Emits, in this order: ``PoolSet`` for each new or resized pool, ``RampCPUsSet`` when the
    ramp-up cpuset (adjustable CPUs minus isolated ones) changes, ``ContainerPlaced`` for each
    container whose placement or owner changes, ``RequestQuantitySet`` for isolated containers
    whose requested cores were looked up, and ``PoolRemoved`` for pools absent from
    ``pools_cs`` (their containers first keep their old CPUs as their own). Cost: O(pools +
    unsettled ramping + unflagged unpooled + dedicated containers + containers of dropped
    pools), whatever the number of pods (ramping ones included).

    Args:
        txn: the decision in progress.
        ctx: reserve and the pod-spec seam.
        pools_cs: every pool's new cpuset (from ``generate_pools_and_isolation``).
        iso_cs: isolated containers' new cpusets.

    Raises:
        PoolError: "entry: share is empty" (sic, §15.3) when reclaim is empty; "invalid
            qosLevel: ..." for a container of a level no pool takes. Nothing is emitted.
    """
    state = txn.cpu
    # 2. Isolated containers: only dedicated ones without NUMA binding (others are skipped).
    isolated: dict[ContainerKey, CPUSet] = {}
    for pod_uid in sorted(iso_cs):
        for name in sorted(iso_cs[pod_uid]):
            found = state.entry(pod_uid, name)
            if found is not None and found.is_dedicated() and not found.is_numa_binding():
                isolated[(pod_uid, name)] = iso_cs[pod_uid][name]
    isolated_union = CPUSet.union_all(isolated.values())
    # 3. Reclaim must not be empty (the reference's message names the wrong pool).
    reclaim = pools_cs.get(RECLAIM_POOL)
    if reclaim is None or reclaim.is_empty():
        raise PoolError("entry: share is empty")
    # 4. Pools: one event per new or changed pool.
    pool_events: list[CPUEvent] = [
        PoolSet(name, pools_cs[name])
        for name in sorted(pools_cs)
        if state.pools.get(name) != pools_cs[name]
    ]
    # 5. The ramp-up cpuset (v0.5.47: without the NUMAs of SNB pools, spec (c) 8).
    ramp = state.adjustable_cpus(ctx.reserved).difference(isolated_union)
    if ctx.at_v0_5_47:
        ramp = adjustable_cpus(state, ctx).difference(isolated_union)
        ramp = ramp.difference(_snb_numa_cpus(ctx, pools_cs))
    if state.ramp_cpus != ramp:
        pool_events.append(RampCPUsSet(ramp))
    # 6. Containers whose placement or owner changes.
    moves: dict[ContainerKey, tuple[Placement, str]] = {}
    quantities: list[CPUEvent] = []
    for key, cpus in isolated.items():
        entry = state.require_entry(*key)
        moves[key] = (OwnCPUs.of(cpus), DEDICATED_OWNER)
        cores = requested_cores(entry, ctx.requested_millicpu)
        if cores != entry.request_quantity:
            quantities.append(RequestQuantitySet(key[0], key[1], cores))
    for key in sorted(state.dedicated_containers()):
        if key not in isolated:
            moves[key] = _dedicated_move(state.require_entry(*key), ramp)
    for key in sorted(state.unsettled_ramping_containers()):
        entry = state.require_entry(*key)
        _check_pooled_level(entry)
        moves[key] = (RAMPING, "")
    for key in sorted(state.unflagged_unpooled_containers()):
        entry = state.require_entry(*key)
        if ctx.at_v0_5_47 and entry.qos_level == SYSTEM_CORES:
            # v0.5.47's system_cores follow the pools they name (policy.cpu.system_cores).
            if entry.is_sidecar():
                continue  # a sidecar keeps the copy of its main container's CPUs
            cpus = system_pool_cpus(state, ctx, entry.annotations, pools_cs)
            moves[key] = (OwnCPUs.of(cpus), entry.owner_pool_name)
            continue
        _check_pooled_level(entry)
        pool = entry.pool_name()
        if pool in pools_cs:
            moves[key] = (InPool(pool), pool)
        # else: the pool is gone, the container keeps its old CPUs (a warning in the reference)
    if ctx.at_v0_5_47:
        # v0.5.47 splits the reclaim pool by NUMA for its containers: the non-actual NUMAs
        # are read from the state before this step (policy.cpu.rnb_allocate).
        non_actual = non_actual_numas(state)
        for entry in reclaimed_entries(state):
            placement = entry.placement
            if entry.key in moves or not isinstance(placement, InPool):
                continue
            if placement.pool_name != RECLAIM_POOL:
                continue
            try:
                split = reclaimed_placement(entry, reclaim, non_actual, state)
            except PolicyError as err:
                raise PoolError(str(err), kind=err.kind) from err
            moves[entry.key] = (split, RECLAIM_POOL)
    dropped = sorted(name for name in state.pools if name not in pools_cs)
    for name in dropped:
        for key in sorted(state.containers_owned_by(name)):
            entry = state.require_entry(*key)
            if key not in moves and entry.placement == InPool(name):
                # The pool goes; its containers keep the CPUs they had (§9.8 step 6).
                result, original = state.placement_cpus(entry.placement)
                moves[key] = (OwnCPUs(result, original), name)
    placed = [
        ContainerPlaced(key[0], key[1], placement, owner)
        for key, (placement, owner) in moves.items()
        if _changes(state.require_entry(*key), placement, owner)
    ]
    removals = [PoolRemoved(name) for name in dropped]
    txn.emit(*pool_events, *placed, *quantities, *removals)


def _snb_numa_cpus(ctx: PolicyContext, pools_cs: Mapping[str, CPUSet]) -> CPUSet:
    """The CPUs of the NUMAs the new SNB pools are bound to."""
    masks = ctx.topology.numa_masks()
    bits = 0
    for name, cpus in pools_cs.items():
        numa = numa_of_pool(name)
        if numa is not None and not cpus.is_empty():
            bits |= masks.get(numa, 0)
    return CPUSet.from_mask(bits)


def _dedicated_move(entry: ContainerEntry, ramp: CPUSet) -> tuple[Placement, str]:
    """A dedicated container not isolated this time: NUMA-binding ones keep their CPUs (and
    take their pool name as owner, so sidecars become ``dedicated``); the others fall back
    onto the ramp-up CPUs."""
    if entry.is_numa_binding():
        return entry.placement, entry.pool_name()
    return OwnCPUs.of(ramp), FALLBACK_OWNER


def _check_pooled_level(entry: ContainerEntry) -> None:
    if not (entry.is_shared() or entry.is_reclaimed()):
        raise PoolError(
            f"invalid qosLevel: {entry.qos_level} for pod: {entry.pod_namespace}/{entry.pod_name} "
            f"container: {entry.container_name}"
        )


def _changes(entry: ContainerEntry, placement: Placement, owner: str) -> bool:
    return entry.placement != placement or entry.owner_pool_name != owner


def unowned_pools(state: CPUState) -> list[str]:
    """Pools that no container owns, other than the resident ones, by name (§9.9)."""
    owners = state.owner_pool_names()
    return sorted(name for name in state.pools if name not in owners and name not in RESIDENT_POOLS)


def clean_pools(txn: Txn, ctx: PolicyContext) -> None:
    """Delete every pool no container owns, except ``reserve`` and ``reclaim`` (§9.9).

    A pool used only by ramping containers goes too: they own nothing. Cost: O(pools), from
    the state's owner index. Emits one ``PoolRemoved`` per deleted pool, nothing otherwise.

    Args:
        txn: the decision in progress.
        ctx: unused; every engine step takes the same arguments.
    """
    del ctx
    txn.emit(*(PoolRemoved(name) for name in unowned_pools(txn.cpu)))
