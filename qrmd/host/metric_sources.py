"""What every NUMA metric source shares: metric names, staleness, value checks, and a source
that takes latency from one adapter and bandwidth from another (spec memory-balancer §4.1, §4.3).

The adapters (``metrics_file``, ``metrics_prometheus``, ``metrics_resctrl``,
``metrics_fixed``) implement the ``NumaMetricSource`` port. Their common rules:

* **Never a zero for a missing value.** A value that is absent, expired, not a number, NaN,
  infinite or negative becomes ``MissingSample(reason)``; the round then fails naming the
  metric, the node and the reason (§7.1), as the reference's does.
* **Staleness** (§4.3): with an insurance period of 0 (the default) samples never expire.
  Otherwise the period is raised to at least 60 s, and a sample whose timestamp is older than
  ``now - period`` is ``MissingSample("metric data expired")``. A sample without a timestamp
  (absent, or Unix 0) never expires.
* **Metric names**: the latency metric is the balancer's resolved ``ReadLatencyMetric``
  (``mem.latency.read.numa``; AMD ``mem.latency.amd.l3.miss``), bandwidth is
  ``mem.bandwidth.numa`` (§4.1). Sources whose own naming differs (Prometheus) map them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from actors.ports.balancer import NumaMetricSource
from policy.balance import MissingSample, NumaMetrics
from policy.balance.inputs import Sample
from policy.balance.numas import BANDWIDTH_METRIC

__all__ = [
    "BANDWIDTH_METRIC",
    "DEFAULT_LATENCY_METRIC",
    "EXPIRED",
    "MIN_INSURANCE_PERIOD_S",
    "MetricSourceUnavailable",
    "SplitNumaMetrics",
    "Staleness",
    "checked_value",
    "missing_everywhere",
]

#: The reference's default ``ReadLatencyMetric`` on a non-AMD CPU (§3).
DEFAULT_LATENCY_METRIC = "mem.latency.read.numa"

#: The insurance period's floor when it is enabled (§4.3).
MIN_INSURANCE_PERIOD_S = 60.0

#: The reference's error for an expired sample (§4.3).
EXPIRED = "metric data expired"


class MetricSourceUnavailable(OSError):  # noqa: N818 - reads as the host's state
    """A metric source cannot work on this host at all (resctrl not mounted, no memory
    bandwidth monitoring); raised when the source is built, so start-up says why."""


@dataclass(frozen=True, slots=True)
class Staleness:
    """The metric insurance period of §4.3 (``--metric-insurance-period``).

    Attributes:
        insurance_period_s: seconds; 0 disables expiry (the default).
    """

    insurance_period_s: float = 0.0

    def __post_init__(self) -> None:
        period = self.insurance_period_s
        if not math.isfinite(period) or period < 0:
            raise ValueError(
                f"metric-insurance-period: {period!r} s must be 0 (off) or a positive number"
            )

    @property
    def period_s(self) -> float:
        """The period in force: 0 when off, else at least 60 s."""
        if self.insurance_period_s == 0:
            return 0.0
        return max(self.insurance_period_s, MIN_INSURANCE_PERIOD_S)

    def check(self, sample: Sample, timestamp_s: float | None, now_s: float) -> Sample:
        """The sample, or ``MissingSample(EXPIRED)`` when it is older than the period.

        Args:
            sample: the value read (a ``MissingSample`` passes through unchanged).
            timestamp_s: when the value was measured, Unix seconds; None or 0 never expires.
            now_s: the current Unix time.
        """
        period = self.period_s
        if (
            period == 0
            or isinstance(sample, MissingSample)
            or not timestamp_s
            or timestamp_s >= now_s - period
        ):
            return sample
        return MissingSample(EXPIRED)


def checked_value(value: object, what: str) -> Sample:
    """A metric value as a float, or why it cannot be one.

    Args:
        value: what the source reported.
        what: names the value in the reason (``"mem.bandwidth.numa of NUMA 1 in FILE"``).

    Returns:
        The value as a float, or ``MissingSample`` when it is not a finite, non-negative number.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return MissingSample(f"{what}: expected a number, got {value!r:.60}")
    try:
        number = float(value)
    except OverflowError:
        return MissingSample(f"{what}: {value!r:.60} is too large")
    if not math.isfinite(number):
        return MissingSample(f"{what}: {number!r} is not a finite number")
    if number < 0:
        return MissingSample(f"{what}: {number!r} is negative")
    return number


def missing_everywhere(numa_ids: Sequence[int], reason: str) -> dict[int, NumaMetrics]:
    """Every node's metrics missing for one reason (the source could not be read at all)."""
    missing = MissingSample(reason)
    return {numa: NumaMetrics(missing, missing) for numa in numa_ids}


class SplitNumaMetrics:
    """Read latency from one source and bandwidth from another (e.g. a collector's latency,
    resctrl's bandwidth). Both are sampled every round; each keeps its own missing reasons.

    Args:
        latency: the source whose ``read_latency`` is used.
        bandwidth: the source whose ``read_write_bandwidth`` is used.
    """

    def __init__(self, latency: NumaMetricSource, bandwidth: NumaMetricSource) -> None:
        self._latency = latency
        self._bandwidth = bandwidth

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Both sources' samples, combined per node (``NumaMetricSource``)."""
        latencies = self._latency.sample(numa_ids)
        bandwidths = self._bandwidth.sample(numa_ids)
        absent = MissingSample("the source returned nothing for this NUMA node")
        out: dict[int, NumaMetrics] = {}
        for numa in numa_ids:
            lat = latencies.get(numa)
            bw = bandwidths.get(numa)
            out[numa] = NumaMetrics(
                absent if lat is None else lat.read_latency,
                absent if bw is None else bw.read_write_bandwidth,
            )
        return out
