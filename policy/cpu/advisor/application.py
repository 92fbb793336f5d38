"""Applying a validated response's blocks to the state (cpu-policy §11.8).

The reference builds a whole new set of entries and swaps it in; here the same result is
reached by events on a ``Txn``, computed first and emitted together, so a refusal at any step
leaves the transaction as it was (the reference swaps nothing when a step fails).

1. Every non-nil result whose sub-entry is ``""`` (a pool) or whose owner is ``dedicated``
   gets the union of its blocks' CPUs. A stored pool is resized, a stored container gets the
   CPUs as its own with owner ``dedicated`` and its ramp-up over; a missing entry may only be
   a new pool named as its owner. Pools the response omits (but ``reclaim``) are dropped.
2. The ramp-up CPUs are every CPU but the reserve and the dedicated CPUs of step 1. At
   Katalyst v0.5.47 also without the NUMA nodes of shared-binding pool entries
   (:func:`shared_binding_numas`), worked out after step 3 as the reference does.
3. ``reclaim`` always exists: when the response gives it no CPUs it gets every CPU no result
   took (but the reserve), or four NUMA-balanced CPUs when that is empty (at v0.5.47 the
   start-up reserved-reclaimed set instead, ``policy.cpu.pool_sizing.fallback_reclaim_cpus``).
4. Every other container follows: shared and reclaimed ones into the pool the response names
   for them (else their own pool), ramping ones onto the ramp-up CPUs (left where they are
   when those are empty); a stored dedicated container without a result is an error.

Null rules (the spec's, where the reference crashes): a nil result for a container in step 4
counts as no result. Deviation: the reference lets a response give a stored pool another
owner; the state's pools are named by their owner, so that is refused with the message the
reference uses for a new pool ("pool entryName: %s and OwnerPoolName: %s mismatch").
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.cpu.advisor.blocks import BlockCPUSets
from policy.cpu.advisor.response import NO_NUMA, POOL_SUB_ENTRY, AdvisorResponse
from policy.cpu.context import PolicyContext
from policy.cpu.pool_sizing import fallback_reclaim_cpus
from policy.cpu.rnb import non_actual_numas
from policy.cpu.rnb_allocate import reclaimed_placement
from policy.cpu.txn import Txn
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import ContainerKey, CPUState
from policy.state.entries import (
    DEDICATED_OWNER,
    RAMPING,
    RECLAIM_POOL,
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
    RampUpFinished,
    RequestQuantitySet,
)
from policy.topology.cpuset import CPUSet
from policy.topology.selection import SelectionError, take_by_numa_balance

__all__ = ["RECLAIM_FALLBACK_CPUS", "AppliedBlocks", "ApplyError", "apply_blocks"]

#: RESERVED_RECLAIMED_CPUS_SIZE (§14): reclaim's size when nothing else is left for it.
RECLAIM_FALLBACK_CPUS = 4


class ApplyError(PolicyError):
    """The blocks cannot be applied; the message is the reference's."""

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class AppliedBlocks:
    """What applying the blocks set, besides its events.

    Attributes:
        pool_sizes: every pool's size after the response (the ``pool_size`` metric).
        ramp_cpus: the ramp-up CPUs of step 2.
    """

    pool_sizes: dict[str, int]
    ramp_cpus: CPUSet


