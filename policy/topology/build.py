"""Assemble a CPUTopology from physical cores: the one path shared by machine files and sysfs.

Spec cpu-policy §1.2: on a real host every CPU gets the NUMA node that lists it, its socket,
and ``core_id`` = the lowest CPU id among its core's thread siblings, so core ids are globally
unique; ``num_cores`` counts physical cores. §1.3: NUMA nodes with memory and no CPUs are no
NUMA nodes of the CPU topology but stay in the distance matrix.

A machine description (a hand-written machine file, or what sysfs says) is reduced to a list
of ``CoreSpec`` (socket, NUMA node, thread siblings) plus a distance matrix; this module checks
that the pieces fit and builds the topology. Where no distances are known, qrmd's synthetic
rule applies (10 local, 12 within a socket, 21 across sockets, §1.3).

The L3 caches, when the description has them, are the CPU sets each cache is shared by (sysfs
``cache/index3/shared_cpu_list``); a cache's id is its lowest CPU, like a core's. Without
them, each NUMA node is one L3 (the reference's dummy topology, cpu-policy-v0.5.47 (b)).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from policy.topology.cpuset import CPUSet
from policy.topology.model import (
    NO_L3_CACHE,
    CPUInfo,
    CPUTopology,
    NUMADistances,
    TopologyError,
)
from policy.topology.synthetic import LOCAL_DISTANCE, REMOTE_SOCKET_DISTANCE, SAME_SOCKET_DISTANCE

__all__ = [
    "CoreSpec",
    "assemble_topology",
    "default_distances",
    "l3_ids_of_caches",
    "parse_cpu_list",
]


@dataclass(frozen=True, slots=True)
class CoreSpec:
    """One physical core: where it sits and its thread siblings (logical CPU ids)."""

    socket_id: int
    numa_id: int
    cpus: tuple[int, ...]

    @property
    def core_id(self) -> int:
        """The lowest CPU id among the siblings (§1.2)."""
        return min(self.cpus)


def parse_cpu_list(text: str) -> CPUSet:
    """Parse a Linux CPU list (``0-3,8``) strictly, as the kernel writes it.

    Unlike ``CPUSet.parse``, which keeps the reference's leniency for checkpoints (§1.1),
    operator and kernel input gets no silent drops: a reversed range or a three-part piece is
    an error. Surrounding whitespace (the kernel's trailing newline) is ignored.

    Args:
        text: the list, e.g. ``"0-11,48-59"``; empty means no CPUs.

    Returns:
        The CPUs the list names.

    Raises:
        TopologyError: naming the offending piece.
    """
    body = text.strip()
    if not body:
        return CPUSet()
    bits = 0
    for piece in body.split(","):
        first, sep, last = piece.partition("-")
        lo = _cpu_id(first, piece, body)
        hi = _cpu_id(last, piece, body) if sep else lo
        if hi < lo:
            raise TopologyError(f"CPU list {body!r}: range {piece!r} runs backwards")
        bits |= ((1 << (hi - lo + 1)) - 1) << lo
    return CPUSet.from_mask(bits)


def _cpu_id(token: str, piece: str, body: str) -> int:
    if not token or not token.isascii() or not token.isdigit():
        raise TopologyError(f"CPU list {body!r}: {piece!r} is not a CPU id or a range a-b")
    return int(token)


def default_distances(numa_sockets: Mapping[int, Iterable[int]]) -> dict[int, dict[int, int]]:
    """qrmd's distance rule for nodes whose distances nobody gave (§1.3).

    Args:
        numa_sockets: each NUMA node's sockets (a node spanning sockets, as on AMD NPS0, lists
            several; two nodes sharing any socket count as same-socket).

    Returns:
        ``distance[from][to]`` for every pair of the given nodes.
    """
    sockets = {n: set(s) for n, s in numa_sockets.items()}
    return {
        a: {
            b: LOCAL_DISTANCE
            if a == b
            else SAME_SOCKET_DISTANCE
            if sockets[a] & sockets[b]
            else REMOTE_SOCKET_DISTANCE
            for b in sorted(sockets)
        }
        for a in sorted(sockets)
    }


def l3_ids_of_caches(caches: Iterable[CPUSet], cpus: Iterable[int]) -> dict[int, int]:
    """Each CPU's L3 id from the caches' CPU sets: the cache's lowest CPU.

    Args:
        caches: the CPUs each L3 cache is shared by; a cache listed twice counts once.
        cpus: the machine's CPUs; one no cache holds gets ``NO_L3_CACHE``.

    Returns:
        ``cpu → L3 id`` for every CPU of ``cpus``.

    Raises:
        TopologyError: two different caches share a CPU, or a cache names no CPU.
    """
    of: dict[int, int] = {}
    seen: dict[int, CPUSet] = {}
    for cache in caches:
        if cache.is_empty():
            raise TopologyError("an L3 cache is shared by no CPU")
        l3 = cache.min()
        if l3 in seen and seen[l3] == cache:
            continue
        for cpu in cache:
            if cpu in of:
                raise TopologyError(f"CPU {cpu} is in two L3 caches ({seen[of[cpu]]} and {cache})")
            of[cpu] = l3
        seen[l3] = cache
    return {cpu: of.get(cpu, NO_L3_CACHE) for cpu in cpus}


def assemble_topology(
    cores: Sequence[CoreSpec],
    *,
    distances: Mapping[int, Mapping[int, int]] | None = None,
    l3_caches: Sequence[CPUSet] | None = None,
) -> CPUTopology:
    """Build the topology of a machine from its physical cores.

    Args:
        cores: every physical core once; each CPU in exactly one core.
        distances: the NUMA distance matrix over every node with memory or CPUs, memory-only
            nodes included; ``None`` applies the default rule to the CPU nodes.
        l3_caches: the CPUs each L3 cache is shared by (CPUs outside the machine are
            ignored; a CPU in none has no L3); ``None`` makes each NUMA node one L3.

    Returns:
        The topology: ``num_cpus`` = CPUs listed, ``num_cores`` = cores given,
        ``num_sockets``/``num_numa_nodes`` = distinct ids among the cores.

    Raises:
        TopologyError: no cores, a core without CPUs, a CPU in two cores, a NUMA node with
            CPUs that the distance matrix leaves out, or a CPU in two L3 caches.
    """
    if not cores:
        raise TopologyError("a machine needs at least one core")
    details: dict[int, CPUInfo] = {}
    numa_sockets: dict[int, set[int]] = {}
    for core in cores:
        if not core.cpus:
            raise TopologyError(f"a core of NUMA node {core.numa_id} has no CPUs")
        core_id = core.core_id
        for cpu in core.cpus:
            if cpu < 0:
                raise TopologyError(f"CPU ids are non-negative, got {cpu}")
            if cpu in details:
                raise TopologyError(
                    f"CPU {cpu} is in two cores ({details[cpu].core_id} and {core_id})"
                )
            details[cpu] = CPUInfo(numa_id=core.numa_id, socket_id=core.socket_id, core_id=core_id)
        numa_sockets.setdefault(core.numa_id, set()).add(core.socket_id)
    if distances is None:
        distances = default_distances(numa_sockets)
    missing = sorted(set(numa_sockets) - set(distances))
    if missing:
        raise TopologyError(
            f"NUMA node(s) {','.join(map(str, missing))} have CPUs but no NUMA distances"
        )
    l3_of = None
    if l3_caches is not None:
        machine = CPUSet(details)
        l3_of = l3_ids_of_caches(
            (c.intersection(machine) for c in l3_caches if c.intersection(machine)), details
        )
    return CPUTopology(
        num_cpus=len(details),
        num_cores=len(cores),
        num_sockets=len({c.socket_id for c in cores}),
        num_numa_nodes=len(numa_sockets),
        cpu_details=details,
        distances=NUMADistances.of(distances),
        l3_caches=l3_of,
    )
