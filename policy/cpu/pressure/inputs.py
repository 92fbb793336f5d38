"""What the CPU pressure decisions read, as plain data (DESIGN.md: inputs are journaled).

* ``PoolMap`` is the reference's ``PodPoolMap`` (``strategy/pod_pool_getter.go``) taken from
  a CPU state snapshot: each pool entry with its size, and each container entry with the pool
  that owns it. A container without an owner pool is left out, as there.
* ``LoadInputs``: one load collection: the pool map, each container's 1-minute load as the
  metric source answered (None: no sample), and the shared pools' limit (the CPUs shared
  pools may grow to, ``accumulateSharedPoolsLimit``), needed with the advised bounds only.
* ``TopInputs``: ``GetTopEvictionPods``: the pool map now, the request's pods and ``topN``.
* ``SuppressionInputs``: ``GetEvictPods`` of the suppression plugin: the reclaim pool's size
  (None: the state has no reclaim pool) and the request's pods.

Each has ``to_json``/``from_json`` so a journal record's cause can be re-read and the
eviction plan can be written by hand; ``from_json`` raises ``InputError`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.cpu.pressure.pods import ActivePod
from policy.errors import ErrorKind, PolicyError

__all__ = [
    "ContainerPool",
    "InputError",
    "LoadInputs",
    "PoolMap",
    "SuppressionInputs",
    "TopInputs",
    "active_pods_from_json",
]


class InputError(PolicyError):
    """Malformed decision inputs; the message names the field."""

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class ContainerPool:
    """A container entry and the pool that owns it (``ContainerOwnerPoolInfo``)."""

    pod_uid: str
    container: str
    pool: str


@dataclass(frozen=True, slots=True)
class PoolMap:
    """Pools (name → CPU count) and container owners, from one CPU state snapshot."""

    pools: Mapping[str, int] = field(default_factory=dict)
    containers: tuple[ContainerPool, ...] = ()

    def owners(self) -> dict[tuple[str, str], str]:
        """(pod UID, container) → the pool owning it, for every container entry."""
        return {(c.pod_uid, c.container): c.pool for c in self.containers}

    def to_json(self) -> dict[str, Any]:
        """``{"pools": {name: size}, "containers": [{pod_uid, container, pool}]}``."""
        return {
            "pools": dict(sorted(self.pools.items())),
            "containers": [
                {"pod_uid": c.pod_uid, "container": c.container, "pool": c.pool}
                for c in self.containers
            ],
        }

    @classmethod
    def from_json(cls, value: object, where: str) -> PoolMap:
        """Read :meth:`to_json`'s form.

        Raises:
            InputError: malformed; the message names the field.
        """
        obj = _map(value, where, ("pools", "containers"))
        pools = {
            _str(k, f"{where}.pools key"): _count(v, f"{where}.pools.{k}")
            for k, v in _map(obj.get("pools", {}), f"{where}.pools", None).items()
        }
        containers = []
        for i, raw in enumerate(_list(obj.get("containers", []), f"{where}.containers")):
            at = f"{where}.containers[{i}]"
            item = _map(raw, at, ("pod_uid", "container", "pool"))
            containers.append(
                ContainerPool(
                    _str(item.get("pod_uid"), f"{at}.pod_uid"),
                    _str(item.get("container"), f"{at}.container"),
                    _str(item.get("pool"), f"{at}.pool"),
                )
            )
        return cls(pools, tuple(containers))


@dataclass(frozen=True, slots=True)
class LoadInputs:
    """One load collection's inputs.

    Attributes:
        pool_map: pools and container owners.
        loads: (pod UID, container) → its 1-minute load; a container missing here had no
            sample, which fails its pool's sample for this collection.
        shared_pools_limit: ``accumulateSharedPoolsLimit``; None when not computed.
        missing: (pod UID, container) → why the source had no load for it (for the log).
    """

    pool_map: PoolMap
    loads: Mapping[tuple[str, str], float] = field(default_factory=dict)
    shared_pools_limit: int | None = None
    missing: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The inputs as plain values; loads as ``[[pod_uid, container, load]]``."""
        return {
            **self.pool_map.to_json(),
            "loads": [[pod, name, load] for (pod, name), load in sorted(self.loads.items())],
            "shared_pools_limit": self.shared_pools_limit,
            "missing": [[pod, name, why] for (pod, name), why in sorted(self.missing.items())],
        }

    @classmethod
    def from_json(cls, value: object, where: str = "inputs") -> LoadInputs:
        """Read :meth:`to_json`'s form.

        Raises:
            InputError: malformed; the message names the field.
        """
        obj = _map(value, where, ("pools", "containers", "loads", "shared_pools_limit", "missing"))
        loads: dict[tuple[str, str], float] = {}
        for i, row in enumerate(_rows(obj.get("loads", []), 3, f"{where}.loads")):
            at = f"{where}.loads[{i}]"
            loads[(_str(row[0], f"{at}[0]"), _str(row[1], f"{at}[1]"))] = number(row[2], f"{at}[2]")
        missing: dict[tuple[str, str], str] = {}
        for i, row in enumerate(_rows(obj.get("missing", []), 3, f"{where}.missing")):
            at = f"{where}.missing[{i}]"
            missing[(_str(row[0], f"{at}[0]"), _str(row[1], f"{at}[1]"))] = _str(row[2], f"{at}[2]")
        limit = obj.get("shared_pools_limit")
        return cls(
            PoolMap.from_json({k: obj[k] for k in ("pools", "containers") if k in obj}, where),
            loads,
            None if limit is None else _count(limit, f"{where}.shared_pools_limit"),
            missing,
        )