def apply_blocks(
    txn: Txn, ctx: PolicyContext, response: AdvisorResponse, blocks: BlockCPUSets
) -> AppliedBlocks:
    """Make the state follow the response's blocks (§11.8); emits on ``txn``.

    Args:
        txn: the decision in progress.
        ctx: the topology, the reserve and the pod-spec seam (§5.5).
        response: the validated response.
        blocks: its block cpusets (§11.7).

    Returns:
        The pools' sizes and the ramp-up CPUs.

    Raises:
        ApplyError: the reference's messages; nothing is emitted.
        StateError: the events do not fit the state (a pool named as a pod); nothing is
            emitted.
    """
    cpu = txn.cpu
    topology = cpu.topology
    everything = topology.cpu_details.cpus()
    # 1. Pools and dedicated containers get the union of their blocks.
    pools: dict[str, CPUSet] = {}
    dedicated: dict[ContainerKey, CPUSet] = {}
    pooled_union = CPUSet()
    dedicated_union = CPUSet()
    for entry, sub, info in response.walk():
        if not (sub == POOL_SUB_ENTRY or info.owner_pool_name == DEDICATED_OWNER):
            continue
        cs = CPUSet()
        for numa in sorted(info.numa_blocks):
            for block in info.numa_blocks[numa] or ():
                mapped = blocks.get(block.block_id)
                if mapped is None:
                    raise ApplyError(
                        f"block {block.block_id} not found, entry: {entry}, subEntry: {sub}"
                    )
                cs = cs.union(mapped)
        stored = (
            cpu.pool_cpus(entry) is not None
            if sub == POOL_SUB_ENTRY
            else cpu.entry(entry, sub) is not None
        )
        if not stored and (info.owner_pool_name == DEDICATED_OWNER or sub != POOL_SUB_ENTRY):
            raise ApplyError(
                f"no-pool entry isn't found in plugin cache, entry: {entry}, subEntry: {sub}"
            )
        if sub == POOL_SUB_ENTRY:
            if entry != info.owner_pool_name:
                raise ApplyError(
                    f"pool entryName: {entry} and OwnerPoolName: {info.owner_pool_name} mismatch"
                )
            pools[entry] = cs
        else:
            dedicated[(entry, sub)] = cs
            dedicated_union = dedicated_union.union(cs)
        pooled_union = pooled_union.union(cs)
    # 2. The ramp-up CPUs (at v0.5.47 without shared-binding NUMA nodes, after step 3).
    ramp = everything.difference(ctx.reserved).difference(dedicated_union)
    # 3. reclaim always exists.
    if pools.get(RECLAIM_POOL, CPUSet()).is_empty():
        reclaim = everything.difference(ctx.reserved).difference(pooled_union)
        if reclaim.is_empty() and ctx.at_v0_5_47:
            # v0.5.47 (reviseReclaimPool, :1344-1349): the start-up reserved-reclaimed set.
            try:
                reclaim = fallback_reclaim_cpus(ctx, "applyBlocks for reclaimPoolCPUSet")
            except PolicyError as err:
                raise ApplyError(str(err), kind=err.kind) from err
        if reclaim.is_empty():
            try:
                reclaim, _ = take_by_numa_balance(
                    topology, everything.difference(ctx.reserved), RECLAIM_FALLBACK_CPUS
                )
            except SelectionError as err:
                raise ApplyError(
                    "fallback takeByNUMABalance faild in applyBlocks for reclaimPoolCPUSet "
                    f"with error: {err}"
                ) from err
        pools[RECLAIM_POOL] = reclaim
    if ctx.at_v0_5_47:
        binding = shared_binding_numas(response)
        ramp = ramp.difference(topology.cpu_details.cpus_in_numa_nodes(*sorted(binding)))
    # 4. Every other container follows.
    moves: dict[ContainerKey, tuple[Placement, str]] = {}
    finished: list[ContainerKey] = []
    quantities: list[CPUEvent] = []
    for key, cs in sorted(dedicated.items()):
        found = cpu.require_entry(*key)
        moves[key] = (OwnCPUs.of(cs), DEDICATED_OWNER)
        if found.ramp_up:
            finished.append(key)
        cores = requested_cores(found, ctx.requested_millicpu)
        if cores != found.request_quantity:
            quantities.append(RequestQuantitySet(key[0], key[1], cores))
    reclaim_non_actual = non_actual_numas(cpu) if ctx.at_v0_5_47 else frozenset()
    for found in cpu.entries():
        if found.key in dedicated:
            continue
        who = f"pod: {found.pod_namespace}/{found.pod_name}, container: {found.container_name}"
        if found.is_dedicated():
            raise ApplyError(f"dedicated_cores blocks aren't applied, {who}")
        if not (found.is_shared() or found.is_reclaimed()):
            raise ApplyError(
                f"invalid qosLevel: {found.qos_level} for pod: {found.pod_namespace}/"
                f"{found.pod_name} container: {found.container_name}"
            )
        pool = found.pool_name()
        named = response.info(found.pod_uid, found.container_name)
        if named is not None:  # a nil result counts as none (the reference crashes on it)
            pool = named.owner_pool_name
        if found.ramp_up:
            if not ramp.is_empty():
                moves[found.key] = (RAMPING, "")
            continue
        if pool not in pools:
            raise ApplyError(
                f"cpu advisor doesn't return entry for pool: {pool} and it's referred by "
                f"{who}, qosLevel: {found.qos_level}"
            )
        in_pool = InPool(pool)
        if ctx.at_v0_5_47 and found.is_reclaimed() and pool == RECLAIM_POOL:
            # v0.5.47: the reclaim pool's part by NUMA (``policy_advisor_handler.go:1047``).
            in_pool = _reclaimed_split(cpu, found, pools[pool], reclaim_non_actual)
        moves[found.key] = (in_pool, pool)
    # Events: pools first (containers refer to them), then the ramp-up CPUs, placements,
    # ramp-ups ended, quantities, and last the pools nobody may use any more.
    events: list[CPUEvent] = [
        PoolSet(name, cs) for name, cs in sorted(pools.items()) if cpu.pool_cpus(name) != cs
    ]
    if not ramp.is_empty() and cpu.ramp_cpus != ramp:
        events.append(RampCPUsSet(ramp))
    for key, (placement, owner) in moves.items():
        found = cpu.require_entry(*key)
        if found.placement != placement or found.owner_pool_name != owner:
            events.append(ContainerPlaced(key[0], key[1], placement, owner))
    events.extend(RampUpFinished(*key) for key in finished)
    events.extend(quantities)
    events.extend(PoolRemoved(name) for name in sorted(cpu.pools) if name not in pools)
    txn.emit(*events)
    return AppliedBlocks({name: cs.size() for name, cs in sorted(pools.items())}, ramp)


