"""The state at a point, as on-call reads it: containers with their cpusets, pools, NUMA map.

A container's cpuset is what kubelet was given for it: its entry's placement resolved in that
state (``CPUState.derive``, spec cpu-policy §5.1) — a pooled container has its pool's CPUs, a
ramping one the ramp-up cpuset, a dedicated one its own. The per-NUMA map is the demo's
(``qrmd.commands.node_view``): holders are the pools (with their containers) and every container
on CPUs of its own, drawn core by core per NUMA node. The balancer section is its ``current`` and
``last`` rounds in the reference's JSON form (memory-balancer.md §5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from policy.cpu.snb import is_snb, numa_of_pool
from policy.errors import StateError
from policy.state.codec import SECTION_CODECS
from policy.state.cpu_state import CPUState
from policy.state.entries import InPool, OwnCPUs, Ramping
from policy.state.sections import BALANCE_SECTION, CPU_SECTION, State
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from qrmd.commands.node_view import Holder, render_numa_map, render_pools

__all__ = [
    "ContainerView",
    "container_view",
    "container_views",
    "per_numa",
    "render_state",
    "state_document",
]

_POOL_STYLES = ("black on green", "black on yellow", "black on bright_green", "black on cyan")
_OWN_STYLES = ("white on blue", "white on magenta", "white on red", "black on bright_blue")
_OWN_CODES = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True, slots=True)
class ContainerView:
    """One container as kubelet saw it at a point.

    Attributes:
        pod_uid: the pod's UID.
        pod: ``namespace/name`` (the UID when the entry has no name).
        container: the container's name.
        qos: its QoS level.
        placement: ``pool <name>``, ``ramp-up`` or ``own CPUs``.
        pool: the pool whose CPUs it follows, or "".
        cpuset: the CPUs kubelet was given (its AllocationResult).
        ramp_up: whether it still carries the ramp-up flag.
    """

    pod_uid: str
    pod: str
    container: str
    qos: str
    placement: str
    pool: str
    cpuset: CPUSet
    ramp_up: bool

    def to_json(self, topology: CPUTopology) -> dict[str, Any]:
        """The view as plain JSON values, with the cpuset split per NUMA node."""
        return {
            "pod_uid": self.pod_uid,
            "pod": self.pod,
            "container": self.container,
            "qos": self.qos,
            "placement": self.placement,
            "pool": self.pool,
            "cpuset": str(self.cpuset),
            "numa": per_numa(topology, self.cpuset),
            "ramp_up": self.ramp_up,
        }


def per_numa(topology: CPUTopology, cpus: CPUSet) -> dict[str, str]:
    """``{numa id: cpuset}`` of the NUMA nodes ``cpus`` has CPUs on (JSON keys are strings)."""
    split = {}
    for numa in topology.numa_nodes():
        part = cpus.intersection(topology.cpus_in_numa(numa))
        if part:
            split[str(numa)] = str(part)
    return split


def container_view(cpu: CPUState, key: tuple[str, str]) -> ContainerView | None:
    """The view of one container in ``cpu``; None when it has no entry there."""
    entry = cpu.entry(*key)
    if entry is None:
        return None
    placement = entry.placement
    try:
        cpuset, _ = cpu.placement_cpus(placement)
    except StateError:
        cpuset = CPUSet()  # a dangling placement is shown empty rather than hidden
    if isinstance(placement, InPool):
        where, pool = f"pool {placement.pool_name}", placement.pool_name
        numa = numa_of_pool(pool) if is_snb(entry.qos_level, entry.annotations) else None
        if numa is not None:  # shared cores with NUMA binding (v0.5.47)
            where += f" (shared cores bound to NUMA {numa})"
        elif placement.numas is not None:  # the reclaim pool's part by NUMA (v0.5.47)
            numas = ",".join(str(n) for n in sorted(placement.numas))
            bound = entry.is_reclaimed() and entry.is_numa_binding() and len(placement.numas) == 1
            kind = "reclaimed cores bound to" if bound else "its part in"
            where += f" ({kind} NUMA {numas})"
    elif isinstance(placement, Ramping):
        where, pool = "ramp-up", ""
    else:
        assert isinstance(placement, OwnCPUs)
        where, pool = "own CPUs", ""
    name = f"{entry.pod_namespace}/{entry.pod_name}" if entry.pod_name else entry.pod_uid
    return ContainerView(
        entry.pod_uid,
        name,
        entry.container_name,
        entry.qos_level,
        where,
        pool,
        cpuset,
        entry.ramp_up,
    )


def container_views(cpu: CPUState) -> dict[tuple[str, str], ContainerView]:
    """Every container's view, keyed ``(pod_uid, container)``."""
    views = {}
    for entry in cpu.entries():
        view = container_view(cpu, entry.key)
        assert view is not None
        views[entry.key] = view
    return views