@dataclass(frozen=True, slots=True)
class TopInputs:
    """``GetTopEvictionPods``' inputs: the pool map now, the request's pods and ``topN``."""

    pool_map: PoolMap
    active_pods: tuple[ActivePod, ...]
    top_n: int

    def to_json(self) -> dict[str, Any]:
        """The inputs as plain values."""
        return {
            **self.pool_map.to_json(),
            "active_pods": [p.to_json() for p in self.active_pods],
            "top_n": self.top_n,
        }

    @classmethod
    def from_json(cls, value: object, where: str = "inputs") -> TopInputs:
        """Read :meth:`to_json`'s form.

        Raises:
            InputError: malformed; the message names the field.
        """
        obj = _map(value, where, ("pools", "containers", "active_pods", "top_n"))
        pool_map = PoolMap.from_json(
            {k: obj[k] for k in ("pools", "containers") if k in obj}, where
        )
        pods = active_pods_from_json(obj.get("active_pods", []), f"{where}.active_pods")
        return cls(pool_map, pods, _count(obj.get("top_n", 0), f"{where}.top_n"))


@dataclass(frozen=True, slots=True)
class SuppressionInputs:
    """The suppression plugin's ``GetEvictPods`` inputs.

    Attributes:
        reclaim_pool_size: CPUs of the ``reclaim`` pool; None when the state has none.
        active_pods: the request's pods, in request order.
    """

    reclaim_pool_size: int | None
    active_pods: tuple[ActivePod, ...]

    def to_json(self) -> dict[str, Any]:
        """The inputs as plain values."""
        return {
            "reclaim_pool_size": self.reclaim_pool_size,
            "active_pods": [p.to_json() for p in self.active_pods],
        }

    @classmethod
    def from_json(cls, value: object, where: str = "inputs") -> SuppressionInputs:
        """Read :meth:`to_json`'s form.

        Raises:
            InputError: malformed; the message names the field.
        """
        obj = _map(value, where, ("reclaim_pool_size", "active_pods"))
        size = obj.get("reclaim_pool_size")
        return cls(
            None if size is None else _count(size, f"{where}.reclaim_pool_size"),
            active_pods_from_json(obj.get("active_pods", []), f"{where}.active_pods"),
        )


def active_pods_from_json(value: object, where: str) -> tuple[ActivePod, ...]:
    """Pods in ``ActivePod.to_json``'s form (``namespace``, ``name``, ``annotations``,
    ``priority``, ``containers``, ``init_containers`` may be left out; ``uid`` may not).

    Raises:
        InputError: malformed; the message names the field.
    """
    pods = []
    keys = ("uid", "namespace", "name", "annotations", "priority", "containers")
    for i, raw in enumerate(_list(value, where)):
        at = f"{where}[{i}]"
        obj = _map(raw, at, (*keys, "init_containers"))
        priority = obj.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise InputError(f"{at}.priority: expected an integer or null, got {priority!r:.40}")
        pods.append(
            ActivePod(
                uid=_str(obj.get("uid"), f"{at}.uid"),
                namespace=_str(obj.get("namespace", ""), f"{at}.namespace"),
                name=_str(obj.get("name", ""), f"{at}.name"),
                annotations=_str_map(obj.get("annotations", {}), f"{at}.annotations"),
                priority=priority,
                containers=_containers(obj.get("containers", []), f"{at}.containers"),
                init_containers=_containers(
                    obj.get("init_containers", []), f"{at}.init_containers"
                ),
            )
        )
    return tuple(pods)


def _containers(value: object, where: str) -> tuple[tuple[str, Mapping[str, str]], ...]:
    out = []
    for i, raw in enumerate(_list(value, where)):
        obj = _map(raw, f"{where}[{i}]", ("name", "requests"))
        out.append(
            (
                _str(obj.get("name"), f"{where}[{i}].name"),
                _str_map(obj.get("requests", {}), f"{where}[{i}].requests"),
            )
        )
    return tuple(out)


def _map(value: object, where: str, keys: tuple[str, ...] | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a map, got {type(value).__name__}")
    if keys is not None:
        unknown = sorted(str(k) for k in set(value) - set(keys))
        if unknown:
            raise InputError(f"{where}: unknown keys {unknown}; known: {list(keys)}")
    return value


def _rows(value: object, width: int, where: str) -> list[list[Any]]:
    rows = _list(value, where)
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != width:
            raise InputError(f"{where}[{i}]: expected a list of {width} items")
    return rows


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _str_map(value: object, where: str) -> dict[str, str]:
    obj = _map(value, where, None)
    for k, v in obj.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InputError(f"{where}: expected string keys and values, got {k!r:.40}: {v!r:.40}")
    return dict(obj)


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}: expected a CPU count >= 0, got {value!r:.40}")
    return value


def number(value: object, where: str) -> float:
    """A finite JSON number.

    Raises:
        InputError: not one.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{where}: expected a finite number, got {value!r:.40}")
    return float(value)
