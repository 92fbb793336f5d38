"""The reference's per-NUMA machine state, derived for export and forensics (spec §5.4).

qrmd never stores machine state: the policy's queries (pooled and adjustable CPUs,
``allocated_cpuset``, ``available``) are answered by ``CPUState`` from its indexes. This
module builds the whole ``{numa: NUMANodeState}`` picture exactly as the reference's
``generate_machine_state`` does, for the checkpoint export (§13.2), ``qrmd journal`` views and
tests. It walks every container, so it is O(pods × NUMA nodes): never call it on a request path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from policy.state.cpu_state import CPUState
from policy.state.entries import AllocationInfo
from policy.topology.cpuset import CPUSet

__all__ = ["NUMANodeState", "generate_machine_state"]


@dataclass(frozen=True, slots=True)
class NUMANodeState:
    """One NUMA node of the machine state (§5.4).

    ``pod_entries`` holds the containers with CPUs (original or current) on this node, their
    CPU fields restricted to it; None (the reference's null) when there are none.
    """

    default_cpuset: CPUSet
    allocated_cpuset: CPUSet
    pod_entries: Mapping[str, Mapping[str, AllocationInfo]] | None


def _restricted(info: AllocationInfo, numa: int, numa_cpus: CPUSet) -> AllocationInfo:
    result = info.allocation_result & numa_cpus
    original = info.original_allocation_result & numa_cpus
    return replace(
        info,
        allocation_result=result,
        original_allocation_result=original,
        topology_aware_assignments={numa: result} if result else {},
        original_topology_aware_assignments={numa: original} if original else {},
    )


def generate_machine_state(state: CPUState) -> dict[int, NUMANodeState]:
    """Machine state from the container entries, as the reference derives it (§5.4 steps 1–3).

    Args:
        state: the CPU state.

    Returns:
        A state for every NUMA node of the topology, ascending.
    """
    infos = list(state.allocation_infos())
    topology = state.topology
    out: dict[int, NUMANodeState] = {}
    for numa in topology.numa_nodes():
        numa_cpus = topology.cpus_in_numa(numa)
        allocated = CPUSet()
        pods: dict[str, dict[str, AllocationInfo]] | None = None
        for info in infos:
            # 2. Containers with no CPUs on this node, originally or now, are not part of it.
            original_part = (info.original_topology_aware_assignments or {}).get(numa)
            current_part = (info.topology_aware_assignments or {}).get(numa)
            if not original_part and not current_part:
                continue
            if info.is_dedicated_numa_binding() and original_part:
                allocated = allocated | original_part
            if pods is None:
                pods = {}
            pods.setdefault(info.pod_uid, {})[info.container_name] = _restricted(
                info, numa, numa_cpus
            )
        # 3. What dedicated NUMA-binding containers do not hold is the node's default cpuset.
        out[numa] = NUMANodeState(
            default_cpuset=numa_cpus - allocated,
            allocated_cpuset=allocated,
            pod_entries=pods,
        )
    return out
