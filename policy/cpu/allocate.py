"""Allocate: which CPUs a container gets, by QoS level (spec cpu-policy §7).

The rule, in the reference's order (§7.1):

5. INIT containers are answered with an echo and no ``allocation_result``; nothing is stored.
6. Debug pods get an allocation that leaves the container's cpuset alone (no OCI property,
   quantity 0, empty result); nothing is stored.
8. A container that already holds at least the requested CPUs (its *original* result) gets
   its stored allocation back; no handler runs.
9. Otherwise, by level:

   * **shared_cores** (§7.3): a new container ramps up on every pooled CPU when its pod is
     Pending or unknown to the pod source, or when its pool does not exist yet — or exists
     but would not survive the resize (no other container sizes it, §5.6/§9.4 step 1: a pool a
     failed re-allocation left behind), since joining it would leave the container owner-less
     on its old CPUs (§9.8) where a later NUMA-binding container breaks §16.26; the reference
     joins such a pool. Else it is
     stored on the pooled CPUs and the pools are resized *without* its request, then it joins
     its pool — the reply still says "all pooled CPUs" (§15.1). A ramping container is moved
     to the current pooled CPUs again; a pooled one makes its pool grow by its request and is
     answered with its current CPUs, its entry unchanged (§15.2). At v0.5.47 an in-place
     resize stores the new request and annotations before the pool grows (with sys-advisor,
     by the pod's aggregated growth), and a ramping container cannot be resized.
   * **reclaimed_cores** (§7.4): the container follows the reclaim pool. A missing pool is
     "pool: reclaim is not ready", an empty one "pool: reclaim is not empty" (sic, §15.3).
   * **dedicated_cores** needs NUMA binding, else "not support dedicated_cores without NUMA
     binding". The main container (§7.5.1) takes, on the hinted NUMA nodes, every available
     CPU (exclusive) or ``take_by_topology`` of them (one NUMA node only); it is stored with the
     ramp-up flag and the pools are re-adjusted around it. A larger request re-allocates it
     from the state without its old entry. A sidecar (§7.5.2) copies its main container's
     CPUs, or gets an empty reply while the main container has none.
   * any other level (``system_cores``): "katalyst QoS level: %s is not supported yet".
   * at the v0.5.47 reference level, shared_cores with NUMA binding (SNB) take
     ``policy.cpu.snb_allocate`` instead, and an in-place resize skips step 8.

Which lifecycle transition a container takes (ramping or pooled, re-allocation, a sidecar) is
the ramp-up machine's decision (``machines.ramp_up`` through ``policy.cpu.ramp_steps``); this module
answers its guards and builds the events it names. A container whose stored QoS level has no
such transition (a shared container re-allocated as reclaimed, say) is refused; the reference
would silently rewrite its level.

Errors are raised with the reference's reason after the pod and container; the working
transaction then holds what the steps before the failure emitted, and the caller discards it
(see ``policy.cpu.facade`` for the finaliser of §7.2).
"""

from __future__ import annotations

import math
from dataclasses import replace

from machines import ramp_up as lifecycle
from machines.lifecycle import Step
from policy.cpu.commands import PodPhase
from policy.cpu.context import PolicyContext
from policy.cpu.dedicated_allocation import (
    allocate_numa_binding_cpus_v0547,
    numa_binding_hint_id,
)
from policy.cpu.hints import NO_NUMA_BINDING, NOT_EXCLUSIVE_TOO_LARGE
from policy.cpu.pool_engine import (
    adjust_allocation_entries,
    pool_quantities,
    put_allocations_and_adjust,
)
from policy.cpu.prepare import PreparedRequest
from policy.cpu.qos import RECLAIMED_CORES, SHARED_CORES, QoSError, check_handled_level
from policy.cpu.ramp_steps import container_phase, emit_step, fire
from policy.cpu.replies import CPUSET_OCI_PROPERTY, AllocationReply, CPUAllocation
from policy.cpu.request import ContainerType, TopologyHint
from policy.cpu.rnb_allocate import resize_reclaimed, settle_reclaimed
from policy.cpu.snb import is_inplace_resizing, non_binding_pooled_cpus, pod_aggregated_request
from policy.cpu.snb_allocate import allocate_snb
from policy.cpu.system_cores import SYSTEM_CORES, allocate_system
from policy.cpu.txn import Txn
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_apply import apply_cpu_event
from policy.state.cpu_state import CPUState
from policy.state.entries import (
    ANNOTATION_NUMA_HINT,
    DEDICATED_OWNER,
    RECLAIM_POOL,
    ContainerEntry,
    InPool,
    OwnCPUs,
    specified_pool_name,
)
from policy.state.events import ContainerAllocated, ContainerRemoved
from policy.topology.cpuset import CPUSet
from policy.topology.selection import SelectionError, take_by_topology

