"""The CPU policy's façade: one pure function per kubelet RPC, each returning a Decision.

The Allocator actor calls these with its (durable) state, the fixed context, the request
converted from the wire, and the current time; it commits ``decision.events`` through the
StateStore and then replies with ``decision.reply`` (DESIGN.md, the commit protocol). Nothing
here reads a clock, a file or a socket, and nothing mutates the state passed in.

Errors. A request that cannot be served raises a ``PolicyError`` subclass whose message names
the pod, the container and the reference's reason, and nothing is to be committed:
``RequestError``/``QoSError`` (malformed request, unknown or unhandled QoS level),
``HintError``, ``AllocationError``, ``UnknownContainerError`` (queries about a container the
state does not hold), ``PoolError`` (start-up).

The Allocate finaliser (spec cpu-policy §7.2): when an Allocate handler fails, the reference
removes the container's entry. A container that had no entry loses nothing, so the call just
raises. A container that had one (a re-allocation with a larger request whose new placement
failed, or a pooled container whose pool could not grow) loses it in the reference; to keep
that observable behaviour, Allocate then *returns* a Decision whose ``error`` is set and whose
events remove the entry (``ContainerRemoved``, nothing else, as the reference runs no pool
adjustment there). The caller commits them and fails the RPC with ``error``. Machine state is
derived, so it cannot go stale as in the reference (§15.7's recommended fix holds).

The advisor half of the finaliser (AddContainer after a successful Allocate, RemovePod before a
removal) is the advisor link's, a later issue; these functions leave room for it: the caller
calls the advisor around the commit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from policy.cpu import remove as removal
from policy.cpu.allocate import allocate_container
from policy.cpu.allocation_listing import ResourcesAllocation, resources_allocation
from policy.cpu.context import PolicyContext
from policy.cpu.hints import topology_hints
from policy.cpu.pool_startup import initialise_pools
from policy.cpu.prepare import prepare_request
from policy.cpu.remove import remove_container
from policy.cpu.replies import (
    AllocatableReply,
    AllocationReply,
    HintsReply,
    PluginOptions,
    TopologyAwareReply,
)
from policy.cpu.request import ResourceRequest
from policy.cpu.topology_aware import (
    allocatable_resources,
    plugin_options,
    topology_aware_resources,
)
from policy.cpu.txn import Txn
from policy.decision import Decision
from policy.errors import PolicyError
from policy.state.sections import State

__all__ = [
    "Decision",
    "PreStartRequest",
    "RemovePodRequest",
    "ResidualCheck",
    "ResidualCount",
    "TopologyAwareRequest",
    "allocate",
    "get_resource_plugin_options",
    "get_resources_allocation",
    "get_topology_aware_allocatable_resources",
    "get_topology_aware_resources",
    "get_topology_hints",
    "pre_start_container",
    "remove_pod",
    "remove_residual_pods",
    "residual_round",
    "start",
]


@dataclass(frozen=True, slots=True)
class TopologyAwareRequest:
    """``GetTopologyAwareResourcesRequest``: which container to describe."""

    pod_uid: str
    container_name: str


@dataclass(frozen=True, slots=True)
class RemovePodRequest:
    """``RemovePodRequest``: the pod to forget."""

    pod_uid: str


@dataclass(frozen=True, slots=True)
class ResidualCheck:
    """One clearResidualState round's input (§12.4): sightings so far and the listed pods."""

    hit_map: Mapping[str, int]
    known_pod_uids: Collection[str]


