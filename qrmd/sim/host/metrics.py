"""A settable NUMA metric source for tests, benchmarks and simulations (spec memory-balancer
§4.1).

Each NUMA node has a *profile*: its read latency and read+write bandwidth. The simulator returns
exactly those numbers at every round, so a test or a simulation decides what the balancer sees:

    sim = SimulatedNumaMetrics.quiet([0, 1, 2, 3])            # latency 40, bandwidth 100
    sim.put_under_pressure(0)                                  # latency 90, bandwidth 900
    sim.sample([0, 1, 2, 3])[0]  # NumaMetrics(read_latency=90.0, read_write_bandwidth=900.0)
    sim.relieve(0)                                             # back to its quiet profile

The profiles and the default pressure are those of the daemon's own fixed source
(``qrmd.host.metrics_fixed``, what ``--numa-metrics-source simulated`` selects), and every
read answers through it, so the two report a node alike. ``make_unreadable`` simulates a
collector that lost a node (its metrics are ``MissingSample``, so the round fails, §7.1).

A caller changes profiles from its own thread while the balancer samples from another, so the
profiles are guarded by a lock; every read returns a consistent snapshot. Each change makes the
fixed source the reads answer through, once: a read between changes (every round of a steady
simulation) makes nothing new.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from policy.balance import NumaMetrics
from qrmd.host.metrics_fixed import (
    PRESSURE_BANDWIDTH,
    PRESSURE_LATENCY,
    QUIET_BANDWIDTH,
    QUIET_LATENCY,
    FixedNumaMetrics,
    NumaProfile,
    quiet_profiles,
)

__all__ = [
    "PRESSURE_BANDWIDTH",
    "PRESSURE_LATENCY",
    "QUIET_BANDWIDTH",
    "QUIET_LATENCY",
    "NumaProfile",
    "SimulatedNumaMetrics",
]


class SimulatedNumaMetrics:
    """The ``NumaMetricSource`` port on fixed, settable per-node profiles.

    Args:
        profiles: NUMA id → its quiet profile. A node without one has no metrics (missing).

    Raises:
        ValueError: a profile is not a non-negative number.
    """

    def __init__(self, profiles: Mapping[int, NumaProfile]) -> None:
        self._lock = threading.Lock()
        self._quiet = dict(profiles)
        self._current = dict(profiles)
        self._unreadable: dict[int, str] = {}
        self._source = FixedNumaMetrics(self._current, self._unreadable)

    @classmethod
    def quiet(
        cls,
        numa_ids: Iterable[int],
        read_latency: float = QUIET_LATENCY,
        read_write_bandwidth: float = QUIET_BANDWIDTH,
    ) -> SimulatedNumaMetrics:
        """Every node at the same quiet profile (no pressure with the default thresholds)."""
        return cls(quiet_profiles(numa_ids, read_latency, read_write_bandwidth))

    def set_profile(self, numa_id: int, profile: NumaProfile) -> None:
        """Report ``profile`` for the node from now on (its quiet profile is unchanged)."""
        with self._lock:
            self._current[numa_id] = profile
            self._changed()

    def put_under_pressure(
        self,
        numa_id: int,
        read_latency: float = PRESSURE_LATENCY,
        read_write_bandwidth: float = PRESSURE_BANDWIDTH,
    ) -> None:
        """Raise the node's latency and bandwidth (defaults: a force balance at level high).

        Raises:
            KeyError: the node has no profile.
        """
        if numa_id not in self._quiet:
            raise KeyError(f"NUMA node {numa_id} is not simulated (have {sorted(self._quiet)})")
        self.set_profile(numa_id, NumaProfile(read_latency, read_write_bandwidth))

    def relieve(self, numa_id: int) -> None:
        """Back to the node's quiet profile, readable again."""
        with self._lock:
            self._unreadable.pop(numa_id, None)
            if numa_id in self._quiet:
                self._current[numa_id] = self._quiet[numa_id]
            self._changed()

    def make_unreadable(self, numa_id: int, reason: str = "simulated collector failure") -> None:
        """The node's metrics are missing, with ``reason``, until ``relieve``."""
        with self._lock:
            self._unreadable[numa_id] = reason
            self._changed()

    def _changed(self) -> None:
        """Answer from the profiles as they are now (called holding the lock)."""
        self._source = FixedNumaMetrics(self._current, self._unreadable)

    def profiles(self) -> dict[int, NumaProfile]:
        """What each node reports now."""
        with self._lock:
            return dict(self._current)

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Every requested node's current profile (``NumaMetricSource``)."""
        with self._lock:
            now = self._source
        return now.sample(numa_ids)
