"""The CPU section of the state: container entries, pools and the ramp-up cpuset (spec §5).

A ``CPUState`` is an immutable value. It stores only what events set — container entries
(with placements, see ``policy.state.entries``), pools (name → cpuset, §5.3) and the ramp-up cpuset
(§9.6) — in ``immutables.Map`` HAMTs, so applying an event (``policy.state.cpu_apply``) shares
everything it does not change. The reference's machine state (§5.4) is never stored: the
queries below derive what the policy asks of it from the indexes of ``policy.state.cpu_indexes``,
in time bounded by the NUMA and dedicated-container counts, never by the pod count. The full
per-NUMA picture, and every per-container AllocationInfo with its four CPU fields, are derived
on demand for replies, the advisor's checkpoint and exports.

Two states are equal when their entries, pools and ramp-up cpusets are; indexes are derived.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import immutables

from policy.errors import StateError
from policy.state.cpu_indexes import ContainerKey, CPUIndexes, ceil_units, exact_units
from policy.state.entries import (
    DEDICATED_OWNER,
    RAMPING,
    AllocationInfo,
    ContainerEntry,
    CPURequestLookup,
    InPool,
    OwnCPUs,
    Placement,
    requested_cores,
)
from policy.state.identity import stored_identity
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = ["CPUState", "ContainerKey", "PodEntries"]

PodEntries = immutables.Map[str, immutables.Map[str, ContainerEntry]]
_NO_CONTAINERS: immutables.Map[str, ContainerEntry] = immutables.Map()
_EMPTY: immutables.Map[Any, Any] = immutables.Map()


@dataclass(frozen=True, slots=True, eq=False)
class CPUState:
    """Container entries, pools and the ramp-up cpuset of one node, plus derived indexes.

    Build the empty state with :meth:`empty`; every other state comes from applying events.
    """

    topology: CPUTopology
    pods: PodEntries = _EMPTY
    pools: immutables.Map[str, CPUSet] = _EMPTY
    ramp_cpus: CPUSet | None = None
    indexes: CPUIndexes = field(default_factory=CPUIndexes)

    @staticmethod
    def empty(topology: CPUTopology) -> CPUState:
        """No containers, no pools, no ramp-up cpuset."""
        return CPUState(topology)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CPUState):
            return NotImplemented
        return (
            self.ramp_cpus == other.ramp_cpus
            and self.pools == other.pools
            and self.pods == other.pods
            and (self.topology is other.topology or self.topology == other.topology)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"CPUState(pods={len(self.pods)}, pools={dict(self.pools)!r}, "
            f"ramp_cpus={self.ramp_cpus!r})"
        )

    # -- entries ---------------------------------------------------------------------------

    def entry(self, pod_uid: str, container_name: str) -> ContainerEntry | None:
        """The stored entry of a container, or None."""
        return self.pods.get(pod_uid, _NO_CONTAINERS).get(container_name)

    def require_entry(self, pod_uid: str, container_name: str) -> ContainerEntry:
        """The stored entry of a container.

        Raises:
            StateError: no such container.
        """
        found = self.entry(pod_uid, container_name)
        if found is None:
            raise StateError(f"pod: {pod_uid}, container: {container_name} has no entry in state")
        return found

    def pod_containers(self, pod_uid: str) -> Mapping[str, ContainerEntry]:
        """A pod's entries by container name (empty for an unknown pod)."""
        return self.pods.get(pod_uid, _NO_CONTAINERS)

    def entries(self) -> Iterator[ContainerEntry]:
        """Every container entry, by pod uid then container name.

        O(pods log pods), for replies and exports that list every container; the sort makes
        decisions that walk it deterministic (the maps' own order follows string hashes,
        which differ between processes).
        """
        pods = self.pods
        for pod_uid in sorted(pods.keys()):
            containers = pods[pod_uid]
            if len(containers) == 1:  # most pods: nothing to sort
                yield from containers.values()
                continue
            for name in sorted(containers.keys()):
                yield containers[name]

    def main_container_entry(self, pod_uid: str) -> ContainerEntry | None:
        """The pod's main container, the first by name should there be several (§5.2, §15.11)."""
        containers = self.pod_containers(pod_uid)
        for name in sorted(containers):
            if containers[name].is_main():
                return containers[name]
        return None

    def containers_owned_by(self, owner_pool_name: str) -> Collection[ContainerKey]:
        """``(pod, container)`` of the entries whose ``owner_pool_name`` is this name.

        This and the other ``*_containers`` queries return read-only views, in no particular
        order, at no cost; sort them where order matters.
        """
        return self.indexes.by_owner.get(owner_pool_name, immutables.Map()).keys()

    def owner_pool_names(self) -> frozenset[str]:
        """Every non-empty ``owner_pool_name`` in use (``clean_pools``' ``remain``, §9.9)."""
        return frozenset(self.indexes.by_owner.keys())

    def ramping_containers(self) -> Collection[ContainerKey]:
        """``(pod, container)`` of the entries whose ``ramp_up`` flag is set."""
        return self.indexes.ramp_flagged.keys()

    def unpooled_containers(self) -> Collection[ContainerKey]:
        """``(pod, container)`` of shared and reclaimed entries that follow no pool (on the
        ramp-up cpuset or on their own CPUs); every other non-dedicated entry is ``InPool``."""
        return self.indexes.unpooled.keys()

    def unsettled_ramping_containers(self) -> Collection[ContainerKey]:
        """``(pod, container)`` of the ramp-flagged non-dedicated entries that are not shared
        or reclaimed entries on the ramp-up cpuset with no owner: the only ramping ones a pool
        re-sizing may move or refuse (§9.8 step 6)."""
        return self.indexes.ramp_unsettled.keys()

    def unflagged_unpooled_containers(self) -> Collection[ContainerKey]:
        """``unpooled_containers`` without the ramp-up flag set."""
        return self.indexes.unpooled_unflagged.keys()

    def dedicated_containers(self) -> Collection[ContainerKey]:
        """``(pod, container)`` of the dedicated_cores entries (sidecars included)."""
        return self.indexes.dedicated.keys()

    # -- pools -----------------------------------------------------------------------------

    def pool_cpus(self, name: str) -> CPUSet | None:
        """Pool ``name``'s cpuset, or None when there is no such pool."""
        return self.pools.get(name)

    def check_pool_empty(self, name: str) -> bool:
        """True when the pool is missing or empty (§5.2)."""
        cpus = self.pools.get(name)
        return cpus is None or cpus.is_empty()

    def filtered_pools_cpuset_map(self, ignore: Collection[str] = ()) -> dict[str, CPUSet]:
        """Pools by name, without those in ``ignore`` (§5.2)."""
        return {name: cpus for name, cpus in self.pools.items() if name not in ignore}

    def filtered_pools_cpuset(self, ignore: Collection[str] = ()) -> CPUSet:
        """The union of the pools not in ``ignore`` (§5.2)."""
        return CPUSet.union_all(self.filtered_pools_cpuset_map(ignore).values())

    def pool_entry(self, name: str) -> AllocationInfo | None:
        """Pool ``name`` as the reference stores it (§5.3), or None."""
        cpus = self.pools.get(name)
        if cpus is None:
            return None
        split = self._split(cpus)
        return AllocationInfo(
            pod_uid=name,
            owner_pool_name=name,
            allocation_result=cpus,
            original_allocation_result=cpus,
            topology_aware_assignments=split,
            original_topology_aware_assignments=split,
        )

    def pool_entries(self) -> Iterator[AllocationInfo]:
        """Every pool as the reference stores it (§5.3), by name."""
        for name in sorted(self.pools.keys()):
            entry = self.pool_entry(name)
            assert entry is not None
            yield entry

    # -- placements and the reference's per-container records -------------------------------

    def placement_cpus(self, placement: Placement) -> tuple[CPUSet, CPUSet]:
        """``(allocation_result, original_allocation_result)`` of a placement in this state.

        Raises:
            StateError: the pool or the ramp-up cpuset it refers to does not exist.
        """
        if isinstance(placement, OwnCPUs):
            return placement.result, placement.original
        if isinstance(placement, InPool):
            cpus = self.pools.get(placement.pool_name)
            if cpus is None:
                raise StateError(f"pool: {placement.pool_name} does not exist")
            if placement.numas is not None:
                masks = self.topology.numa_masks()
                cpus = CPUSet.from_mask(cpus.mask & sum(masks.get(n, 0) for n in placement.numas))
            return cpus, cpus
        if self.ramp_cpus is None:
            raise StateError("no ramp-up cpuset has been set yet")
        return self.ramp_cpus, self.ramp_cpus

    def ramp_placement(self, cpus: CPUSet) -> Placement:
        """How to place a ramping container on ``cpus``: following the ramp-up cpuset when
        ``cpus`` is that set, else on its own CPUs (§9.6)."""
        if cpus == self.ramp_cpus:
            return RAMPING
        return OwnCPUs.of(cpus)

    def allocation_info(self, pod_uid: str, container_name: str) -> AllocationInfo | None:
        """The container's full §5.1 record, derived from its entry; None when unknown."""
        found = self.entry(pod_uid, container_name)
        return None if found is None else self.derive(found)

    def allocation_infos(self) -> Iterator[AllocationInfo]:
        """Every container's §5.1 record (O(pods); each pool's NUMA split is computed once)."""
        splits: dict[CPUSet, Mapping[int, CPUSet]] = {}
        for found in self.entries():
            yield self.derive(found, splits)

    def derive(
        self, entry: ContainerEntry, splits: dict[CPUSet, Mapping[int, CPUSet]] | None = None
    ) -> AllocationInfo:
        """The §5.1 record of ``entry`` in this state (§9.8: pooled containers take the pool's
        result, original and current NUMA split for both topology fields)."""
        result, original = self.placement_cpus(entry.placement)
        result_split = self._split(result, splits)
        original_split = result_split if original is result else self._split(original, splits)
        return AllocationInfo(
            **stored_identity(entry),
            ramp_up=entry.ramp_up,
            owner_pool_name=entry.owner_pool_name,
            pod_role=entry.pod_role,
            pod_type=entry.pod_type,
            allocation_result=result,
            original_allocation_result=original,
            topology_aware_assignments=result_split,
            original_topology_aware_assignments=original_split,
            init_timestamp=entry.init_timestamp,
            labels=entry.labels,
            annotations=entry.annotations,
            qos_level=entry.qos_level,
            request_quantity=entry.request_quantity,
        )

    def _split(
        self, cpus: CPUSet, splits: dict[CPUSet, Mapping[int, CPUSet]] | None = None
    ) -> Mapping[int, CPUSet]:
        if splits is not None and cpus in splits:
            return splits[cpus]
        bits = cpus.mask
        parts = {
            numa: CPUSet.from_mask(bits & m)
            for numa, m in self.topology.numa_masks().items()
            if bits & m
        }
        split = MappingProxyType(parts)
        if splits is not None:
            splits[cpus] = split
        return split

    # -- machine state (§5.4), derived -----------------------------------------------------

    def allocated_cpuset(self, numa: int) -> CPUSet:
        """NUMA ``numa``'s ``allocated_cpuset``: original CPUs of dedicated NUMA-binding
        containers there."""
        return CPUSet.from_mask(self.indexes.allocated_mask & self._numa_mask(numa))

    def default_cpuset(self, numa: int) -> CPUSet:
        """NUMA ``numa``'s ``default_cpuset``: its CPUs minus the allocated ones."""
        return CPUSet.from_mask(self._numa_mask(numa) & ~self.indexes.allocated_mask)

    def numa_available(self, numa: int, reserved: CPUSet) -> CPUSet:
        """``machine_state[numa].available(reserved)``."""
        return CPUSet.from_mask(
            self._numa_mask(numa) & ~self.indexes.allocated_mask & ~reserved.mask
        )

    def numa_available_count(self, numa: int, reserved: CPUSet) -> int:
        """How many CPUs :meth:`numa_available` holds, counted on the masks."""
        return (self._numa_mask(numa) & ~self.indexes.allocated_mask & ~reserved.mask).bit_count()

    def available(self, reserved: CPUSet) -> CPUSet:
        """Machine-level ``available(reserved)``: every NUMA's default cpuset minus reserved."""
        bits = self.topology.cpu_details.mask & ~self.indexes.allocated_mask
        return CPUSet.from_mask(bits & ~reserved.mask)

    def numas_with_dedicated_numa_binding(self) -> frozenset[int]:
        """NUMA nodes that a dedicated NUMA-binding container touches (original or current)."""
        return frozenset(self.indexes.dnb_numas.keys())

    def pooled_cpus(self, reserved: CPUSet) -> CPUSet:
        """Pooled CPUs (§5.4): ``filtered_available(reserved, is_dedicated,
        is_dedicated_numa_binding)`` — CPUs of NUMAs hosting no dedicated NUMA-binding
        container, minus CPUs of other dedicated containers, minus reserved."""
        return CPUSet.from_mask(
            self._free_numas_mask() & ~self.indexes.dedicated_mask & ~reserved.mask
        )

    def adjustable_cpus(self, reserved: CPUSet) -> CPUSet:
        """Adjustable CPUs (§5.4): ``filtered_available(reserved, None,
        is_dedicated_numa_binding)``."""
        return CPUSet.from_mask(self._free_numas_mask() & ~reserved.mask)

    def numas_without_numa_binding(self) -> frozenset[int]:
        """``filtered_numa_set(is_numa_binding)``: NUMA nodes where no container with the
        ``numa_binding`` annotation, of any QoS level, has CPUs (§5.4, §8.3 step 3)."""
        idx = self.indexes
        touched = set(idx.nb_numas.keys())
        bits = 0
        for pool in idx.nb_pools:
            bits |= self.pools[pool].mask
        if idx.nb_on_ramp and self.ramp_cpus is not None:
            bits |= self.ramp_cpus.mask
        masks = self.topology.numa_masks()
        touched.update(n for n, m in masks.items() if m & bits)
        return frozenset(n for n in masks if n not in touched)

    def _numa_mask(self, numa: int) -> int:
        return self.topology.numa_masks().get(numa, 0)

    def _free_numas_mask(self) -> int:
        bits = 0
        dnb = self.indexes.dnb_numas
        for numa, m in self.topology.numa_masks().items():
            if numa not in dnb:
                bits |= m
        return bits

    # -- quantity maps (§5.6) ---------------------------------------------------------------

    def shared_quantity_map(
        self, ignore: Collection[ContainerKey] = (), lookup: CPURequestLookup | None = None
    ) -> dict[str, int]:
        """``{owner pool: ceil(Σ requested cores)}`` of shared containers with an owner (§5.6).

        The sum of the stored floats is exact, so it does not depend on order.

        Args:
            ignore: containers to leave out, by ``(pod_uid, container_name)``.
            lookup: the pod source, for containers whose stored quantity is 0 (§5.5).
        """
        idx = self.indexes
        left_out: dict[str, tuple[int, int]] = {}
        for key in set(ignore):
            found = self.entry(*key)
            if found is not None and found.is_shared() and found.owner_pool_name:
                count, total = left_out.get(found.owner_pool_name, (0, 0))
                left_out[found.owner_pool_name] = (
                    count + 1,
                    total + exact_units(found.request_quantity),
                )
        out: dict[str, int] = {}
        for pool, (count, total) in idx.shared_sum.items():
            ignored_count, ignored_total = left_out.get(pool, (0, 0))
            if count <= ignored_count:
                continue
            exact = total - ignored_total
            for key in idx.shared_unknown.get(pool, ()):
                if key not in ignore:
                    cores = requested_cores(self.require_entry(*key), lookup)
                    exact += exact_units(cores)
            out[pool] = ceil_units(exact)
        return out

    def isolated_quantity_map(
        self, ignore: Collection[ContainerKey] = (), lookup: CPURequestLookup | None = None
    ) -> dict[str, dict[str, int]]:
        """``{pod: {container: CPUs}}`` for dedicated containers without NUMA binding (§5.6):
        the size of their result when owned by ``dedicated``, else ``ceil(requested cores)``;
        zero quantities are left out."""
        out: dict[str, dict[str, int]] = {}
        for key in sorted(self.indexes.isolated.keys()):
            if key in ignore:
                continue
            found = self.require_entry(*key)
            if found.owner_pool_name == DEDICATED_OWNER:
                quantity = self.placement_cpus(found.placement)[0].size()
            else:
                quantity = math.ceil(requested_cores(found, lookup))
            if quantity:
                out.setdefault(key[0], {})[key[1]] = quantity
        return out
