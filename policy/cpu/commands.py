"""The kubelet calls to the CPU plugin, one type each, and what each decision reads besides.

One type per request (DESIGN.md, "Actors and messages"): ``wire.convert`` builds these from
protobuf, the Allocator receives them as its commands, the façade (``policy.cpu.facade``)
decides on them, and the journal keeps them as the decision's cause. Each is a
:class:`PluginCall` parameterised by its reply type, so an ``ask`` of the Allocator is typed
end to end (``actors.allocator.ask_allocator``).

A decision's ``inputs`` hold everything it read besides the state and the settings (DESIGN.md,
"Every decision has one shape"). For most calls that is the call itself. Allocate also reads
what the pod source said of the pod (cpu-policy §7.3 step 3a: a Pending or unknown pod ramps
up), so its inputs are :class:`AllocateInputs`: the call and a :class:`PodPhase`. The Allocator
gathers the phase through its pod-source port before deciding; the policy never asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.replies import (
    AllocatableReply,
    AllocationReply,
    HintsReply,
    PluginOptions,
    TopologyAwareReply,
)
from policy.cpu.request import ResourceRequest

__all__ = [
    "UNKNOWN_PHASE",
    "Allocate",
    "AllocateInputs",
    "GetResourcePluginOptions",
    "GetResourcesAllocation",
    "GetTopologyAwareAllocatableResources",
    "GetTopologyAwareResources",
    "GetTopologyHints",
    "PluginCall",
    "PodPhase",
    "PreStartContainer",
    "RemovePod",
    "StartPolicy",
]

R = TypeVar("R")

#: The phase of a pod the pod source does not list (or of every pod, without a source).
#: Lower case on purpose: Kubernetes' own ``Unknown`` phase is a listed pod's, and is not
#: "pending or unknown" in the sense of §7.3 step 3a.
UNKNOWN_PHASE: Final = "unknown"


class PluginCall(Generic[R]):
    """A kubelet call whose reply is ``R`` (``None`` where kubelet gets an empty message)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class StartPolicy(PluginCall[None]):
    """Bring the pools up to date on the recovered state (spec cpu-policy §6.2 steps 4–6).

    Sent once at start-up; sending it again commits nothing, as the pools are then current.
    """


@dataclass(frozen=True, slots=True)
class GetTopologyHints(PluginCall[HintsReply]):
    """GetTopologyHints (§8): read-only."""

    request: ResourceRequest


@dataclass(frozen=True, slots=True)
class Allocate(PluginCall[AllocationReply | None]):
    """Allocate (§7): place one container."""

    request: ResourceRequest


@dataclass(frozen=True, slots=True)
class RemovePod(PluginCall[None]):
    """RemovePod (§10.6): forget a pod's containers and re-size the pools."""

    pod_uid: str


@dataclass(frozen=True, slots=True)
class GetResourcesAllocation(PluginCall[ResourcesAllocation]):
    """GetResourcesAllocation (§10.1): every container's cpuset; ramp-up ends here."""


@dataclass(frozen=True, slots=True)
class GetTopologyAwareResources(PluginCall[TopologyAwareReply]):
    """GetTopologyAwareResources (§10.2): one container's CPUs by NUMA node; read-only."""

    pod_uid: str
    container_name: str


@dataclass(frozen=True, slots=True)
class GetTopologyAwareAllocatableResources(PluginCall[AllocatableReply]):
    """GetTopologyAwareAllocatableResources (§10.3): read-only."""


@dataclass(frozen=True, slots=True)
class GetResourcePluginOptions(PluginCall[PluginOptions]):
    """GetResourcePluginOptions (§10.4): read-only."""


@dataclass(frozen=True, slots=True)
class PreStartContainer(PluginCall[None]):
    """PreStartContainer (§10.5): nothing to do."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str


@dataclass(frozen=True, slots=True)
class PodPhase:
    """What the pod source said of one pod when a decision was taken.

    Attributes:
        phase: the listed ``status.phase`` (``Pending``, ``Running``, ...), or
            :data:`UNKNOWN_PHASE` when the listing does not hold the pod or there is none.
        listing_age_s: how old the listing was (the decision's ``now`` minus its fetch
            time), ``None`` when there was no listing at all. Recorded for forensics ("it
            ramped because the listing was 40 s old"); the rule of §7.3 does not read it.
    """

    phase: str = UNKNOWN_PHASE
    listing_age_s: float | None = None

    @property
    def is_pending_or_unknown(self) -> bool:
        """Whether a new shared container of this pod ramps up (§7.3 step 3a)."""
        return self.phase in (UNKNOWN_PHASE, "Pending")


@dataclass(frozen=True, slots=True)
class AllocateInputs:
    """Everything an Allocate decision reads besides the state and the settings.

    Attributes:
        call: the kubelet call.
        pod: the pod source's answer for ``call.request.pod_uid`` (unknown by default).
    """

    call: Allocate
    pod: PodPhase = field(default_factory=PodPhase)
