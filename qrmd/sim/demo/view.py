"""What the kubelet sees, drawn: a per-NUMA map of which pod holds which CPUs, and the pools.

Everything here is derived from the plugin's answers to the kubelet (``GetResourcesAllocation``:
each container's ``CpusetCpus``), not from qrmd's internals: the reference plugin leaves pool
entries out of that answer (wire.md §9.2), so a pool is what the kubelet can infer: the
containers of one QoS level that hold the same cpuset. Dedicated pods are named after the pod
(a sidecar holds its main container's CPUs); shared containers form ``share``, reclaimed ones
``reclaim``. CPUs nobody holds are the system reserve, or CPUs of a NUMA node that a NUMA-bound
pod uses, which the shared pools never take (cpu-policy §5.4, "pooled CPUs").

The map and the pool table are drawn as ``qrmd journal state`` draws them
(``qrmd.commands.node_view``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group, RenderableType

from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from qrmd.commands.node_view import Holder, render_numa_map, render_pools
from qrmd.sim.kubelet import AllocationInfo, Hint, Pod
from qrmd.sim.kubelet.pods import CPU

__all__ = [
    "Snapshot",
    "admission_line",
    "holders",
    "render_phase",
    "runtime_view",
    "snapshot",
]

_DEDICATED_CODES = "ABCDEFGHIJKLMNOPQ"
_STYLES = {
    "share": "black on green",
    "reclaim": "black on yellow",
}
_DEDICATED_STYLES = (
    "white on blue",
    "white on magenta",
    "black on cyan",
    "white on red",
    "black on bright_blue",
    "black on bright_magenta",
)
_QOS_POOL = {"shared_cores": "share", "reclaimed_cores": "reclaim"}
_POOLS = {"share": "s", "reclaim": "r"}  # pool → its code on the map

#: pod UID → container name → CpusetCpus, the kubelet's view of one reconcile answer.
Snapshot = dict[str, dict[str, str]]


def snapshot(answer: Mapping[str, Mapping[str, Mapping[str, AllocationInfo]]]) -> Snapshot:
    """Reduce a ``GetResourcesAllocation`` answer to each container's ``CpusetCpus``."""
    return {
        pod_uid: {
            container: resources[CPU].allocation_result
            for container, resources in sorted(containers.items())
            if CPU in resources and resources[CPU].oci_property_name == "CpusetCpus"
        }
        for pod_uid, containers in sorted(answer.items())
    }


def holders(pods: Sequence[Pod], view: Snapshot) -> list[Holder]:
    """Group the containers of ``view`` into holders (see the module docstring).

    Args:
        pods: the pods the kubelet knows (for names and QoS levels); containers of pods not
            listed are shown under their UID as ``unknown``.
        view: the reduced answer.

    Returns:
        Dedicated pods in pod order, then ``share`` and ``reclaim`` groups.
    """
    by_uid = {p.uid: p for p in pods}
    order = {p.uid: i for i, p in enumerate(pods)}
    groups: dict[tuple[str, str, CPUSet], list[str]] = {}
    rank: dict[tuple[str, str, CPUSet], int] = {}
    for uid, containers in view.items():
        pod = by_uid.get(uid)
        qos = pod.qos_level if pod is not None else "unknown"
        pod_name = pod.name if pod is not None else uid
        for container, cpuset in containers.items():
            key = (qos, _QOS_POOL.get(qos, pod_name), CPUSet.parse(cpuset))
            groups.setdefault(key, []).append(f"{pod_name}/{container}")
            rank.setdefault(key, order.get(uid, len(order)))
    result: list[Holder] = []
    dedicated = sorted((k for k in groups if k[1] not in _POOLS), key=lambda k: (rank[k], k[1]))
    for i, key in enumerate(dedicated):
        result.append(
            Holder(
                _DEDICATED_CODES[i % len(_DEDICATED_CODES)],
                key[1],
                key[0],
                key[2],
                tuple(sorted(groups[key])),
                _DEDICATED_STYLES[i % len(_DEDICATED_STYLES)],
            )
        )
    for pool, code in _POOLS.items():
        keys = sorted((k for k in groups if k[1] == pool), key=lambda k: k[2].ids())
        for n, key in enumerate(keys):
            label = pool if n == 0 else f"{pool}#{n + 1}"
            result.append(
                Holder(code, label, key[0], key[2], tuple(sorted(groups[key])), _STYLES[pool])
            )
    return result


def runtime_view(properties: Mapping[tuple[str, str], Mapping[str, str]]) -> Snapshot:
    """What the container runtime was told (``Kubelet.runtime_properties``), as a Snapshot."""
    view: Snapshot = {}
    for (uid, container), props in sorted(properties.items()):
        if "CpusetCpus" in props:
            view.setdefault(uid, {})[container] = props["CpusetCpus"]
    return view


def admission_line(
    pod: Pod, cpusets: Mapping[str, str], affinities: Mapping[str, Hint | None]
) -> str:
    """One console line for an admitted pod: each container's type, hint and CPUs.

    Args:
        pod: the pod.
        cpusets: container name → the CPUs ``Allocate`` answered (absent: no allocation).
        affinities: container name → the affinity chosen at admission.

    Returns:
        Rich markup.
    """
    parts = []
    for slot in pod.admission_order():
        if not slot.container.requests_resource:
            continue
        name = slot.container.name
        hint = affinities.get(name)
        where = f"NUMA {list(hint.nodes)}" if hint is not None else "none"
        got = cpusets.get(name)
        result = f"CPUs {got}" if got is not None else "no allocation (init container)"
        parts.append(f"{name} ({slot.kind.name.lower()}, hint {where}) → {result}")
    return f"  [bold]{pod.name}[/] [dim]{pod.qos_level}[/]: " + "; ".join(parts)


def render_phase(topology: CPUTopology, pods: Sequence[Pod], view: Snapshot) -> RenderableType:
    """The map and the pool table for one reconcile answer."""
    held = holders(pods, view)
    return Group(render_numa_map(topology, held), render_pools(topology, held))
