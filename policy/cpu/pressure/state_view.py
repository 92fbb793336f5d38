"""What the CPU pressure plugins read of the CPU state (katalyst-core v0.5.3
``strategy/pod_pool_getter.go`` and ``pressure_load.go``; spec cpu-policy §5.4, §12.7).

* ``pool_map``: ``DefaultGetPodPoolMapFunc``: every pool entry with its size, and every
  container entry with a non-empty owner pool (a container entry without one is skipped).
* ``shared_pools_limit``: ``accumulateSharedPoolsLimit``, the CPUs the shared pools may grow
  to: the machine's CPUs outside the system's reserved CPUs and outside NUMA nodes that host a
  dedicated NUMA-binding container (``GetFilteredAvailableCPUSet(reserved, nil,
  CheckDedicatedNUMABinding)``), minus the cores reserved for reclaimed pods on the NUMA nodes
  no NUMA-binding container touches (``GetFilteredNUMASet(CheckNUMABinding)``).
* ``reserved_for_reclaim``: ``machine.GetCoreNumReservedForReclaim``: ``n // numas`` per NUMA
  node (at least 1) on every ``numas // n``-th node (at least every one). The reference
  divides by ``n`` and panics for ``n = 0``; qrmd reserves nothing then.
"""

from __future__ import annotations

import math

from policy.cpu.pressure.inputs import ContainerPool, PoolMap
from policy.state.cpu_state import CPUState
from policy.topology.cpuset import CPUSet

__all__ = ["pool_map", "reserved_for_reclaim", "shared_pools_limit"]


def pool_map(state: CPUState) -> PoolMap:
    """The pools and container owners of ``state`` (``DefaultGetPodPoolMapFunc``)."""
    pools = {name: cpus.size() for name, cpus in state.pools.items()}
    containers = tuple(
        ContainerPool(e.pod_uid, e.container_name, e.owner_pool_name)
        for e in sorted(state.entries(), key=lambda e: e.key)
        if e.owner_pool_name
    )
    return PoolMap(pools, containers)


def reserved_for_reclaim(cores: int, numas: int) -> dict[int, int]:
    """Cores reserved for reclaimed pods per NUMA node (``GetCoreNumReservedForReclaim``)."""
    if cores <= 0 or numas <= 0:
        return dict.fromkeys(range(max(numas, 0)), 0)
    per_numa = max(cores // numas, 1)
    step = max(numas // cores, 1)
    return {numa: per_numa if numa % step == 0 else 0 for numa in range(numas)}


def shared_pools_limit(state: CPUState, reserved: CPUSet, reclaimed_cores: float) -> int:
    """``accumulateSharedPoolsLimit`` (the module docstring).

    Args:
        state: the CPU state.
        reserved: the system's reserved CPUs.
        reclaimed_cores: the CPU of ``reserved-resource-for-reclaimed-cores``; the reference
            takes ``Quantity.Value()``, rounded up.
    """
    available = state.adjustable_cpus(reserved).size()
    per_numa = reserved_for_reclaim(math.ceil(reclaimed_cores), len(state.topology.numa_masks()))
    shared_numas = state.numas_without_numa_binding()
    return available - sum(per_numa.get(numa, 0) for numa in shared_numas)
