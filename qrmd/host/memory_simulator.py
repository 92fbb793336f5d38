"""A deterministic per-container anonymous-memory source for tests and the demo (spec
memory-balancer §4.2).

The counterpart of ``metrics_simulator`` for the ``ContainerMemoryReader`` port: the demo says
how much anonymous memory each container holds on each NUMA node, and the balancer reads it as
it would read cgroup ``memory.numa_stat`` on a node::

    memory = SimulatedContainerMemory()
    memory.set_container("pod-a", "containerd://c1", {0: 4 << 30, 1: 1 << 30})
    memory.anon_by_numa("pod-a", ["containerd://c1"]).containers  # {'containerd://c1': {...}}

Like the cgroup reader, an unknown pod or container raises ``AnonMemoryUnavailable`` (the
balancer skips the pod), and a node a container has no figure for has no key (never a zero).
The pod-level figure is the per-node sum over the pod's containers, as a pod cgroup's
hierarchical counter is. Guarded by a lock: the demo changes figures from its own thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from actors.ports.balancer import AnonMemoryUnavailable, PodAnonMemory

__all__ = ["SimulatedContainerMemory"]


class SimulatedContainerMemory:
    """The ``ContainerMemoryReader`` port on figures the caller sets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, dict[int, int]]] = {}

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
        with self._lock:
            self._pods.setdefault(pod_uid, {})[container_id] = dict(anon)

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
            snapshot = self._pods.get(pod_uid)
            every = None if snapshot is None else {c: dict(a) for c, a in snapshot.items()}
        if every is None:
            raise AnonMemoryUnavailable(f"pod {pod_uid}: not simulated")
        pod: dict[int, int] = {}
        for anon in every.values():
            for numa, amount in anon.items():
                pod[numa] = pod.get(numa, 0) + amount
        if container_ids is None:
            return PodAnonMemory(pod=pod, containers=every)
        unknown = [cid for cid in container_ids if cid not in every]
        if unknown:
            raise AnonMemoryUnavailable(
                f"pod {pod_uid}: container {unknown[0]} is not simulated "
                f"(have {', '.join(sorted(every))})"
            )
        return PodAnonMemory(pod=pod, containers={cid: every[cid] for cid in container_ids})
