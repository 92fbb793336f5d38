"""NUMA distance lists for the memory balancer, from sysfs or a known topology (spec
memory-balancer §4.4).

The balancer wants, per NUMA node, its ``(NumaID, Distance)`` entries in NUMA-id order. On a
host they come from ``/sys/devices/system/node/node<N>/distance``, read by the same code as the
CPU topology (``qrmd.host.sysfs_topology.read_numa_distances``), so the two can never disagree
about which nodes exist. The lists therefore **include the node itself** at its local distance
(normally 10), as the reference's sysfs lists do; the planner handles that shape (O5).

Ids are the nodes' own ids, not positions in the row. On a host with contiguous node ids (the
reference's assumption, O15) that is the same thing; on sparse ids it maps each distance to the
right node instead of mis-mapping it.

A machine described another way (a synthetic layout, a machine file: the demo) gives the same
lists through ``TopologyNumaDistances``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from policy.balance import NumaDistance
from policy.topology.model import NUMADistances
from qrmd.host.sysfs_topology import DEFAULT_SYSFS_ROOT, read_numa_distances

__all__ = ["SysfsNumaDistances", "TopologyNumaDistances", "distance_lists"]


def distance_lists(matrix: NUMADistances) -> Mapping[int, tuple[NumaDistance, ...]]:
    """Each node's distance list, self entry included, in node order.

    Args:
        matrix: the distance matrix (``distance[from][to]``).

    Returns:
        NUMA id → ``NumaDistance`` entries to every node, ascending by id.
    """
    nodes = matrix.nodes()
    return MappingProxyType(
        {n: tuple(NumaDistance(m, matrix.distance(n, m)) for m in nodes) for n in nodes}
    )


class TopologyNumaDistances:
    """The distance lists of a topology already in hand (synthetic, machine file, sysfs)."""

    def __init__(self, matrix: NUMADistances) -> None:
        self._lists = distance_lists(matrix)

    def distances(self) -> Mapping[int, tuple[NumaDistance, ...]]:
        """The lists (``NumaDistanceSource``)."""
        return self._lists


class SysfsNumaDistances:
    """The host's distance lists from sysfs, read on first use and kept (§4.4: read once).

    Args:
        root: the sysfs mount point, or a tree laid out like it (tests).
    """

    def __init__(self, root: Path | str = DEFAULT_SYSFS_ROOT) -> None:
        self._root = Path(root)
        self._lists: Mapping[int, tuple[NumaDistance, ...]] | None = None

    def distances(self) -> Mapping[int, tuple[NumaDistance, ...]]:
        """The lists (``NumaDistanceSource``).

        Raises:
            SysfsTopologyError: a ``distance`` or ``cpulist`` file is missing or malformed; the
                message names it. Nothing is kept, so the next call reads again.
        """
        if self._lists is None:
            self._lists = distance_lists(read_numa_distances(self._root))
        return self._lists
