"""Reclaimed cores bound to a NUMA node (RNB) at v0.5.47: the three kinds of reclaimed
containers and the NUMA sets the hints and the allocation read (katalyst-core v0.5.47
``commonstate/state.go:251-300``, ``state/state.go:564-573``, ``state/util.go:216-247``).

The kinds, as the reference's predicates tell them apart:

* **RNB**: a ``reclaimed_cores`` container whose ``numa_binding`` is ``"true"``
  (``CheckReclaimedNUMABinding``);
* **actual RNB**: an RNB container whose entry carries the ``numa_hint`` state annotation,
  which only Allocate sets (``CheckReclaimedActualNUMABinding``): it holds the reclaim pool's
  CPUs of that NUMA node only;
* **non-actual**: every reclaimed container without ``numa_hint``, ordinary reclaimed pods
  included (``CheckReclaimedNonActualNUMABinding``): it holds the reclaim pool's CPUs of the
  NUMA nodes no actual RNB container is in.

A plain reclaimed container allocated with a one-NUMA hint also gets ``numa_hint`` (the
allocation does not check ``numa_binding``, ``policy.cpu.rnb_allocate``): it is then neither
actual RNB nor non-actual, and holds its NUMA's part of the pool.

"A container is in NUMA n" means what the reference's machine state says: its current CPUs
have some in n (``GenerateMachineStateFromPodEntriesByPolicy``); a NUMA's set of a kind is
therefore read from the containers' CPUs, never from their annotations alone. Reading costs
O(reclaimed containers) and runs only at v0.5.47, for reclaimed containers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Final

from policy.cpu.context import PolicyContext
from policy.state.advisor_section import NUMAHeadroomSet
from policy.state.cpu_state import ContainerKey, CPUState
from policy.state.entries import (
    ANNOTATION_NUMA_HINT,
    RECLAIM_POOL,
    ContainerEntry,
    requested_cores,
)
from policy.topology.cpuset import CPUSet

__all__ = [
    "NO_NUMA",
    "actual_rnb_numas",
    "headroom_event",
    "is_actual_rnb",
    "is_non_actual",
    "is_rnb",
    "non_actual_numas",
    "numa_hint_of",
    "numas_hosting",
    "reclaimed_entries",
    "reclaimed_requested",
]

#: ``commonstate.FakedNUMAID``: a container without ``numa_hint``.
NO_NUMA: Final = -1


def numa_hint_of(entry: ContainerEntry) -> int:
    """``GetSpecifiedNUMABindingNUMAID``: the NUMA of the ``numa_hint`` annotation, or
    :data:`NO_NUMA` without one."""
    text = (entry.annotations or {}).get(ANNOTATION_NUMA_HINT, "")
    return int(text) if text.isdigit() else NO_NUMA


def is_rnb(entry: ContainerEntry) -> bool:
    """``CheckReclaimedNUMABinding``: reclaimed with ``numa_binding``."""
    return entry.is_reclaimed() and entry.is_numa_binding()


def is_actual_rnb(entry: ContainerEntry) -> bool:
    """``CheckReclaimedActualNUMABinding``: RNB and placed on one NUMA (``numa_hint`` set)."""
    return is_rnb(entry) and numa_hint_of(entry) != NO_NUMA


def is_non_actual(entry: ContainerEntry) -> bool:
    """``CheckReclaimedNonActualNUMABinding``: reclaimed without ``numa_hint``."""
    return entry.is_reclaimed() and numa_hint_of(entry) == NO_NUMA


def reclaimed_entries(
    state: CPUState, ignore: Collection[ContainerKey] = ()
) -> Iterator[ContainerEntry]:
    """Every reclaimed container entry, by pod uid and container name (O(reclaimed)), but
    those in ``ignore``; sidecars included, as the reference's pod entries hold them."""
    for key in sorted(state.containers_owned_by(RECLAIM_POOL)):
        if key in ignore:
            continue
        entry = state.require_entry(*key)
        if entry.is_reclaimed():
            yield entry


def _numas_of(state: CPUState, entry: ContainerEntry) -> frozenset[int]:
    result, original = state.placement_cpus(entry.placement)
    bits = result.mask | original.mask
    return frozenset(n for n, m in state.topology.numa_masks().items() if m & bits)


def numas_hosting(
    state: CPUState, kind: str, ignore: Collection[ContainerKey] = ()
) -> frozenset[int]:
    """The NUMA nodes some reclaimed container of ``kind`` (``"actual"`` or
    ``"non_actual"``) is in, by its CPUs."""
    wanted = is_actual_rnb if kind == "actual" else is_non_actual
    out: set[int] = set()
    for entry in reclaimed_entries(state, ignore):
        if wanted(entry):
            out |= _numas_of(state, entry)
    return frozenset(out)


def actual_rnb_numas(state: CPUState, ignore: Collection[ContainerKey] = ()) -> frozenset[int]:
    """The NUMA nodes an actual RNB container is in."""
    return numas_hosting(state, "actual", ignore)


def non_actual_numas(state: CPUState, ignore: Collection[ContainerKey] = ()) -> frozenset[int]:
    """``GetFilteredNUMASet(CheckReclaimedActualNUMABinding)``: the NUMA nodes no actual RNB
    container is in (the non-actual NUMAs)."""
    return frozenset(state.topology.numa_masks()) - actual_rnb_numas(state, ignore)


def reclaimed_requested(
    state: CPUState,
    ctx: PolicyContext,
    kind: str,
    numa: int | None = None,
    ignore: Collection[ContainerKey] = (),
) -> float:
    """``GetRequestedQuantityFromPodEntries``: the requested cores of the reclaimed containers
    of ``kind`` (``"actual"``, ``"non_actual"`` or ``"any"``), of those in NUMA ``numa``
    when given (the reference then reads that NUMA's machine state)."""
    total = 0.0
    for entry in reclaimed_entries(state, ignore):
        if kind == "actual" and not is_actual_rnb(entry):
            continue
        if kind == "non_actual" and not is_non_actual(entry):
            continue
        if numa is not None and numa not in _numas_of(state, entry):
            continue
        total += requested_cores(entry, ctx.requested_millicpu)
    return total


def headroom_event(headroom: Mapping[int, float]) -> NUMAHeadroomSet:
    """The event that keeps sys-advisor's per-NUMA headroom (``SetNUMAHeadroom``)."""
    return NUMAHeadroomSet(tuple(sorted((int(n), float(c)) for n, c in headroom.items())))


def cpus_of_numas(state: CPUState, cpus: CPUSet, numas: Collection[int]) -> CPUSet:
    """``cpus`` in these NUMA nodes."""
    masks = state.topology.numa_masks()
    return CPUSet.from_mask(cpus.mask & sum(masks.get(n, 0) for n in set(numas)))
