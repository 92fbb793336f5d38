"""The CPU policy's façade: one pure function per kubelet RPC, each returning a Decision.

Every function has the one shape of DESIGN.md ("Every decision has one shape"):
``(state, inputs, settings, now) -> Decision``. ``inputs`` is plain data holding everything the
decision reads besides the state: the kubelet call (``policy.cpu.commands``) and, for Allocate,
what the pod source said of the pod (``AllocateInputs``). ``settings`` is the fixed context
(``PolicyContext``: topology, reserve, QoS configuration, transition period, options), the same
for every decision of a run. ``now`` is the wall time in seconds since the epoch.

The Allocator actor gathers the inputs through its ports, calls these with its (durable) state,
commits ``decision.events`` through the StateStore with the inputs as the journaled cause, and
then replies with ``decision.reply`` (DESIGN.md, the commit protocol); so the journal can
re-run any committed decision from its record alone (``qrmd.offline.decision_rerun``). Nothing here
reads a clock, a file or a socket, and nothing mutates the state passed in.

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
removal) is the advisor link's (spec cpu-policy §7.2, §10.6), not built yet; these functions
leave room for it: the caller calls the advisor around the commit.
"""

from __future__ import annotations

from policy.cpu import remove as removal
from policy.cpu import residual_removal
from policy.cpu.allocate import allocate_container
from policy.cpu.allocation_listing import ResourcesAllocation, listed_as_is, resources_allocation
from policy.cpu.commands import (
    AllocateInputs,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PreStartContainer,
    RemovePod,
)
from policy.cpu.context import PolicyContext
from policy.cpu.hints import topology_hints
from policy.cpu.pool_startup import start_pools
from policy.cpu.prepare import prepare_request
from policy.cpu.remove import remove_container
from policy.cpu.replies import (
    AllocatableReply,
    AllocationReply,
    HintsReply,
    PluginOptions,
    TopologyAwareReply,
)
from policy.cpu.residual_removal import ResidualOutcome, ResidualPods
from policy.cpu.snb import is_inplace_resizing
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
    "ResidualOutcome",
    "ResidualPods",
    "allocate",
    "get_resource_plugin_options",
    "get_resources_allocation",
    "get_resources_allocation_as_is",
    "get_topology_aware_allocatable_resources",
    "get_topology_aware_resources",
    "get_topology_hints",
    "pre_start_container",
    "remove_pod",
    "remove_residual_pods",
    "start",
]


def start(state: State, settings: PolicyContext) -> Decision[None]:
    """Start-up pools (§6.2 steps 4–6): clean unowned pools, write ``reserve``, make ``reclaim``;
    re-plan every pool when the reserve changed (``policy.cpu.pool_startup``).

    Args:
        state: the recovered state (empty on a fresh node).
        settings: topology, reserve, options.

    Returns:
        The events that bring the pools up to date (none when they already are), and a
        warning when the reserve changed.

    Raises:
        ReserveError: the reserve holds every CPU of the node; start-up must fail.
        ReserveChangeRefused: the reserve changed and a dedicated container holds CPUs of the
            new one (or the pools cannot be re-planned); start-up must fail.
        PoolError: no reclaim pool can be made (§15.9); start-up must fail.
        InvariantError: the state would break ``policy.cpu.invariants``.
    """
    txn = Txn(state)
    warnings = start_pools(txn, settings)
    return Decision(txn.events, None, warnings=warnings)


def get_topology_hints(
    state: State, inputs: GetTopologyHints, settings: PolicyContext, now: float
) -> Decision[HintsReply]:
    """GetTopologyHints (§8): read-only.

    Args:
        state: the current state.
        inputs: the call.
        settings: topology, reserve, QoS configuration, hint limits.
        now: the current time (unused: hints do not depend on it).

    Returns:
        No events and the hints reply.

    Raises:
        RequestError, QoSError, HintError: see the module docstring.
    """
    del now
    prepared = prepare_request(settings.qos, inputs.request, _kept_keys(settings))
    headroom = state.advisor.headroom_of()
    return Decision((), topology_hints(state.cpu, settings, prepared, numa_headroom=headroom))


def _kept_keys(settings: PolicyContext) -> tuple[str, ...]:
    """The annotations a request keeps besides the QoS ones: ``--pod-annotation-kept-keys``
    at v0.5.47 (spec cpu-policy-v0.5.47 (c) 4), none at v0.5.3."""
    return settings.reference.pod_annotation_kept_keys if settings.at_v0_5_47 else ()


