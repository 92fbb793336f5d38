"""The CPU topology of a node: CPU → core → socket → NUMA node, and NUMA distances.

Spec cpu-policy §1.2 (model and queries) and §1.4 (NUMA-aware assignment). Core ids are
globally unique (on a real host, the lowest CPU id among the core's thread siblings), so a
core id alone names a core.

Every query is answered from bitmasks computed once at construction, so restricting the
topology to the free CPUs (``CPUDetails.keep_only``) and asking it questions costs a few
integer operations, not a walk over the CPUs.

NUMA nodes with memory and no CPUs (CXL expanders, some SNC layouts) are not NUMA nodes of
the CPU topology (§1.3): they appear only in ``distances``.

Each CPU also sits in an **L3 cache** (the last-level cache domain), the level Katalyst
v0.5.47's dedicated allocation orders by between sockets and cores (cpu-policy-v0.5.47 (b)).
An L3 id is the lowest CPU id the cache is shared by (as a core's is), and ``NO_L3_CACHE``
(-1) for a CPU with no L3, as the reference's ``getUniqueL3CacheID`` answers. Without other
information each NUMA node is one L3, the reference's dummy topology
(``GenerateDummyCPUTopology`` names it by the NUMA id; ordering by lowest CPU is the same
order there, and order is all the allocation reads of an id). The L3 level is not part of
the fingerprint: v0.5.3 decisions never read it, and a journal written before it existed must
still open on the same machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from policy.errors import ErrorKind, PolicyError
from policy.topology.cpuset import CPUSet

__all__ = [
    "NO_L3_CACHE",
    "CPUDetails",
    "CPUInfo",
    "CPUTopology",
    "NUMADistances",
    "TopologyError",
    "numa_aware_assignments",
]


#: The L3 id of a CPU without an L3 cache (the reference's ``getUniqueL3CacheID``).
NO_L3_CACHE = -1


class TopologyError(PolicyError):
    """A topology that cannot be built or queried as asked.

    Its kind is ``INVALID``: the description given (a synthetic spec, a machine file, what
    sysfs reported) does not describe a machine this model can hold.
    """

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class CPUInfo:
    """Where one logical CPU sits."""

    numa_id: int
    socket_id: int
    core_id: int


def _mask(ids: Iterable[int]) -> int:
    bits = 0
    for i in ids:
        bits |= 1 << i
    return bits


class _Index:
    """Bitmask indexes of a topology, shared by every restriction of it."""

    __slots__ = (
        "all_mask",
        "core_cpus",
        "core_numa",
        "core_socket",
        "cpu_info",
        "cpu_l3",
        "l3_cpus",
        "numa_cpus",
        "numa_socket",
        "socket_cpus",
        "socket_numas",
    )

    def __init__(self, cpu_info: Mapping[int, CPUInfo], cpu_l3: Mapping[int, int]) -> None:
        self.cpu_info = dict(cpu_info)
        self.cpu_l3 = dict(cpu_l3)
        l3_cpus: dict[int, int] = {}
        for cpu, l3 in cpu_l3.items():
            l3_cpus[l3] = l3_cpus.get(l3, 0) | (1 << cpu)
        self.l3_cpus = dict(sorted(l3_cpus.items()))
        numa_cpus: dict[int, int] = {}
        socket_cpus: dict[int, int] = {}
        core_cpus: dict[int, int] = {}
        self.core_numa: dict[int, int] = {}
        self.core_socket: dict[int, int] = {}
        self.numa_socket: dict[int, set[int]] = {}
        self.socket_numas: dict[int, set[int]] = {}
        for cpu, info in sorted(cpu_info.items()):
            bit = 1 << cpu
            numa_cpus[info.numa_id] = numa_cpus.get(info.numa_id, 0) | bit
            socket_cpus[info.socket_id] = socket_cpus.get(info.socket_id, 0) | bit
            core_cpus[info.core_id] = core_cpus.get(info.core_id, 0) | bit
            self.core_numa.setdefault(info.core_id, info.numa_id)
            self.core_socket.setdefault(info.core_id, info.socket_id)
            self.numa_socket.setdefault(info.numa_id, set()).add(info.socket_id)
            self.socket_numas.setdefault(info.socket_id, set()).add(info.numa_id)
        self.numa_cpus = dict(sorted(numa_cpus.items()))
        self.socket_cpus = dict(sorted(socket_cpus.items()))
        self.core_cpus = dict(sorted(core_cpus.items()))
        self.all_mask = _mask(cpu_info)


class CPUDetails:
    """``cpu_id → CPUInfo`` for a subset of a topology's CPUs, with the queries of §1.2.

    Every query returns a CPUSet of ids (CPU, core, socket or NUMA ids as named) and only
    considers the CPUs this view holds.
    """

    __slots__ = ("_idx", "_mask")

    def __init__(self, index: _Index, mask: int) -> None:
        self._idx = index
        self._mask = mask

    # mapping-like access
    def __len__(self) -> int:
        return self._mask.bit_count()

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and cpu >= 0 and (self._mask >> cpu) & 1 == 1

    def __getitem__(self, cpu: int) -> CPUInfo:
        if cpu not in self:
            raise KeyError(cpu)
        return self._idx.cpu_info[cpu]

    def items(self) -> list[tuple[int, CPUInfo]]:
        return [(cpu, self._idx.cpu_info[cpu]) for cpu in self.cpus()]

    @property
    def mask(self) -> int:
        return self._mask

    def keep_only(self, cpus: CPUSet) -> CPUDetails:
        """The restriction of this view to ``cpus``."""
        return CPUDetails(self._idx, self._mask & cpus.mask)

    def cpus(self) -> CPUSet:
        return CPUSet.from_mask(self._mask)

    def _ids_with_cpus(self, groups: Mapping[int, int], ids: Iterable[int] | None) -> CPUSet:
        keys = groups if ids is None else ids
        return CPUSet(k for k in keys if groups.get(k, 0) & self._mask)

    def numa_nodes(self) -> CPUSet:
        return self._ids_with_cpus(self._idx.numa_cpus, None)

    def sockets(self) -> CPUSet:
        return self._ids_with_cpus(self._idx.socket_cpus, None)

    def cores(self) -> CPUSet:
        return self._ids_with_cpus(self._idx.core_cpus, None)

    def _cpus_in(self, groups: Mapping[int, int], ids: Iterable[int]) -> CPUSet:
        bits = 0
        for i in ids:
            bits |= groups.get(i, 0)
        return CPUSet.from_mask(bits & self._mask)

    def cpus_in_numa_nodes(self, *ids: int) -> CPUSet:
        return self._cpus_in(self._idx.numa_cpus, ids)

    def cpus_in_sockets(self, *ids: int) -> CPUSet:
        return self._cpus_in(self._idx.socket_cpus, ids)

    def cpus_in_cores(self, *ids: int) -> CPUSet:
        return self._cpus_in(self._idx.core_cpus, ids)

    def cores_in_numa_nodes(self, *ids: int) -> CPUSet:
        wanted = set(ids)
        return CPUSet(
            core
            for core, bits in self._idx.core_cpus.items()
            if bits & self._mask and self._idx.core_numa[core] in wanted
        )

    def cores_in_sockets(self, *ids: int) -> CPUSet:
        wanted = set(ids)
        return CPUSet(
            core
            for core, bits in self._idx.core_cpus.items()
            if bits & self._mask and self._idx.core_socket[core] in wanted
        )

    def l3_caches(self) -> tuple[int, ...]:
        """The L3 ids of this view's CPUs, ascending (``NO_L3_CACHE`` first when present).

        A tuple, not a CPUSet: an L3 id may be -1.
        """
        return tuple(l3 for l3, bits in self._idx.l3_cpus.items() if bits & self._mask)

    def cpus_in_l3_caches(self, *ids: int) -> CPUSet:
        return self._cpus_in(self._idx.l3_cpus, ids)

    def numa_nodes_in_sockets(self, *ids: int) -> CPUSet:
        bits = 0
        for s in ids:
            bits |= self._idx.socket_cpus.get(s, 0)
        return self._ids_with_cpus(
            {n: m & bits for n, m in self._idx.numa_cpus.items()},
            None,
        )

    def sockets_in_numa_nodes(self, *ids: int) -> CPUSet:
        bits = 0
        for n in ids:
            bits |= self._idx.numa_cpus.get(n, 0)
        return self._ids_with_cpus(
            {s: m & bits for s, m in self._idx.socket_cpus.items()},
            None,
        )


@dataclass(frozen=True, slots=True)
class NUMADistances:
    """The NUMA distance matrix as sysfs gives it: ``distance[from][to]``.

    Holds every NUMA node with memory, including memory-only nodes that the CPU topology
    leaves out (§1.3).
    """

    matrix: Mapping[int, Mapping[int, int]]

    @staticmethod
    def of(matrix: Mapping[int, Mapping[int, int]]) -> NUMADistances:
        """Validate and freeze a matrix.

        Raises:
            TopologyError: a row does not cover every node, or a distance is not positive.
        """
        nodes = sorted(matrix)
        frozen: dict[int, Mapping[int, int]] = {}
        for n in nodes:
            row = matrix[n]
            if sorted(row) != nodes:
                raise TopologyError(
                    f"NUMA distance row of node {n} covers nodes {sorted(row)}, expected {nodes}"
                )
            for m, d in row.items():
                if d <= 0:
                    raise TopologyError(f"NUMA distance {n}->{m} is {d}, must be positive")
            frozen[n] = MappingProxyType({m: row[m] for m in nodes})
        return NUMADistances(MappingProxyType(frozen))

    def nodes(self) -> list[int]:
        return sorted(self.matrix)

    def distance(self, src: int, dst: int) -> int:
        return self.matrix[src][dst]

    def as_lists(self) -> dict[int, list[int]]:
        """Each node's row in node order, as ``/sys/devices/system/node/nodeN/distance``."""
        nodes = self.nodes()
        return {n: [self.matrix[n][m] for m in nodes] for n in nodes}


