"""Commands the Allocator actor serves: every kubelet call, plus start-up and residual pods.

The kubelet calls are the policy's own types (``policy.cpu.commands``, re-exported here): the
gRPC handlers convert a protobuf request to one (domain types only, DESIGN.md "Actors and
messages") and ask the Allocator with ``actors.allocator.ask_allocator`` and the RPC's
remaining deadline, which types the reply by the call (``Allocate`` answers
``AllocationReply | None``, ``GetResourcesAllocation`` a ``ResourcesAllocation``, ...). The
residual-state checker sends ``RemoveResidualPods`` with its evidence once a pod is due
(answered by a ``ResidualRemoval``); the composition root sends ``StartPolicy`` once, before
the plugin registers with kubelet.

Errors an ask can raise: ``AllocatorUnavailable`` (the commit failed; state unchanged; the
wire answers UNAVAILABLE and kubelet retries) and the policy's ``PolicyError`` subclasses,
unchanged (the wire maps each to its status, e.g. ``UnknownContainerError`` to NOT_FOUND).
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.errors import ActorError
from policy.cpu.commands import (
    Allocate,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PluginCall,
    PreStartContainer,
    RemovePod,
    StartPolicy,
)
from policy.cpu.residual_check import ResidualEvidence
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
    "PluginCall",
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
class ResidualRemoval:
    """What a residual removal did.

    Attributes:
        removed: the pods removed, by ascending uid.
        warnings: a pool adjustment that failed after the removal; the checker then reports
            not ready, as the reference's handler does.
        kept: candidates kept because sys-advisor refused their removal (§12.4 step 4);
            they are due again at the next round.
    """

    removed: tuple[str, ...]
    warnings: tuple[str, ...]
    kept: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RemoveResidualPods(PluginCall[ResidualRemoval]):
    """Remove the pods the residual checker's evidence calls due (§12.4 step 4).

    The checker keeps the only count of sightings and sends its evidence once a pod is due;
    the Allocator removes the due pods its state still holds (after sys-advisor's RemovePod,
    when enabled) in one decision, the evidence journaled as its cause.
    """

    evidence: ResidualEvidence


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
