"""The GetResourcesAllocation decision written the plain way, as an oracle (cpu-policy §10.1).

One walk over every container, uid then name: its lifecycle step through the ramp-up machine
(repair an unreadable timestamp, end an elapsed ramp-up), then its cpuset as the state now
holds it; then the containers that finished ramping join their pools. No parts, no memo and
no index: what ``policy.cpu.allocation_listing`` must answer however it saves work.
"""

from __future__ import annotations

from dataclasses import dataclass

from machines import ramp_up as machine
from policy.cpu.context import PolicyContext
from policy.cpu.pool_engine import put_allocations_and_adjust
from policy.cpu.ramp_steps import RampUpError, container_phase, emit_step, fire
from policy.cpu.replies import ContainerCPUAllocation
from policy.cpu.timestamps import format_qrm_time, parse_qrm_time
from policy.cpu.txn import Txn
from policy.errors import PolicyError
from policy.state.entries import ContainerEntry
from policy.state.events import ContainerReRamped, Event, RampUpFinished, TimestampReset
from policy.state.sections import State
from policy.topology.cpuset import CPUSet


@dataclass(frozen=True)
class OracleListing:
    events: tuple[Event, ...]
    pod_resources: dict[str, dict[str, ContainerCPUAllocation]]
    warnings: tuple[str, ...]


def walk_every_container(state: State, ctx: PolicyContext, now: float) -> OracleListing:
    txn = Txn(state)
    pooled = state.cpu.pooled_cpus(ctx.reserved)
    stamp = format_qrm_time(now)
    warnings: list[str] = []
    finished: list[ContainerEntry] = []
    pods: dict[str, dict[str, ContainerCPUAllocation]] = {}
    for entry in state.cpu.entries():
        try:
            done = _step(txn, ctx, entry, now, stamp, pooled)
        except RampUpError as err:
            warnings.append(str(err))
            done = None
        if done is not None:
            finished.append(done)
        current = txn.cpu.require_entry(*entry.key)
        cpus, _ = txn.cpu.placement_cpus(current.placement)
        allocation = ContainerCPUAllocation(cpus.size(), str(cpus))
        pods.setdefault(entry.pod_uid, {})[entry.container_name] = allocation
    if finished:
        try:
            put_allocations_and_adjust(txn, ctx, finished, incr_by_req=True)
        except PolicyError as err:
            warnings.append(f"putAllocationsAndAdjustAllocationEntries failed with error: {err}")
    return OracleListing(txn.events, pods, tuple(warnings))


def _step(
    txn: Txn, ctx: PolicyContext, entry: ContainerEntry, now: float, stamp: str, pooled: CPUSet
) -> ContainerEntry | None:
    pod_uid, name = entry.key
    started = parse_qrm_time(entry.init_timestamp)
    if started is None:
        step = fire(container_phase(entry), "repair_timestamp", {"numa_bound": False})
        assert step is not None
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
