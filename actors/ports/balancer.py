"""What the MemoryBalancer reads each round (spec memory-balancer §4).

A balance round needs, for every NUMA node of the distance map, its read latency and read+write
bandwidth (§4.1); the NUMA distance lists (§4.4); and the anonymous memory per NUMA node of the
containers of the pods in the balanced pools (§4.2). Each is a port here; ``qrmd/host`` holds the
adapters (sysfs, cgroup ``memory.numa_stat``, a collector's JSON file, Prometheus, resctrl, a
simulator) and the composition root picks them from configuration.

The rules every adapter keeps:

* A metric that cannot be read this round (absent, expired by the insurance period of §4.3,
  unreadable, not a number) is a ``MissingSample`` with the reason, **never a zero**: a zero
  would pass the round's zero guard (§7.2) and silently hide pressure, while a missing sample
  fails the round as the reference does (§7.1). ``sample`` itself does not raise for that.
* Anonymous memory is in bytes per NUMA id. A NUMA node absent from a container's mapping has
  no sample there, so pods containing that container are skipped (§4.2); it is not zero either.
* Ports are called from one actor's thread at a time; an adapter needs no locking of its own
  unless the composition root shares it (the simulator does, for the demo).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from actors.errors import ActorError
from policy.balance import MissingSample, NumaDistance, NumaMetrics
from policy.balance.amounts import NumaAmounts
from policy.balance.decode import in_numa_order
from policy.errors import ErrorKind

__all__ = [
    "AnonMemoryUnavailable",
    "BatchedContainerMemoryReader",
    "ContainerMemoryReader",
    "MissingSample",
    "NumaDistanceSource",
    "NumaMetricSource",
    "NumaMetrics",
    "PodAnonMemory",
]


@runtime_checkable
class NumaMetricSource(Protocol):
    """Per-NUMA read latency and read+write bandwidth, sampled once per round (§4.1)."""

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Read every NUMA node's metrics now.

        Args:
            numa_ids: the NUMA nodes the round reads, ascending (every node of the distance map).

        Returns:
            One ``NumaMetrics`` per requested id. A value that could not be read is a
            ``MissingSample(reason)`` in its field; the mapping holds every requested id.
        """
        ...


@runtime_checkable
class NumaDistanceSource(Protocol):
    """The NUMA distance lists (§4.4), read once at start-up."""

    def distances(self) -> Mapping[int, tuple[NumaDistance, ...]]:
        """Each NUMA node's distance list, nodes ascending, entries in NUMA-id order.

        Returns:
            NUMA id → its ``(NumaID, Distance)`` entries. A host adapter includes the node
            itself (its local distance, as sysfs does); a synthetic one may omit it (§4.4, O5).

        Raises:
            ValueError: the distances cannot be read or are malformed; the message names the
                file. Start-up fails (§4.4).
        """
        ...


class AnonMemoryUnavailable(ActorError):  # noqa: N818 - reads as what happened to the pod
    """A pod's or container's anonymous memory cannot be read (no cgroup, unreadable or
    malformed ``memory.numa_stat``). The message names the pod, the container and the file.

    The balancer skips such a pod for this round (§4.2): it is not an error of the round.
    """

    kind = ErrorKind.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class PodAnonMemory:
    """A pod's anonymous memory per NUMA node, in bytes (§4.2).

    Attributes:
        pod: the pod cgroup's own hierarchical figure in bytes (every process under the pod,
            including the sandbox and containers not listed): a round uses it only when it
            has no container IDs, else ``containers``.
        containers: container ID → NUMA id → bytes (ints as read, or a ``NumaAmounts``'s
            floats, below). Keyed by the IDs the caller asked for,
            verbatim; when it asked for none, by the ID found in each container cgroup's name.

    Every map is copied in NUMA order, except a figure (the pod's or a container's) given
    as a ``NumaAmounts`` (``policy.balance.amounts``): read-only and in NUMA order already, its
    amounts the floats a round's checks make of the bytes read, it is kept as it is, and the
    round takes it as checked (``Container``). A source whose figures change only when it
    is told (the simulator) makes them once, not on each of a round's thousands of reads.
    """

    pod: Mapping[int, float]
    containers: Mapping[str, Mapping[int, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.pod) is not NumaAmounts:
            object.__setattr__(self, "pod", MappingProxyType(in_numa_order(self.pod)))
        object.__setattr__(
            self,
            "containers",
            MappingProxyType(
                {
                    cid: anon
                    if type(anon) is NumaAmounts
                    else MappingProxyType(in_numa_order(anon))
                    for cid, anon in sorted(self.containers.items())
                }
            ),
        )


def _ordered_copy(anon: Mapping[int, int]) -> dict[int, int]:
    """A copy in NUMA order; sorted only when the reader did not give that order already
    (``memory.numa_stat`` lists its nodes in order: a round reads thousands of these)."""
    numas = list(anon)
    if numas == sorted(numas):
        return dict(anon)
    return dict(sorted(anon.items()))


@runtime_checkable
class ContainerMemoryReader(Protocol):
    """Anonymous memory per NUMA node of a pod and its containers (§4.2)."""

    def anon_by_numa(self, pod_uid: str, container_ids: Sequence[str] | None) -> PodAnonMemory:
        """Read the pod's and its containers' anonymous memory per NUMA node now.

        Args:
            pod_uid: the pod's UID, as the pod source reports it.
            container_ids: the pod's regular containers' IDs as the pod source reports them
                (``containerd://<id>``, ``docker://<id>``, ``cri-o://<id>`` or a bare ID); None
                when there is no pod source: every container cgroup under the pod is read.

        Returns:
            The pod-level figure and one entry per container.

        Raises:
            AnonMemoryUnavailable: the pod's cgroup or a listed container's cgroup is not
                found, or its ``memory.numa_stat`` is unreadable or malformed.
        """
        ...


@runtime_checkable
class BatchedContainerMemoryReader(ContainerMemoryReader, Protocol):
    """A ``ContainerMemoryReader`` that also reads the listed containers of many pods at once.

    A round reads every pod of the balanced pools (§4.2): a source whose figures are at hand
    (the simulator) answers them all in one call rather than one call per pod. The round uses
    it for the pods whose container IDs it knows, and ``anon_by_numa`` for the others; a
    reader without it (the cgroup reader, whose cost is its files) is read pod by pod.
    """

    def containers_anon_by_numa(
        self, pods: Sequence[tuple[str, Sequence[str]]]
    ) -> list[tuple[Mapping[int, float], ...] | AnonMemoryUnavailable]:
        """Read the listed containers' anonymous memory per NUMA node of every pod now.

        Args:
            pods: per pod, its UID and its regular containers' IDs, as for ``anon_by_numa``.

        Returns:
            Per pod, in order: each listed container's figure, in the order of its IDs
            (``anon_by_numa(uid, ids).containers[id]``, as that figure is given); or, for a
            pod ``anon_by_numa`` would refuse, the ``AnonMemoryUnavailable`` it would raise.
        """
        ...
