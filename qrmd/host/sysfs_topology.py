"""Read this host's CPU topology from sysfs (spec cpu-policy §1.2, §1.3).

What is read, under a configurable root (``/sys`` on a host, a tmp tree in tests):

- ``devices/system/cpu/online``: the CPUs qrmd places work on; offline CPUs are left out.
- per online CPU, ``cpuN/topology/physical_package_id`` (its socket) and its thread siblings,
  ``core_cpus_list`` (kernels since 5.0) or else ``thread_siblings_list``. The core id is the
  lowest online sibling, so core ids are globally unique (§1.2).
- per NUMA node, ``devices/system/node/nodeN/cpulist`` (its CPUs) and ``distance`` (its row of
  the distance matrix, one entry per online node in ascending id: ``devices/system/node/online``,
  else the node directories present).
- per online CPU, ``cpuN/cache/index3/shared_cpu_list`` where present: the CPUs its L3 cache
  is shared by, the level Katalyst v0.5.47's dedicated allocation orders by
  (cpu-policy-v0.5.47 (b)). A cache's id is its lowest online CPU; a CPU without ``index3``
  has no L3 (the reference's -1); only online CPUs count.
- ``devices/system/node/has_memory`` where present: a node with neither online CPUs nor memory
  is dropped from the matrix; a node with memory and no CPUs is memory-only, no NUMA node of
  the CPU topology but kept in the distances (§1.3).

A CPU that no node lists (a kernel built without NUMA has no ``node`` directory at all) belongs
to node 0, as cadvisor, the reference's machine-info source, reports it. ``has_cpu`` is not
needed: a node's ``cpulist`` restricted to the online CPUs says the same and more.

Any missing, unreadable or malformed file is one ``SysfsTopologyError`` naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from policy.topology.build import CoreSpec, assemble_topology, parse_cpu_list
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology, NUMADistances, TopologyError
from policy.topology.synthetic import LOCAL_DISTANCE

__all__ = [
    "DEFAULT_SYSFS_ROOT",
    "SysfsTopologyError",
    "read_numa_distances",
    "read_sysfs_topology",
]

DEFAULT_SYSFS_ROOT = Path("/sys")

_NODE_DIR = re.compile(r"node(\d+)")

# Some kernels without package information (early arm64) report -1: one unnamed socket.
_UNKNOWN_PACKAGE = -1


class SysfsTopologyError(TopologyError):
    """sysfs does not describe a usable topology; the message names the file."""


def read_sysfs_topology(root: Path | str = DEFAULT_SYSFS_ROOT) -> CPUTopology:
    """Read the host's topology: online CPUs, cores, sockets, NUMA nodes and distances.

    Args:
        root: the sysfs mount point (``/sys``), or a tree laid out like it.

    Returns:
        The topology of the online CPUs, with the distance matrix of every node that has CPUs
        or memory.

    Raises:
        SysfsTopologyError: a file is missing, unreadable or malformed, or the files contradict
            each other (a CPU in two nodes, siblings that disagree); the message names the file.
    """
    system = Path(root) / "devices" / "system"
    cpu_dir = system / "cpu"
    online = _read_cpu_list(cpu_dir / "online")
    if not online:
        raise SysfsTopologyError(f"{cpu_dir / 'online'}: no online CPUs")
    cpu_numa, distances = _read_nodes(system / "node", online)
    siblings: dict[int, CPUSet] = {}
    package: dict[int, int] = {}
    for cpu in online:
        topo_dir = cpu_dir / f"cpu{cpu}" / "topology"
        package[cpu] = _read_package(topo_dir / "physical_package_id")
        siblings[cpu] = _read_siblings(topo_dir, cpu, online)
    l3_caches = _read_l3_caches(cpu_dir, online)
    cores: list[CoreSpec] = []
    for cpu in online:
        group = siblings[cpu]
        if group.min() != cpu:
            continue  # the core is emitted once, by its lowest sibling
        for other in group:
            _check_sibling(
                cpu_dir, cpu, other, siblings=siblings, package=package, cpu_numa=cpu_numa
            )
        cores.append(CoreSpec(socket_id=package[cpu], numa_id=cpu_numa[cpu], cpus=group.ids()))
    try:
        return assemble_topology(cores, distances=distances, l3_caches=l3_caches)
    except TopologyError as exc:
        raise SysfsTopologyError(f"{system}: {exc}") from None


def _read_l3_caches(cpu_dir: Path, online: CPUSet) -> list[CPUSet]:
    """The online CPUs each L3 cache is shared by, one entry per CPU that has an L3."""
    caches: list[CPUSet] = []
    for cpu in online:
        index3 = cpu_dir / f"cpu{cpu}" / "cache" / "index3"
        if not index3.is_dir():
            continue
        path = index3 / "shared_cpu_list"
        shared = _read_cpu_list(path).intersection(online)
        if cpu not in shared:
            raise SysfsTopologyError(f"{path}: does not list CPU {cpu} itself")
        caches.append(shared)
    return caches


def read_numa_distances(root: Path | str = DEFAULT_SYSFS_ROOT) -> NUMADistances:
    """Read only the NUMA distance matrix, by the same rules as ``read_sysfs_topology``.

    The memory balancer reads the distances on their own (spec memory-balancer §4.4): every
    node with online CPUs or memory, memory-only nodes included, one row each.

    Args:
        root: the sysfs mount point (``/sys``), or a tree laid out like it.

    Returns:
        The distance matrix.

    Raises:
        SysfsTopologyError: a file is missing, unreadable or malformed; the message names it.
    """
    system = Path(root) / "devices" / "system"
    _, matrix = _read_nodes(system / "node", _read_cpu_list(system / "cpu" / "online"))
    try:
        return NUMADistances.of(matrix)
    except TopologyError as exc:
        raise SysfsTopologyError(f"{system / 'node'}: {exc}") from None


def _read_nodes(node_dir: Path, online: CPUSet) -> tuple[dict[int, int], dict[int, dict[int, int]]]:
    """Each online CPU's NUMA node, and the distance matrix of the nodes that matter."""
    node_ids = _node_dirs(node_dir)
    if not node_ids:
        # A kernel without NUMA: everything is node 0, at the local distance from itself.
        return dict.fromkeys(online, 0), {0: {0: LOCAL_DISTANCE}}
    online_file = node_dir / "online"
    columns = _read_cpu_list(online_file).ids() if online_file.exists() else tuple(node_ids)
    cpu_numa: dict[int, int] = {}
    node_cpus: dict[int, CPUSet] = {}
    for node in columns:
        cpulist = node_dir / f"node{node}" / "cpulist"
        cpus = _read_cpu_list(cpulist).intersection(online)
        node_cpus[node] = cpus
        for cpu in cpus:
            if cpu in cpu_numa:
                raise SysfsTopologyError(
                    f"{cpulist}: CPU {cpu} is also listed by node{cpu_numa[cpu]}/cpulist"
                )
            cpu_numa[cpu] = node
    homeless = [cpu for cpu in online if cpu not in cpu_numa]
    if homeless and 0 not in columns:
        raise SysfsTopologyError(
            f"{node_dir}: CPU(s) {CPUSet(homeless)} are in no node's cpulist "
            f"and there is no node0 to default to"
        )
    for cpu in homeless:
        cpu_numa[cpu] = 0
    has_cpus = set(cpu_numa.values())
    has_memory_file = node_dir / "has_memory"
    with_memory = (
        set(_read_cpu_list(has_memory_file).ids()) if has_memory_file.exists() else set(columns)
    )
    kept = [n for n in columns if n in has_cpus or n in with_memory]
    matrix: dict[int, dict[int, int]] = {}
    for node in kept:
        row = _read_distance_row(node_dir / f"node{node}" / "distance", len(columns))
        full = dict(zip(columns, row, strict=True))
        matrix[node] = {other: full[other] for other in kept}
    return cpu_numa, matrix