def state_document(state: State, *, seq: int, wall_time: float | None) -> dict[str, Any]:
    """The whole state at a point as one JSON document (``qrmd journal state --json``).

    Args:
        state: the replayed state.
        seq: the last record it includes.
        wall_time: that record's wall time (None for the starting state).

    Returns:
        ``{"seq", "wall_time", "pods", "pools", "ramp_cpus", "numa", "balance", "sections"}``
        (``sections``: every other state section, such as the advisor's, in its codec's form).
    """
    cpu = state.cpu
    topology = cpu.topology
    views = container_views(cpu)
    pods: dict[str, dict[str, Any]] = {}
    for (uid, _), view in sorted(views.items()):
        pod = pods.setdefault(uid, {"uid": uid, "pod": view.pod, "containers": []})
        pod["containers"].append(view.to_json(topology))
    pools = {
        name: {
            "cpuset": str(cpus),
            "size": len(cpus),
            "numa": per_numa(topology, cpus),
            "containers": sorted(
                f"{v.pod}/{v.container}" for v in views.values() if v.pool == name
            ),
        }
        for name, cpus in sorted(cpu.pools.items())
    }
    held = holders_of(cpu, views.values())
    numa_map = []
    for numa in topology.numa_nodes():
        cpus = topology.cpus_in_numa(numa)
        by_holder = {
            h.name: str(h.cpus.intersection(cpus)) for h in held if h.cpus.intersection(cpus)
        }
        busy = CPUSet.union_all(h.cpus for h in held).intersection(cpus)
        numa_map.append(
            {
                "numa": numa,
                "socket": topology.socket_of_numa(numa),
                "cpus": str(cpus),
                "held": by_holder,
                "busy": len(busy),
                "total": len(cpus),
            }
        )
    return {
        "seq": seq,
        "wall_time": wall_time,
        "pods": list(pods.values()),
        "pools": pools,
        "ramp_cpus": None if cpu.ramp_cpus is None else str(cpu.ramp_cpus),
        "numa": numa_map,
        "balance": state.balance.to_json(),
        # Sections added later (the advisor's, …) in their codec's plain form: shown, not
        # dropped, before they have a view of their own here.
        "sections": {
            name: SECTION_CODECS[name].encode_section(value)
            for name, value in sorted(state.sections.items())
            if name not in (CPU_SECTION, BALANCE_SECTION) and name in SECTION_CODECS
        },
    }


def holders_of(cpu: CPUState, views: Iterable[ContainerView]) -> list[Holder]:
    """The demo map's holders: each pool with its containers, then each container on own CPUs."""
    in_pool: dict[str, list[str]] = {}
    own: list[ContainerView] = []
    for view in views:
        if view.pool:
            in_pool.setdefault(view.pool, []).append(f"{view.pod}/{view.container}")
        else:
            own.append(view)
    result = []
    taken: set[str] = set()
    for n, (name, cpus) in enumerate(sorted(cpu.pools.items())):
        result.append(
            Holder(
                _pool_code(name, taken),
                name,
                "pool",
                cpus,
                tuple(sorted(in_pool.get(name, []))),
                _POOL_STYLES[n % len(_POOL_STYLES)],
            )
        )
    for n, view in enumerate(sorted(own, key=lambda v: (v.pod, v.container))):
        result.append(
            Holder(
                _OWN_CODES[n % len(_OWN_CODES)],
                f"{view.pod}/{view.container}",
                view.qos,
                view.cpuset,
                (view.placement,),
                _OWN_STYLES[n % len(_OWN_STYLES)],
            )
        )
    return result


def _pool_code(name: str, taken: set[str]) -> str:
    """The first letter of the pool's name no pool before it in name order took."""
    for letter in name.lower() + "abcdefghijklmnopqrstuvwxyz0123456789":
        if letter.isalnum() and letter not in taken:
            taken.add(letter)
            return letter
    return "?"


def render_state(state: State, header: str, balance: Mapping[str, Any]) -> RenderableType:
    """The state as the demo draws it: a header line, the NUMA map, the pool table, the
    balancer's current round in one line."""
    cpu = state.cpu
    held = holders_of(cpu, container_views(cpu).values())
    current = balance.get("current")
    if current is None:
        round_line = "balancer: no round stored"
    else:
        fields = current if isinstance(current, Mapping) else {}
        source = fields.get("sourceNuma")
        source_id = source.get("NumaID") if isinstance(source, Mapping) else source
        round_line = (
            f"balancer: current round detectTime={fields.get('detectTime')} "
            f"status={fields.get('status')} level={fields.get('balanceLevel')} "
            f"sourceNuma={source_id} evictPods={len(fields.get('evictPods') or [])}"
            f" balancePods={len(fields.get('balancePods') or [])}"
        )
    return Group(
        Text(header, style="bold"),
        render_numa_map(cpu.topology, held),
        render_pools(cpu.topology, held),
        Text(round_line),
    )
