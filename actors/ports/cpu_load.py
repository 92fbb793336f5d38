"""The CPU load port: each container's 1-minute CPU load, for the load pressure plugin
(katalyst-core v0.5.3 ``cpueviction/strategy/pressure_load.go``: ``GetContainerMetric(pod,
container, "cpu.load.1min.container")``; spec cpu-policy §12.7).

The reference reads the load from its metrics server (malachite). qrmd reads it through a
``ContainerLoadSource``; ``qrmd.host.cpu_load_sources`` holds the adapters (a collector's JSON
file, a Prometheus endpoint, a simulator) and the composition root picks one from
``--cpu-load-metrics-source``.

The rule every adapter keeps: a load that cannot be read (absent, stale, unreadable, not a
non-negative number) is a ``MissingLoad`` with the reason, **never a zero**. A zero would lower
its pool's sum and hide pressure; a missing load makes the pool unsampled for that collection
(``policy.cpu.pressure.load``), named in the log and the journal. ``sample`` does not raise for
that. Ports are called from the CPU pressure actor's thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["ContainerKey", "ContainerLoadSource", "MissingLoad"]

#: (pod UID, container name).
ContainerKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class MissingLoad:
    """No load for a container this time, and why (``"no sample in /run/qrmd/cpu-load.json"``)."""

    reason: str


@runtime_checkable
class ContainerLoadSource(Protocol):
    """Where containers' 1-minute CPU load (runnable tasks, as ``/proc/loadavg`` counts them)
    is read."""

    def sample(
        self, containers: Sequence[ContainerKey]
    ) -> Mapping[ContainerKey, float | MissingLoad]:
        """The load of each container asked for; every one asked for has an answer.

        Args:
            containers: the (pod UID, container) pairs of the CPU state's pooled containers.

        Returns:
            A load (``>= 0``) or ``MissingLoad`` for each.
        """
        ...
