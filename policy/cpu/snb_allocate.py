"""Allocate for shared_cores with NUMA binding (SNB) at the v0.5.47 reference level (spec
cpu-policy-v0.5.47 (a) "Allocation"; katalyst-core v0.5.47
``sharedCoresWithNUMABindingAllocationHandler``, ``allocateSharedNumaBindingCPUs``,
``allocationSidecarHandler``, ``policy_allocation_handlers.go:511-779``).

1. A sidecar copies its main container: its pool (as owner), its CPUs and the annotations it
   lacks. Without a main container the reply is completely empty and nothing is stored.
2. The hint must name exactly one NUMA: "hint is nil", "hint is empty", or "shared_cores with
   numa_binding container has request larger than 1 NUMA".
3. An in-place resize needs a stored SNB container: "no origion cpu allocation info for
   inplace update resize" (sic), "cannot change from non-snb to snb during inplace update".
4. The container is stored with annotation ``numa_hint: "<id>"`` and owner
   ``<base>-NUMA<id>``; it never ramps up. The pools are then re-sized with its request × 2
   counted into that pool (``policy.cpu.pool_engine``, ``policy.cpu.numa_pools``), and it
   follows the pool.
5. The reply is the whole pool cpuset.

Errors carry the reference's reasons; the caller adds the pod and container.
"""

from __future__ import annotations

from machines import ramp_up as lifecycle
from policy.cpu.context import PolicyContext
from policy.cpu.pool_engine import put_allocations_and_adjust
from policy.cpu.prepare import PreparedRequest
from policy.cpu.ramp_steps import container_phase, emit_step, fire
from policy.cpu.request import ContainerType
from policy.cpu.snb import NUMA_HINT_KEY, is_inplace_resizing, is_snb, numa_pool_name
from policy.cpu.txn import Txn
from policy.errors import ErrorKind, PolicyError
from policy.state.entries import ContainerEntry, InPool, OwnCPUs
from policy.state.events import ContainerAllocated
from policy.topology.cpuset import CPUSet

__all__ = ["SNBAllocationError", "allocate_snb"]


class SNBAllocationError(PolicyError):
    """An SNB Allocate refused; the message is the reference's reason."""

    kind = ErrorKind.REFUSED


def allocate_snb(
    txn: Txn, ctx: PolicyContext, prepared: PreparedRequest, now: float
) -> tuple[CPUSet | None, bool]:
    """Place one SNB container (module docstring), emitting its events into ``txn``.

    Args:
        txn: the decision in progress.
        ctx: the policy's settings (v0.5.47).
        prepared: the request after ``prepare_request``; an SNB one.
        now: the current time (the entry's ``init_timestamp``).

    Returns:
        ``(cpuset, stored)``: the CPUs to answer and whether anything was stored; ``None``
        for the empty reply of a sidecar whose main container is not there yet.

    Raises:
        SNBAllocationError: steps 2-3.
        PolicyError: the pools cannot be re-sized (the pool engine's message).
    """
    request = prepared.request
    state = txn.cpu
    # 1. Sidecars follow their main container.
    if request.container_type is ContainerType.SIDECAR:
        main = state.main_container_entry(request.pod_uid)
        if main is None:
            return None, False
        result, original = state.placement_cpus(main.placement)
        annotations = {**(main.annotations or {}), **prepared.annotations}
        placement = (
            main.placement if isinstance(main.placement, InPool) else OwnCPUs(result, original)
        )
        entry = prepared.new_entry(
            now, placement, ramp_up=False, owner=main.owner_pool_name, annotations=annotations
        )
        _store(txn, entry)
        return result, True
    # 2. One NUMA.
    hint = request.hint
    if hint is None:
        raise SNBAllocationError("hint is nil")
    if not hint.nodes:
        raise SNBAllocationError("hint is empty")
    if len(hint.nodes) > 1:
        raise SNBAllocationError(
            "shared_cores with numa_binding container has request larger than 1 NUMA"
        )
    numa = hint.nodes[0]
    # 3. A resize keeps an SNB container SNB.
    existing = state.entry(request.pod_uid, request.container_name)
    if is_inplace_resizing(prepared.annotations):
        if existing is None:
            raise SNBAllocationError("no origion cpu allocation info for inplace update resize")
        if not is_snb(existing.qos_level, existing.annotations):
            raise SNBAllocationError("cannot change from non-snb to snb during inplace update")
    # 4. Stored on its NUMA's pool, which is re-sized with it.
    annotations = {**prepared.annotations, NUMA_HINT_KEY: str(numa)}
    pool = numa_pool_name(annotations, numa)
    entry = prepared.new_entry(
        now, OwnCPUs.of(CPUSet()), ramp_up=False, owner=pool, annotations=annotations
    )
    _store(txn, entry)
    resized_from = existing if is_inplace_resizing(prepared.annotations) else None
    put_allocations_and_adjust(txn, ctx, [entry], incr_by_req=True, resized_from=resized_from)
    # 5. The whole pool.
    cpus = txn.cpu.pool_cpus(pool)
    if cpus is None:  # the engine sizes every pool with a positive demand
        raise SNBAllocationError(f"pool {pool} was not created", kind=ErrorKind.INTERNAL)
    return cpus, True


def _store(txn: Txn, entry: ContainerEntry) -> None:
    # SNB containers never ramp up: the machine's "pooled" transition, its guards answered.
    existing = txn.cpu.entry(*entry.key)
    phase = lifecycle.NEW if existing is None else container_phase(existing)
    step = fire(
        phase,
        "allocate_shared",
        {"pod_pending_or_unknown": False, "target_pool_missing": False},
    )
    if step is None:
        raise SNBAllocationError(
            f"ramp_up: 'allocate_shared' from {phase!r} took no transition",
            kind=ErrorKind.INTERNAL,
        )
    emit_step(txn, step, ContainerAllocated(entry))
