"""What changed between two states: containers added, removed or moved, pools resized.

``diff`` compares the state at two points (the difference of two ``state`` answers) and names,
for each change, the records between the points that made it: a record is responsible for a
container when that container's view (pool, placement, cpuset, QoS, ramp-up flag) differs
before and after it, and for a pool when the pool's cpuset does. Per record only what it can
have touched is compared — the pods whose entries it replaced, the containers of the pools it
resized, the ramping containers when it moved the ramp-up cpuset — so a diff over a long
range costs per record what the record changed, not the node's pod count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from policy.state.cpu_state import CPUState
from policy.state.entries import InPool
from policy.state.sections import BALANCE_SECTION, CPU_SECTION, State
from policy.topology.cpuset import CPUSet
from qrmd.offline.state_view import ContainerView, container_view, container_views

__all__ = [
    "ContainerChange",
    "PoolChange",
    "StateDiff",
    "container_changes",
    "diff_states",
    "pool_changes",
    "touched_containers",
]

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class ContainerChange:
    """A container whose view differs: ``added``, ``removed`` or ``moved`` (anything else
    about it changed: CPUs, pool, placement, ramp-up flag)."""

    key: Key
    change: str
    before: ContainerView | None
    after: ContainerView | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        view = self.after or self.before
        assert view is not None
        return {
            "pod_uid": self.key[0],
            "pod": view.pod,
            "container": self.key[1],
            "change": self.change,
            "cpuset_before": None if self.before is None else str(self.before.cpuset),
            "cpuset_after": None if self.after is None else str(self.after.cpuset),
            "placement_before": None if self.before is None else self.before.placement,
            "placement_after": None if self.after is None else self.after.placement,
        }


@dataclass(frozen=True, slots=True)
class PoolChange:
    """A pool ``added``, ``removed`` or ``resized``."""

    name: str
    change: str
    before: CPUSet | None
    after: CPUSet | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "pool": self.name,
            "change": self.change,
            "cpuset_before": None if self.before is None else str(self.before),
            "cpuset_after": None if self.after is None else str(self.after),
            "size_before": None if self.before is None else len(self.before),
            "size_after": None if self.after is None else len(self.after),
        }


def _kind(before: object, after: object, changed: str) -> str:
    if before is None:
        return "added"
    if after is None:
        return "removed"
    return changed


def container_changes(
    before: CPUState, after: CPUState, keys: Iterable[Key] | None = None
) -> list[ContainerChange]:
    """The containers whose views differ, among ``keys`` (None: every container of both)."""
    if keys is None:
        old, new = container_views(before), container_views(after)
        candidates: Iterable[Key] = old.keys() | new.keys()
    else:
        old = {k: v for k in keys if (v := container_view(before, k)) is not None}
        new = {k: v for k in keys if (v := container_view(after, k)) is not None}
        candidates = set(keys)
    changes = []
    for key in sorted(candidates):
        was, now = old.get(key), new.get(key)
        if was != now:
            changes.append(ContainerChange(key, _kind(was, now, "moved"), was, now))
    return changes


def pool_changes(before: CPUState, after: CPUState) -> list[PoolChange]:
    """The pools created, deleted or resized."""
    if before.pools is after.pools:
        return []
    changes = []
    for name in sorted(set(before.pools.keys()) | set(after.pools.keys())):
        was, now = before.pools.get(name), after.pools.get(name)
        if was != now:
            changes.append(PoolChange(name, _kind(was, now, "resized"), was, now))
    return changes


def touched_containers(before: CPUState, after: CPUState) -> set[Key]:
    """The containers one step can have changed (module docstring); a superset, never less."""
    keys: set[Key] = set()
    if before.pods is not after.pods:
        for uid in set(before.pods.keys()) | set(after.pods.keys()):
            old, new = before.pods.get(uid), after.pods.get(uid)
            if old is new:
                continue
            keys.update((uid, name) for name in (old or {}))
            keys.update((uid, name) for name in (new or {}))
    for change in pool_changes(before, after):
        keys.update(before.containers_owned_by(change.name))
        keys.update(after.containers_owned_by(change.name))
        keys.update(_pooled_in(before, change.name))
        keys.update(_pooled_in(after, change.name))
    if before.ramp_cpus != after.ramp_cpus:
        keys.update(before.ramping_containers())
        keys.update(after.ramping_containers())
    return keys


def _pooled_in(cpu: CPUState, pool: str) -> set[Key]:
    # containers_owned_by is by owner pool; a container may follow a pool other than its owner
    # (reclaimed and sidecar placements), so placements are checked too — only when a pool
    # changed, which is rare next to the records that touch one pod.
    return {
        e.key
        for e in cpu.entries()
        if isinstance(e.placement, InPool) and e.placement.pool_name == pool
    }


@dataclass(slots=True)
class StateDiff:
    """The difference between two states, each change with the records responsible."""

    containers: list[ContainerChange] = field(default_factory=list)
    pools: list[PoolChange] = field(default_factory=list)
    container_records: dict[Key, list[int]] = field(default_factory=dict)
    pool_records: dict[str, list[int]] = field(default_factory=dict)
    balance_records: list[int] = field(default_factory=list)
    balance_changed: bool = False
    #: Every other section (the advisor's, later ones) that differs → the records that changed it.
    sections: dict[str, list[int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "containers": [
                {**c.to_json(), "records": self.container_records.get(c.key, [])}
                for c in self.containers
            ],
            "pools": [
                {**p.to_json(), "records": self.pool_records.get(p.name, [])} for p in self.pools
            ],
            "balance": {"changed": self.balance_changed, "records": self.balance_records},
            "sections": self.sections,
        }


def diff_states(start: State, end: State, steps: Iterable[tuple[int, State, State]]) -> StateDiff:
    """What differs between ``start`` and ``end``, and which of ``steps`` made each change.

    Args:
        start: the state at the first point.
        end: the state at the second point.
        steps: ``(seq, before, after)`` of every record between them, in order.

    Returns:
        The diff; a change that records made and undid inside the range is not in it.
    """
    result = StateDiff(
        containers=container_changes(start.cpu, end.cpu),
        pools=pool_changes(start.cpu, end.cpu),
        balance_changed=start.balance != end.balance,
    )
    others = [
        name
        for name in sorted(set(start.sections.keys()) | set(end.sections.keys()))
        if name not in (CPU_SECTION, BALANCE_SECTION)
        and start.sections.get(name) != end.sections.get(name)
    ]
    result.sections = {name: [] for name in others}
    wanted_containers = {c.key for c in result.containers}
    wanted_pools = {p.name for p in result.pools}
    for seq, before, after in steps:
        keys = touched_containers(before.cpu, after.cpu) & wanted_containers
        for change in container_changes(before.cpu, after.cpu, keys):
            result.container_records.setdefault(change.key, []).append(seq)
        for pool in pool_changes(before.cpu, after.cpu):
            if pool.name in wanted_pools:
                result.pool_records.setdefault(pool.name, []).append(seq)
        if before.balance != after.balance:
            result.balance_records.append(seq)
        for name in others:
            if before.sections.get(name) != after.sections.get(name):
                result.sections[name].append(seq)
    return result
