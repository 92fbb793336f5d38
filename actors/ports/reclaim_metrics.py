"""The reclaim metrics port: what the v0.5.47 suppression eviction measures of the reclaim
pool (katalyst-core v0.5.47 ``metaserver/agent/metric/helper/reclaim.go`` ``GetReclaimMetrics``;
``policy.cpu.pressure.suppression_numa``).

The reference reads, from its metrics server (malachite):

* ``cpu.usage.ratio.cpu``: each CPU's busy share over the last sampling window, summed over
  a part's CPUs (``AggregateCoreMetric(cpus, ..., sum)``);
* ``cpu.usage.cgroup``: the reclaim cgroup's CPU usage, in CPUs;
* ``cpu.quota.cgroup`` / ``cpu.period.cgroup``: its CFS quota and period (microseconds;
  a quota ``<= 0`` is none).

qrmd reads them through a ``ReclaimMetricsSource``; ``qrmd.host.reclaim_metrics`` holds the
host adapter (``/proc/stat`` and the cpu controller's cgroup tree) and a fixed one
(``--reclaim-metrics-source``). One ``read`` is one window for every part of a call, so the
parts of one ``GetEvictPods`` are measured over the same interval.

The rule every adapter keeps (as the CPU load port's): what cannot be read is a
``MissingMetric`` with the reason, never a zero: a zero usage would inflate the supply and
hide suppression. Ports are called from the CPU pressure actor's thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["CgroupCPU", "MissingMetric", "ReclaimMetricsSource", "ReclaimReading"]


@dataclass(frozen=True, slots=True)
class MissingMetric:
    """A metric that could not be read this time, and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class CgroupCPU:
    """One cgroup's CPU figures.

    Attributes:
        usage: CPUs used over the window (``cpu.usage.cgroup``).
        cfs_quota: the CFS quota in microseconds; ``-1`` when there is none.
        cfs_period: the CFS period in microseconds.
    """

    usage: float
    cfs_quota: float
    cfs_period: float


@dataclass(frozen=True, slots=True)
class ReclaimReading:
    """One window's figures.

    Attributes:
        core_usage: each CPU's busy share over the window (0..1), by CPU id; or why none.
        cgroups: each cgroup asked for (relative to the cpu controller's mount).
    """

    core_usage: Mapping[int, float] | MissingMetric
    cgroups: Mapping[str, CgroupCPU | MissingMetric]


@runtime_checkable
class ReclaimMetricsSource(Protocol):
    """Where the reclaim pool's usage and its cgroups' usage and quota are read."""

    def cgroup_exists(self, relative_path: str) -> bool:
        """Whether the cgroup exists (``general.IsPathExists`` of its absolute path)."""
        ...

    def read(self, cgroups: Sequence[str]) -> ReclaimReading:
        """Every CPU's usage and each cgroup's figures over the window since the last read
        (or since the source started); every cgroup asked for has an answer."""
        ...