class CPUTopology:
    """A node's CPU topology (§1.2) with its NUMA distances.

    Args:
        num_cpus: logical CPUs as the machine reports them (the synthetic generator keeps the
            requested number even when its quirk drops CPUs, §1.3).
        num_cores: physical cores.
        num_sockets: sockets.
        num_numa_nodes: NUMA nodes with CPUs.
        cpu_details: where each CPU sits.
        distances: the NUMA distance matrix; may hold memory-only nodes too.
        l3_caches: each CPU's L3 id (the cache's lowest CPU); ``None`` puts each NUMA node's
            CPUs in one L3 (the reference's dummy topology). A CPU the mapping leaves out has
            no L3 (``NO_L3_CACHE``).
    """

    __slots__ = (
        "_fingerprint",
        "_index",
        "cpu_details",
        "distances",
        "num_cores",
        "num_cpus",
        "num_numa_nodes",
        "num_sockets",
    )

    def __init__(
        self,
        *,
        num_cpus: int,
        num_cores: int,
        num_sockets: int,
        num_numa_nodes: int,
        cpu_details: Mapping[int, CPUInfo],
        distances: NUMADistances,
        l3_caches: Mapping[int, int] | None = None,
    ) -> None:
        self.num_cpus = num_cpus
        self.num_cores = num_cores
        self.num_sockets = num_sockets
        self.num_numa_nodes = num_numa_nodes
        if l3_caches is None:
            numa_lowest: dict[int, int] = {}
            for cpu, info in sorted(cpu_details.items()):
                numa_lowest.setdefault(info.numa_id, cpu)
            cpu_l3 = {cpu: numa_lowest[info.numa_id] for cpu, info in cpu_details.items()}
        else:
            cpu_l3 = {cpu: l3_caches.get(cpu, NO_L3_CACHE) for cpu in cpu_details}
        self._index = _Index(cpu_details, cpu_l3)
        self.cpu_details = CPUDetails(self._index, self._index.all_mask)
        self.distances = distances
        self._fingerprint: str | None = None

    # -- derived counts (integer division, 0 when the divisor is 0) -----------------------

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @property
    def cpus_per_numa(self) -> int:
        return self.num_cpus // self.num_numa_nodes if self.num_numa_nodes else 0

    def numas_per_socket(self) -> int:
        """NUMA nodes per socket.

        Raises:
            TopologyError: the NUMA count is not a multiple of the socket count.
        """
        numas = len(self._index.numa_cpus)
        if self.num_sockets == 0 or numas % self.num_sockets != 0:
            raise TopologyError(f"invalid numasCount: {numas} and socketsCount: {self.num_sockets}")
        return numas // self.num_sockets

    def check_numa_cross_sockets(self, numas: Iterable[int]) -> bool:
        """True iff at least two NUMA nodes are given and they span more than one socket."""
        ids = list(numas)
        if len(ids) < 2:
            return False
        sockets: set[int] = set()
        for n in ids:
            sockets |= self._index.numa_socket.get(n, set())
        return len(sockets) > 1

    # -- convenience over the full details ------------------------------------------------

    def cpus(self) -> CPUSet:
        return self.cpu_details.cpus()

    def numa_nodes(self) -> list[int]:
        """NUMA nodes with CPUs, ascending."""
        return list(self._index.numa_cpus)

    def sockets(self) -> list[int]:
        return list(self._index.socket_cpus)

    def cpus_in_numa(self, numa: int) -> CPUSet:
        return CPUSet.from_mask(self._index.numa_cpus.get(numa, 0))

    def cpus_in_socket(self, socket: int) -> CPUSet:
        return CPUSet.from_mask(self._index.socket_cpus.get(socket, 0))

    def cpus_in_core(self, core: int) -> CPUSet:
        return CPUSet.from_mask(self._index.core_cpus.get(core, 0))

    def core_of(self, cpu: int) -> int:
        return self._index.cpu_info[cpu].core_id

    def numa_of(self, cpu: int) -> int:
        return self._index.cpu_info[cpu].numa_id

    def socket_of_numa(self, numa: int) -> int:
        """The socket a NUMA node belongs to (its lowest, should it span several)."""
        return min(self._index.numa_socket[numa])

    def numa_masks(self) -> Mapping[int, int]:
        """NUMA id → bitmask of its CPUs, ascending ids (for hot loops)."""
        return self._index.numa_cpus

    def core_masks(self) -> Mapping[int, int]:
        """Core id → bitmask of its CPUs, ascending ids (for hot loops)."""
        return self._index.core_cpus

    def socket_masks(self) -> Mapping[int, int]:
        """Socket id → bitmask of its CPUs, ascending ids (for hot loops)."""
        return self._index.socket_cpus

    def l3_masks(self) -> Mapping[int, int]:
        """L3 id → bitmask of its CPUs, ascending ids (``NO_L3_CACHE`` first when present)."""
        return self._index.l3_cpus

    def l3_of(self, cpu: int) -> int:
        """The L3 id of a CPU (``NO_L3_CACHE`` when it has none)."""
        return self._index.cpu_l3[cpu]

    def cpus_in_l3(self, l3: int) -> CPUSet:
        return CPUSet.from_mask(self._index.l3_cpus.get(l3, 0))

    def has_default_l3_layout(self) -> bool:
        """Whether the L3 level is one cache per NUMA node (the default)."""
        numas = self._index.numa_cpus.values()
        return self._index.l3_cpus == {(bits & -bits).bit_length() - 1: bits for bits in numas}

    def core_numa(self) -> Mapping[int, int]:
        return self._index.core_numa

    def core_socket(self) -> Mapping[int, int]:
        return self._index.core_socket

    def fingerprint(self) -> str:
        """A short stable digest of the shape (CPU placement and distances).

        A journal written on one machine shape is refused on another by comparing these.
        """
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(
                f"{self.num_cpus}/{self.num_cores}/{self.num_sockets}/{self.num_numa_nodes}".encode()
            )
            for cpu, info in sorted(self._index.cpu_info.items()):
                h.update(f";{cpu}:{info.numa_id}:{info.socket_id}:{info.core_id}".encode())
            for n, row in sorted(self.distances.as_lists().items()):
                h.update(f";d{n}:{row}".encode())
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CPUTopology):
            return NotImplemented
        # The L3 level is compared apart from the fingerprint (see the module docstring), so
        # caches keyed by topology never mix two L3 layouts of one shape.
        return (
            self.fingerprint() == other.fingerprint()
            and self._index.l3_cpus == other._index.l3_cpus
        )

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def __repr__(self) -> str:
        return (
            f"CPUTopology(cpus={self.num_cpus}, cores={self.num_cores}, "
            f"sockets={self.num_sockets}, numas={self.num_numa_nodes})"
        )


def numa_aware_assignments(topology: CPUTopology, cpuset: CPUSet) -> dict[int, CPUSet]:
    """Split ``cpuset`` by NUMA node, keeping only non-empty parts (§1.4)."""
    bits = cpuset.mask
    out: dict[int, CPUSet] = {}
    if not bits:
        return out
    for numa, numa_bits in topology.numa_masks().items():
        part = bits & numa_bits
        if part:
            out[numa] = CPUSet.from_mask(part)
    return out
