"""Build fake sysfs trees in a tmp dir, laid out as Linux lays out ``/sys``.

A ``SysfsTree`` says what the kernel would report; ``write(root)`` creates the files under
``root/devices/system``. ``tree_of(topology)`` derives the tree a host of that shape shows, so
the reader can be checked against every other way of building a topology.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology


@dataclass
class SysfsTree:
    """What sysfs says about CPUs and NUMA nodes.

    Attributes:
        online: ``cpu/online``.
        cpus: every CPU with a topology directory: CPU → (physical_package_id, siblings list).
        nodes: NUMA node → (``cpulist``, ``distance`` row); ``None`` writes no ``node``
            directory at all (a kernel without NUMA).
        node_online: ``node/online``; ``None`` leaves the file out.
        has_memory: ``node/has_memory``; ``None`` leaves the file out.
        siblings_file: ``core_cpus_list`` (kernel ≥ 5.0) or ``thread_siblings_list`` (older).
        l3_shared: CPU → its ``cache/index3/shared_cpu_list``; a CPU left out has no
            ``index3`` directory (no L3).
    """

    online: str
    cpus: dict[int, tuple[int, str]]
    nodes: dict[int, tuple[str, list[int]]] | None
    node_online: str | None = None
    has_memory: str | None = None
    siblings_file: str = "core_cpus_list"
    extra_files: dict[str, str] = field(default_factory=dict)
    l3_shared: dict[int, str] = field(default_factory=dict)

    def write(self, root: Path) -> Path:
        """Create the tree under ``root`` and return ``root``."""
        system = root / "devices" / "system"
        put(system / "cpu" / "online", self.online + "\n")
        for cpu, (package, siblings) in self.cpus.items():
            topo = system / "cpu" / f"cpu{cpu}" / "topology"
            put(topo / "physical_package_id", f"{package}\n")
            put(topo / self.siblings_file, siblings + "\n")
        for cpu, shared in self.l3_shared.items():
            index3 = system / "cpu" / f"cpu{cpu}" / "cache" / "index3"
            put(index3 / "shared_cpu_list", shared + "\n")
            put(index3 / "level", "3\n")
        if self.nodes is not None:
            node_dir = system / "node"
            node_dir.mkdir(parents=True, exist_ok=True)
            for node, (cpulist, row) in self.nodes.items():
                put(node_dir / f"node{node}" / "cpulist", cpulist + "\n")
                put(node_dir / f"node{node}" / "distance", " ".join(map(str, row)) + "\n")
            if self.node_online is not None:
                put(node_dir / "online", self.node_online + "\n")
            if self.has_memory is not None:
                put(node_dir / "has_memory", self.has_memory + "\n")
        for relative, text in self.extra_files.items():
            put(system / relative, text)
        return root


def put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def tree_of(
    topology: CPUTopology, *, offline: CPUSet | None = None, stale_siblings: bool = False
) -> SysfsTree:
    """The sysfs a host of ``topology``'s shape shows, with ``offline`` CPUs switched off.

    Offline CPUs lose their topology directory and drop out of ``online`` and of their
    siblings' lists (as Linux does), but stay in their node's ``cpulist`` (the harder case
    for the reader). ``stale_siblings`` keeps offline CPUs in the siblings lists too. Nodes
    in the distance matrix without CPUs get an empty ``cpulist``.
    """
    gone = offline or CPUSet()
    online = topology.cpus().difference(gone)
    cpus: dict[int, tuple[int, str]] = {}
    for cpu, info in topology.cpu_details.items():
        if cpu in gone:
            continue
        siblings = topology.cpus_in_core(info.core_id)
        if not stale_siblings:
            siblings = siblings.difference(gone)
        cpus[cpu] = (info.socket_id, str(siblings))
    rows = topology.distances.as_lists()
    nodes = {n: (str(topology.cpus_in_numa(n)), rows[n]) for n in rows}
    listed = CPUSet(rows)
    # Linux lists the whole cache, offline CPUs included; the reader keeps the online ones.
    l3_shared = {
        cpu: str(topology.cpus_in_l3(topology.l3_of(cpu)))
        for cpu in online
        if topology.l3_of(cpu) >= 0
    }
    return SysfsTree(
        online=str(online),
        cpus=cpus,
        nodes=nodes,
        node_online=str(listed),
        has_memory=str(listed),
        l3_shared=l3_shared,
    )
