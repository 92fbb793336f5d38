"""The pool engine: resize pools and make containers follow (cpu-policy §9.1–§9.3, §9.7).

Pools are sized from what their containers ask for — the sum of the requested cores of the
shared containers each pool owns, or, with sys-advisor, the sizes the advisor last set — plus
the isolated dedicated containers' CPUs, on the adjustable CPUs (every NUMA node without a
dedicated NUMA-binding container, minus the reserve). It runs after ramp-up ends, after
dedicated allocations, after pod removal, after residual clean-up, and for non-ramping shared
allocations (§9 intro).

1. Quantities: ``put_allocations_and_adjust`` (§9.1, some containers joining their pools) or
   ``adjust_allocation_entries`` (§9.2, everything as it is).
2. ``adjust_pools_and_isolated`` (§9.3): sizes (``policy.cpu.pool_sizing``), reclaim overlap with
   dedicated NUMA-binding containers (§9.7), placement (``policy.cpu.pool_apply``), clean-up.

Costs: the quantity maps come from the state's per-pool sums and its isolated-container index
(O(pools + isolated containers)), the adjustable CPUs from its NUMA indexes, sizing is a few
``take_by_numa_balance`` calls, and placement touches only the containers whose placement
changes (see ``policy.cpu.pool_apply``): no step walks the list of pods.

Errors carry the reference's nested messages ("adjustPoolsAndIsolatedEntries failed with
error: generatePoolsAndIsolation failed with error: ..."); each step emits its events at once,
so a failing step leaves the transaction as the previous step left it, as in the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from policy.cpu.advisor.overlap import reclaim_overlap_share_ratio
from policy.cpu.advisor.resize import resize_growth
from policy.cpu.context import PolicyContext
from policy.cpu.numa_pools import generate_pools_with_numa_binding
from policy.cpu.pool_apply import apply_pools_and_isolated, clean_pools
from policy.cpu.pool_memo import sized_pools
from policy.cpu.pool_sizing import (
    IsolatedQuantities,
    PoolError,
    apportion_reclaimed_pool,
    generate_pools_and_isolation,
)
from policy.cpu.snb import adjustable_cpus, demand_of, pool_demands, precise_ceil, target_pool
from policy.cpu.txn import Txn
from policy.state.cpu_state import ContainerKey, CPUState
from policy.state.entries import RECLAIM_POOL, RESIDENT_POOLS, ContainerEntry, requested_cores
from policy.topology.cpuset import CPUSet

__all__ = [
    "PoolError",
    "adjust_allocation_entries",
    "adjust_pools_and_isolated",
    "apportion_reclaimed_pool",
    "clean_pools",
    "generate_pools_and_isolation",
    "pool_quantities",
    "put_allocations_and_adjust",
    "reclaim_overlap_numa_binding",
]


def pool_quantities(
    state: CPUState, ctx: PolicyContext, ignore: frozenset[ContainerKey] = frozenset()
) -> dict[str, int]:
    """What each pool should hold before any increment (§9.1 step 3, §9.2).

    With sys-advisor, the current size of every non-resident pool ("trust the advisor's
    ratios"); otherwise ``shared_quantity_map`` without the ``ignore``d containers.
    """
    if ctx.advisor_enabled:
        return {
            name: cpus.size() for name, cpus in state.pools.items() if name not in RESIDENT_POOLS
        }
    if ctx.at_v0_5_47:
        # v0.5.47: main containers, ramping ones too, SNB ones twice (policy.cpu.snb).
        return pool_demands(state, ctx, ignore)
    return state.shared_quantity_map(ignore, ctx.requested_millicpu)


def put_allocations_and_adjust(
    txn: Txn,
    ctx: PolicyContext,
    containers: Sequence[ContainerEntry],
    incr_by_req: bool,
    *,
    resized_from: ContainerEntry | None = None,
) -> None:
    """Put shared containers into their pools and resize every pool (§9.1).

    The containers are counted out of the current pool quantities and, with ``incr_by_req``,
    their requested cores are added to the pool their request names (``specified_pool_name``
    of the entry given, which may carry updated annotations, §7.3 step 2); then §9.3.

    Args:
        txn: the decision in progress; each container must have an entry in its state.
        ctx: reserve, options and seams.
        containers: shared containers, possibly in-memory copies of their stored entries.
        incr_by_req: add their requested cores to their pools' quantities.
        resized_from: for the in-place resize of one container, its entry before; with
            sys-advisor at v0.5.47 the pool then grows by what the pod grew by
            (``policy.cpu.advisor.resize``) instead of by the container's demand.

    Raises:
        PoolError: "put container with invalid qos level: L into pool", "entry NS/NAME, C
            isn't found in state", "allocationInfo points to empty poolName", or
            "adjustPoolsAndIsolatedEntries failed with error: ..."; nothing is emitted for the
            first three.
    """
    # 1. Nothing to put, nothing to do.
    if not containers:
        return
    state = txn.cpu
    ignore = frozenset(c.key for c in containers)
    # 3. Current quantities without these containers.
    pools_q = pool_quantities(state, ctx, ignore)
    # 4. Each container must be a stored shared container with a pool.
    increments: dict[str, float] = {}
    for container in containers:
        if not container.is_shared():
            raise PoolError(
                f"put container with invalid qos level: {container.qos_level} into pool"
            )
        if state.entry(*container.key) is None:
            raise PoolError(
                f"entry {container.pod_namespace}/{container.pod_name}, "
                f"{container.container_name} isn't found in state"
            )
        pool = container.specified_pool_name()
        if not pool:
            raise PoolError("allocationInfo points to empty poolName")
        if incr_by_req:
            if ctx.at_v0_5_47:
                # v0.5.47 counts an SNB container into its NUMA pool, twice its request.
                pool, cores = target_pool(container), demand_of(container, ctx)
            else:
                cores = requested_cores(container, ctx.requested_millicpu)
            increments[pool] = increments.get(pool, 0.0) + cores
    if resized_from is not None and ctx.advisor_enabled and ctx.at_v0_5_47:
        # v0.5.47 with the advisor: the growth of the pod's aggregated request only.
        growth = resize_growth(state, resized_from, containers[0])
        increments = {growth.pool: growth.cores}
    # 5. Their requests go to their pools.
    ceil = precise_ceil if ctx.at_v0_5_47 else math.ceil
    for pool, cores in increments.items():
        pools_q[pool] = pools_q.get(pool, 0) + ceil(cores)
    # 6-7. Isolated containers as they are; then size and place.
    iso_q = state.isolated_quantity_map(ignore, ctx.requested_millicpu)
    _adjust(txn, ctx, pools_q, iso_q)


def adjust_allocation_entries(txn: Txn, ctx: PolicyContext) -> None:
    """Resize every pool from the containers as they are and re-place them (§9.2).

    Raises:
        PoolError: "adjustPoolsAndIsolatedEntries failed with error: ...".
    """
    state = txn.cpu
    pools_q = pool_quantities(state, ctx)
    iso_q = state.isolated_quantity_map(lookup=ctx.requested_millicpu)
    _adjust(txn, ctx, pools_q, iso_q)


def _adjust(
    txn: Txn, ctx: PolicyContext, pools_q: dict[str, int], iso_q: IsolatedQuantities
) -> None:
    try:
        adjust_pools_and_isolated(txn, ctx, pools_q, iso_q)
    except PoolError as err:
        raise PoolError(
            f"adjustPoolsAndIsolatedEntries failed with error: {err}", kind=err.kind
        ) from err


def adjust_pools_and_isolated(
    txn: Txn, ctx: PolicyContext, pools_q: dict[str, int], iso_q: IsolatedQuantities
) -> None:
    """Size pools and isolated containers, then place everything and clean up (§9.3).

    1. The adjustable CPUs of the current state.
    2. ``generate_pools_and_isolation`` (§9.4).
    3. ``reclaim_overlap_numa_binding`` (§9.7).
    4. ``apply_pools_and_isolated`` (§9.8).
    5. ``clean_pools`` (§9.9).

    Raises:
        PoolError: the failing step's name and message ("generatePoolsAndIsolation failed
            with error: ..."); the steps before it keep their events.
    """
    state = txn.cpu
    # 1. Adjustable CPUs (v0.5.47: only NUMA-exclusive dedicated NUMAs are left out whole).
    available = (
        adjustable_cpus(state, ctx) if ctx.at_v0_5_47 else state.adjustable_cpus(ctx.reserved)
    )
    # 2. Sizes (v0.5.47: the NUMA-bound pools first, policy.cpu.numa_pools, and reclaim
    # overlapping share-type pools while sys-advisor allows it, policy.cpu.advisor.overlap).
    overlap = _overlap_ratios(txn) if ctx.at_v0_5_47 else None
    try:
        # The same inputs as the last adjustment give its answer again (policy.cpu.pool_memo).
        generate = (
            generate_pools_with_numa_binding if ctx.at_v0_5_47 else generate_pools_and_isolation
        )
        pools_cs, iso_cs = sized_pools(generate, ctx, pools_q, iso_q, available, overlap=overlap)
    except PoolError as err:
        raise PoolError(
            f"generatePoolsAndIsolation failed with error: {err}", kind=err.kind
        ) from err
    # 3. Reclaim may overlap idle dedicated CPUs.
    try:
        pools_cs = reclaim_overlap_numa_binding(ctx, state, pools_cs)
    except PoolError as err:
        raise PoolError(
            f"reclaimOverlapNUMABinding failed with error: {err}", kind=err.kind
        ) from err
    # 4. Placement.
    try:
        apply_pools_and_isolated(txn, ctx, pools_cs, iso_cs)
    except PoolError as err:
        raise PoolError(
            f"applyPoolsAndIsolatedInfo failed with error: {err}", kind=err.kind
        ) from err
    # 5. Pools nobody owns.
    try:
        clean_pools(txn, ctx)
    except PoolError as err:  # pragma: no cover - clean_pools refuses nothing today
        raise PoolError(f"cleanPools failed with error: {err}", kind=err.kind) from err


def _overlap_ratios(txn: Txn) -> dict[str, float] | None:
    """The share-type pools' overlap ratios while sys-advisor allows the overlap, else None.

    Raises:
        PoolError: "reclaimOverlapShareRatio failed with error: ..." (no reclaim pool).
    """
    if not txn.state.advisor.allow_shared_cores_overlap_reclaimed_cores:
        return None
    try:
        return reclaim_overlap_share_ratio(txn.cpu)
    except PoolError as err:
        raise PoolError(f"reclaimOverlapShareRatio failed with error: {err}") from err


def reclaim_overlap_numa_binding(
    ctx: PolicyContext, state: CPUState, pools_cs: dict[str, CPUSet]
) -> dict[str, CPUSet]:
    """With sys-advisor and ``enable_reclaim``, let reclaim also use the CPUs it already shares
    with settled dedicated NUMA-binding main containers (§9.7).

    Cost: O(dedicated containers), from the state's dedicated index.

    Args:
        ctx: ``advisor_enabled`` and ``enable_reclaim``.
        state: the current state (its reclaim pool and dedicated containers).
        pools_cs: the new pools.

    Returns:
        ``pools_cs`` with reclaim widened (the same mapping when the rule does not apply).

    Raises:
        PoolError: "reclaim pool misses in current entries" when the current reclaim pool is
            missing or empty; "reclaim pool is empty after overlapping with dedicated_cores
            numa_binding containers".
    """
    if not (ctx.advisor_enabled and ctx.enable_reclaim):
        return pools_cs
    current = state.pool_cpus(RECLAIM_POOL)
    if current is None or current.is_empty():
        raise PoolError("reclaim pool misses in current entries")
    reclaim = pools_cs.get(RECLAIM_POOL, CPUSet())
    for key in sorted(state.dedicated_containers()):
        entry = state.require_entry(*key)
        if entry.is_numa_binding() and entry.is_main() and not entry.ramp_up:
            result, _ = state.placement_cpus(entry.placement)
            reclaim = reclaim.union(current.intersection(result))
    if reclaim.is_empty():
        raise PoolError(
            "reclaim pool is empty after overlapping with dedicated_cores numa_binding containers"
        )
    out = dict(pools_cs)
    out[RECLAIM_POOL] = reclaim
    return out
