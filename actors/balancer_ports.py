"""What the MemoryBalancer reads and whom it hands advices to (memory-balancer §4, §11)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from actors.balancer_inputs import PodsProvider
from actors.ports.balancer import ContainerMemoryReader, NumaDistanceSource, NumaMetricSource
from actors.ports.migration import AdviceExecutor
from actors.ports.pod_source import PodSource

__all__ = ["BalancerPorts", "RoundHealth"]

#: Told after every tick: None when it went well, else why not ("update by error",
#: cpu-policy §12.3). It must not block.
RoundHealth = Callable[[str | None], None]


@dataclass(frozen=True, slots=True)
class BalancerPorts:
    """What the balancer reads and whom it hands advices to.

    Attributes:
        metrics: per-NUMA latency and bandwidth (§4.1).
        distances: the NUMA distance lists, read once at start (§4.4).
        memory: per-container anonymous memory per NUMA (§4.2).
        pods: the pods in pools, from the StateStore's CPU snapshot (§4.5).
        executor: carries out emitted advices (§11); None: advices are only journaled.
        pod_source: the node's pods, whose latest listing gives each round its container
            IDs (per-container memory and migration); None: every pod is read and migrated
            through its pod cgroup.
        health: told how each tick went; None: nobody watches.
    """

    metrics: NumaMetricSource
    distances: NumaDistanceSource
    memory: ContainerMemoryReader
    pods: PodsProvider
    executor: AdviceExecutor | None = None
    pod_source: PodSource | None = None
    health: RoundHealth | None = None
