"""Machine files: a hand-written description of a node's CPU topology (spec cpu-policy §1.2).

An operator describes any machine shape (an 8-NUMA 256-CPU host, a host with CXL memory) as
sockets → NUMA nodes → physical cores → thread-sibling CPU ids, and qrmd builds the same
``CPUTopology`` it would read from sysfs. This module turns the parsed document (the dict YAML
or JSON gives) into a topology and back; reading the file is ``qrmd.host.machine_file``'s job.

The format (all ids are non-negative integers; CPU lists use the Linux list format)::

    description: "2 sockets x 2 NUMA nodes, 2 threads per core"   # optional, free text
    threads_per_core: 2          # optional default for nodes given as 'cpus'
    sibling_layout: split        # optional default for nodes given as 'cpus': split | adjacent
    sockets:
      - id: 0
        numa_nodes:
          - id: 0
            cores: [[0, 8], [1, 9]]      # each core = its thread siblings
          - id: 1
            cpus: "2-3,10-11"            # compact form: cut into cores of threads_per_core
            threads_per_core: 2          # per-node override (optional)
    memory_only_numa_nodes: [4]          # optional: nodes with memory and no CPUs (CXL)
    distances:                           # optional without memory-only nodes
      0: [10, 12, 21, 21, 30]            # one row per node, columns in ascending node id
      ...
    l3_caches: ["0-1,8-9", "2-3,10-11"]  # optional: the CPUs each L3 cache is shared by

Rules:
- ``core_id`` is the lowest CPU id of a core's siblings (§1.2); ``num_cores`` counts cores.
- A CPU appears in exactly one core; a NUMA node id appears once per socket. A NUMA node that
  spans sockets (AMD NPS0) is listed under each socket with that socket's cores.
- Compact form: the node's CPUs, sorted, are cut into ``threads_per_core`` equal runs and
  core ``i`` takes the ``i``-th CPU of each run (``split``, Linux's numbering on x86:
  ``0-1,8-9`` → cores [0, 8], [1, 9]); ``adjacent`` takes consecutive CPUs (``0-3`` →
  [0, 1], [2, 3]).
- Without ``distances``: 10 to itself, 12 to a node sharing a socket, 21 otherwise (§1.3).
  Memory-only nodes have no socket, so they need explicit distances.
- ``l3_caches`` (what ``cpuN/cache/index3/shared_cpu_list`` says, one list per cache): every
  CPU of the machine in exactly one. Without it each NUMA node is one L3 cache, as in the
  reference's dummy topology. Only Katalyst v0.5.47's dedicated allocation reads it
  (cpu-policy-v0.5.47 (b)); ``machine_from_topology`` writes it only when the layout is not
  that default, so a machine document of a default layout is what it was before the key.

Every error names the key path of the offending value, e.g.
``sockets[1].numa_nodes[0].cores[3]: CPU 7 already in sockets[0].numa_nodes[0].cores[2]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policy.errors import ErrorKind
from policy.topology.build import CoreSpec, assemble_topology, parse_cpu_list
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology, TopologyError

__all__ = [
    "SIBLING_LAYOUTS",
    "MachineFileError",
    "machine_from_topology",
    "topology_from_machine",
]

SIBLING_LAYOUTS = ("split", "adjacent")

_TOP_KEYS = (
    "description",
    "threads_per_core",
    "sibling_layout",
    "sockets",
    "memory_only_numa_nodes",
    "distances",
    "l3_caches",
)
_SOCKET_KEYS = ("id", "numa_nodes")
_NUMA_KEYS = ("id", "cores", "cpus", "threads_per_core", "sibling_layout")


class MachineFileError(TopologyError):
    """A machine file that does not describe a machine; ``key_path`` names the bad value."""

    kind = ErrorKind.INVALID

    def __init__(self, key_path: str, problem: str) -> None:
        super().__init__(f"{key_path or 'top level'}: {problem}")
        self.key_path = key_path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class _Threads:
    """How a compact ``cpus`` list is cut into cores."""

    per_core: int | None
    layout: str


def topology_from_machine(doc: object) -> CPUTopology:
    """Build the topology a parsed machine file describes.

    Args:
        doc: the document as YAML or JSON parsing gives it (mappings, lists, scalars).

    Returns:
        The machine's topology, distances included.

    Raises:
        MachineFileError: naming the key path of the first bad value.
    """
    top = _mapping(doc, "", _TOP_KEYS)
    if "description" in top and not isinstance(top["description"], str):
        raise MachineFileError("description", f"expected text, got {_kind(top['description'])}")
    defaults = _threads(top, "", _Threads(per_core=None, layout="split"))
    sockets = _list(top, "sockets", "")
    if sockets is None:
        raise MachineFileError("", "missing key 'sockets'")
    if not sockets:
        raise MachineFileError("sockets", "a machine needs at least one socket")
    cpu_home: dict[int, str] = {}
    socket_home: dict[int, str] = {}
    numa_home: dict[int, str] = {}
    cores: list[CoreSpec] = []
    for i, raw_socket in enumerate(sockets):
        where = f"sockets[{i}]"
        socket = _mapping(raw_socket, where, _SOCKET_KEYS)
        socket_id = _required_id(socket, where)
        if socket_id in socket_home:
            raise MachineFileError(
                f"{where}.id", f"socket {socket_id} already defined at {socket_home[socket_id]}"
            )
        socket_home[socket_id] = where
        nodes = _list(socket, "numa_nodes", where)
        if not nodes:
            raise MachineFileError(f"{where}.numa_nodes", "a socket needs at least one NUMA node")
        in_socket: set[int] = set()
        for j, raw_node in enumerate(nodes):
            node_where = f"{where}.numa_nodes[{j}]"
            node = _mapping(raw_node, node_where, _NUMA_KEYS)
            numa_id = _required_id(node, node_where)
            if numa_id in in_socket:
                raise MachineFileError(
                    f"{node_where}.id", f"NUMA node {numa_id} listed twice in socket {socket_id}"
                )
            in_socket.add(numa_id)
            numa_home.setdefault(numa_id, node_where)
            for core_where, cpus in _node_cores(node, node_where, defaults):
                for cpu in cpus:
                    if cpu in cpu_home:
                        raise MachineFileError(core_where, f"CPU {cpu} already in {cpu_home[cpu]}")
                    cpu_home[cpu] = core_where
                cores.append(CoreSpec(socket_id=socket_id, numa_id=numa_id, cpus=cpus))
    memory_only = _memory_only_nodes(top, numa_home)
    distances = _distances(top, sorted(set(numa_home) | set(memory_only)))
    if memory_only and distances is None:
        raise MachineFileError(
            "memory_only_numa_nodes",
            "memory-only NUMA nodes need 'distances' too: a node without CPUs has no socket, "
            "so qrmd has no default distance for it",
        )
    l3_caches = _l3_caches(top, cpu_home)
    return assemble_topology(cores, distances=distances, l3_caches=l3_caches)


def machine_from_topology(topology: CPUTopology) -> dict[str, object]:
    """The full-form machine document of a topology (cores listed, distances explicit).

    ``topology_from_machine`` of the result equals ``topology`` whenever ``num_cpus`` is the
    number of CPUs placed (always, except for the synthetic generator's odd-count quirk).

    Args:
        topology: any topology.

    Returns:
        A document of plain dicts, lists and ints, ready for YAML or JSON.
    """
    placement: dict[int, dict[int, list[list[int]]]] = {}
    core_numa = topology.core_numa()
    core_socket = topology.core_socket()
    for core_id in topology.core_masks():
        siblings = list(topology.cpus_in_core(core_id).ids())
        by_numa = placement.setdefault(core_socket[core_id], {})
        by_numa.setdefault(core_numa[core_id], []).append(siblings)
    doc: dict[str, object] = {
        "sockets": [
            {
                "id": socket_id,
                "numa_nodes": [
                    {"id": numa_id, "cores": placement[socket_id][numa_id]}
                    for numa_id in sorted(placement[socket_id])
                ],
            }
            for socket_id in sorted(placement)
        ]
    }
    memory_only = sorted(set(topology.distances.nodes()) - set(topology.numa_nodes()))
    if memory_only:
        doc["memory_only_numa_nodes"] = memory_only
    doc["distances"] = topology.distances.as_lists()
    if not topology.has_default_l3_layout():
        # A CPU without an L3 (NO_L3_CACHE) is in no list, as it is in no cache.
        doc["l3_caches"] = [
            str(CPUSet.from_mask(bits)) for l3, bits in topology.l3_masks().items() if l3 >= 0
        ]
    return doc


# -- pieces of the document ------------------------------------------------------------------


def _node_cores(
    node: Mapping[str, object], where: str, defaults: _Threads
) -> list[tuple[str, tuple[int, ...]]]:
    """The cores of one NUMA node as (key path, siblings), from either form."""
    has_cores, has_cpus = "cores" in node, "cpus" in node
    if has_cores == has_cpus:
        raise MachineFileError(where, "give exactly one of 'cores' (lists of siblings) or 'cpus'")
    if has_cores:
        for key in ("threads_per_core", "sibling_layout"):
            if key in node:
                raise MachineFileError(f"{where}.{key}", "applies only to a node given as 'cpus'")
        raw_cores = _list(node, "cores", where) or []
        if not raw_cores:
            raise MachineFileError(f"{where}.cores", "a NUMA node needs at least one core")
        return [
            (f"{where}.cores[{k}]", _siblings(raw, f"{where}.cores[{k}]"))
            for k, raw in enumerate(raw_cores)
        ]
    threads = _threads(node, f"{where}.", defaults)
    raw_cpus = node["cpus"]
    cpus_where = f"{where}.cpus"
    if isinstance(raw_cpus, int) and not isinstance(raw_cpus, bool):
        raw_cpus = str(raw_cpus)  # YAML reads `cpus: 5` as a number
    if not isinstance(raw_cpus, str):
        raise MachineFileError(
            cpus_where, f"expected a CPU list like '0-3,8', got {_kind(raw_cpus)}"
        )
    try:
        ids = parse_cpu_list(raw_cpus).ids()
    except TopologyError as exc:
        raise MachineFileError(cpus_where, str(exc)) from None
    if not ids:
        raise MachineFileError(cpus_where, "a NUMA node needs at least one CPU")
    if threads.per_core is None:
        raise MachineFileError(
            cpus_where, "needs threads_per_core (on this node or at the top level)"
        )
    per_core = threads.per_core
    if len(ids) % per_core:
        raise MachineFileError(
            cpus_where, f"{len(ids)} CPUs do not cut into cores of threads_per_core={per_core}"
        )
    count = len(ids) // per_core
    if threads.layout == "split":
        groups = [tuple(ids[i + t * count] for t in range(per_core)) for i in range(count)]
    else:
        groups = [ids[i * per_core : (i + 1) * per_core] for i in range(count)]
    return [(cpus_where, g) for g in groups]


def _threads(doc: Mapping[str, object], prefix: str, inherited: _Threads) -> _Threads:
    per_core = inherited.per_core
    if "threads_per_core" in doc:
        per_core = _int(doc["threads_per_core"], f"{prefix}threads_per_core")
        if per_core < 1:
            raise MachineFileError(f"{prefix}threads_per_core", f"{per_core} is not positive")
    layout = inherited.layout
    if "sibling_layout" in doc:
        layout_value = doc["sibling_layout"]
        if layout_value not in SIBLING_LAYOUTS:
            raise MachineFileError(
                f"{prefix}sibling_layout",
                f"{layout_value!r} is not one of {', '.join(SIBLING_LAYOUTS)}",
            )
        layout = str(layout_value)
    return _Threads(per_core=per_core, layout=layout)


def _siblings(raw: object, where: str) -> tuple[int, ...]:
    if not isinstance(raw, list):
        raise MachineFileError(
            where, f"expected a list of thread-sibling CPU ids, got {_kind(raw)}"
        )
    if not raw:
        raise MachineFileError(where, "a core needs at least one CPU")
    cpus = tuple(_int(v, f"{where}[{k}]") for k, v in enumerate(raw))
    if len(set(cpus)) != len(cpus):
        raise MachineFileError(where, f"lists a CPU twice: {list(cpus)}")
    return cpus


def _memory_only_nodes(top: Mapping[str, object], numa_home: Mapping[int, str]) -> list[int]:
    raw = _list(top, "memory_only_numa_nodes", "") or []
    nodes: list[int] = []
    for k, value in enumerate(raw):
        where = f"memory_only_numa_nodes[{k}]"
        node = _int(value, where)
        if node in numa_home:
            raise MachineFileError(where, f"NUMA node {node} has CPUs ({numa_home[node]})")
        if node in nodes:
            raise MachineFileError(where, f"NUMA node {node} listed twice")
        nodes.append(node)
    return nodes


def _distances(top: Mapping[str, object], nodes: Sequence[int]) -> dict[int, dict[int, int]] | None:
    if "distances" not in top:
        return None
    raw = top["distances"]
    if not isinstance(raw, Mapping):
        raise MachineFileError(
            "distances", f"expected a mapping NUMA node → row of distances, got {_kind(raw)}"
        )
    rows: dict[int, dict[int, int]] = {}
    for key, row in raw.items():
        node = _node_key(key)
        where = f"distances[{key}]"
        if node not in nodes:
            raise MachineFileError(
                where, f"no NUMA node {key} among the sockets or memory_only_numa_nodes"
            )
        if node in rows:
            raise MachineFileError(where, f"NUMA node {node} has two rows")
        if not isinstance(row, list):
            raise MachineFileError(where, f"expected a list of distances, got {_kind(row)}")
        if len(row) != len(nodes):
            raise MachineFileError(
                where,
                f"{len(row)} distances, expected {len(nodes)} "
                f"(one per NUMA node {','.join(map(str, nodes))}, ascending)",
            )
        values = [_int(v, f"{where}[{k}]") for k, v in enumerate(row)]
        for k, value in enumerate(values):
            if value <= 0:
                raise MachineFileError(
                    f"{where}[{k}]", f"distance to node {nodes[k]} is {value}, must be positive"
                )
        rows[node] = dict(zip(nodes, values, strict=True))
    missing = [n for n in nodes if n not in rows]
    if missing:
        raise MachineFileError(
            "distances", f"no row for NUMA node(s) {','.join(map(str, missing))}"
        )
    return rows


# -- typed access with key paths -------------------------------------------------------------


def _l3_caches(top: Mapping[str, object], cpu_home: Mapping[int, str]) -> list[CPUSet] | None:
    raw = _list(top, "l3_caches", "")
    if raw is None:
        return None
    caches: list[CPUSet] = []
    owner: dict[int, str] = {}
    for k, raw_value in enumerate(raw):
        where = f"l3_caches[{k}]"
        value = raw_value
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # YAML reads a one-CPU list as a number
        if not isinstance(value, str):
            raise MachineFileError(where, f"expected a CPU list like '0-3,8', got {_kind(value)}")
        try:
            cache = parse_cpu_list(value)
        except TopologyError as exc:
            raise MachineFileError(where, str(exc)) from None
        if cache.is_empty():
            raise MachineFileError(where, "an L3 cache needs at least one CPU")
        for cpu in cache:
            if cpu not in cpu_home:
                raise MachineFileError(where, f"CPU {cpu} is in no NUMA node of the sockets")
            if cpu in owner:
                raise MachineFileError(where, f"CPU {cpu} already in {owner[cpu]}")
            owner[cpu] = where
        caches.append(cache)
    missing = sorted(set(cpu_home) - set(owner))
    if missing:
        raise MachineFileError(
            "l3_caches", f"CPU(s) {CPUSet(missing)} are in no L3 cache (list every CPU once)"
        )
    return caches


def _node_key(key: object) -> int:
    # JSON object keys are strings; YAML gives ints.
    if isinstance(key, str) and key.isascii() and key.isdigit():
        return int(key)
    return _int(key, f"distances[{key!r}]")


def _mapping(value: object, where: str, keys: Sequence[str]) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise MachineFileError(where, f"expected a mapping, got {_kind(value)}")
    for key in value:
        if key not in keys:
            raise MachineFileError(
                where, f"unknown key {key!r} (expected one of: {', '.join(keys)})"
            )
    return value


def _list(doc: Mapping[str, object], key: str, where: str) -> list[object] | None:
    if key not in doc:
        return None
    value = doc[key]
    path = f"{where}.{key}" if where else key
    if not isinstance(value, list):
        raise MachineFileError(path, f"expected a list, got {_kind(value)}")
    return value


def _required_id(doc: Mapping[str, object], where: str) -> int:
    if "id" not in doc:
        raise MachineFileError(where, "missing key 'id'")
    return _int(doc["id"], f"{where}.id")


def _int(value: object, where: str) -> int:
    # bool is an int in Python; `true` is never a CPU or node id.
    if not isinstance(value, int) or isinstance(value, bool):
        raise MachineFileError(where, f"expected a non-negative integer, got {_kind(value)}")
    if value < 0:
        raise MachineFileError(where, f"{value} is negative")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, str):
        return f"text {value!r}"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
