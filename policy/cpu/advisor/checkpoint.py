"""The checkpoint sys-advisor reads back: ``GetCheckpoint`` from a state (cpu-policy §11.4).

For every stored entry, pools included: ``ramp_up`` and the owner pool; a sidecar with an
empty owner shows its pod's main container's owner instead; the NUMA assignments (NUMA id →
cpuset, current and original) only for entries that are neither shared nor reclaimed
(dedicated containers and pools), which sys-advisor needs to place its blocks. At Katalyst
v0.5.47 only shared containers are left without them (``GetCheckpoint``,
``policy_advisor_handler.go``:175-180 at tag v0.5.47: ``!CheckShared() || IsPoolEntry()``), so
reclaimed containers show theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from policy.state.cpu_state import CPUState
from policy.state.entries import AllocationInfo
from policy.topology.cpuset import CPUSet

__all__ = ["CheckpointEntry", "allocation_entry", "checkpoint_entries"]


@dataclass(frozen=True, slots=True)
class CheckpointEntry:
    """One ``cpuadvisor.AllocationInfo`` (wire.md §6.3); assignments None = left out."""

    ramp_up: bool
    owner_pool_name: str
    topology_aware_assignments: Mapping[int, CPUSet] | None = None
    original_topology_aware_assignments: Mapping[int, CPUSet] | None = None


def checkpoint_entries(
    cpu: CPUState, *, at_v0_5_47: bool = False
) -> dict[str, dict[str, CheckpointEntry]]:
    """The ``GetCheckpointResponse`` entries: pool name or pod uid → sub-entry → entry.

    Args:
        cpu: the state to report (the latest durable snapshot's).
        at_v0_5_47: answer as Katalyst v0.5.47 (reclaimed containers with assignments).

    Returns:
        Pools under their name with sub-entry ``""``; containers under pod uid and name.
    """
    out: dict[str, dict[str, CheckpointEntry]] = {}
    for pool in cpu.pool_entries():
        out[pool.pod_uid] = {"": allocation_entry(pool, pool.owner_pool_name)}
    for info in cpu.allocation_infos():
        owner = info.owner_pool_name
        if not owner and info.is_sidecar():
            main = cpu.main_container_entry(info.pod_uid)
            owner = main.owner_pool_name if main is not None else ""
        out.setdefault(info.pod_uid, {})[info.container_name] = allocation_entry(
            info, owner, at_v0_5_47=at_v0_5_47
        )
    return out


def allocation_entry(
    info: AllocationInfo, owner: str, *, at_v0_5_47: bool = False
) -> CheckpointEntry:
    """One entry's ``AllocationInfo`` with this owner pool (pool entries are never shared or
    reclaimed, so they always carry their assignments)."""
    if info.is_shared() or (info.is_reclaimed() and not at_v0_5_47):
        return CheckpointEntry(info.ramp_up, owner)
    return CheckpointEntry(
        info.ramp_up,
        owner,
        _frozen_map(info.topology_aware_assignments),
        _frozen_map(info.original_topology_aware_assignments),
    )


def _frozen_map(value: Mapping[int, CPUSet] | None) -> Mapping[int, CPUSet] | None:
    return None if value is None else MappingProxyType(dict(value))
