"""Pool sizing: from wanted quantities to cpusets (spec cpu-policy §9.4, §9.5).

The rule, in the reference's words: isolated dedicated containers first, then every pool by
name, each with ``take_by_numa_balance`` from the adjustable CPUs; when they do not all fit,
the isolated containers go without (they fall back onto the pools' CPUs) and, if even the
pools do not fit, the pools shrink in proportion, at least one CPU each — and when that too is
impossible, every pool gets *all* the CPUs (§15.8). ``reserve`` is always the reserved set,
``reclaim`` gets every CPU left over (never nothing: four CPUs anywhere, overlap allowed), and
unless ``enable_reclaim`` is set, reclaim keeps only four of them and hands the rest to the
other pools in proportion to their sizes (§9.5).

At the v0.5.47 reference level (spec cpu-policy-v0.5.47 (c) 1–2) the floor is max(4, NUMA
nodes), the fallback and the hand-out take single hyper-threads by NUMA balance
(TakeHTByNUMABalance) instead of whole cores, and only non-binding pools share the surplus.

Everything here is a pure function of the topology, the reserve and plain maps: no state, no
events. Where the reference iterates a Go map (random order), the order is the spec's
recommended one (§15.11): pool names ascending, pod uids then container names ascending,
shrinking ties broken by pool name.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Final

from policy.cpu.context import PolicyContext
from policy.errors import ErrorKind, PolicyError
from policy.state.entries import RECLAIM_POOL, RESERVE_POOL, RESIDENT_POOLS
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.selection import (
    SelectionError,
    take_by_numa_balance,
    take_ht_by_numa_balance,
)

__all__ = [
    "RESERVED_RECLAIMED_CPUS_SIZE",
    "IsolatedCPUs",
    "IsolatedQuantities",
    "PoolError",
    "apportion_reclaimed_pool",
    "fallback_reclaim_cpus",
    "generate_pools_and_isolation",
    "proportional",
    "reserved_reclaimed_cpus_size",
    "shrink_proportionally",
    "take_cpus_for_containers",
    "take_cpus_for_pools",
]

#: The reclaim pool's floor and fallback size (§6.1).
RESERVED_RECLAIMED_CPUS_SIZE: Final = 4


def reserved_reclaimed_cpus_size(ctx: PolicyContext) -> int:
    """Reclaim's floor: four CPUs, and at v0.5.47 at least one per NUMA node (its
    ``general.Max(reservedReclaimedCPUsSize, NumNUMANodes)``)."""
    if ctx.at_v0_5_47:
        return max(RESERVED_RECLAIMED_CPUS_SIZE, len(ctx.topology.numa_nodes()))
    return RESERVED_RECLAIMED_CPUS_SIZE


#: ``{pod_uid: {container_name: CPUs}}`` of isolated dedicated containers (§5.6).
IsolatedQuantities = Mapping[str, Mapping[str, int]]
#: ``{pod_uid: {container_name: cpuset}}``.
IsolatedCPUs = dict[str, dict[str, CPUSet]]


class PoolError(PolicyError):
    """The pool engine cannot size or place pools; the message is the reference's.

    A refusal, or the kind of the error it wraps (a selection's ``SHORTAGE``): each step adds
    its name to the message of the step below, as the reference does, and keeps its kind.
    """

    kind = ErrorKind.REFUSED


def proportional(old: int, old_total: int, new_total: int, *, ceil: bool) -> int:
    """``new_total * (old / old_total)`` in IEEE doubles, in exactly that order (§9 intro).

    Args:
        old: this part's size.
        old_total: the sum of all parts.
        new_total: the sum to share out.
        ceil: round up; otherwise truncate toward zero (Go's ``int(f)``).

    Returns:
        The part's share.
    """
    share = float(new_total) * (float(old) / float(old_total))
    return math.ceil(share) if ceil else math.trunc(share)


def take_cpus_for_pools(
    topology: CPUTopology, quantities: Mapping[str, int], available: CPUSet
) -> tuple[dict[str, CPUSet], CPUSet]:
    """Each pool's CPUs, pools by name ascending, ``take_by_numa_balance`` each (§9.4).

    Returns:
        ``(pool cpusets, CPUs left)``.

    Raises:
        PoolError: "take cpu for pool: P of req: N failed with error: ...".
    """
    out: dict[str, CPUSet] = {}
    for name in sorted(quantities):
        try:
            out[name], available = take_by_numa_balance(topology, available, quantities[name])
        except SelectionError as err:
            raise PoolError(
                f"take cpu for pool: {name} of req: {quantities[name]} failed with error: {err}",
                kind=err.kind,
            ) from err
    return out, available


def take_cpus_for_containers(
    topology: CPUTopology, quantities: IsolatedQuantities, available: CPUSet
) -> tuple[IsolatedCPUs, CPUSet]:
    """Each isolated container's CPUs, by pod uid then container name (§9.4, §15.11).

    Returns:
        ``(container cpusets, CPUs left)``.

    Raises:
        PoolError: "take cpu for pod: P container: C of req: N failed with error: ...".
    """
    out: IsolatedCPUs = {}
    for pod_uid in sorted(quantities):
        containers = quantities[pod_uid]
        for name in sorted(containers):
            try:
                cpus, available = take_by_numa_balance(topology, available, containers[name])
            except SelectionError as err:
                raise PoolError(
                    f"take cpu for pod: {pod_uid} container: {name} of req: {containers[name]} "
                    f"failed with error: {err}",
                    kind=err.kind,
                ) from err
            out.setdefault(pod_uid, {})[name] = cpus
    return out, available


def shrink_proportionally(quantities: Mapping[str, int], available_size: int) -> dict[str, int]:
    """Pool sizes scaled down to ``available_size``, at least one CPU each (§9.4 third case).

    1. ``ceil``-proportional share of each pool, at least 1.
    2. While the total is too big: one CPU less for each pool above 1, biggest first (ties by
       name), stopping as soon as the total fits; give up when a round frees nothing.

    The result may still exceed ``available_size`` when there are more pools than CPUs.
    """
    wanted_total = sum(quantities.values())
    # 1. Proportional shares, at least one CPU each.
    prop = {
        name: max(proportional(q, wanted_total, available_size, ceil=True), 1)
        for name, q in quantities.items()
    }
    total = sum(prop.values())
    order = sorted(prop, key=lambda name: (-prop[name], name))
    # 2. Rounds of one CPU less per pool until the total fits or nothing moves.
    while total > available_size:
        before = total
        for name in order:
            if prop[name] > 1 and total > 0:
                prop[name] -= 1
                total -= 1
            if total == available_size:
                break
        if before == total:
            break
    return prop


def generate_pools_and_isolation(
    ctx: PolicyContext,
    pools_q: Mapping[str, int],
    iso_q: IsolatedQuantities,
    available: CPUSet,
) -> tuple[dict[str, CPUSet], IsolatedCPUs]:
    """Pool and isolated-container cpusets from wanted quantities (§9.4).

    1. Pools and containers wanting 0 CPUs are dropped.
    2. Everything fits: isolated containers first, then pools. Only pools fit: pools, the
       isolated containers get nothing. Neither: pools shrink in proportion, or all share
       every available CPU when they cannot get one each (§15.8).
    3. ``reserve`` is the reserved set; ``reclaim`` takes every CPU left (four anywhere when
       none is left), and gives what exceeds four to the other pools unless
       ``ctx.enable_reclaim``.

    Args:
        ctx: topology, reserve and ``enable_reclaim``.
        pools_q: ``{pool: CPUs wanted}``.
        iso_q: ``{pod: {container: CPUs wanted}}`` of isolated dedicated containers.
        available: the adjustable CPUs (§5.4).

    Returns:
        ``(pool cpusets, isolated container cpusets)``; pools absent here are to be dropped.

    Raises:
        PoolError: with the reference's message when a take fails, when a shared pool is
            named ``reserve``, or when no reclaim fallback exists.
    """
    topology = ctx.topology
    # 1. Zero quantities take nothing.
    pools = {name: q for name, q in pools_q.items() if q != 0}
    isolated = {
        pod: {name: q for name, q in containers.items() if q != 0}
        for pod, containers in iso_q.items()
    }
    isolated = {pod: containers for pod, containers in isolated.items() if containers}
    size = available.size()
    pools_total = sum(pools.values())
    isolated_total = sum(q for containers in isolated.values() for q in containers.values())
    pools_cs: dict[str, CPUSet] = {}
    iso_cs: IsolatedCPUs = {}
    # 2. One of four cases.
    if pools_total + isolated_total <= size:
        try:
            iso_cs, available = take_cpus_for_containers(topology, isolated, available)
        except PoolError as err:
            raise PoolError(
                f"allocate isolated cpus for dedicated_cores failed with error: {err}",
                kind=err.kind,
            ) from err
        pools_cs, available = _take_pools(topology, pools, available)
    elif pools_total <= size:
        pools_cs, available = _take_pools(topology, pools, available)
    elif pools_total > 0:
        prop = shrink_proportionally(pools, size)
        if sum(prop.values()) > size:
            # Not even one CPU per pool: every pool gets all of them, none is consumed (§15.8).
            pools_cs = dict.fromkeys(pools, available)
        else:
            pools_cs, available = _take_pools(topology, prop, available)
    # 3. The resident pools.
    reserve = pools_cs.get(RESERVE_POOL)
    if reserve is not None and not reserve.is_empty():
        raise PoolError(f"static pool {RESERVE_POOL} result: {reserve} is generated dynamically")
    pools_cs[RESERVE_POOL] = ctx.reserved
    reclaim = pools_cs.get(RECLAIM_POOL, CPUSet()).union(available)
    if reclaim.is_empty():
        reclaim = fallback_reclaim_cpus(ctx, "generatePoolsAndIsolation for reclaimedCPUSet")
    floor = reserved_reclaimed_cpus_size(ctx)
    if not ctx.enable_reclaim and reclaim.size() > floor:
        if ctx.at_v0_5_47:
            # v0.5.47: hyper-threads, and the non-binding pools only ((c) 2).
            pools_cs, reclaim = apportion_reclaimed_pool(
                topology, pools_cs, reclaim, floor=floor, by_thread=True, only=pools.keys()
            )
        else:
            pools_cs, reclaim = apportion_reclaimed_pool(topology, pools_cs, reclaim)
    pools_cs[RECLAIM_POOL] = reclaim
    return pools_cs, iso_cs


def _take_pools(
    topology: CPUTopology, quantities: Mapping[str, int], available: CPUSet
) -> tuple[dict[str, CPUSet], CPUSet]:
    try:
        return take_cpus_for_pools(topology, quantities, available)
    except PoolError as err:
        raise PoolError(f"allocate cpus for pools failed with error: {err}", kind=err.kind) from err


def fallback_reclaim_cpus(ctx: PolicyContext, where: str) -> CPUSet:
    """Four CPUs for reclaim from all non-reserved CPUs, whatever holds them (§6.2, §9.4).

    At v0.5.47 the reference's start-up ``reservedReclaimedCPUSet``: the floor's size
    (``reserved_reclaimed_cpus_size``) by TakeHTByNUMABalance ((c) 1), so ``1,3-4,6`` on the
    (16,2,4) node with reserve ``0,2`` where v0.5.3 gives ``1,3,9,11``.

    Raises:
        PoolError: "fallback takeByNUMABalance faild in <where> with error: ..." (sic).
    """
    everything = CPUSet.from_mask(ctx.topology.cpu_details.mask).difference(ctx.reserved)
    take, name = take_by_numa_balance, "takeByNUMABalance"
    if ctx.at_v0_5_47:
        take, name = take_ht_by_numa_balance, "TakeHTByNUMABalance"
    try:
        taken, _ = take(ctx.topology, everything, reserved_reclaimed_cpus_size(ctx))
    except SelectionError as err:
        message = f"fallback {name} faild in {where} with error: {err}"
        raise PoolError(message, kind=err.kind) from err
    return taken


def apportion_reclaimed_pool(
    topology: CPUTopology,
    pools_cs: Mapping[str, CPUSet],
    reclaim: CPUSet,
    *,
    floor: int = RESERVED_RECLAIMED_CPUS_SIZE,
    by_thread: bool = False,
    only: Collection[str] | None = None,
) -> tuple[dict[str, CPUSet], CPUSet]:
    """Give reclaim's CPUs above the floor to the non-resident pools (§9.5).

    Each non-resident pool, by name, takes ``max(trunc(extra × size / total), 1)`` CPUs from
    reclaim with ``take_by_numa_balance`` (sizes as they were before this step), until reclaim
    is down to the floor. A take that fails stops the hand-out where it is (the reference
    logs it and keeps what was given so far).

    Args:
        topology: the machine.
        pools_cs: every pool's cpuset (reclaim's own entry is ignored).
        reclaim: the reclaim pool's CPUs.
        floor: what reclaim keeps (``reserved_reclaimed_cpus_size``).
        by_thread: take single hyper-threads (``take_ht_by_numa_balance``, v0.5.47) rather
            than whole cores first.
        only: the pools that share the surplus (v0.5.47: the non-binding ones); every
            non-resident pool when None.

    Returns:
        ``(pools with their share added, what reclaim keeps)``.
    """
    out = dict(pools_cs)
    take = take_ht_by_numa_balance if by_thread else take_by_numa_balance
    sizes = {
        name: cpus.size()
        for name, cpus in pools_cs.items()
        if name not in RESIDENT_POOLS and (only is None or name in only)
    }
    total = sum(sizes.values())
    extra = reclaim.size() - floor
    if extra <= 0 or total == 0:
        return out, reclaim
    for name in sorted(sizes):
        n = max(proportional(sizes[name], total, extra, ceil=False), 1)
        try:
            taken, reclaim = take(topology, reclaim, n)
        except SelectionError:
            return out, reclaim
        out[name] = out[name].union(taken)
        if reclaim.size() <= floor:
            break
    return out, reclaim
