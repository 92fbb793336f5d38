"""Allocate for reclaimed cores at v0.5.47: the ``numa_hint`` of a container bound to one NUMA
node, and the per-NUMA split of the reclaim pool (katalyst-core v0.5.47
``reclaimedCoresAllocationHandler``, ``policy_allocation_handlers.go:207-348``;
``updateReclaimAllocationResultByPoolEntry``, :2101-2160).

The rule, in the reference's order (every reclaimed container at v0.5.47, whatever
``--enable-reclaim-numa-binding`` says: the allocation checks neither the flag nor
``numa_binding``; the kinds are ``policy.cpu.rnb``'s):

1. The reclaim pool must exist and hold CPUs (as at v0.5.3).
2. An in-place resize (``pod.kubernetes.io/inplace-update-resizing: "true"``) needs the
   stored container, keeps its kind (RNB or not) and, for RNB, its NUMA nodes: the hint
   must name exactly the NUMA nodes of its CPUs. Only the stored request changes; the reply
   is its CPUs.
3. Otherwise the non-actual NUMAs are read first (the NUMA nodes no actual RNB container is
   in). An existing container takes the request's level and annotations (so a stored
   ``numa_hint`` is dropped, as ``updateAllocationInfoByReq`` drops it); a new one gets
   ``numa_hint`` when its hint names one NUMA node h and either no non-actual reclaimed
   container is in h, or the non-actual NUMAs are not exactly {h}.
4. Its CPUs: with ``numa_hint``, the reclaim pool's CPUs in that NUMA node (none there is an
   error); without, the pool's CPUs in the non-actual NUMAs (``InPool("reclaim", numas)``;
   the whole pool, plain ``InPool("reclaim")``, while every NUMA is non-actual).
5. A container with ``numa_hint`` that takes a non-actual NUMA shrinks every non-actual
   reclaimed container to the NUMAs left. The reference tests and subtracts with the
   container's *CPU* ids where NUMA ids are meant (``nonReclaimActualBindingNUMAs``
   ``.Intersection(allocationInfo.AllocationResult)``, :300-303), and so does this step: on
   the 16-CPU 4-NUMA node, a container on NUMA 2 (CPUs 4,5,12,13) shrinks nothing, one on
   NUMA 0 holding CPU 1 drops NUMA 1 from the others. The next pool regeneration
   (:func:`reclaimed_placement`) puts them right.

Every regeneration of the pools (``policy.cpu.pool_apply``, the advisor's application)
places each reclaimed container by step 4 again, with the non-actual NUMAs of the state
before it (``applyPoolsAndIsolatedInfo`` :1117-1118, ``applyBlocks``
``policy_advisor_handler.go:1047``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Final

from policy.cpu.prepare import PreparedRequest
from policy.cpu.rnb import (
    NO_NUMA,
    cpus_of_numas,
    is_non_actual,
    non_actual_numas,
    numa_hint_of,
    numas_hosting,
    reclaimed_entries,
)
from policy.cpu.snb import is_inplace_resizing, numas_of
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import ANNOTATION_NUMA_HINT, RECLAIM_POOL, ContainerEntry, InPool
from policy.state.events import ContainerPlaced, CPUEvent
from policy.topology.cpuset import CPUSet

__all__ = [
    "RNBAllocationError",
    "reclaimed_placement",
    "resize_reclaimed",
    "settle_reclaimed",
]

#: The refusals of an in-place resize (``policy_allocation_handlers.go:238-252``).
RESIZE_WITHOUT_ENTRY: Final = (
    "pod request to cpu inplace update resize, but origin allocationInfo is nil"
)
RESIZE_CHANGES_KIND: Final = (
    "can not change qos form non-rnb to rnb or vice versa during inplace update resize"
)
RESIZE_CHANGES_NUMA: Final = "can not change the binding numa during inplace update resize"


class RNBAllocationError(PolicyError):
    """A reclaimed allocation at v0.5.47 refused; the message is the reference's."""

    kind = ErrorKind.REFUSED


