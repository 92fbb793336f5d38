"""GetResourcesAllocation's reply pod by pod, each pod's part made once per version of the pod
(cpu-policy §10.1 step 2; kubelet lists every container every few seconds, wire.md §9.2).

A pod's part of the reply — each container's ``cpu`` allocation, by container name — is a
function of two things only:

* the pod's entries: an immutable map that the state replaces, in a new state, whenever any
  container of the pod changes (``policy.state.cpu_apply``), and shares otherwise. Of them the
  reply reads each container's name and placement: the pod's *shape* (:class:`PodShape`);
* the cpusets the placements follow: pool P's for ``InPool(P)``, the ramp-up cpuset for
  ``RAMPING`` (``OwnCPUs`` carries its own), read through ``CPUState.placement_cpus``.

So a listing keeps what it made (:class:`ListingParts`) and the next listing, handed it,
keeps the part of every pod whose entry map is the very object the part was made from, and the
allocations of every shape none of whose followed cpusets changed; it makes the rest, once per
shape (the thousands of one-container pods of pool ``share`` have one shape). What it returns
equals what it would make from nothing, because the state is immutable and a part depends on
nothing but what is compared; ``tests/policy/cpu/test_listing_parts.py`` checks that on random
histories.

A listing holds the parts of the pods it lists and nothing else: the part of a removed pod
goes with the last listing that had it (shapes are kept a little longer, pruned to those in
use when too many are not). Cost: one identity check per pod, plus the pods that changed and
one resolution per shape whose cpusets moved, plus a sort of the pod uids when pods came or
went.

A part also names the containers whose ``init_timestamp`` does not parse, since that too is a
function of the entries: the listing repairs them (§10.1) and need not look at the others.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import immutables

from machines.lifecycle import Step
from policy.cpu.ramp_steps import RampUpError, container_phase, fire
from policy.cpu.replies import ContainerCPUAllocation
from policy.cpu.timestamps import parse_qrm_time
from policy.state.cpu_state import ContainerKey, CPUState
from policy.state.entries import ContainerEntry, InPool, Placement, Ramping
from policy.topology.cpuset import CPUSet

__all__ = [
    "ListingParts",
    "PodAllocations",
    "PodPart",
    "PodShape",
    "finish_ramp_up_step",
    "list_pods",
    "parse_init_timestamp",
    "pod_allocations",
]

#: A pod's entries by container name, as the state stores them.
PodEntries = immutables.Map[str, ContainerEntry]

# A container's timestamp only changes when it is re-ramped or reset, so parsing each distinct
# string once keeps the listing cheap at thousands of containers. A pure function of the
# string: caching cannot change an answer.
parse_init_timestamp = functools.lru_cache(maxsize=1 << 15)(parse_qrm_time)


@dataclass(frozen=True, slots=True, eq=False)
class PodShape:
    """What a pod's part of the reply is made of: each container's name and placement.

    Compared by identity, so it is a fast dictionary key: a listing makes one per distinct
    value and the listings after it reuse it (``ListingParts.shapes``).

    Attributes:
        containers: ``(container name, placement)`` by name ascending.
        follows: the pools whose cpusets the placements are; ``None`` stands for the ramp-up
            cpuset.
    """

    containers: tuple[tuple[str, Placement], ...]
    follows: frozenset[str | None]


@dataclass(frozen=True, slots=True)
class PodPart:
    """What one listing knew of a pod.

    Attributes:
        containers: the pod's entries the part was made from (compared by identity).
        shape: their names and placements.
        unreadable: names of the containers whose ``init_timestamp`` does not parse.
        flagged: names of the containers with the ramp-up flag set.
        first_step_at: for a pod with ``flagged`` containers, the earliest ``init_timestamp``
            among those the ramp-up table gives no step until their transition period has
            passed, or ``-inf`` when one may take a step at any listing; None without.
    """

    containers: PodEntries
    shape: PodShape
    unreadable: tuple[str, ...]
    flagged: tuple[str, ...] = ()
    first_step_at: float | None = None


#: A pod's part of the reply: container name → its ``cpu`` allocation, by name ascending.
PodAllocations = Mapping[str, ContainerCPUAllocation]


@dataclass(frozen=True, slots=True)
class ListingParts:
    """The parts of one listing and the state it listed.

    Attributes:
        state: the CPU state listed.
        pods: pod uid → its part, by uid ascending; every pod of ``state`` with a container.
        pod_resources: pod uid → its allocations, by uid ascending: the reply's map.
            Read-only; pods of one shape share one mapping while its cpusets hold.
        allocations: each shape in use → its allocations in ``state``, and up to ``spare``
            shapes no longer in use (those of pods changed since the last full pass).
        shapes: the shapes made so far, by value (those in use, and a bounded few more).
        unreadable: ``(pod, container)`` of every container whose ``init_timestamp`` does not
            parse, ascending.
        ramping: the uids of the pods with ramp-flagged containers, ascending.
        spare: at most how many of ``allocations``' shapes are not in use.
    """

    state: CPUState
    pods: Mapping[str, PodPart]
    pod_resources: Mapping[str, PodAllocations]
    allocations: Mapping[PodShape, PodAllocations]
    shapes: Mapping[tuple[tuple[str, Placement], ...], PodShape]
    unreadable: tuple[ContainerKey, ...] = ()
    ramping: tuple[str, ...] = ()
    spare: int = 0


def list_pods(state: CPUState, previous: ListingParts | None = None) -> ListingParts:
    """Every pod's part of the listing of ``state``, reusing ``previous``'s parts that still hold.

    1. A pod whose entry map is the one ``previous`` saw keeps its part; any other pod gets a
       new part (its shape made once per distinct value).
    2. A shape keeps ``previous``'s allocations unless a cpuset it follows moved; else they
       are resolved in ``state``, once per shape.

    Args:
        state: the CPU state to list.
        previous: the parts of an earlier listing, of any state; None builds every part.

    Returns:
        The parts; equal to ``list_pods(state)`` whatever ``previous`` is.

    Raises:
        StateError: a placement follows a pool or a ramp-up cpuset the state does not have.
    """
    build = _PartBuilder(state, previous)
    if previous is not None:
        quick = _list_changed_pods(state, previous, build)
        if quick is not None:
            return quick
    pods = state.pods
    parts: dict[str, PodPart] = {}
    resources: dict[str, PodAllocations] = {}
    in_use = build.in_use
    unreadable: list[ContainerKey] = []
    ramping: list[str] = []
    for uid, kept in _kept_parts(pods, build.kept_parts):
        containers = pods[uid]
        # 1. The pod's part.
        part = kept
        if part is None or part.containers is not containers:
            if not containers:  # no container, nothing to list (as CPUState.entries)
                continue
            part = build.part(containers)
        parts[uid] = part
        # 2. Its allocations, through its shape.
        allocations = in_use.get(part.shape)
        if allocations is None:
            allocations = build.allocations(part.shape)
        resources[uid] = allocations
        if part.unreadable:
            unreadable.extend((uid, name) for name in part.unreadable)
        if part.flagged:
            ramping.append(uid)
    return ListingParts(
        state, parts, resources, in_use, build.shapes(), tuple(unreadable), tuple(ramping)
    )


def pod_allocations(state: CPUState, pod_uid: str) -> PodAllocations | None:
    """One pod's part of the listing of ``state``, made as :func:`list_pods` makes it.

    For forensics, which shows what one listing answered for one pod without listing them
    all (``qrmd.offline.explain``).

    Args:
        state: the CPU state listed.
        pod_uid: the pod.

    Returns:
        Its containers' allocations, by name ascending; None when the listing has no part for
        it (no container in ``state``).

    Raises:
        StateError: a placement follows a pool or a ramp-up cpuset the state does not have.
    """
    containers = state.pods.get(pod_uid)
    if not containers:
        return None
    build = _PartBuilder(state, None)
    return build.allocations(build.part(containers).shape)


def _list_changed_pods(
    state: CPUState, previous: ListingParts, build: _PartBuilder
) -> ListingParts | None:
    """``list_pods`` when ``state`` holds the pods ``previous`` listed and none of the cpusets
    ``previous``'s shapes follow moved: only the pods whose entry map changed are made again,
    into copies of ``previous``'s maps (which keep their order). None when it does not apply.
    """
    pods = state.pods
    kept = previous.pods
    if len(kept) != len(pods):
        return None
    if build.moved and any(not build.moved.isdisjoint(s.follows) for s in previous.allocations):
        return None
    get = pods.get
    changed = [uid for uid, part in kept.items() if part.containers is not get(uid)]
    if not changed:
        return dataclasses.replace(previous, state=state)
    spare = previous.spare + len(changed)  # each may leave its old shape unused
    if spare > _PartBuilder.SPARE_SHAPES or not all(get(uid) for uid in changed):
        return None  # a pod came and another went (or a map is empty): the full pass
    parts = dict(kept)
    resources = dict(previous.pod_resources)
    build.in_use.update(previous.allocations)
    for uid in changed:
        part = build.part(pods[uid])
        parts[uid] = part
        allocations = build.in_use.get(part.shape)
        resources[uid] = build.allocations(part.shape) if allocations is None else allocations
    again = set(changed)
    unreadable = [key for key in previous.unreadable if key[0] not in again]
    unreadable.extend((uid, name) for uid in changed for name in parts[uid].unreadable)
    ramping = [uid for uid in previous.ramping if uid not in again]
    ramping.extend(uid for uid in changed if parts[uid].flagged)
    return ListingParts(
        state,
        parts,
        resources,
        build.in_use,
        build.shapes(),
        tuple(sorted(unreadable)),
        tuple(sorted(ramping)),
        spare,
    )


def _kept_parts(
    pods: Mapping[str, PodEntries], kept: Mapping[str, PodPart]
) -> Iterable[tuple[str, PodPart | None]]:
    """Each pod uid of ``pods``, ascending, with its part in ``kept`` (None if it has none):
    ``kept``'s own order when it lists the same pods, else a sort."""
    if len(kept) == len(pods) and all(map(pods.__contains__, kept)):
        return kept.items()
    return ((uid, kept.get(uid)) for uid in sorted(pods.keys()))


