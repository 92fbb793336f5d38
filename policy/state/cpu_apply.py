"""Applying CPU events to a CPU state: pure, and O(size of the change) (spec cpu-policy §5;
DESIGN.md: the cost per request does not grow with the number of pods).

``apply_cpu_event(state, event)`` returns a new ``CPUState``; the old one is untouched and
shares every map the event does not change. The cost is that of the entries the event names
(a pod's containers for ``PodRemoved``, one entry otherwise) plus their CPUs; resizing a pool
or the ramp-up cpuset is one map update whatever the number of containers following it.

An event that does not fit raises ``StateError`` and yields no state, so the StateStore
refuses the commit. Beyond existence checks, apply keeps these invariants, which make the
derived views well defined:

* pod uids and container names are non-empty, and a pod uid is never a pool name (the
  reference keeps both in one map, §5.2);
* ``InPool(P)`` needs pool P to exist and ``owner_pool_name == P`` (§9.8 step 6, §11.8);
  a pool with containers placed in it cannot be removed;
* ``RAMPING`` needs a ramp-up cpuset and the ``ramp_up`` flag; clearing the flag freezes the
  container's CPUs as its own, as the reference's copy stays put until the pool engine moves it;
* dedicated containers hold their own CPUs (the machine-state indexes depend on it);
* every cpuset lies within the topology; quantities are finite.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import immutables

from policy.errors import StateError
from policy.state.cpu_indexes import CPUIndexes
from policy.state.cpu_state import CPUState, PodEntries
from policy.state.entries import ContainerEntry, InPool, OwnCPUs, Ramping
from policy.state.events import (
    ContainerAllocated,
    ContainerPlaced,
    ContainerRemoved,
    ContainerReRamped,
    CPUEvent,
    PodRemoved,
    PoolRemoved,
    PoolSet,
    RampCPUsSet,
    RampUpFinished,
    RequestQuantitySet,
    TimestampReset,
)
from policy.topology.cpuset import CPUSet

__all__ = ["allocate_all", "apply_cpu_event"]


def apply_cpu_event(state: CPUState, event: CPUEvent) -> CPUState:
    """The state after ``event``.

    Args:
        state: the state before.
        event: one CPU event.

    Returns:
        The new state (``state`` itself is unchanged).

    Raises:
        StateError: the event does not fit ``state``; the message names the pod, container or
            pool and why.
    """
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise StateError(f"{type(event).__name__} is not an event of the CPU state")
    return handler(state, event)


def allocate_all(state: CPUState, entries: Sequence[ContainerEntry]) -> CPUState:
    """The state after ``ContainerAllocated(entry)`` for each entry in turn, when none of
    their containers is in ``state`` yet (decoding a checkpoint).

    The state applying those events one by one gives, by construction: each entry gets the
    same check, the pod map is built in one mutation, and the indexes once from all the
    entries (``CPUIndexes.with_entries``) rather than a new state and new indexes per entry.

    Args:
        state: the state before (its pools and ramp-up cpuset already set: entries refer to
            them).
        entries: the new entries, no two for the same container.

    Returns:
        The new state (``state`` itself is unchanged).

    Raises:
        StateError: an entry does not fit (the message ``ContainerAllocated`` gives), or its
            container already has an entry.
    """
    added: dict[str, Any] = {}
    # The entries of a node share a handful of placement values (codec_fast decodes each
    # distinct one once): the placement's part of the check, which depends only on the
    # placement and this state, runs once per distinct placement object.
    # (Own CPUs also pass the dedicated_cores check whatever the entry's QoS.)
    fitting: dict[int, OwnCPUs] = {}
    pools, pods_before, isfinite = state.pools, state.pods, math.isfinite
    for entry in entries:
        placement = entry.placement
        pod_uid, name = entry.pod_uid, entry.container_name
        if id(placement) not in fitting:
            _check_entry(state, entry)
            if type(placement) is OwnCPUs:
                fitting[id(placement)] = placement  # held: its id stays its own
        elif not (pod_uid and name and pod_uid not in pools and isfinite(entry.request_quantity)):
            _check_identity(state, entry)  # its checks, inlined above: raises, naming which
        containers = added.get(pod_uid)
        if containers is None:
            containers = added[pod_uid] = pods_before.get(pod_uid, _NO_CONTAINERS).mutate()
        if name in containers:
            raise StateError(f"{_who(entry)}: the container already has an entry")
        containers[name] = entry
    pods = state.pods.mutate()
    for pod_uid, containers in added.items():
        pods[pod_uid] = containers.finish()
    return _evolve(
        state,
        pods=pods.finish(),
        indexes=state.indexes.with_entries(entries, state.topology.numa_masks()),
    )


_NO_CONTAINERS: immutables.Map[str, ContainerEntry] = immutables.Map()


# -- checks ------------------------------------------------------------------------------


def _who(entry: ContainerEntry) -> str:
    return f"pod: {entry.pod_uid}, container: {entry.container_name}"


def _check_cpus(state: CPUState, cpus: CPUSet, what: str) -> None:
    outside = cpus.mask & ~state.topology.cpu_details.mask
    if outside:
        raise StateError(
            f"{what}: cpuset {cpus} has CPUs {CPUSet.from_mask(outside)} "
            f"that the topology does not have"
        )


def _check_identity(state: CPUState, entry: ContainerEntry) -> None:
    """The checks of an entry that do not look at its placement (``_check_entry`` runs them
    first)."""
    if not entry.pod_uid or not entry.container_name:
        raise StateError(
            f"a container entry needs a pod uid and a container name, got "
            f"pod_uid={entry.pod_uid!r}, container_name={entry.container_name!r}"
        )
    if entry.pod_uid in state.pools:
        raise StateError(f"{_who(entry)}: pod uid is the name of a pool")
    if not math.isfinite(entry.request_quantity):
        raise StateError(f"{_who(entry)}: request_quantity {entry.request_quantity} is not finite")


def _check_entry(state: CPUState, entry: ContainerEntry) -> None:
    _check_identity(state, entry)
    placement = entry.placement
    if isinstance(placement, InPool):
        if placement.pool_name not in state.pools:
            raise StateError(
                f"{_who(entry)}: placed in pool {placement.pool_name}, which does not exist"
            )
        if entry.owner_pool_name != placement.pool_name:
            raise StateError(
                f"{_who(entry)}: placed in pool {placement.pool_name} "
                f"but owned by {entry.owner_pool_name!r}"
            )
    elif isinstance(placement, Ramping):
        if state.ramp_cpus is None:
            raise StateError(f"{_who(entry)}: placed on the ramp-up cpuset, which is not set")
        if not entry.ramp_up:
            raise StateError(f"{_who(entry)}: placed on the ramp-up cpuset without ramp_up")
    elif isinstance(placement, OwnCPUs):
        # The message is only built for CPUs outside the topology: every allocation, live or
        # replayed, passes here, and formatting it each time was a third of the check.
        topology_mask = state.topology.cpu_details.mask
        if placement.result.mask & ~topology_mask:
            _check_cpus(state, placement.result, f"{_who(entry)} allocation_result")
        if placement.original.mask & ~topology_mask:
            _check_cpus(state, placement.original, f"{_who(entry)} original_allocation_result")
    else:
        raise StateError(f"{_who(entry)}: {placement!r} is not a placement")
    if entry.is_dedicated() and not isinstance(placement, OwnCPUs):
        raise StateError(f"{_who(entry)}: a dedicated_cores container must hold its own CPUs")


# -- entry updates -------------------------------------------------------------------------


def _evolve(
    state: CPUState,
    *,
    pods: PodEntries | None = None,
    pools: immutables.Map[str, CPUSet] | None = None,
    ramp_cpus: CPUSet | None = None,
    indexes: CPUIndexes | None = None,
) -> CPUState:
    # Cheaper than dataclasses.replace, which this hot path would call for every event.
    return CPUState(
        state.topology,
        state.pods if pods is None else pods,
        state.pools if pools is None else pools,
        state.ramp_cpus if ramp_cpus is None else ramp_cpus,
        state.indexes if indexes is None else indexes,
    )


def _put(state: CPUState, old: ContainerEntry | None, new: ContainerEntry) -> CPUState:
    _check_entry(state, new)
    containers = state.pods.get(new.pod_uid, immutables.Map())
    return _evolve(
        state,
        pods=state.pods.set(new.pod_uid, containers.set(new.container_name, new)),
        indexes=state.indexes.replaced(new.key, old, new, state.topology.numa_masks()),
    )


def _changed(state: CPUState, pod_uid: str, container_name: str, **fields: Any) -> CPUState:
    old = state.require_entry(pod_uid, container_name)
    return _put(state, old, replace(old, **fields))


def _allocated(state: CPUState, event: ContainerAllocated) -> CPUState:
    entry = event.entry
    return _put(state, state.entry(entry.pod_uid, entry.container_name), entry)


def _placed(state: CPUState, event: ContainerPlaced) -> CPUState:
    return _changed(
        state,
        event.pod_uid,
        event.container_name,
        placement=event.placement,
        owner_pool_name=event.owner_pool_name,
    )


def _ramp_up_finished(state: CPUState, event: RampUpFinished) -> CPUState:
    old = state.require_entry(event.pod_uid, event.container_name)
    if not old.ramp_up:
        raise StateError(f"{_who(old)}: ramp-up already finished")
    placement = old.placement
    if isinstance(placement, Ramping):
        # The reference's entry keeps its copy of the ramp-up CPUs; it no longer follows them.
        assert state.ramp_cpus is not None  # guaranteed by _check_entry when it was placed
        placement = OwnCPUs.of(state.ramp_cpus)
    return _put(state, old, replace(old, ramp_up=False, placement=placement))


def _re_ramped(state: CPUState, event: ContainerReRamped) -> CPUState:
    old = state.require_entry(event.pod_uid, event.container_name)
    if not old.is_shared():
        raise StateError(
            f"{_who(old)}: only shared_cores containers re-ramp, not {old.qos_level!r}"
        )
    _check_cpus(state, event.pooled_cpus, f"{_who(old)} pooled cpus")
    new = replace(
        old,
        ramp_up=True,
        owner_pool_name="",
        init_timestamp=event.init_timestamp,
        placement=state.ramp_placement(event.pooled_cpus),
    )
    return _put(state, old, new)


def _timestamp_reset(state: CPUState, event: TimestampReset) -> CPUState:
    return _changed(state, event.pod_uid, event.container_name, init_timestamp=event.init_timestamp)


def _quantity_set(state: CPUState, event: RequestQuantitySet) -> CPUState:
    return _changed(
        state, event.pod_uid, event.container_name, request_quantity=event.request_quantity
    )


def _drop(state: CPUState, old: ContainerEntry) -> CPUState:
    containers = state.pods[old.pod_uid].delete(old.container_name)
    pods = state.pods.set(old.pod_uid, containers) if containers else state.pods.delete(old.pod_uid)
    return _evolve(
        state,
        pods=pods,
        indexes=state.indexes.replaced(old.key, old, None, state.topology.numa_masks()),
    )


def _container_removed(state: CPUState, event: ContainerRemoved) -> CPUState:
    return _drop(state, state.require_entry(event.pod_uid, event.container_name))


def _pod_removed(state: CPUState, event: PodRemoved) -> CPUState:
    containers = state.pods.get(event.pod_uid)
    if containers is None:
        raise StateError(f"pod: {event.pod_uid} has no entries in state")
    for entry in list(containers.values()):
        state = _drop(state, entry)
    return state


# -- pools and the ramp-up cpuset ----------------------------------------------------------


def _pool_set(state: CPUState, event: PoolSet) -> CPUState:
    if not event.name:
        raise StateError("a pool needs a name")
    if event.name in state.pods:
        raise StateError(f"pool: {event.name} has the uid of a pod in state")
    _check_cpus(state, event.cpuset, f"pool: {event.name}")
    return _evolve(state, pools=state.pools.set(event.name, event.cpuset))


def _pool_removed(state: CPUState, event: PoolRemoved) -> CPUState:
    if event.name not in state.pools:
        raise StateError(f"pool: {event.name} does not exist")
    placed = state.indexes.in_pool.get(event.name, 0)
    if placed:
        raise StateError(
            f"pool: {event.name} still has {placed} containers placed in it; "
            f"place them elsewhere first"
        )
    return _evolve(state, pools=state.pools.delete(event.name))


def _ramp_cpus_set(state: CPUState, event: RampCPUsSet) -> CPUState:
    _check_cpus(state, event.cpuset, "ramp-up cpuset")
    return _evolve(state, ramp_cpus=event.cpuset)


_HANDLERS: dict[type[CPUEvent], Callable[[CPUState, Any], CPUState]] = {
    ContainerAllocated: _allocated,
    ContainerPlaced: _placed,
    RampUpFinished: _ramp_up_finished,
    ContainerReRamped: _re_ramped,
    TimestampReset: _timestamp_reset,
    RequestQuantitySet: _quantity_set,
    ContainerRemoved: _container_removed,
    PodRemoved: _pod_removed,
    PoolSet: _pool_set,
    PoolRemoved: _pool_removed,
    RampCPUsSet: _ramp_cpus_set,
}