__all__ = ["AllocationError", "allocate_container", "allocate_numa_binding_cpus"]


class AllocationError(PolicyError):
    """Allocate refused or failed; the message names pod, container and the reference's reason.

    A refusal by default; raised as a ``SHORTAGE`` where the CPUs ran out (no pooled CPUs, an
    empty reclaim pool, hinted NUMA nodes too small) and with the kind of the error it wraps.
    """

    kind = ErrorKind.REFUSED


def allocate_container(
    txn: Txn, ctx: PolicyContext, prepared: PreparedRequest, pod: PodPhase, now: float
) -> AllocationReply:
    """Decide one Allocate (§7.1 steps 5–9), emitting its events into ``txn``.

    Args:
        txn: the decision in progress, on the current state.
        ctx: topology, reserve, settings.
        prepared: the request after ``prepare_request``.
        pod: what the pod source said of the request's pod (§7.3 step 3a).
        now: the current time, seconds since the epoch (the new entry's ``init_timestamp``).

    Returns:
        The reply.

    Raises:
        QoSError: the level has no handler (``system_cores``).
        AllocationError: the handler refused or failed; ``txn`` may hold the events of the
            steps before the failure and must be discarded.
    """
    request = prepared.request
    # 5. INIT containers: an echo, nothing stored.
    if prepared.is_init:
        return _reply(prepared, None)
    # 6. Debug pods: an allocation that leaves the cgroup alone.
    if prepared.is_debug:
        return _reply(prepared, CPUAllocation(is_node_resource=False, is_scalar_resource=True))
    state = txn.cpu
    # 8. Enough CPUs already: the stored allocation, no handler.
    held = state.entry(request.pod_uid, request.container_name)
    # v0.5.47: an in-place resize always reaches its handler.
    resizing = ctx.at_v0_5_47 and is_inplace_resizing(prepared.annotations)
    if held is not None and not resizing:
        result, original = state.placement_cpus(held.placement)
        if original.size() >= prepared.req_int:
            return _reply(prepared, _cpu_allocation(result, None), native_qos_class="")
    # 9. Dispatch on the level (v0.5.47 also accepts system_cores).
    if ctx.at_v0_5_47 and prepared.qos_level == SYSTEM_CORES:
        try:
            system = allocate_system(txn, ctx, prepared, now)
        except PolicyError as err:
            raise AllocationError(str(err), kind=err.kind, subject=request.describe()) from err
        return AllocationReply() if system is None else _pack(prepared, system)
    try:
        check_handled_level(prepared.qos_level)
    except QoSError as err:
        raise QoSError(str(err), subject=request.describe()) from err
    try:
        if prepared.qos_level == SHARED_CORES and ctx.at_v0_5_47 and prepared.numa_binding:
            return _allocate_snb(txn, ctx, prepared, now)
        if prepared.qos_level == SHARED_CORES:
            return _allocate_shared(txn, ctx, prepared, pod, now)
        if prepared.qos_level == RECLAIMED_CORES:
            return _allocate_reclaimed(txn, ctx, prepared, now)
        return _allocate_dedicated(txn, ctx, prepared, now)
    except PolicyError as err:
        raise AllocationError(str(err), kind=err.kind, subject=request.describe()) from err


# -- replies ---------------------------------------------------------------------------------


def _cpu_allocation(cpus: CPUSet, hint: tuple[TopologyHint | None, ...] | None) -> CPUAllocation:
    return CPUAllocation(
        oci_property_name=CPUSET_OCI_PROPERTY,
        is_node_resource=False,
        is_scalar_resource=True,
        allocated_quantity=float(cpus.size()),
        allocation_result=str(cpus),
        resource_hints=hint,
    )