def reclaimed_placement(
    entry: ContainerEntry,
    reclaim: CPUSet,
    non_actual: Collection[int],
    state: CPUState,
) -> InPool:
    """Where a reclaimed container's CPUs come from, given the reclaim pool's new CPUs and
    the non-actual NUMAs (step 4).

    Raises:
        RNBAllocationError: its ``numa_hint`` NUMA holds none of the pool's CPUs (the
            reference: "specified numa ... not found in topologyAwareAssignments").
    """
    numa = numa_hint_of(entry)
    if numa != NO_NUMA:
        if cpus_of_numas(state, reclaim, (numa,)).is_empty():
            raise RNBAllocationError(
                f"get actual NUMA binding result: pod: {entry.pod_namespace}/{entry.pod_name} "
                f"container: {entry.container_name} is reclaimed_cores with numa_binding "
                f"specified numa: {numa} not found in topologyAwareAssignments of {reclaim}"
            )
        return InPool(RECLAIM_POOL, frozenset((numa,)))
    numas = frozenset(non_actual)
    if numas >= frozenset(state.topology.numa_masks()):
        return InPool(RECLAIM_POOL)  # every NUMA: the whole pool, as before v0.5.47
    return InPool(RECLAIM_POOL, numas)


def resize_reclaimed(state: CPUState, prepared: PreparedRequest) -> ContainerEntry | None:
    """Step 2: the entry of an in-place resize, or None when the request is no resize.

    Raises:
        RNBAllocationError: no stored container, a change of kind or of NUMA nodes.
    """
    if not is_inplace_resizing(prepared.annotations):
        return None
    request = prepared.request
    existing = state.entry(request.pod_uid, request.container_name)
    if existing is None:
        raise RNBAllocationError(RESIZE_WITHOUT_ENTRY)
    if prepared.numa_binding != existing.is_numa_binding():
        raise RNBAllocationError(RESIZE_CHANGES_KIND)
    if existing.is_numa_binding():
        hinted = frozenset(request.hint.nodes) if request.hint is not None else frozenset()
        result, _ = state.placement_cpus(existing.placement)
        if hinted != numas_of(state.topology.numa_masks(), result):
            raise RNBAllocationError(RESIZE_CHANGES_NUMA)
    return replace(existing, request_quantity=prepared.req_float)


def settle_reclaimed(
    state: CPUState, entry: ContainerEntry, hint_nodes: tuple[int, ...] | None, is_new: bool
) -> tuple[ContainerEntry, list[CPUEvent]]:
    """Steps 3-5 for a container about to be stored: its ``numa_hint`` (new containers),
    its placement, and the shrinking of the non-actual containers. Pure.

    Args:
        state: the CPU state before the container (the reclaim pool exists, not empty).
        entry: the new or updated entry (its placement and owner are replaced here).
        hint_nodes: the NUMA nodes of the request's hint, None without one.
        is_new: whether no entry was stored for the container.

    Returns:
        The entry to store, and the ``ContainerPlaced`` events that shrink the non-actual
        containers (to emit after it).

    Raises:
        RNBAllocationError: the ``numa_hint`` NUMA holds none of the reclaim pool's CPUs.
    """
    reclaim = state.pool_cpus(RECLAIM_POOL)
    assert reclaim is not None
    # 3. The non-actual NUMAs before the container, and a new container's numa_hint.
    non_actual = non_actual_numas(state)
    if is_new:
        numa = _hinted_numa(state, hint_nodes, non_actual)
        if numa != NO_NUMA:
            annotations = {**(entry.annotations or {}), ANNOTATION_NUMA_HINT: str(numa)}
            entry = replace(entry, annotations=annotations)
    # 4. Its part of the reclaim pool.
    placement = reclaimed_placement(entry, reclaim, non_actual, state)
    entry = replace(entry, owner_pool_name=RECLAIM_POOL, placement=placement)
    events: list[CPUEvent] = []
    cpus = state.placement_cpus(placement)[0]
    # 5. Shrink the non-actual containers, with the reference's NUMA-id/CPU-id mix (module
    #    docstring).
    cpu_ids = frozenset(cpus.ids())
    if numa_hint_of(entry) != NO_NUMA and non_actual & cpu_ids:
        left = non_actual - cpu_ids
        for other in reclaimed_entries(state, ignore={entry.key}):
            if not is_non_actual(other):
                continue
            moved = reclaimed_placement(other, reclaim, left, state)
            if moved != other.placement:
                events.append(
                    ContainerPlaced(other.pod_uid, other.container_name, moved, RECLAIM_POOL)
                )
    return entry, events


def _hinted_numa(
    state: CPUState, hint_nodes: tuple[int, ...] | None, non_actual: frozenset[int]
) -> int:
    """The NUMA a new container's ``numa_hint`` names, or :data:`NO_NUMA` (step 3): its
    one-NUMA hint h, when no non-actual container is in h or the non-actual NUMAs are not
    exactly {h}."""
    if hint_nodes is None or len(hint_nodes) != 1:
        return NO_NUMA
    numa = hint_nodes[0]
    if numa not in numas_hosting(state, "non_actual") or non_actual != frozenset((numa,)):
        return numa
    return NO_NUMA