def _moved(before: CPUState, after: CPUState) -> frozenset[str | None]:
    """What a placement can follow whose cpuset differs between two states (``None``: the
    ramp-up cpuset); a handful of pools, compared by value."""
    moved: set[str | None] = set()
    if before.pools is not after.pools:
        for name, cpus in after.pools.items():
            if before.pools.get(name) != cpus:
                moved.add(name)
        moved.update(name for name in before.pools if name not in after.pools)
    if before.ramp_cpus != after.ramp_cpus:
        moved.add(None)
    return frozenset(moved)


class _PartBuilder:
    """Makes the parts of one listing of ``state`` from ``previous``'s: one shape per distinct
    value, one allocation value per cpuset and one allocations mapping per shape, all
    immutable, so sharing them between pods and listings is safe."""

    #: Shapes kept beyond those in use before the table is pruned to them (bounds what
    #: removed pods leave behind; pruning costs one pass over the shapes in use).
    SPARE_SHAPES = 256

    def __init__(self, state: CPUState, previous: ListingParts | None) -> None:
        self.state = state
        self.in_use: dict[PodShape, PodAllocations] = {}
        self.by_cpuset: dict[CPUSet, ContainerCPUAllocation] = {}
        self.new_shapes: dict[tuple[tuple[str, Placement], ...], PodShape] = {}
        if previous is None:
            self.kept_parts: Mapping[str, PodPart] = {}
            self.kept_allocations: Mapping[PodShape, PodAllocations] = {}
            self.kept_shapes: Mapping[tuple[tuple[str, Placement], ...], PodShape] = {}
            self.moved: frozenset[str | None] = frozenset()
        else:
            self.kept_parts = previous.pods
            self.kept_allocations = previous.allocations
            self.kept_shapes = previous.shapes
            self.moved = _moved(previous.state, state)

    def part(self, containers: PodEntries) -> PodPart:
        """A new part for a pod's entries (not empty)."""
        names = sorted(containers.keys())
        key = tuple((name, containers[name].placement) for name in names)
        shape = self.new_shapes.get(key) or self.kept_shapes.get(key)
        if shape is None:
            shape = PodShape(key, frozenset(_followed(key)))
        self.new_shapes[key] = shape
        unreadable = tuple(
            name for name in names if parse_init_timestamp(containers[name].init_timestamp) is None
        )
        flagged = tuple(name for name in names if containers[name].ramp_up)
        if not flagged:
            return PodPart(containers, shape, unreadable)
        first = min(_first_step_at(containers[name]) for name in flagged)
        return PodPart(containers, shape, unreadable, flagged, first)

    def allocations(self, shape: PodShape) -> PodAllocations:
        """The allocations of ``shape``'s pods in ``state``: ``previous``'s unless a cpuset
        it follows moved."""
        found = None
        if self.moved.isdisjoint(shape.follows):
            found = self.kept_allocations.get(shape)
        if found is None:
            found = MappingProxyType(
                {
                    name: self._allocation(self.state.placement_cpus(placement)[0])
                    for name, placement in shape.containers
                }
            )
        self.in_use[shape] = found
        return found

    def shapes(self) -> Mapping[tuple[tuple[str, Placement], ...], PodShape]:
        """The shapes for the next listing to reuse: ``previous``'s and the new ones, pruned
        to those in use when too many are not."""
        if not self.new_shapes:
            shapes = self.kept_shapes
        else:
            shapes = {**self.kept_shapes, **self.new_shapes}
        if len(shapes) > len(self.in_use) + self.SPARE_SHAPES:
            return {shape.containers: shape for shape in self.in_use}
        return shapes

    def _allocation(self, cpus: CPUSet) -> ContainerCPUAllocation:
        allocation = self.by_cpuset.get(cpus)
        if allocation is None:
            allocation = ContainerCPUAllocation(cpus.size(), str(cpus))
            self.by_cpuset[cpus] = allocation
        return allocation