def _reply(
    prepared: PreparedRequest, allocation: CPUAllocation | None, native_qos_class: str | None = None
) -> AllocationReply:
    request = prepared.request
    qos_class = request.native_qos_class if native_qos_class is None else native_qos_class
    return AllocationReply.echo(
        request, prepared.labels, prepared.annotations, allocation, qos_class
    )


def _pack(prepared: PreparedRequest, cpus: CPUSet) -> AllocationReply:
    """The handlers' reply (§7.3 step 5): the cpuset and the request's hint, even a null one."""
    return _reply(prepared, _cpu_allocation(cpus, (prepared.request.hint,)))


def _updated(entry: ContainerEntry, prepared: PreparedRequest) -> ContainerEntry:
    """An existing entry updated from the request (§7.3 step 2): level and annotations."""
    return replace(entry, qos_level=prepared.qos_level, annotations=dict(prepared.annotations))


# -- shared_cores (§7.3) -----------------------------------------------------------------------


def _allocate_shared(
    txn: Txn, ctx: PolicyContext, prepared: PreparedRequest, pod: PodPhase, now: float
) -> AllocationReply:
    request = prepared.request
    state = txn.cpu
    # 1. The pooled CPUs: every NUMA node without a dedicated NUMA-binding container, minus
    #    dedicated CPUs and the reserve.
    pooled = state.pooled_cpus(ctx.reserved)
    if ctx.at_v0_5_47:
        # v0.5.47 also leaves out the NUMAs of SNB pools (spec cpu-policy-v0.5.47 (c) 8).
        pooled = non_binding_pooled_cpus(state, ctx)
    if pooled.is_empty():
        raise AllocationError("get empty pooledCPUs", kind=ErrorKind.SHORTAGE)
    existing = state.entry(request.pod_uid, request.container_name)
    # 3a. A new container: ramping or straight into its pool, as the machine decides.
    if existing is None:
        target = specified_pool_name(SHARED_CORES, prepared.cpuset_pool)
        step = _fire(
            lifecycle.NEW,
            "allocate_shared",
            {
                "pod_pending_or_unknown": pod.is_pending_or_unknown,
                # A pool the resize would drop counts as missing (see the module docstring).
                "target_pool_missing": state.pool_cpus(target) is None
                or pool_quantities(state, ctx).get(target, 0) <= 0,
            },
        )
        if step.dest == lifecycle.RAMPING:
            entry = prepared.new_entry(now, state.ramp_placement(pooled), ramp_up=True, owner="")
            emit_step(txn, step, ContainerAllocated(entry))
        else:
            entry = prepared.new_entry(now, OwnCPUs.of(pooled), ramp_up=False, owner="")
            emit_step(txn, step, ContainerAllocated(entry))
            _put_into_pool(txn, ctx, entry, incr_by_req=False)
        # §15.1: the reply says "all pooled CPUs" even when the container joined its pool.
        return _pack(prepared, pooled)
    updated = _updated(existing, prepared)
    resizing = ctx.at_v0_5_47 and is_inplace_resizing(prepared.annotations)
    if resizing and existing.ramp_up:
        # v0.5.47 refuses to resize a ramping container (policy_allocation_handlers.go:143-147).
        raise AllocationError("pod is still ramp up, not allow to inplace update resize")
    step = _fire(container_phase(existing), "allocate_shared", {})
    # 3b. Still ramping: onto the current pooled CPUs, with the request's annotations.
    if existing.ramp_up:
        emit_step(
            txn, step, ContainerAllocated(replace(updated, placement=state.ramp_placement(pooled)))
        )
        return _pack(prepared, pooled)
    # 3c. In its pool: the pool grows by the request; the entry is stored unchanged and the
    #     reply carries its CPUs from before the resize (§15.2).
    current = state.placement_cpus(existing.placement)[0]
    if resizing:
        # 3d. v0.5.47's in-place resize (policy_allocation_handlers.go:157-170) stores the new
        #     request and annotations first; its pool then grows by that request, or with
        #     sys-advisor by what the pod's aggregated request grew (policy.cpu.advisor.resize).
        resized = replace(updated, request_quantity=prepared.req_float)
        emit_step(txn, step, ContainerAllocated(resized))
        _put_into_pool(txn, ctx, resized, incr_by_req=True, resized_from=existing)
        return _pack(prepared, current)
    emit_step(txn, step, ContainerAllocated(existing))
    _put_into_pool(txn, ctx, updated, incr_by_req=True)
    return _pack(prepared, current)


