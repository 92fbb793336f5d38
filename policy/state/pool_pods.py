"""The pods in the pools, as the memory balancer lists them from the CPU section (spec
memory-balancer §4.5).

A pod is listed in the pool its main container's entry is owned by, each pod once (O22), with
its regular containers in pod-spec order (``container_index``); a pool's NUMA list is the
ascending NUMA ids its cpuset has CPUs on. A pod whose main container has no owner pool (still
ramping up, §4.5) is in no pool. The CPU section knows no container IDs, so they are None here
until a pod source supplies them.

A pure query on ``CPUState``: the MemoryBalancer asks it once per computed round, on the
StateStore's latest snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policy.errors import StateError
from policy.state.cpu_state import CPUState
from policy.state.entries import CONTAINER_TYPE_MAIN, CONTAINER_TYPE_SIDECAR

__all__ = ["PodsInPools", "PoolPod", "pods_in_pools"]

# Regular containers (§4.2): kubelet allocates CPUs for these; init containers are not counted.
_REGULAR = (CONTAINER_TYPE_MAIN, CONTAINER_TYPE_SIDECAR)


@dataclass(frozen=True, slots=True)
class PoolPod:
    """A pod listed in a pool through its main container (§4.5).

    Attributes:
        uid, namespace, name: the pod.
        pool: its main container's owner pool.
        containers: its regular containers' names, in pod-spec order.
        container_ids: their IDs (``containerd://...``), same order; None when unknown.

    Raises:
        StateError: ``container_ids`` does not hold one ID per container.
    """

    uid: str
    namespace: str
    name: str
    pool: str
    containers: tuple[str, ...]
    container_ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.container_ids is not None and len(self.container_ids) != len(self.containers):
            raise StateError(
                f"pod {self.uid}: {len(self.container_ids)} container IDs for "
                f"{len(self.containers)} containers {list(self.containers)}"
            )


@dataclass(frozen=True, slots=True)
class PodsInPools:
    """Each pool's NUMA list and the pods in the pools."""

    pools: Mapping[str, tuple[int, ...]]
    pods: tuple[PoolPod, ...]


def pods_in_pools(cpu: CPUState) -> PodsInPools:
    """The pools and the pods in them, from the CPU section of a snapshot (§4.5).

    Args:
        cpu: the CPU section.

    Returns:
        Every pool's NUMA list, and every pod whose main container has an owner pool, by UID.
    """
    numa_masks = cpu.topology.numa_masks()
    pools = {
        name: tuple(numa for numa, mask in sorted(numa_masks.items()) if cpus.mask & mask)
        for name, cpus in sorted(cpu.pools.items())
    }
    pods: list[PoolPod] = []
    for uid in sorted(cpu.pods.keys()):
        main = cpu.main_container_entry(uid)
        if main is None or not main.owner_pool_name:
            continue
        regular = sorted(
            (e for e in cpu.pod_containers(uid).values() if e.container_type in _REGULAR),
            key=lambda e: (e.container_index, e.container_name),
        )
        pods.append(
            PoolPod(
                uid=uid,
                namespace=main.pod_namespace,
                name=main.pod_name,
                pool=main.owner_pool_name,
                containers=tuple(e.container_name for e in regular),
            )
        )
    return PodsInPools(pools=pools, pods=tuple(pods))