def _followed(containers: tuple[tuple[str, Placement], ...]) -> Iterator[str | None]:
    """What the placements' cpusets follow: a pool, or the ramp-up cpuset (``None``); own
    CPUs follow nothing."""
    for _, placement in containers:
        if isinstance(placement, InPool):
            yield placement.pool_name
        elif isinstance(placement, Ramping):
            yield None


def _first_step_at(entry: ContainerEntry) -> float:
    """When a ramp-flagged container may first take a lifecycle step at a listing (§10.1): at
    its ``init_timestamp`` if the ramp-up table gives ``finish_ramp_up`` no step from its
    phase until the transition period has passed, else at any time (``-inf``: an unreadable
    timestamp, a level without lifecycle, a phase the trigger is illegal in)."""
    started = parse_init_timestamp(entry.init_timestamp)
    if started is None:
        return -math.inf
    try:
        waits = finish_ramp_up_step(container_phase(entry), False) is None
    except RampUpError:
        waits = False
    return started if waits else -math.inf


@functools.cache
def finish_ramp_up_step(phase: str, transition_period_passed: bool) -> Step | None:
    """``finish_ramp_up``'s step from ``phase``: a pure function of the ramp-up table, which
    is constant, so it is asked once per answer rather than once per ramping container per
    listing. An illegal phase raises ``RampUpError`` every time (exceptions are not kept)."""
    return fire(phase, "finish_ramp_up", {"transition_period_passed": transition_period_passed})