@dataclass(frozen=True, slots=True)
class ResidualCount:
    """A round's result: the new sightings to keep, and the pods now due for removal."""

    hit_map: Mapping[str, int]
    candidates: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PreStartRequest:
    """``PreStartContainerRequest``: the container about to start."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str


def start(state: State, ctx: PolicyContext) -> Decision[None]:
    """Start-up pools (§6.2 steps 4–6): clean unowned pools, write ``reserve``, make ``reclaim``.

    Args:
        state: the recovered state (empty on a fresh node).
        ctx: topology, reserve, settings.

    Returns:
        The events that bring the pools up to date (none when they already are).

    Raises:
        PoolError: no reclaim pool can be made (§15.9); start-up must fail.
    """
    txn = Txn(state)
    initialise_pools(txn, ctx)
    return Decision(txn.events, None)


def get_topology_hints(
    state: State,
    ctx: PolicyContext,
    request: ResourceRequest,
    now: float,
    extra_numa_sets: Mapping[str, str] | None = None,
) -> Decision[HintsReply]:
    """GetTopologyHints (§8): read-only.

    Args:
        state: the current state.
        ctx: topology, reserve, settings, hint limits.
        request: the request as converted from the wire.
        now: the current time (unused: hints do not depend on it).
        extra_numa_sets: the extra state file's ``memoryEntries``, when that option is on.

    Returns:
        No events and the hints reply.

    Raises:
        RequestError, QoSError, HintError: see the module docstring.
    """
    del now
    prepared = prepare_request(ctx.qos, request)
    return Decision((), topology_hints(state.cpu, ctx, prepared, extra_numa_sets))


def allocate(
    state: State, ctx: PolicyContext, request: ResourceRequest, now: float
) -> Decision[AllocationReply | None]:
    """Allocate (§7).

    Args:
        state: the current state.
        ctx: topology, reserve, settings, pod-source seam.
        request: the request as converted from the wire.
        now: the current time in seconds since the epoch (new entries' ``init_timestamp``).

    Returns:
        The events and the reply; or, when a handler failed for a container that had an
        entry, its removal and ``error`` (reply ``None``; see the module docstring).

    Raises:
        RequestError, QoSError: a malformed request or unhandled level; nothing to commit.
        AllocationError: the handler failed and the container had no entry; nothing to commit.
    """
    prepared = prepare_request(ctx.qos, request)
    txn = Txn(state)
    try:
        reply = allocate_container(txn, ctx, prepared, now)
    except PolicyError as err:
        # §7.2: the finaliser removes the container; only a pre-existing entry makes that
        # observable.
        cleanup = Txn(state)
        remove_container(cleanup, ctx, request.pod_uid, request.container_name)
        if not cleanup.events:
            raise
        return Decision(cleanup.events, None, error=err)
    return Decision(txn.events, reply)


def remove_pod(
    state: State, ctx: PolicyContext, request: RemovePodRequest, now: float
) -> Decision[None]:
    """RemovePod (§10.6 steps 2–4): the pod's entries go and the pools are re-sized.

    An unknown pod commits nothing and succeeds (kubelet retries removals). A pool adjustment
    that fails is reported in ``warnings``, not raised, as in the reference.
    """
    del now
    txn = Txn(state)
    warnings = removal.remove_pod(txn, ctx, request.pod_uid)
    return Decision(txn.events, None, warnings=warnings)


def get_resources_allocation(
    state: State, ctx: PolicyContext, request: None, now: float
) -> Decision[ResourcesAllocation]:
    """GetResourcesAllocation (§10.1): every container's cpuset; ramp-up ends here."""
    del request
    txn = Txn(state)
    reply = resources_allocation(txn, ctx, now)
    return Decision(txn.events, reply, warnings=reply.warnings)


def get_topology_aware_resources(
    state: State, ctx: PolicyContext, request: TopologyAwareRequest, now: float
) -> Decision[TopologyAwareReply]:
    """GetTopologyAwareResources (§10.2): read-only.

    Raises:
        UnknownContainerError: no entry for the container (kubelet gets NOT_FOUND).
    """
    del ctx, now
    return Decision(
        (), topology_aware_resources(state.cpu, request.pod_uid, request.container_name)
    )


def get_topology_aware_allocatable_resources(
    state: State, ctx: PolicyContext, request: None, now: float
) -> Decision[AllocatableReply]:
    """GetTopologyAwareAllocatableResources (§10.3): read-only, from the topology and reserve."""
    del state, request, now
    return Decision((), allocatable_resources(ctx))


def get_resource_plugin_options(
    state: State, ctx: PolicyContext, request: None, now: float
) -> Decision[PluginOptions]:
    """GetResourcePluginOptions (§10.4): the reference CPU plugin's options."""
    del state, ctx, request, now
    return Decision((), plugin_options())


def pre_start_container(
    state: State, ctx: PolicyContext, request: PreStartRequest, now: float
) -> Decision[None]:
    """PreStartContainer (§10.5): nothing to do, an empty reply."""
    del state, ctx, request, now
    return Decision((), None)


def residual_round(
    state: State, ctx: PolicyContext, request: ResidualCheck, now: float
) -> Decision[ResidualCount]:
    """Count one clearResidualState round (§12.4 steps 2–3): read-only.

    A pod in the state that the pod source does not list is seen once more; after
    ``ctx.residual_sightings`` consecutive rounds (ten 30-s rounds, 5 minutes, by default) it
    is a candidate. Remove candidates with :func:`remove_residual_pods` (with sys-advisor,
    only those it removed first).
    """
    del now
    hits, candidates = removal.residual_round(
        request.hit_map, request.known_pod_uids, state.cpu, ctx.residual_sightings
    )
    return Decision((), ResidualCount(hits, tuple(candidates)))


def remove_residual_pods(
    state: State, ctx: PolicyContext, request: Sequence[str], now: float
) -> Decision[None]:
    """Remove residual pods by ascending uid, then re-size the pools (§12.4 step 4).

    A pool adjustment that fails is reported in ``warnings`` (the handler then reports not
    ready), as in the reference.
    """
    del now
    txn = Txn(state)
    warnings = removal.remove_residual_pods(txn, ctx, request)
    return Decision(txn.events, None, warnings=warnings)
