"""GetResourcesAllocation: kubelet's reconcile, where ramp-up ends (cpu-policy §10.1, §15.6).

Kubelet asks for every container's cpuset. On the way, the policy settles the lifecycle of
each container through the ramp-up machine:

* an unreadable or empty ``init_timestamp`` is repaired (``repair_timestamp``): a shared
  container ramps again on the pooled CPUs (``ContainerReRamped``), any other gets the
  timestamp reset (``TimestampReset``);
* at v0.5.47 a dedicated or reclaimed sidecar whose CPUs or owner differ from its main
  container's takes its main container's again (``ContainerPlaced``), as the reference syncs them;
* a flagged container whose transition period has passed (``now > init + period``) finishes
  ramp-up (``finish_ramp_up`` → ``RampUpFinished``); shared ones then join their pools with
  ``put_allocations_and_adjust(..., incr_by_req=True)``.

The reply lists each container's cpuset as it is *before* the pools are adjusted (§15.6):
kubelet learns the new cpusets at its next call. At the v0.5.47 reference level the reply is
built after the adjustment (spec cpu-policy-v0.5.47 (c) 3): the call that ends a ramp-up
already reports the pool. An adjustment that fails does not fail the call; its message comes
back in ``warnings`` for the caller to log, and the flags stay cleared.

When the disk refuses the commit of what was settled, kubelet's reconcile must still get an
answer: :func:`listed_as_is` lists the state as it is, settling nothing (the containers stay
ramping), and the next call settles again.

Each listing keeps its per-pod parts (``policy.cpu.listing_parts``) in the reply it returns;
handed that reply again as ``previous``, the next listing makes again only the pods that
changed, and visits only the containers that may have a lifecycle step to take — those with an
unreadable timestamp, and the ramp-flagged ones of pods whose transition period may have
passed — in the order a walk over every container would take them; ``_settle`` decides each
exactly as that walk did. A state with nothing to settle gets ``previous`` itself back when
``previous`` listed that very state. Cost: one identity check per pod and one comparison per
ramping pod, plus the pods that changed; the adjustment is the pool engine's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from machines import ramp_up as machine
from policy.cpu.context import PolicyContext
from policy.cpu.listing_parts import (
    ListingParts,
    finish_ramp_up_step,
    list_pods,
    parse_init_timestamp,
)
from policy.cpu.pool_engine import put_allocations_and_adjust
from policy.cpu.ramp_steps import RampUpError, container_phase, emit_step, fire
from policy.cpu.replies import CPUSET_OCI_PROPERTY, ContainerCPUAllocation
from policy.cpu.snb import snb_pool_cpus
from policy.cpu.timestamps import format_qrm_time
from policy.cpu.txn import Txn
from policy.errors import PolicyError
from policy.state.cpu_state import ContainerKey, CPUState
from policy.state.entries import RECLAIM_POOL, ContainerEntry, InPool, OwnCPUs
from policy.state.events import ContainerPlaced, ContainerReRamped, RampUpFinished, TimestampReset
from policy.topology.cpuset import CPUSet

__all__ = [
    "CPUSET_OCI_PROPERTY",
    "ContainerCPUAllocation",
    "ResourcesAllocation",
    "listed_as_is",
    "resources_allocation",
]


@dataclass(frozen=True, slots=True)
class ResourcesAllocation:
    """The GetResourcesAllocation reply, plus what went wrong without failing the call.

    Two replies are equal when their maps and warnings are; ``parts`` and ``settled`` are what
    the next listing reuses, not part of the answer.

    Attributes:
        pod_resources: ``{pod_uid: {container_name: allocation}}``, every stored container,
            by pod uid ascending. Read-only: pods on the same cpusets share their inner map.
        warnings: errors swallowed on the way (a failed pool adjustment, a container whose
            level has no lifecycle), for the caller to log.
        parts: the per-pod parts the reply was built from, for the next listing to reuse.
        settled: the listed state had nothing to settle (no ramp-flagged container, every
            timestamp readable, no warning), so its listing is the same at any time.
        listed_after_events: how many of the decision's events (its lifecycle steps) the
            listed state holds; the pool adjustment's events come after them (§15.6). The
            listing is ``list_pods`` of the decision's state with these events applied, which
            is how a journal record of the decision names it without holding it.
    """

    pod_resources: Mapping[str, Mapping[str, ContainerCPUAllocation]]
    warnings: tuple[str, ...] = field(default=())
    parts: ListingParts | None = field(default=None, compare=False, repr=False)
    settled: bool = field(default=False, compare=False, repr=False)
    listed_after_events: int = field(default=0, compare=False, repr=False)


def resources_allocation(
    txn: Txn, ctx: PolicyContext, now: float, previous: ResourcesAllocation | None = None
) -> ResourcesAllocation:
    """Settle ramp-up and timestamps, report every container's cpuset (§10.1).

    1. ``pooled`` = the pooled CPUs of the state as it is now.
    2. For each pod and container (uid, then name, ascending): repair a bad timestamp or end
       an elapsed ramp-up, through the ramp-up machine; report the container's cpuset.
    3. Containers of shared pods that just finished ramp-up join their pools; a failure is a
       warning.

    Args:
        txn: the decision in progress; its events are what to commit.
        ctx: transition period, reserve and the pool engine's settings.
        now: the current time, seconds since the epoch.
        previous: an earlier reply of this function or :func:`listed_as_is`, of any state,
            whose parts to reuse; the answer is the same without it.

    Returns:
        The reply, with cpusets as they were before step 3 (v0.5.3) or after it (v0.5.47).
        ``previous`` itself when it listed this very state and that state had nothing to
        settle.
    """
    state = txn.cpu
    basis = None if previous is None else previous.parts
    if _lists_settled(previous, state) and not txn.events:
        assert previous is not None  # for the type checker: _lists_settled said so
        return previous  # nothing to settle: the same answer at any time
    parts = list_pods(state, basis)
    # 0. v0.5.47: sidecars follow their main container again (policy.go:546-553).
    if ctx.at_v0_5_47:
        txn.emit(*_sidecar_syncs(state))
    # 1. What a re-ramped shared container gets.
    pooled = state.pooled_cpus(ctx.reserved)
    if ctx.at_v0_5_47:
        # v0.5.47 re-ramps onto the pooled CPUs without the SNB containers' (policy.go:521).
        pooled = pooled.difference(snb_pool_cpus(state))
    stamp = format_qrm_time(now)
    warnings: list[str] = []
    just_finished: list[ContainerEntry] = []
    # 2. Each container: lifecycle first. Only a ramp-flagged container or one whose timestamp
    #    does not parse has a step to take (``_settle`` returns at once for any other), so
    #    these are the ones visited, in the order of a walk over every container.
    for key in _to_settle(parts, now, ctx.transition_period_s):
        entry = state.require_entry(*key)
        try:
            finished = _settle(txn, ctx, entry, now=now, stamp=stamp, pooled=pooled)
        except RampUpError as err:
            warnings.append(str(err))
            finished = None
        if finished is not None:
            just_finished.append(finished)
    # ... then every cpuset as it now is: a step changes only its own container's entry, and
    # the cpuset a ramping container is listed on stays the one it had.
    if txn.cpu is not state:
        parts = list_pods(txn.cpu, parts)
    listed_after = len(txn.events)
    # 3. Shared containers done ramping join their pools; errors are only reported.
    if just_finished:
        try:
            put_allocations_and_adjust(txn, ctx, just_finished, incr_by_req=True)
        except PolicyError as err:
            warnings.append(f"putAllocationsAndAdjustAllocationEntries failed with error: {err}")

    if ctx.at_v0_5_47 and txn.cpu is not state:
        # v0.5.47 reads the pod entries again after adjusting (policy.go:589-634).
        parts = list_pods(txn.cpu, parts)
        listed_after = len(txn.events)
    settled = not txn.events and not warnings and not state.ramping_containers()
    return ResourcesAllocation(parts.pod_resources, tuple(warnings), parts, settled, listed_after)


def _sidecar_syncs(state: CPUState) -> list[ContainerPlaced]:
    """v0.5.47's ``applySidecarAllocationInfoFromMainContainer`` for the sidecars that hold a
    copy of their main container's CPUs (an SNB sidecar follows its pool): a
    ``ContainerPlaced`` for each whose CPUs or owner differ from its main container's.
    A dedicated sidecar gets a copy of the CPUs; a reclaimed one its main container's part of
    the reclaim pool (its own ``numa_hint`` places it again at the next regeneration, as in
    the reference). O(dedicated and reclaimed containers)."""
    out: list[ContainerPlaced] = []
    for key in sorted(state.dedicated_containers()):
        entry = state.require_entry(*key)
        main = state.main_container_entry(entry.pod_uid)
        if not entry.is_sidecar() or main is None:
            continue
        result, original = state.placement_cpus(main.placement)
        placement = OwnCPUs(result, original)
        if entry.placement != placement or entry.owner_pool_name != main.owner_pool_name:
            out.append(ContainerPlaced(key[0], key[1], placement, main.owner_pool_name))
    for key in sorted(state.containers_owned_by(RECLAIM_POOL)):
        entry = state.require_entry(*key)
        main = state.main_container_entry(entry.pod_uid)
        if not (entry.is_sidecar() and entry.is_reclaimed()) or main is None:
            continue
        wanted = state.placement_cpus(main.placement)
        if (
            state.placement_cpus(entry.placement) != wanted
            or entry.owner_pool_name != main.owner_pool_name
        ):
            follows = main.placement if isinstance(main.placement, InPool) else OwnCPUs(*wanted)
            out.append(ContainerPlaced(key[0], key[1], follows, main.owner_pool_name))
    return out


def listed_as_is(
    state: CPUState, previous: ResourcesAllocation | None = None
) -> ResourcesAllocation:
    """Every container's cpuset as ``state`` holds it, settling nothing (§10.1 step 2's
    listing without its lifecycle steps).

    Args:
        state: the durable CPU state.
        previous: an earlier listing whose parts to reuse, as in :func:`resources_allocation`.

    Returns:
        The reply; ramping containers are listed on their ramp-up CPUs.
    """
    parts = list_pods(state, None if previous is None else previous.parts)
    return ResourcesAllocation(parts.pod_resources, (), parts)


def _lists_settled(previous: ResourcesAllocation | None, state: CPUState) -> bool:
    """Whether ``previous`` is the listing of this very state and it had nothing to settle."""
    return (
        previous is not None
        and previous.settled
        and previous.parts is not None
        and previous.parts.state is state
    )


def _to_settle(parts: ListingParts, now: float, period_s: float) -> list[ContainerKey]:
    """The containers that may have a lifecycle step to take, ``(pod, container)`` ascending:
    every one with an unreadable timestamp, and the ramp-flagged ones of the pods where one
    may (``PodPart.first_step_at``) have passed its transition period. ``_settle`` decides;
    the second of slack only ever adds a container it then leaves as it is."""
    keys = set(parts.unreadable)
    horizon = now - period_s + _SLACK_S
    pods = parts.pods
    for uid in parts.ramping:
        part = pods[uid]
        if part.first_step_at is not None and part.first_step_at < horizon:
            keys.update((uid, name) for name in part.flagged)
    return sorted(keys)


#: Room for the rounding of ``now > started + period`` when the filter above is written as
#: ``started < now - period``: a container within a second of its end is visited.
_SLACK_S = 1.0


def _settle(
    txn: Txn,
    ctx: PolicyContext,
    entry: ContainerEntry,
    *,
    now: float,
    stamp: str,
    pooled: CPUSet,
) -> ContainerEntry | None:
    """One container's lifecycle step; returns it when a shared ramp-up just finished."""
    pod_uid, name = entry.key
    started = parse_init_timestamp(entry.init_timestamp)
    if started is None:
        # v0.5.47 re-ramps only non-binding shared containers (policy.go:559).
        numa_bound = ctx.at_v0_5_47 and entry.is_shared() and entry.is_numa_binding()
        phase = container_phase(entry, system_cores=ctx.at_v0_5_47)
        step = fire(phase, "repair_timestamp", {"numa_bound": numa_bound})
        assert step is not None  # every live phase has a repair_timestamp transition
        if entry.is_shared() and not numa_bound:
            emit_step(txn, step, ContainerReRamped(pod_uid, name, stamp, pooled))
        else:
            emit_step(txn, step, TimestampReset(pod_uid, name, stamp))
        return None
    if not entry.ramp_up:
        return None
    passed = now > started + ctx.transition_period_s
    step = finish_ramp_up_step(container_phase(entry), passed)
    if step is None:
        return None
    emit_step(txn, step, RampUpFinished(pod_uid, name))
    if step.dest == machine.POOLED:
        return txn.cpu.require_entry(pod_uid, name)
    return None
