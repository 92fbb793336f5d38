"""A deterministic per-container anonymous-memory source for tests and benchmarks (spec
memory-balancer §4.2).

The counterpart of ``metrics`` for the ``ContainerMemoryReader`` port: a test says how much
anonymous memory each container holds on each NUMA node, and the balancer reads it as it would
read cgroup ``memory.numa_stat`` on a node::

    memory = SimulatedContainerMemory()
    memory.set_container("pod-a", "containerd://c1", {0: 4 << 30, 1: 1 << 30})
    memory.anon_by_numa("pod-a", ["containerd://c1"]).containers  # {'containerd://c1': {...}}

Like the cgroup reader, an unknown pod or container raises ``AnonMemoryUnavailable`` (the
balancer skips the pod), and a node a container has no figure for has no key (never a zero).
The pod-level figure is the per-node sum over the pod's containers, as a pod cgroup's
hierarchical counter is. Guarded by a lock: a test changes figures from its own thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from actors.ports.balancer import AnonMemoryUnavailable, PodAnonMemory
from policy.balance.amounts import NumaAmounts, numa_index
from policy.balance.decode import amounts_in_bulk

__all__ = ["SimulatedContainerMemory"]


class SimulatedContainerMemory:
    """The ``ContainerMemoryReader`` port on figures the caller sets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, _PodFigures] = {}

    def set_container(self, pod_uid: str, container_id: str, anon: Mapping[int, int]) -> None:
        """Set one container's anonymous memory per NUMA node, in bytes.

        Raises:
            ValueError: a NUMA id or an amount is negative.
        """
        for numa, amount in anon.items():
            if numa < 0 or amount < 0:
                raise ValueError(
                    f"pod {pod_uid} container {container_id}: NUMA {numa} holds {amount} bytes; "
                    "ids and amounts must not be negative"
                )
        # In NUMA order, as memory.numa_stat lists its nodes (N0=... N1=...).
        figures = dict(sorted(anon.items()))
        checked = _checked(figures)
        with self._lock:
            known = self._pods.get(pod_uid)
            containers = {} if known is None else dict(known.containers)
            containers[container_id] = figures
            read = {} if known is None else dict(known.read)
            read[container_id] = checked
            self._pods[pod_uid] = _PodFigures.of(containers, read)

    def remove_pod(self, pod_uid: str) -> None:
        """Forget a pod (it was deleted); unknown pods are ignored."""
        with self._lock:
            self._pods.pop(pod_uid, None)

    def anon_by_numa(self, pod_uid: str, container_ids: Sequence[str] | None) -> PodAnonMemory:
        """The pod's figures (``ContainerMemoryReader``).

        Raises:
            AnonMemoryUnavailable: the pod, or a listed container, has no figures.
        """
        with self._lock:
            figures = self._pods.get(pod_uid)
        if figures is None:
            raise AnonMemoryUnavailable(f"pod {pod_uid}: not simulated")
        every = figures.read
        if container_ids is None:
            return PodAnonMemory(pod=figures.pod, containers=every)
        if any(cid not in every for cid in container_ids):
            raise _unknown_container(pod_uid, container_ids, every)
        return PodAnonMemory(pod=figures.pod, containers={cid: every[cid] for cid in container_ids})

    def containers_anon_by_numa(
        self, pods: Sequence[tuple[str, Sequence[str]]]
    ) -> list[tuple[Mapping[int, float], ...] | AnonMemoryUnavailable]:
        """Every pod's listed containers' figures in one call (``BatchedContainerMemoryReader``):
        what ``anon_by_numa`` gives of each, read under the lock once, as of one instant."""
        answers: list[tuple[Mapping[int, float], ...] | AnonMemoryUnavailable] = []
        with self._lock:
            known = self._pods
            for pod_uid, container_ids in pods:
                figures = known.get(pod_uid)
                if figures is None:
                    answers.append(AnonMemoryUnavailable(f"pod {pod_uid}: not simulated"))
                    continue
                every = figures.read
                try:
                    answers.append(tuple(map(every.__getitem__, container_ids)))
                except KeyError:
                    answers.append(_unknown_container(pod_uid, container_ids, every))
        return answers


def _unknown_container(
    pod_uid: str, container_ids: Sequence[str], every: Mapping[str, object]
) -> AnonMemoryUnavailable:
    unknown = next(cid for cid in container_ids if cid not in every)
    return AnonMemoryUnavailable(
        f"pod {pod_uid}: container {unknown} is not simulated (have {', '.join(sorted(every))})"
    )


def _checked(figures: dict[int, int]) -> Mapping[int, float]:
    """A container's or a pod's figures as a round reads them: a ``NumaAmounts`` made once,
    when they are set, rather than a copy per read (``PodAnonMemory``); as set when a round's
    checks refuse them (a value beyond int64), so that the round refuses them as it reads
    them."""
    bulk = amounts_in_bulk(figures)
    return figures if bulk is None else NumaAmounts(numa_index(bulk[0]), bulk[1])


@dataclass(frozen=True, slots=True)
class _PodFigures:
    """One pod's figures as a read sees them: its containers' and their per-node sum.

    Replaced whole on every change and never changed in place, so a read takes it under the
    lock and builds its answer outside it (``PodAnonMemory`` keeps the pod's figure and each
    container's in ``read`` as they are: read-only values made when they were set). The
    pod's sum is kept up to date on each change, as the kernel keeps a pod cgroup's
    hierarchical counter, rather than summed on every read.
    """

    containers: dict[str, dict[int, int]]
    read: dict[str, Mapping[int, float]]
    pod: Mapping[int, float]

    @classmethod
    def of(
        cls,
        containers: dict[str, dict[int, int]],
        read: dict[str, Mapping[int, float]],
    ) -> _PodFigures:
        pod: dict[int, int] = {}
        for anon in containers.values():
            for numa, amount in anon.items():
                pod[numa] = pod.get(numa, 0) + amount
        return cls(containers, read, _checked(dict(sorted(pod.items()))))