def _allocate_snb(
    txn: Txn, ctx: PolicyContext, prepared: PreparedRequest, now: float
) -> AllocationReply:
    """v0.5.47 shared cores with NUMA binding (``policy.cpu.snb_allocate``)."""
    cpus, _ = allocate_snb(txn, ctx, prepared, now)
    if cpus is None:
        return AllocationReply()  # a sidecar before its main container: an empty reply
    return _pack(prepared, cpus)


def _put_into_pool(
    txn: Txn,
    ctx: PolicyContext,
    entry: ContainerEntry,
    incr_by_req: bool,
    *,
    resized_from: ContainerEntry | None = None,
) -> None:
    try:
        put_allocations_and_adjust(txn, ctx, [entry], incr_by_req, resized_from=resized_from)
    except PolicyError as err:
        raise AllocationError(
            f"putAllocationsAndAdjustAllocationEntries failed with error: {err}", kind=err.kind
        ) from err


# -- reclaimed_cores (§7.4) --------------------------------------------------------------------


def _allocate_reclaimed(
    txn: Txn, ctx: PolicyContext, prepared: PreparedRequest, now: float
) -> AllocationReply:
    request = prepared.request
    state = txn.cpu
    if ctx.at_v0_5_47 and request.container_type is ContainerType.SIDECAR:
        # v0.5.47: a sidecar copies its main container, before any pool check (:214-216).
        return _allocate_reclaimed_sidecar(txn, prepared, now)
    existing = state.entry(request.pod_uid, request.container_name)
    # 2. The reclaim pool must exist and hold CPUs (the message for an empty pool is sic).
    reclaim = state.pool_cpus(RECLAIM_POOL)
    if reclaim is None:
        raise AllocationError(f"pool: {RECLAIM_POOL} is not ready")
    if reclaim.is_empty():
        raise AllocationError(f"pool: {RECLAIM_POOL} is not empty", kind=ErrorKind.SHORTAGE)
    if ctx.at_v0_5_47:
        # v0.5.47: a resize in place, the numa_hint, the per-NUMA split (policy.cpu.rnb_allocate).
        return _allocate_reclaimed_v0547(txn, prepared, existing, now)
    # 3–4. New or updated, the container follows the reclaim pool.
    if existing is None:
        phase = lifecycle.NEW
        entry = prepared.new_entry(now, InPool(RECLAIM_POOL), ramp_up=False, owner=RECLAIM_POOL)
    else:
        phase = container_phase(existing)
        entry = replace(
            _updated(existing, prepared),
            owner_pool_name=RECLAIM_POOL,
            placement=InPool(RECLAIM_POOL),
        )
    step = _fire(phase, "allocate_reclaimed", {})
    # 5. Stored; no pool adjustment.
    emit_step(txn, step, ContainerAllocated(entry))
    return _pack(prepared, reclaim)


def _allocate_reclaimed_sidecar(txn: Txn, prepared: PreparedRequest, now: float) -> AllocationReply:
    """v0.5.47's ``allocationSidecarHandler`` for a reclaimed sidecar
    (``policy_allocation_handlers.go:511-559``).

    1. Without a main container the reply is empty and nothing is stored.
    2. The sidecar takes its main container's owner and CPUs, and the annotations it lacks:
       its ``numa_hint`` too, so every later pool regeneration gives it its main container's
       part of the reclaim pool (``updateReclaimAllocationResultByPoolEntry`` reads the
       sidecar's own ``numa_hint``). A main container that follows the pool is followed by
       its part (the same CPUs now; the same rule at each regeneration).
    """
    request = prepared.request
    state = txn.cpu
    main = state.main_container_entry(request.pod_uid)
    if main is None:
        return AllocationReply()
    result, original = state.placement_cpus(main.placement)
    placement = main.placement if isinstance(main.placement, InPool) else OwnCPUs(result, original)
    existing = state.entry(request.pod_uid, request.container_name)
    phase = lifecycle.NEW if existing is None else container_phase(existing)
    step = _fire(phase, "allocate_reclaimed", {})
    entry = replace(
        prepared.new_entry(now, placement, ramp_up=False, owner=main.owner_pool_name),
        annotations={**(main.annotations or {}), **prepared.annotations},
    )
    emit_step(txn, step, ContainerAllocated(entry))
    return _pack(prepared, result)


