"""The closed vocabulary of state events (spec cpu-policy §5, DESIGN.md "Decide, then commit").

The policy never writes state: each decision returns a list of these events, the StateStore
journals them and then applies them with ``policy.state.sections.apply``. Replaying them needs no
policy code. Each event is minimal (it carries what changed, nothing derivable) and its
docstring says which decision commits it.

Every event belongs to one state section (``section``); CPU events to ``"cpu"``. Another
owner (the memory balancer) adds its own ``Event`` subclasses with its own section name.
Applying an event that does not fit the state (an unknown container, a missing pool) raises
``StateError`` — including ``PodRemoved`` of an unknown pod: the policy answers kubelet's
idempotent RemovePod (wire.md §9.3) by committing no event at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from policy.decision import Event
from policy.state.entries import ContainerEntry, Placement
from policy.topology.cpuset import CPUSet

__all__ = [
    "CPU_EVENT_TYPES",
    "CPUEvent",
    "ContainerAllocated",
    "ContainerPlaced",
    "ContainerReRamped",
    "ContainerRemoved",
    "Event",
    "PodRemoved",
    "PoolRemoved",
    "PoolSet",
    "RampCPUsSet",
    "RampUpFinished",
    "RequestQuantitySet",
    "TimestampReset",
    "event_target",
]


class CPUEvent(Event):
    """An event of the CPU section (container entries, pools, ramp-up cpuset)."""

    __slots__ = ()

    section: ClassVar[str] = "cpu"


@dataclass(frozen=True, slots=True)
class ContainerAllocated(CPUEvent):
    """A container entry is created or replaced whole, placement included.

    Committed by Allocate (§7.3 new or still-ramping shared containers, §7.4 reclaimed, §7.5.1
    dedicated, §7.5.2 sidecars).
    """

    entry: ContainerEntry


@dataclass(frozen=True, slots=True)
class ContainerPlaced(CPUEvent):
    """A container moves: into a pool, onto its own CPUs, or back onto the ramp-up cpuset.

    Committed by the pool engine (§9.8 step 2 and 6) and by applying advisor blocks (§11.8),
    for every container whose placement or owner pool changes; containers that already follow
    their pool need no event when only the pool's CPUs change.
    """

    pod_uid: str
    container_name: str
    placement: Placement
    owner_pool_name: str


@dataclass(frozen=True, slots=True)
class RampUpFinished(CPUEvent):
    """The container's ramp-up flag is cleared.

    Committed by GetResourcesAllocation once the transition period has passed (§10.1), and for
    dedicated containers by the first applied advisor response (§11.8). A container still on the
    ramp-up cpuset keeps those CPUs as its own until the pool engine places it (§9.6).
    """

    pod_uid: str
    container_name: str


@dataclass(frozen=True, slots=True)
class ContainerReRamped(CPUEvent):
    """A shared container with an unreadable ``init_timestamp`` ramps up again (§10.1).

    It gets ``pooled_cpus`` (the pooled CPUs at that moment), owner ``""``, ``ramp_up`` and the
    new timestamp. When ``pooled_cpus`` equals the state's ramp-up cpuset the container follows
    that set from then on, otherwise it holds ``pooled_cpus`` as its own CPUs.
    """

    pod_uid: str
    container_name: str
    init_timestamp: str
    pooled_cpus: CPUSet


@dataclass(frozen=True, slots=True)
class TimestampReset(CPUEvent):
    """A non-shared container's unreadable ``init_timestamp`` is replaced by now (§10.1)."""

    pod_uid: str
    container_name: str
    init_timestamp: str


@dataclass(frozen=True, slots=True)
class RequestQuantitySet(CPUEvent):
    """A container's ``request_quantity`` is set (isolated containers, §9.8 step 6, §11.8 step 4:
    the reference stores ``requested_cores`` there, looked up when it was 0)."""

    pod_uid: str
    container_name: str
    request_quantity: float


@dataclass(frozen=True, slots=True)
class ContainerRemoved(CPUEvent):
    """One container's entry is deleted (§7.2 ``remove_container`` after a failed Allocate);
    the pod's key goes when its last container does (§13.1)."""

    pod_uid: str
    container_name: str


@dataclass(frozen=True, slots=True)
class PodRemoved(CPUEvent):
    """Every container of a pod is deleted (RemovePod §10.6, residual pods §12.4)."""

    pod_uid: str


@dataclass(frozen=True, slots=True)
class PoolSet(CPUEvent):
    """Pool ``name`` is created or resized to ``cpuset`` (§6.2 reserve/reclaim at start-up,
    §9.8 step 4, §11.8).

    Containers placed in the pool follow it, as §9.8 step 6 and §11.8 step 4 re-copy them in
    the same step. Where the reference rewrites a pool without re-copying its containers
    (start-up ``init_reserve_pool``), the policy first places them on their own CPUs.
    """

    name: str
    cpuset: CPUSet


@dataclass(frozen=True, slots=True)
class PoolRemoved(CPUEvent):
    """Pool ``name`` is deleted (§9.8 step 4 pools absent from the result, §9.9 clean_pools).

    No container may still be placed in it: the pool engine first places such containers on
    their own CPUs (they keep their old result, §9.8 step 6).
    """

    name: str


@dataclass(frozen=True, slots=True)
class RampCPUsSet(CPUEvent):
    """The ramp-up cpuset becomes ``cpuset`` (§9.8 step 5, §11.8 step 2); every container
    placed on it follows."""

    cpuset: CPUSet


def event_target(event: Event) -> tuple[str, str] | None:
    """The ``(pod_uid, container_name)`` an event is about, for journal filters.

    ``container_name`` is ``""`` for an event about a whole pod; None for events about pools or
    the ramp-up cpuset (and events of other sections).
    """
    if isinstance(event, ContainerAllocated):
        return event.entry.key
    if isinstance(event, PodRemoved):
        return (event.pod_uid, "")
    pod_uid = getattr(event, "pod_uid", None)
    container_name = getattr(event, "container_name", None)
    if isinstance(pod_uid, str) and isinstance(container_name, str):
        return (pod_uid, container_name)
    return None


#: Every CPU-section event type, in the order the codec documents them.
CPU_EVENT_TYPES: tuple[type[CPUEvent], ...] = (
    ContainerAllocated,
    ContainerPlaced,
    RampUpFinished,
    ContainerReRamped,
    TimestampReset,
    RequestQuantitySet,
    ContainerRemoved,
    PodRemoved,
    PoolSet,
    PoolRemoved,
    RampCPUsSet,
)