def _reclaimed_split(
    cpu: CPUState, found: ContainerEntry, reclaim: CPUSet, non_actual: frozenset[int]
) -> InPool:
    try:
        return reclaimed_placement(found, reclaim, non_actual, cpu)
    except PolicyError as err:
        raise ApplyError(str(err), kind=err.kind) from err


def shared_binding_numas(response: AdvisorResponse) -> frozenset[int]:
    """v0.5.47's ``GetSharedBindingNUMAs`` (``cpuadvisor/helper.go:45-86``).

    A top-level entry counts by its shape, not its name: a pool entry (one sub-entry, ``""``)
    whose info has exactly one NUMA key and no NUMA ``-1`` result. Every such NUMA node is
    kept out of the ramp-up CPUs (``policy_advisor_handler.go:1146-1156``).

    Raises:
        ApplyError: such an entry keyed by a negative NUMA id with a nil result, with the
            reference's message.
    """
    numas: set[int] = set()
    for subs in response.entries.values():
        info = None if subs is None or len(subs) != 1 else subs.get(POOL_SUB_ENTRY)
        if info is None:
            continue
        keys = list(info.numa_blocks)
        if len(keys) != 1 or info.numa_blocks.get(NO_NUMA) is not None:
            continue
        if keys[0] < 0:
            raise ApplyError(
                "GetSharedBindingNUMAs failed with error: SharedNUMABindingPoolEntry has "
                f"invalid numaID: {keys[0]}"
            )
        numas.add(keys[0])
    return frozenset(numas)