def _allocate_reclaimed_v0547(
    txn: Txn, prepared: PreparedRequest, existing: ContainerEntry | None, now: float
) -> AllocationReply:
    state = txn.cpu
    resized = resize_reclaimed(state, prepared)
    if resized is not None:
        step = _fire(container_phase(resized), "allocate_reclaimed", {})
        emit_step(txn, step, ContainerAllocated(resized))
        return _pack(prepared, state.placement_cpus(resized.placement)[0])
    if existing is None:
        phase = lifecycle.NEW
        entry = prepared.new_entry(now, InPool(RECLAIM_POOL), ramp_up=False, owner=RECLAIM_POOL)
    else:
        phase = container_phase(existing)
        entry = _updated(existing, prepared)
    step = _fire(phase, "allocate_reclaimed", {})
    hint = prepared.request.hint
    nodes = None if hint is None else hint.nodes
    try:
        entry, shrinks = settle_reclaimed(state, entry, nodes, existing is None)
    except PolicyError as err:
        raise AllocationError(
            f"updateReclaimAllocationResultByPoolEntry failed: {err}", kind=err.kind
        ) from err
    emit_step(txn, step, ContainerAllocated(entry))
    # Non-actual containers shrunk off a NUMA this container took (after it, as the reference).
    txn.emit(*shrinks)
    return _pack(prepared, state.placement_cpus(entry.placement)[0])


# -- dedicated_cores (§7.5) --------------------------------------------------------------------


def allocate_numa_binding_cpus(
    state: CPUState,
    ctx: PolicyContext,
    request: int,
    hint: TopologyHint | None,
    exclusive: bool,
) -> CPUSet:
    """The CPUs of a dedicated NUMA-binding container on its hinted NUMA nodes (§7.5.1 step 2).

    Args:
        state: the CPU state to take from (without the container's old entry).
        ctx: the machine and the system reserve.
        request: CPUs requested (``req_int``).
        hint: the topology manager's hint from the request.
        exclusive: whole NUMA nodes (``numa_exclusive``).

    Returns:
        Exclusive: every available CPU of the hinted nodes; otherwise ``take_by_topology``.
        On (16,2,4) with reserve ``0,2``, hint ``[0]``, request 2: ``1,8-9`` / ``1,9``.

    Raises:
        AllocationError: "hint is nil", "hint is empty", a multi-NUMA hint for a non-exclusive
            container, "take cpu for NUMA not exclusive binding container failed with err:
            %v", or "results can't meet cpus request".
    """
    if hint is None:
        raise AllocationError("hint is nil")
    if not hint.nodes:
        raise AllocationError("hint is empty")
    if not exclusive and len(hint.nodes) > 1:
        raise AllocationError(NOT_EXCLUSIVE_TOO_LARGE)
    aligned = CPUSet.union_all(state.numa_available(n, ctx.reserved) for n in hint.nodes)
    if exclusive:
        result = aligned
    else:
        try:
            result = take_by_topology(ctx.topology, aligned, request)
        except SelectionError as err:
            raise AllocationError(
                f"take cpu for NUMA not exclusive binding container failed with err: {err}",
                kind=err.kind,
            ) from err
    if result.size() < request:
        raise AllocationError("results can't meet cpus request", kind=ErrorKind.SHORTAGE)
    return result


