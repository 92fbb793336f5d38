"""GetResourcesAllocation: kubelet's reconcile, where ramp-up ends (cpu-policy §10.1, §15.6).

Kubelet asks for every container's cpuset. On the way, the policy settles the lifecycle of
each container through the ramp-up machine:

* an unreadable or empty ``init_timestamp`` is repaired (``repair_timestamp``): a shared
  container ramps again on the pooled CPUs (``ContainerReRamped``), any other gets the
  timestamp reset (``TimestampReset``);
* a flagged container whose transition period has passed (``now > init + period``) finishes
  ramp-up (``finish_ramp_up`` → ``RampUpFinished``); shared ones then join their pools with
  ``put_allocations_and_adjust(..., incr_by_req=True)``.

The reply lists each container's cpuset as it is *before* the pools are adjusted (§15.6):
kubelet learns the new cpusets at its next call. An adjustment that fails does not fail the
call; its message comes back in ``warnings`` for the caller to log, and the flags stay cleared.

When the disk refuses the commit of what was settled, kubelet's reconcile must still get an
answer: :func:`listed_as_is` lists the state as it is, settling nothing (the containers stay
ramping), and the next call settles again.

Cost: O(containers), which the reply itself is; the adjustment is the pool engine's.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from machines import ramp_up as machine
from policy.cpu.context import PolicyContext
from policy.cpu.pool_engine import put_allocations_and_adjust
from policy.cpu.ramp_steps import RampUpError, container_phase, emit_step, fire
from policy.cpu.timestamps import format_qrm_time, parse_qrm_time
from policy.cpu.txn import Txn
from policy.errors import PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import ContainerEntry
from policy.state.events import ContainerReRamped, RampUpFinished, TimestampReset
from policy.topology.cpuset import CPUSet

__all__ = [
    "CPUSET_OCI_PROPERTY",
    "ContainerCPUAllocation",
    "ResourcesAllocation",
    "listed_as_is",
    "resources_allocation",
]

#: The OCI property kubelet writes a container's cpuset to (§14).
CPUSET_OCI_PROPERTY: Final = "CpusetCpus"


@dataclass(frozen=True, slots=True)
class ContainerCPUAllocation:
    """One container's ``cpu`` resource in the reply (§10.1 step 2)."""

    allocated_quantity: int
    allocation_result: str
    oci_property_name: str = CPUSET_OCI_PROPERTY
    is_node_resource: bool = False
    is_scalar_resource: bool = True


@dataclass(frozen=True, slots=True)
class ResourcesAllocation:
    """The GetResourcesAllocation reply, plus what went wrong without failing the call.

    Attributes:
        pod_resources: ``{pod_uid: {container_name: allocation}}``, every stored container.
        warnings: errors swallowed on the way (a failed pool adjustment, a container whose
            level has no lifecycle), for the caller to log.
    """

    pod_resources: Mapping[str, Mapping[str, ContainerCPUAllocation]]
    warnings: tuple[str, ...] = field(default=())


# kubelet lists every container every 3 s (wire.md §9.2) and a container's timestamp only
# changes when it is re-ramped, so parsing each distinct string once keeps the listing cheap
# at thousands of containers. Pure function of the string: caching cannot change an answer.
_parse_init_timestamp = functools.lru_cache(maxsize=1 << 15)(parse_qrm_time)


class _SettledListing:
    """The last listing of a state in which nothing was left to settle, and that state.

    Such a listing does not depend on ``now``: with no ramp-flagged container and every
    timestamp readable, step 2 emits nothing and step 3 has nobody to place, so the reply is
    a function of the (immutable) CPU state and the settings alone. kubelet asks every 3 s
    (wire.md §9.2) and the state usually has not changed in between, so the same reply value
    is handed out again — the wire layer then reuses its bytes too. One slot, replaced by a
    single assignment: a reader sees the old pair or the new one, never a mix.
    """

    last: tuple[CPUState, PolicyContext, ResourcesAllocation] | None = None

    @classmethod
    def get(cls, state: CPUState, ctx: PolicyContext) -> ResourcesAllocation | None:
        last = cls.last
        if last is not None and last[0] is state and last[1] is ctx:
            return last[2]
        return None


