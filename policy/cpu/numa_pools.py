"""Pool sizing at the v0.5.47 reference level: NUMA-bound pools first, then the rest
(spec cpu-policy-v0.5.47 (a) "Allocation" and "Reclaim", (c) 2; katalyst-core v0.5.47
``generatePoolsAndIsolation`` and ``generateNUMABindingPoolsCPUSetInPlace``,
``policy_allocation_handlers.go:1380-1766``).

1. Zero quantities are dropped. SNB pools (``<base>-NUMA<id>``, ``policy.cpu.snb``) are the
   binding pools; every other pool is non-binding.
2. Each NUMA hosting binding pools, by id: the pools get exactly their sizes
   (``take_by_numa_balance`` within the NUMA, by name) when their total fits the NUMA's
   adjustable CPUs and reclaim is enabled; otherwise they split **all** of those CPUs in
   proportion (ceiling, at least one each; every pool gets all of them when there are more
   pools than CPUs). What is left of the NUMA goes to reclaim.
3. The non-binding pools and the isolated dedicated containers share the adjustable CPUs of
   the other NUMAs, in v0.5.3's four cases (``policy.cpu.pool_sizing``).
4. ``reserve`` is the reserve; ``reclaim`` takes every CPU left, and without
   ``enable_reclaim`` hands what exceeds max(4, NUMA nodes) to the non-binding pools by
   hyper-thread; an empty reclaim falls back on the start-up set (TakeHTByNUMABalance).

While sys-advisor allows shared cores to overlap reclaimed cores (``overlap`` given, see
``policy.cpu.advisor.overlap``), step 2 and the non-binding pools of step 3 always split all
their CPUs in proportion, and step 4 does not apportion reclaim but lets it take its ratio of
every share-type pool.

The reference iterates Go maps here (random order); as in ``policy.cpu.pool_sizing``, NUMAs
go by id and pools by name.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy.cpu.advisor.overlap import overlap_reclaim
from policy.cpu.context import PolicyContext
from policy.cpu.pool_sizing import (
    IsolatedCPUs,
    IsolatedQuantities,
    PoolError,
    apportion_reclaimed_pool,
    fallback_reclaim_cpus,
    reserved_reclaimed_cpus_size,
    shrink_proportionally,
    take_cpus_for_containers,
    take_cpus_for_pools,
)
from policy.cpu.snb import numa_of_pool
from policy.state.entries import RECLAIM_POOL, RESERVE_POOL
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = ["generate_pools_with_numa_binding"]


def generate_pools_with_numa_binding(
    ctx: PolicyContext,
    pools_q: Mapping[str, int],
    iso_q: IsolatedQuantities,
    available: CPUSet,
    overlap: Mapping[str, float] | None = None,
) -> tuple[dict[str, CPUSet], IsolatedCPUs]:
    """Pool and isolated-container cpusets at v0.5.47 (module docstring).

    Args:
        ctx: topology, reserve and ``enable_reclaim``.
        pools_q: ``{pool: CPUs wanted}``, SNB pools by their ``-NUMA<id>`` names.
        iso_q: ``{pod: {container: CPUs wanted}}`` of isolated dedicated containers.
        available: the adjustable CPUs.
        overlap: while sys-advisor allows shared cores to overlap reclaimed cores, each
            share-type pool's overlap ratio; None otherwise.

    Returns:
        ``(pool cpusets, isolated container cpusets)``.

    Raises:
        PoolError: with the reference's message when a take fails, when a shared pool is
            named ``reserve``, or when no reclaim fallback exists.
    """
    topology = ctx.topology
    # 1. Zero quantities take nothing; binding pools by NUMA.
    binding: dict[int, dict[str, int]] = {}
    non_binding: dict[str, int] = {}
    for name, quantity in pools_q.items():
        if quantity == 0:
            continue
        numa = numa_of_pool(name)
        if numa is None:
            non_binding[name] = quantity
        else:
            binding.setdefault(numa, {})[name] = quantity
    isolated = {
        pod: {name: q for name, q in containers.items() if q != 0}
        for pod, containers in iso_q.items()
    }
    isolated = {pod: containers for pod, containers in isolated.items() if containers}
    pools_cs: dict[str, CPUSet] = {}
    # 2. Each binding NUMA's pools.
    masks = topology.numa_masks()
    for numa in sorted(binding):
        numa_cpus = CPUSet.from_mask(masks.get(numa, 0)).difference(ctx.reserved)
        try:
            left = _numa_pools(
                ctx,
                binding[numa],
                numa_cpus.intersection(available),
                pools_cs,
                exact=ctx.enable_reclaim and overlap is None,
            )
        except PoolError as err:
            raise PoolError(
                f"generateNUMABindingPoolsCPUSetInPlace failed with error: {err}", kind=err.kind
            ) from err
        available = available.difference(numa_cpus).union(left)
    # 3. The other NUMAs for the non-binding pools and the isolated containers.
    other = 0
    for numa, mask in masks.items():
        if numa not in binding:
            other |= mask
    free = CPUSet.from_mask(available.mask & other)
    available = available.difference(free)
    iso_cs: IsolatedCPUs = {}
    free = _non_binding(
        topology,
        non_binding,
        isolated,
        free,
        pools_cs=pools_cs,
        iso_cs=iso_cs,
        proportional=overlap is not None,
    )
    available = available.union(free)
    # 4. The resident pools.
    reserve = pools_cs.get(RESERVE_POOL)
    if reserve is not None and not reserve.is_empty():
        raise PoolError(f"static pool {RESERVE_POOL} result: {reserve} is generated dynamically")
    pools_cs[RESERVE_POOL] = ctx.reserved
    reclaim = pools_cs.get(RECLAIM_POOL, CPUSet()).union(available)
    floor = reserved_reclaimed_cpus_size(ctx)
    if overlap is not None:
        reclaim = overlap_reclaim(topology, pools_cs, overlap, reclaim)
    elif not ctx.enable_reclaim and reclaim.size() > floor:
        pools_cs, reclaim = apportion_reclaimed_pool(
            topology, pools_cs, reclaim, floor=floor, by_thread=True, only=non_binding.keys()
        )
    if reclaim.is_empty():
        reclaim = fallback_reclaim_cpus(ctx, "generatePoolsAndIsolation for reclaimedCPUSet")
    pools_cs[RECLAIM_POOL] = reclaim
    return pools_cs, iso_cs


def _numa_pools(
    ctx: PolicyContext,
    quantities: Mapping[str, int],
    free: CPUSet,
    out: dict[str, CPUSet],
    *,
    exact: bool,
) -> CPUSet:
    """One NUMA's binding pools into ``out``; returns the NUMA's CPUs left (step 2).
    ``exact``: reclaim is enabled and may not overlap, so pools that fit get exact sizes."""
    total = sum(quantities.values())
    if total <= free.size() and exact:
        # Exact sizes; the rest of the NUMA goes to reclaim.
        taken, left = _take(ctx.topology, quantities, free)
        out.update(taken)
        return left
    # Otherwise the pools split every CPU of the NUMA in proportion.
    return _proportional(ctx.topology, quantities, free, out)


def _proportional(
    topology: CPUTopology, quantities: Mapping[str, int], free: CPUSet, out: dict[str, CPUSet]
) -> CPUSet:
    """``generateProportionalPoolsCPUSetInPlace``."""
    shares = shrink_proportionally(quantities, free.size())
    if sum(shares.values()) > free.size():
        # Not even one CPU each: every pool gets all of them.
        for name in quantities:
            out[name] = free
        return CPUSet()
    taken, left = _take(topology, shares, free)
    out.update(taken)
    return left


def _take(
    topology: CPUTopology, quantities: Mapping[str, int], free: CPUSet
) -> tuple[dict[str, CPUSet], CPUSet]:
    try:
        return take_cpus_for_pools(topology, quantities, free)
    except PoolError as err:
        raise PoolError(f"allocate cpus for pools failed with error: {err}", kind=err.kind) from err


def _non_binding(
    topology: CPUTopology,
    pools: Mapping[str, int],
    isolated: IsolatedQuantities,
    free: CPUSet,
    *,
    pools_cs: dict[str, CPUSet],
    iso_cs: IsolatedCPUs,
    proportional: bool = False,
) -> CPUSet:
    """Step 3: v0.5.3's four cases on the non-binding NUMAs' CPUs; returns what is left.
    ``proportional``: pools that fit split every CPU left in proportion (overlap allowed)."""
    pools_total = sum(pools.values())
    isolated_total = sum(q for containers in isolated.values() for q in containers.values())
    size = free.size()
    if pools_total + isolated_total <= size:
        try:
            taken_iso, free = take_cpus_for_containers(topology, isolated, free)
        except PoolError as err:
            raise PoolError(
                f"allocate isolated cpus for dedicated_cores failed with error: {err}",
                kind=err.kind,
            ) from err
        iso_cs.update(taken_iso)
        free = _fit(topology, pools, free, pools_cs, proportional)
    elif pools_total <= size:
        free = _fit(topology, pools, free, pools_cs, proportional)
    elif pools_total > 0:
        free = _proportional(topology, pools, free, pools_cs)
    return free


def _fit(
    topology: CPUTopology,
    pools: Mapping[str, int],
    free: CPUSet,
    pools_cs: dict[str, CPUSet],
    proportional: bool,
) -> CPUSet:
    """Pools that fit: exact sizes, or (overlap allowed) every CPU in proportion."""
    if proportional:
        return _proportional(topology, pools, free, pools_cs)
    taken, free = _take(topology, pools, free)
    pools_cs.update(taken)
    return free