def _allocate_dedicated(
    txn: Txn, ctx: PolicyContext, prepared: PreparedRequest, now: float
) -> AllocationReply:
    if not prepared.numa_binding:
        raise AllocationError(NO_NUMA_BINDING)
    if prepared.request.container_type is ContainerType.SIDECAR:
        return _allocate_sidecar(txn, prepared, now)
    request = prepared.request
    state = txn.cpu
    existing = state.entry(request.pod_uid, request.container_name)
    phase = lifecycle.NEW if existing is None else container_phase(existing)
    step = _fire(phase, "allocate_dedicated", {})
    # 1. A re-allocation (the old entry holds too few CPUs) takes from the state without it.
    source = state
    if existing is not None:
        source = apply_cpu_event(state, ContainerRemoved(request.pod_uid, request.container_name))
    # 2. The CPUs on the hinted NUMA nodes (at v0.5.47 with the allocation options).
    if ctx.at_v0_5_47:
        result = _numa_binding_cpus_v0547(source, ctx, prepared)
    else:
        result = allocate_numa_binding_cpus(
            source, ctx, prepared.req_int, request.hint, prepared.numa_exclusive
        )
    # 3–4. Stored with the ramp-up flag (replacing the old entry), then the pools move away.
    entry = prepared.new_entry(now, OwnCPUs.of(result), ramp_up=True, owner=DEDICATED_OWNER)
    if ctx.at_v0_5_47:
        entry = _with_numa_hint(entry, ctx, prepared)
    emit_step(txn, step, ContainerAllocated(entry))
    try:
        adjust_allocation_entries(txn, ctx)
    except PolicyError as err:
        raise AllocationError(
            f"adjustAllocationEntries failed with error: {err}", kind=err.kind
        ) from err
    # 5. The reply.
    return _pack(prepared, result)


def _with_numa_hint(
    entry: ContainerEntry, ctx: PolicyContext, prepared: PreparedRequest
) -> ContainerEntry:
    """v0.5.47 records a single-node dedicated container's NUMA as ``numa_hint`` (module
    ``policy.cpu.dedicated_allocation``); the hint was checked by the allocation already."""
    hint = prepared.request.hint
    assert hint is not None  # the allocation refused a missing hint
    numa = numa_binding_hint_id(
        prepared.numa_exclusive,
        prepared.annotations,
        len(ctx.topology.numa_nodes()),
        hint,
        numa_number_key=ctx.reference.numa_number_annotation_key,
    )
    if numa is None:
        return entry
    return replace(
        entry, annotations={**(entry.annotations or {}), ANNOTATION_NUMA_HINT: str(numa)}
    )


def _numa_binding_cpus_v0547(
    state: CPUState, ctx: PolicyContext, prepared: PreparedRequest
) -> CPUSet:
    """v0.5.47's ``allocateNumaBindingCPUs`` (``policy.cpu.dedicated_allocation``), for the
    pod's aggregated request when its annotation is kept (``GetPodAggregatedRequestResource``:
    rounded up to whole CPUs), else the container's."""
    numas = ctx.topology.numa_nodes()
    aggregated = pod_aggregated_request(prepared.annotations)
    wanted = prepared.req_int if aggregated is None else math.ceil(aggregated)
    try:
        return allocate_numa_binding_cpus_v0547(
            ctx.topology,
            {n: state.numa_available(n, ctx.reserved) for n in numas},
            wanted,
            prepared.request.hint,
            exclusive=prepared.numa_exclusive,
            annotations=prepared.annotations,
            numa_number_key=ctx.reference.numa_number_annotation_key,
        )
    except PolicyError as err:
        raise AllocationError(str(err), kind=err.kind) from err


def _allocate_sidecar(txn: Txn, prepared: PreparedRequest, now: float) -> AllocationReply:
    request = prepared.request
    state = txn.cpu
    # 1. No main container yet: an empty reply, "wait for next reconcile".
    main = state.main_container_entry(request.pod_uid)
    if main is None:
        return AllocationReply()
    # 2. The main container's CPUs, current and original, copied.
    result, original = state.placement_cpus(main.placement)
    existing = state.entry(request.pod_uid, request.container_name)
    phase = lifecycle.NEW if existing is None else container_phase(existing)
    step = _fire(phase, "allocate_dedicated_sidecar", {})
    entry = prepared.new_entry(now, OwnCPUs(result, original), ramp_up=False, owner="")
    # 3. Stored; no pool adjustment.
    emit_step(txn, step, ContainerAllocated(entry))
    return _pack(prepared, result)


def _fire(phase: str, trigger: str, guards: dict[str, bool]) -> Step:
    step = fire(phase, trigger, guards)
    if step is None:
        # Every trigger Allocate fires has a transition for any guard answers.
        raise AllocationError(f"ramp_up: {trigger!r} from {phase!r} took no transition")
    return step
