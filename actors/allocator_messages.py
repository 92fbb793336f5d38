"""Commands the Allocator actor serves: one per kubelet RPC, plus start-up and residual pods.

The gRPC handlers convert a protobuf request to one of these (domain types only, DESIGN.md
"Actors and messages") and ``ask`` the Allocator with the RPC's remaining deadline; the
residual-state checker sends ``RemoveResidualPods`` on its ticks; the composition root sends
``StartPolicy`` once, before the plugin registers with kubelet. Replies are the policy's reply
values (``policy.cpu.replies``,
``policy.cpu.allocation_listing.ResourcesAllocation``) or ``None`` where the RPC
answers nothing; ``ResidualRemoval`` is the checker's.

Errors an ask can raise: ``AllocatorUnavailable`` (the commit failed; state unchanged; the
wire answers UNAVAILABLE and kubelet retries) and the policy's ``PolicyError`` subclasses,
unchanged (the wire maps each to its status, e.g. ``UnknownContainerError`` to NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from actors.errors import ActorError
from policy.cpu.request import ResourceRequest
from policy.errors import ErrorKind

__all__ = [
    "Allocate",
    "AllocatorCommand",
    "AllocatorUnavailable",
    "GetResourcePluginOptions",
    "GetResourcesAllocation",
    "GetTopologyAwareAllocatableResources",
    "GetTopologyAwareResources",
    "GetTopologyHints",
    "PreStartContainer",
    "RemovePod",
    "RemoveResidualPods",
    "ResidualRemoval",
    "StartPolicy",
]


class AllocatorUnavailable(ActorError):  # noqa: N818 (the brief's name, like CommitRefused)
    """A decision could not be made durable; nothing changed and the call may be retried.

    The wire layer answers UNAVAILABLE (DESIGN.md, the commit protocol step 3).
    """

    kind = ErrorKind.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class StartPolicy:
    """Bring the pools up to date on the recovered state (spec cpu-policy §6.2 steps 4–6).

    Sent once at start-up; sending it again commits nothing, as the pools are then current.
    """


@dataclass(frozen=True, slots=True)
class GetTopologyHints:
    """GetTopologyHints (§8): read-only."""

    request: ResourceRequest


@dataclass(frozen=True, slots=True)
class Allocate:
    """Allocate (§7): place one container."""

    request: ResourceRequest


@dataclass(frozen=True, slots=True)
class RemovePod:
    """RemovePod (§10.6): forget a pod's containers and re-size the pools."""

    pod_uid: str


@dataclass(frozen=True, slots=True)
class GetResourcesAllocation:
    """GetResourcesAllocation (§10.1): every container's cpuset; ramp-up ends here."""


@dataclass(frozen=True, slots=True)
class GetTopologyAwareResources:
    """GetTopologyAwareResources (§10.2): one container's CPUs by NUMA node; read-only."""

    pod_uid: str
    container_name: str


@dataclass(frozen=True, slots=True)
class GetTopologyAwareAllocatableResources:
    """GetTopologyAwareAllocatableResources (§10.3): read-only."""


@dataclass(frozen=True, slots=True)
class GetResourcePluginOptions:
    """GetResourcePluginOptions (§10.4): read-only."""


@dataclass(frozen=True, slots=True)
class PreStartContainer:
    """PreStartContainer (§10.5): nothing to do."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str


@dataclass(frozen=True, slots=True)
class RemoveResidualPods:
    """One clearResidualState round (§12.4): the pods the pod source lists now.

    The Allocator counts, for each pod of its state missing from ``known_pod_uids``, the
    consecutive rounds it was missing, and removes those missing for ten rounds (5 minutes).
    """

    known_pod_uids: Collection[str]


@dataclass(frozen=True, slots=True)
class ResidualRemoval:
    """What a residual round did.

    Attributes:
        removed: the pods removed this round, by ascending uid (usually none).
        warnings: a pool adjustment that failed after the removal; the checker then reports
            not ready, as the reference's handler does.
    """

    removed: tuple[str, ...]
    warnings: tuple[str, ...]


#: Every message the Allocator accepts.
AllocatorCommand = (
    StartPolicy
    | GetTopologyHints
    | Allocate
    | RemovePod
    | GetResourcesAllocation
    | GetTopologyAwareResources
    | GetTopologyAwareAllocatableResources
    | GetResourcePluginOptions
    | PreStartContainer
    | RemoveResidualPods
)