def _node_dirs(node_dir: Path) -> list[int]:
    if not node_dir.is_dir():
        return []
    try:
        names = [p.name for p in node_dir.iterdir()]
    except OSError as exc:
        raise SysfsTopologyError(f"cannot list {node_dir}: {exc.strerror}") from None
    return sorted(int(m.group(1)) for name in names if (m := _NODE_DIR.fullmatch(name)))


def _read_siblings(topo_dir: Path, cpu: int, online: CPUSet) -> CPUSet:
    path = topo_dir / "core_cpus_list"
    if not path.exists():
        path = topo_dir / "thread_siblings_list"
    group = _read_cpu_list(path).intersection(online)
    if cpu not in group:
        raise SysfsTopologyError(f"{path}: does not list CPU {cpu} itself")
    return group


def _check_sibling(
    cpu_dir: Path,
    cpu: int,
    other: int,
    *,
    siblings: Mapping[int, CPUSet],
    package: Mapping[int, int],
    cpu_numa: Mapping[int, int],
) -> None:
    """Thread siblings must agree on their core, socket and NUMA node."""
    where = cpu_dir / f"cpu{other}" / "topology"
    if siblings[other] != siblings[cpu]:
        raise SysfsTopologyError(
            f"{where}: CPU {other} lists siblings {siblings[other]}, "
            f"but CPU {cpu} lists {siblings[cpu]}"
        )
    if package[other] != package[cpu]:
        raise SysfsTopologyError(
            f"{where / 'physical_package_id'}: CPU {other} is on socket {package[other]}, "
            f"its thread sibling CPU {cpu} on socket {package[cpu]}"
        )
    if cpu_numa[other] != cpu_numa[cpu]:
        raise SysfsTopologyError(
            f"{where}: thread siblings CPU {cpu} and CPU {other} are in different NUMA nodes "
            f"({cpu_numa[cpu]} and {cpu_numa[other]})"
        )


def _read_package(path: Path) -> int:
    text = _read(path)
    try:
        value = int(text)
    except ValueError:
        raise SysfsTopologyError(f"{path}: expected a socket id, got {text!r}") from None
    if value == _UNKNOWN_PACKAGE:
        return 0
    if value < 0:
        raise SysfsTopologyError(f"{path}: socket id {value} is negative")
    return value


def _read_distance_row(path: Path, width: int) -> list[int]:
    text = _read(path)
    try:
        row = [int(v) for v in text.split()]
    except ValueError:
        raise SysfsTopologyError(f"{path}: expected distances, got {text!r}") from None
    if len(row) != width:
        raise SysfsTopologyError(
            f"{path}: {len(row)} distances for {width} online NUMA nodes, expected one each"
        )
    if any(d <= 0 for d in row):
        raise SysfsTopologyError(f"{path}: distances must be positive, got {text!r}")
    return row


def _read_cpu_list(path: Path) -> CPUSet:
    text = _read(path)
    try:
        return parse_cpu_list(text)
    except TopologyError as exc:
        raise SysfsTopologyError(f"{path}: {exc}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise SysfsTopologyError(f"{path}: missing") from None
    except OSError as exc:
        raise SysfsTopologyError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SysfsTopologyError(f"{path}: not text") from None
