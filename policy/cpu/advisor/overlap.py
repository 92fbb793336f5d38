"""Katalyst v0.5.47's ``allow_shared_cores_overlap_reclaimed_cores``: reclaim overlapping the
share-type pools by ratio (``policy_allocation_handlers.go`` at tag v0.5.47).

sys-advisor sets the flag in a response; the plugin keeps it in its state
(``AdvisorOverlapAllowed``, ``policy.state.advisor_section``). While it is set, the pool engine
(``policy.cpu.numa_pools``) sizes pools differently (:1413, :1525-1558, :1585-1615):

* the NUMA-bound pools and the non-binding pools always split **all** their CPUs in proportion
  (never exact sizes leaving the rest to reclaim);
* reclaim is not apportioned to the pools when reclaim is disabled;
* reclaim takes, from every share-type pool with a positive ratio, ``ceil(size × ratio)`` of its
  CPUs by :func:`take_by_numa_balance_reversely`, pools by name (the reference ranges over a Go
  map).

The ratios (:func:`reclaim_overlap_share_ratio`, ``getReclaimOverlapShareRatio`` :1895-1964) come
from the state before the pools are sized: each share-type pool's current overlap with the
reclaim pool; when no pool overlaps at all, ``1 − Σ request / |cpuset|`` over the containers of
each share-type pool. A share-type pool is any pool but ``reclaim``, ``dedicated``, ``reserve``,
``interrupt``, ``fallback`` and the ``isolation*`` and ``system*`` pools (``GetPoolType``), so SNB
pools count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from policy.cpu.pool_sizing import PoolError
from policy.state.cpu_state import CPUState
from policy.state.entries import RECLAIM_POOL
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = [
    "is_share_type_pool",
    "overlap_reclaim",
    "reclaim_overlap_share_ratio",
    "take_by_numa_balance_reversely",
]

#: Pools whose type is their own name (``GetPoolType``); the rest but the prefixed ones share.
_OWN_TYPE_POOLS: Final = frozenset({"reclaim", "dedicated", "reserve", "interrupt", "fallback"})
_OWN_TYPE_PREFIXES: Final = ("isolation", "system")


def is_share_type_pool(name: str) -> bool:
    """``GetPoolType(name) == share``."""
    return name not in _OWN_TYPE_POOLS and not name.startswith(_OWN_TYPE_PREFIXES)


def reclaim_overlap_share_ratio(state: CPUState) -> dict[str, float]:
    """Each share-type pool's overlap ratio (module docstring).

    Raises:
        PoolError: the state has no reclaim pool (the reference's message).
    """
    reclaim = state.pools.get(RECLAIM_POOL)
    if reclaim is None or reclaim.is_empty():
        raise PoolError("reclaim pool misses in current entries")
    ratios: dict[str, float] = {}
    for name, cpus in sorted(state.pools.items()):
        if not is_share_type_pool(name) or cpus.is_empty():
            continue
        overlap = cpus.intersection(reclaim).size()
        if overlap:
            ratios[name] = overlap / cpus.size()
    if ratios:
        return ratios
    non_overlap: dict[str, float] = {}
    for info in state.allocation_infos():
        if info.allocation_result.is_empty():
            continue
        pool = info.pool_name()
        if is_share_type_pool(pool) and info.request_quantity > 0:
            share = info.request_quantity / info.allocation_result.size()
            non_overlap[pool] = non_overlap.get(pool, 0.0) + share
    return {pool: 1.0 - ratio for pool, ratio in non_overlap.items()}


def take_by_numa_balance_reversely(
    topology: CPUTopology, available: CPUSet, n: int
) -> tuple[CPUSet, CPUSet]:
    """``calculator.TakeByNUMABalanceReversely`` (``cpu_assignment.go``:527-634 at tag
    v0.5.47): whole free cores while ``n`` covers one, one per NUMA node per round, each node's
    highest core id first; then single CPUs, one per NUMA node per round, each node's highest.

    Raises:
        PoolError: fewer than ``n`` CPUs of the topology are available.
    """
    details = topology.cpu_details.keep_only(available)
    if n < 1:
        return CPUSet(), available
    if n > details.cpus().size():
        raise PoolError("not enough cpus available to satisfy request")
    per_core = topology.cpus_per_core
    numas = topology.cpu_details.numa_nodes().ids()
    taken = CPUSet()
    needed = n
    if per_core and needed >= per_core:
        free_cores = {
            numa: [
                core
                for core in reversed(details.cores_in_numa_nodes(numa).ids())
                if details.cpus_in_cores(core).size() == per_core
            ]
            for numa in numas
        }
        rounds = max((len(cores) for cores in free_cores.values()), default=0)
        for i in range(rounds):
            for numa in numas:
                if i < len(free_cores[numa]) and needed >= per_core:
                    core_cpus = details.cpus_in_cores(free_cores[numa][i])
                    taken = taken.union(core_cpus)
                    needed -= core_cpus.size()
                    if needed == 0:
                        return taken, available.difference(taken)
        details = topology.cpu_details.keep_only(available.difference(taken))
    while needed > 0:
        for numa in numas:
            free = details.cpus_in_numa_nodes(numa).ids()
            if free and needed > 0:
                cpu = CPUSet([free[-1]])
                taken = taken.union(cpu)
                details = topology.cpu_details.keep_only(available.difference(taken))
                needed -= 1
            if needed == 0:
                return taken, available.difference(taken)
    return taken, available.difference(taken)


def overlap_reclaim(
    topology: CPUTopology,
    pools: Mapping[str, CPUSet],
    ratios: Mapping[str, float],
    reclaim: CPUSet,
) -> CPUSet:
    """Reclaim with ``ceil(size × ratio)`` CPUs of every pool that has a positive ratio.

    Raises:
        PoolError: a take that fails, with the reference's message.
    """
    for name, cpus in sorted(pools.items()):
        ratio = ratios.get(name, 0.0)
        if ratio <= 0:
            continue
        wanted = math.ceil(cpus.size() * ratio)
        try:
            overlap, _ = take_by_numa_balance_reversely(topology, cpus, wanted)
        except PoolError as err:
            raise PoolError(
                f"take overlapCPUs from: {name} to {RECLAIM_POOL} by ratio: {ratio:.4f} "
                f"failed with err: {err}"
            ) from err
        reclaim = reclaim.union(overlap)
    return reclaim
