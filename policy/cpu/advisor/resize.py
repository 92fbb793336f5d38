"""How much an in-place resize grows a pool while sys-advisor sizes the pools (Katalyst v0.5.47).

With the advisor on (and not degraded) v0.5.47 takes the pools' sizes from their current
cpusets and, for an in-place resize of a shared container, adds only what the pod grew by
(``calcPoolResizeRequest``, ``policy_allocation_handlers.go:885-970``, called from
``putAllocationsAndAdjustAllocationEntriesResizeAware`` :819-853); the advisor trims the pools
later. Without the advisor, or outside a resize, the container's demand is added instead
(twice its request for shared cores with NUMA binding, ``policy.cpu.snb``).

1. The pod's aggregated request before: the ``pod-aggregated-requests`` annotation of the
   stored entry, else the sum of the pod's stored containers' requests.
2. After: that annotation of the resized entry, else the same sum with the new request.
3. The growth is after − before, and 0 when the pod shrinks (the advisor shrinks the pool).
4. For shared cores with NUMA binding the pool is ``<base>-NUMA<numa>`` of the NUMA the
   request names; when that NUMA differs from the stored one the growth is the whole
   aggregated request (the new pool takes the pod, the advisor shrinks the old one).
   Any other shared container grows the pool it names.

The caller rounds the growth up (``math.Ceil``), as the reference does.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.cpu.snb import is_snb, numa_of_pool, pod_aggregated_request, snb_numa_of, target_pool
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import ContainerEntry

__all__ = ["PoolGrowth", "ResizeError", "resize_growth"]


class ResizeError(PolicyError):
    """The resized container names no pool; the message is the reference's."""

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class PoolGrowth:
    """The pool an in-place resize grows and by how many cores (not yet rounded)."""

    pool: str
    cores: float


def resize_growth(state: CPUState, origin: ContainerEntry, resized: ContainerEntry) -> PoolGrowth:
    """Steps 1-4 of the module text.

    Args:
        state: the CPU state with the resized entry already stored (the reference stores it
            before sizing, so its new request counts in the pod's sum).
        origin: the entry before the resize.
        resized: the entry with the new request and annotations.

    Returns:
        The pool and the growth in cores.

    Raises:
        ResizeError: "get poolName failed for NS/NAME/C" when no pool can be named, or "failed
            to get origin target NUMA" / "failed to get target NUMA" for a shared container
            with NUMA binding whose NUMA cannot be told.
    """
    before = pod_aggregated_request(origin.annotations)
    if before is None:
        before = _pod_sum(state, origin, replacing=origin)
    after = pod_aggregated_request(resized.annotations)
    if after is None:
        after = _pod_sum(state, origin, replacing=None)
    growth = max(after - before, 0.0)
    pool = resized.pool_name()
    if is_snb(resized.qos_level, resized.annotations):
        origin_numa = _target_numa(origin)
        if origin_numa is None:
            raise ResizeError("failed to get origin target NUMA")
        numa = _target_numa(resized)
        if numa is None:
            raise ResizeError("failed to get target NUMA")
        if origin_numa != numa:
            growth = after
        pool = target_pool(resized)
    if not pool:
        raise ResizeError(
            f"get poolName failed for {resized.pod_namespace}/{resized.pod_name}/"
            f"{resized.container_name}"
        )
    return PoolGrowth(pool, growth)


def _pod_sum(state: CPUState, origin: ContainerEntry, *, replacing: ContainerEntry | None) -> float:
    """The stored requests of the origin's pod; ``replacing`` stands in for its own entry."""
    total = 0.0
    for entry in state.entries():
        if entry.pod_uid != origin.pod_uid:
            continue
        if replacing is not None and entry.container_name == replacing.container_name:
            total += replacing.request_quantity
        else:
            total += entry.request_quantity
    return total


def _target_numa(entry: ContainerEntry) -> int | None:
    """``GetSharedNUMABindingTargetNuma``: the NUMA of the pool the entry is in, else of the
    NUMA hint it names."""
    numa = numa_of_pool(entry.owner_pool_name)
    return numa if numa is not None else snb_numa_of(entry)