def allocate(
    state: State, inputs: AllocateInputs, settings: PolicyContext, now: float
) -> Decision[AllocationReply | None]:
    """Allocate (§7).

    Args:
        state: the current state.
        inputs: the call and what the pod source said of its pod (§7.3 step 3a).
        settings: topology, reserve, QoS configuration, options.
        now: the current time in seconds since the epoch (new entries' ``init_timestamp``).

    Returns:
        The events and the reply; or, when a handler failed for a container that had an
        entry, its removal and ``error`` (reply ``None``; see the module docstring).

    Raises:
        RequestError, QoSError: a malformed request or unhandled level; nothing to commit.
        AllocationError: the handler failed and the container had no entry; nothing to commit.
    """
    request = inputs.call.request
    prepared = prepare_request(settings.qos, request, _kept_keys(settings))
    txn = Txn(state)
    try:
        reply = allocate_container(txn, settings, prepared, inputs.pod, now)
    except PolicyError as err:
        # v0.5.47 keeps the container when an in-place resize fails (policy.go:937-940).
        if settings.at_v0_5_47 and is_inplace_resizing(prepared.annotations):
            raise
        # §7.2: the finaliser removes the container; only a pre-existing entry makes that
        # observable.
        cleanup = Txn(state)
        remove_container(cleanup, settings, request.pod_uid, request.container_name)
        if not cleanup.events:
            raise
        return Decision(cleanup.events, None, error=err)
    return Decision(txn.events, reply)


def remove_pod(
    state: State, inputs: RemovePod, settings: PolicyContext, now: float
) -> Decision[None]:
    """RemovePod (§10.6 steps 2–4): the pod's entries go and the pools are re-sized.

    An unknown pod commits nothing and succeeds (kubelet retries removals). A pool adjustment
    that fails is reported in ``warnings``, not raised, as in the reference.
    """
    del now
    txn = Txn(state)
    warnings = removal.remove_pod(txn, settings, inputs.pod_uid)
    return Decision(txn.events, None, warnings=warnings)


def get_resources_allocation(
    state: State,
    inputs: GetResourcesAllocation,
    settings: PolicyContext,
    now: float,
    previous: ResourcesAllocation | None = None,
) -> Decision[ResourcesAllocation]:
    """GetResourcesAllocation (§10.1): every container's cpuset; ramp-up ends here.

    ``previous``, an earlier listing, only saves work: its per-pod parts are reused where
    they still hold (``policy.cpu.listing_parts``); the decision is the same without it.
    """
    del inputs
    txn = Txn(state)
    reply = resources_allocation(txn, settings, now, previous)
    return Decision(txn.events, reply, warnings=reply.warnings)


def get_resources_allocation_as_is(
    state: State,
    inputs: GetResourcesAllocation,
    settings: PolicyContext,
    now: float,
    previous: ResourcesAllocation | None = None,
) -> Decision[ResourcesAllocation]:
    """GetResourcesAllocation's answer when what it settles cannot be committed: read-only.

    Every container's cpuset as the state holds it; ramp-ups that ended stay pending and
    bad timestamps stay as they are until a call whose commit succeeds (§10.1). ``previous``
    as in :func:`get_resources_allocation`.
    """
    del inputs, settings, now
    return Decision((), listed_as_is(state.cpu, previous))


def get_topology_aware_resources(
    state: State, inputs: GetTopologyAwareResources, settings: PolicyContext, now: float
) -> Decision[TopologyAwareReply]:
    """GetTopologyAwareResources (§10.2): read-only.

    Raises:
        UnknownContainerError: no entry for the container (kubelet gets NOT_FOUND).
    """
    del settings, now
    return Decision((), topology_aware_resources(state.cpu, inputs.pod_uid, inputs.container_name))


def get_topology_aware_allocatable_resources(
    state: State,
    inputs: GetTopologyAwareAllocatableResources,
    settings: PolicyContext,
    now: float,
) -> Decision[AllocatableReply]:
    """GetTopologyAwareAllocatableResources (§10.3): read-only, from the topology and reserve."""
    del state, inputs, now
    return Decision((), allocatable_resources(settings))


def get_resource_plugin_options(
    state: State, inputs: GetResourcePluginOptions, settings: PolicyContext, now: float
) -> Decision[PluginOptions]:
    """GetResourcePluginOptions (§10.4): the reference CPU plugin's options."""
    del state, inputs, settings, now
    return Decision((), plugin_options())


def pre_start_container(
    state: State, inputs: PreStartContainer, settings: PolicyContext, now: float
) -> Decision[None]:
    """PreStartContainer (§10.5): nothing to do, an empty reply."""
    del state, inputs, settings, now
    return Decision((), None)


def remove_residual_pods(
    state: State, inputs: ResidualPods, settings: PolicyContext, now: float
) -> Decision[ResidualOutcome]:
    """Remove the pods the residual checker's evidence calls due, then re-size the pools
    (§12.4 step 4; ``policy.cpu.residual_removal``).

    ``inputs`` is the checker's evidence (the one count of sightings) and the candidates
    sys-advisor refused to remove (kept until the next round). A pool adjustment that fails
    is reported in ``warnings`` (the handler then reports not ready), as in the reference.
    """
    return residual_removal.remove_residual_pods(state, inputs, settings, now)
