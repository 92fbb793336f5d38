"""The checkpoint sys-advisor reads back: ``GetCheckpoint`` from a state (cpu-policy §11.4).

For every stored entry, pools included: ``ramp_up`` and the owner pool; a sidecar with an
empty owner shows its pod's main container's owner instead; the NUMA assignments (NUMA id →
cpuset, current and original) only for entries that are neither shared nor reclaimed
(dedicated containers and pools), which sys-advisor needs to place its blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from policy.state.cpu_state import CPUState
from policy.state.entries import AllocationInfo
from policy.topology.cpuset import CPUSet

__all__ = ["CheckpointEntry", "checkpoint_entries"]


@dataclass(frozen=True, slots=True)
class CheckpointEntry:
    """One ``cpuadvisor.AllocationInfo`` (wire.md §6.3); assignments None = left out."""

    ramp_up: bool
    owner_pool_name: str
    topology_aware_assignments: Mapping[int, CPUSet] | None = None
    original_topology_aware_assignments: Mapping[int, CPUSet] | None = None


def checkpoint_entries(cpu: CPUState) -> dict[str, dict[str, CheckpointEntry]]:
    """The ``GetCheckpointResponse`` entries: pool name or pod uid → sub-entry → entry.

    Args:
        cpu: the state to report (the latest durable snapshot's).

    Returns:
        Pools under their name with sub-entry ``""``; containers under pod uid and name.
    """
    out: dict[str, dict[str, CheckpointEntry]] = {}
    for pool in cpu.pool_entries():
        out[pool.pod_uid] = {"": _entry(pool, pool.owner_pool_name)}
    for info in cpu.allocation_infos():
        owner = info.owner_pool_name
        if not owner and info.is_sidecar():
            main = cpu.main_container_entry(info.pod_uid)
            owner = main.owner_pool_name if main is not None else ""
        out.setdefault(info.pod_uid, {})[info.container_name] = _entry(info, owner)
    return out


def _entry(info: AllocationInfo, owner: str) -> CheckpointEntry:
    if info.is_shared() or info.is_reclaimed():
        return CheckpointEntry(info.ramp_up, owner)
    return CheckpointEntry(
        info.ramp_up,
        owner,
        _frozen_map(info.topology_aware_assignments),
        _frozen_map(info.original_topology_aware_assignments),
    )


def _frozen_map(value: Mapping[int, CPUSet] | None) -> Mapping[int, CPUSet] | None:
    return None if value is None else MappingProxyType(dict(value))
