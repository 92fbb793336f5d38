"""Container entries, placements and the reference's AllocationInfo (spec cpu-policy §5.1–§5.5).

The rule: a container entry stores *where its CPUs come from*, never a copy of a pool's CPUs.

* ``InPool(P)``: a shared or reclaimed container in pool P. Its four result/topology fields
  are the pool's, as §9.8 step 6 copies them (allocation_result = the pool's result,
  original_allocation_result = the pool's original, both topology fields = the pool's
  *current* NUMA split — §15.4). Resizing a pool is therefore one event whatever the number
  of containers in it. ``InPool(P, numas)`` follows only P's CPUs in those NUMA nodes: the
  reclaimed containers of v0.5.47's reclaimed NUMA binding (``policy.cpu.rnb``), whose
  cpusets are the reclaim pool's part in their NUMA (or in the NUMAs no bound container
  holds), as ``updateReclaimAllocationResultByPoolEntry`` copies them.
* ``RAMPING``: a ramping container on the state's current ramp-up cpuset, which the pool engine
  rewrites whenever it re-applies pools (§9.6, §9.8 step 5).
* ``OwnCPUs(result, original)``: CPUs that follow nothing — dedicated containers, sidecars,
  `fallback` containers, a ramping container whose pooled set differs from the ramp set, a
  container whose pool vanished and keeps its old result (§9.8).

The reference's per-container record with all four CPU fields, :class:`AllocationInfo`, is
derived from an entry and the state on demand (``CPUState.allocation_info``). Both share the
predicates of §5.1. Topology-aware fields are always the NUMA split of their cpuset (§1.4), as
every writer in the reference computes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import immutables

from policy.topology.cpuset import CPUSet

__all__ = [
    "ANNOTATION_CPUSET_POOL",
    "ANNOTATION_NUMA_BINDING",
    "ANNOTATION_NUMA_EXCLUSIVE",
    "ANNOTATION_NUMA_HINT",
    "CONTAINER_TYPE_MAIN",
    "CONTAINER_TYPE_SIDECAR",
    "DEDICATED_CORES",
    "DEDICATED_OWNER",
    "FALLBACK_OWNER",
    "RAMPING",
    "RECLAIMED_CORES",
    "RECLAIM_POOL",
    "RESERVE_POOL",
    "RESIDENT_POOLS",
    "SHARED_CORES",
    "SHARE_POOL",
    "STATIC_POOLS",
    "AllocationInfo",
    "CPURequestLookup",
    "ContainerEntry",
    "InPool",
    "OwnCPUs",
    "Placement",
    "Ramping",
    "StrMap",
    "frozen_str_map",
    "requested_cores",
    "specified_pool_name",
]

# QoS levels (§4.3) as stored in ``qos_level``.
SHARED_CORES: Final = "shared_cores"
DEDICATED_CORES: Final = "dedicated_cores"
RECLAIMED_CORES: Final = "reclaimed_cores"

# Pool and owner names (§6.1).
RESERVE_POOL: Final = "reserve"
RECLAIM_POOL: Final = "reclaim"
SHARE_POOL: Final = "share"
DEDICATED_OWNER: Final = "dedicated"
FALLBACK_OWNER: Final = "fallback"
STATIC_POOLS: Final = frozenset({RESERVE_POOL})
RESIDENT_POOLS: Final = frozenset({RECLAIM_POOL}) | STATIC_POOLS

# Flattened annotation keys (§4.3, §4.5).
ANNOTATION_NUMA_BINDING: Final = "numa_binding"
ANNOTATION_NUMA_EXCLUSIVE: Final = "numa_exclusive"
ANNOTATION_CPUSET_POOL: Final = "cpuset_pool"
#: The NUMA node a single-node binding container was placed on, at v0.5.47
#: (``CPUStateAnnotationKeyNUMAHint``, cpu-policy-v0.5.47 (a) "State", (b) "Allocation").
ANNOTATION_NUMA_HINT: Final = "numa_hint"
#: ``numa_share: "false"`` asks for NUMA anti-affinity, at v0.5.47 (cpu-policy-v0.5.47 (c)).
ANNOTATION_NUMA_SHARE: Final = "numa_share"

# Container types as stored (enum names, §4.7).
CONTAINER_TYPE_MAIN: Final = "MAIN"
CONTAINER_TYPE_SIDECAR: Final = "SIDECAR"

StrMap = immutables.Map[str, str]

#: ``(pod_uid, container_name) -> cpu request in millicores``, or None when the pod source
#: cannot tell (§5.5). The policy passes its pod source; without one, requested cores are 0.
CPURequestLookup = Callable[[str, str], "float | None"]


def frozen_str_map(value: Mapping[str, str] | None) -> StrMap | None:
    """An immutable copy of a label/annotation map; ``None`` (the reference's null) stays None."""
    if value is None or isinstance(value, immutables.Map):
        return value
    return immutables.Map(value)


@dataclass(frozen=True, slots=True)
class InPool:
    """The container uses pool ``pool_name``'s CPUs, whatever they become; with ``numas``,
    only those of the pool's CPUs in these NUMA nodes (v0.5.47 reclaimed NUMA binding)."""

    pool_name: str
    numas: frozenset[int] | None = None


@dataclass(frozen=True, slots=True)
class Ramping:
    """The container ramps up on the state's current ramp-up cpuset (§9.6)."""


#: The one value of :class:`Ramping`.
RAMPING: Final = Ramping()


@dataclass(frozen=True, slots=True)
class OwnCPUs:
    """The container holds these CPUs itself; nothing moves them but an event naming it."""

    result: CPUSet
    original: CPUSet

    @staticmethod
    def of(cpus: CPUSet) -> OwnCPUs:
        """Result and original both ``cpus`` (every fresh placement in the reference)."""
        return OwnCPUs(cpus, cpus)


Placement = InPool | Ramping | OwnCPUs


def specified_pool_name(qos_level: str, cpuset_pool: str) -> str:
    """The pool a container of this level belongs in by its request (§5.1)."""
    if qos_level == SHARED_CORES:
        return cpuset_pool or SHARE_POOL
    if qos_level == RECLAIMED_CORES:
        return RECLAIM_POOL
    if qos_level == DEDICATED_CORES:
        return DEDICATED_OWNER
    return ""


class _EntryFacts:
    """The §5.1 predicates, shared by stored entries and derived AllocationInfos."""

    __slots__ = ()

    pod_uid: str
    container_name: str
    request_quantity: float
    qos_level: str
    annotations: Mapping[str, str] | None
    container_type: str
    owner_pool_name: str

    def _annotation(self, key: str) -> str:
        return self.annotations.get(key, "") if self.annotations is not None else ""

    def is_shared(self) -> bool:
        return self.qos_level == SHARED_CORES

    def is_dedicated(self) -> bool:
        return self.qos_level == DEDICATED_CORES

    def is_reclaimed(self) -> bool:
        return self.qos_level == RECLAIMED_CORES

    def is_numa_binding(self) -> bool:
        return self._annotation(ANNOTATION_NUMA_BINDING) == "true"

    def is_dedicated_numa_binding(self) -> bool:
        return self.is_dedicated() and self.is_numa_binding()

    def is_numa_exclusive(self) -> bool:
        return self.is_numa_binding() and self._annotation(ANNOTATION_NUMA_EXCLUSIVE) == "true"

    def is_main(self) -> bool:
        return self.container_type == CONTAINER_TYPE_MAIN

    def is_sidecar(self) -> bool:
        return self.container_type == CONTAINER_TYPE_SIDECAR

    def specified_pool_name(self) -> str:
        return specified_pool_name(self.qos_level, self._annotation(ANNOTATION_CPUSET_POOL))

    def pool_name(self) -> str:
        """The owner pool if set, else the pool the request names (§5.1)."""
        return self.owner_pool_name or self.specified_pool_name()


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerEntry(_EntryFacts):
    """One container as the state stores it: the §5.1 fields, with a placement for its CPUs.

    ``labels`` and ``annotations`` keep the reference's distinction between null (``None``)
    and an empty map; plain dicts given here are frozen into ``immutables.Map``.
    """

    pod_uid: str
    pod_namespace: str = ""
    pod_name: str = ""
    container_name: str
    container_type: str = ""
    container_index: int = 0
    ramp_up: bool = False
    owner_pool_name: str = ""
    pod_role: str = ""
    pod_type: str = ""
    placement: Placement
    init_timestamp: str = ""
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    qos_level: str = ""
    request_quantity: float = 0.0

    def __post_init__(self) -> None:
        # Frozen maps keep the entry a value: equal, hashable, safe to share between states.
        object.__setattr__(self, "labels", frozen_str_map(self.labels))
        object.__setattr__(self, "annotations", frozen_str_map(self.annotations))

    @property
    def key(self) -> tuple[str, str]:
        """``(pod_uid, container_name)``."""
        return (self.pod_uid, self.container_name)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationInfo(_EntryFacts):
    """The reference's per-container (or per-pool) record with all four CPU fields (§5.1).

    Derived from a :class:`ContainerEntry` and its state, or from a pool (§5.3); never stored.
    """

    pod_uid: str
    pod_namespace: str = ""
    pod_name: str = ""
    container_name: str = ""
    container_type: str = ""
    container_index: int = 0
    ramp_up: bool = False
    owner_pool_name: str = ""
    pod_role: str = ""
    pod_type: str = ""
    allocation_result: CPUSet
    original_allocation_result: CPUSet
    topology_aware_assignments: Mapping[int, CPUSet] | None
    original_topology_aware_assignments: Mapping[int, CPUSet] | None
    init_timestamp: str = ""
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    qos_level: str = ""
    request_quantity: float = 0.0


def requested_cores(entry: _EntryFacts, lookup: CPURequestLookup | None = None) -> float:
    """The cores a container asks for (§5.5).

    The stored ``request_quantity`` when non-zero; otherwise the pod source's CPU request
    (millicores / 1000, at least 0); 0 when there is no lookup or it cannot tell. The
    reference also writes the looked-up value back into the record; here state only changes
    by events, so a caller that wants it kept commits ``RequestQuantitySet``.

    Args:
        entry: a stored entry or a derived AllocationInfo.
        lookup: ``(pod_uid, container_name) -> millicores | None``.

    Returns:
        Cores, possibly fractional.
    """
    if entry.request_quantity != 0:
        return entry.request_quantity
    if lookup is None:
        return 0.0
    millicores = lookup(entry.pod_uid, entry.container_name)
    if millicores is None or not math.isfinite(millicores):
        return 0.0
    return max(millicores / 1000, 0.0)