def resources_allocation(txn: Txn, ctx: PolicyContext, now: float) -> ResourcesAllocation:
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

    Returns:
        The reply, with cpusets as they were before step 3. A state with nothing to settle
        gets the very reply value it got last time (``_SettledListing``).
    """
    state = txn.cpu
    settled = _SettledListing.get(state, ctx)
    if settled is not None and not txn.events:
        return settled
    # 1. What a re-ramped shared container gets.
    pooled = state.pooled_cpus(ctx.reserved)
    stamp = format_qrm_time(now)
    warnings: list[str] = []
    just_finished: list[ContainerEntry] = []
    pod_resources: dict[str, dict[str, ContainerCPUAllocation]] = {}
    by_cpuset: dict[CPUSet, ContainerCPUAllocation] = {}
    # 2. Each container: lifecycle first, then its cpuset as it now is.
    for entry in state.entries():
        try:
            finished = _settle(txn, ctx, entry, now=now, stamp=stamp, pooled=pooled)
        except RampUpError as err:
            warnings.append(str(err))
            finished = None
        if finished is not None:
            just_finished.append(finished)
        current = txn.cpu.require_entry(*entry.key)
        allocation = _allocation(txn.cpu, current, by_cpuset)
        pod_resources.setdefault(entry.pod_uid, {})[entry.container_name] = allocation
    # 3. Shared containers done ramping join their pools; errors are only reported.
    if just_finished:
        try:
            put_allocations_and_adjust(txn, ctx, just_finished, incr_by_req=True)
        except PolicyError as err:
            warnings.append(f"putAllocationsAndAdjustAllocationEntries failed with error: {err}")
    reply = ResourcesAllocation(pod_resources, tuple(warnings))
    if not txn.events and not warnings and not state.ramping_containers():
        _SettledListing.last = (state, ctx, reply)
    return reply


def listed_as_is(state: CPUState) -> ResourcesAllocation:
    """Every container's cpuset as ``state`` holds it, settling nothing (§10.1 step 2's
    listing without its lifecycle steps).

    Args:
        state: the durable CPU state.

    Returns:
        The reply; ramping containers are listed on their ramp-up CPUs.
    """
    by_cpuset: dict[CPUSet, ContainerCPUAllocation] = {}
    pod_resources: dict[str, dict[str, ContainerCPUAllocation]] = {}
    for entry in state.entries():
        allocation = _allocation(state, entry, by_cpuset)
        pod_resources.setdefault(entry.pod_uid, {})[entry.container_name] = allocation
    return ResourcesAllocation(pod_resources)


def _allocation(
    state: CPUState, entry: ContainerEntry, by_cpuset: dict[CPUSet, ContainerCPUAllocation]
) -> ContainerCPUAllocation:
    result, _ = state.placement_cpus(entry.placement)
    # Containers of one pool share one cpuset: format it once (values are immutable).
    allocation = by_cpuset.get(result)
    if allocation is None:
        allocation = ContainerCPUAllocation(result.size(), str(result))
        by_cpuset[result] = allocation
    return allocation


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
    started = _parse_init_timestamp(entry.init_timestamp)
    if started is None:
        step = fire(container_phase(entry), "repair_timestamp")
        assert step is not None  # repair_timestamp has no guards
        if entry.is_shared():
            emit_step(txn, step, ContainerReRamped(pod_uid, name, stamp, pooled))
        else:
            emit_step(txn, step, TimestampReset(pod_uid, name, stamp))
        return None
    if not entry.ramp_up:
        return None
    passed = now > started + ctx.transition_period_s
    step = fire(container_phase(entry), "finish_ramp_up", {"transition_period_passed": passed})
    if step is None:
        return None
    emit_step(txn, step, RampUpFinished(pod_uid, name))
    if step.dest == machine.POOLED:
        return txn.cpu.require_entry(pod_uid, name)
    return None
