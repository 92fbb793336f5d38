"""Build the memory balancer's metric sources from their settings (spec memory-balancer §3.2,
§4; the keys and their defaults are ``qrmd.host.source_settings``).

When latency and bandwidth name the same source, it is built once and read once per round;
otherwise ``SplitNumaMetrics`` reads both. A source that cannot work on this host (resctrl)
raises ``MetricSourceUnavailable``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from actors.ports.balancer import NumaMetricSource
from qrmd.host.metric_sources import SplitNumaMetrics, Staleness
from qrmd.host.metrics_file import MetricsFile
from qrmd.host.metrics_fixed import FixedNumaMetrics
from qrmd.host.metrics_resctrl import ResctrlBandwidth
from qrmd.host.numa_stat import CgroupAnonMemoryReader
from qrmd.host.source_settings import (
    DEFAULT_METRICS_FILE,
    BalancerSourceSettings,
    SourceKind,
    prometheus_name,
)
from qrmd.host.sysfs_topology import DEFAULT_SYSFS_ROOT

__all__ = [
    "DEFAULT_METRICS_FILE",
    "BalancerSourceSettings",
    "SourceKind",
    "build_container_memory_reader",
    "build_numa_metric_source",
]


def build_numa_metric_source(
    settings: BalancerSourceSettings,
    *,
    latency_metric: str,
    numa_ids: Sequence[int] = (),
    sysfs_root: Path | str = DEFAULT_SYSFS_ROOT,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> NumaMetricSource:
    """The ``NumaMetricSource`` the settings choose.

    Args:
        settings: the validated settings.
        latency_metric: the balancer's resolved ``ReadLatencyMetric`` (§3.1), the name read
            from a file, and the Prometheus name unless one is configured.
        numa_ids: the nodes the ``simulated`` source reports quiet figures for.
        sysfs_root: sysfs, for resctrl's L3 domain map.
        clock: Unix time, for staleness.
        monotonic: a monotonic clock, for resctrl rates.

    Raises:
        ValueError: a Prometheus setting is invalid.
        MetricSourceUnavailable: resctrl cannot work on this host.
    """
    staleness = Staleness(settings.metric_insurance_period_s)
    built: dict[SourceKind, NumaMetricSource] = {}

    def source(kind: SourceKind) -> NumaMetricSource:
        if kind not in built:
            built[kind] = _build(kind)
        return built[kind]

    def _build(kind: SourceKind) -> NumaMetricSource:
        if kind is SourceKind.FILE:
            return MetricsFile(
                settings.metrics_file,
                latency_metric=latency_metric,
                staleness=staleness,
                clock=clock,
            )
        if kind is SourceKind.PROMETHEUS:
            # Its HTTP client and prometheus_client's parser (and with it the whole package)
            # load only for this source: a restart of another node is served without them.
            from qrmd.host.metrics_prometheus import PrometheusNumaMetrics  # noqa: PLC0415

            return PrometheusNumaMetrics(
                settings.prometheus_url,
                latency_metric=settings.prometheus_latency_metric
                or prometheus_name(latency_metric),
                bandwidth_metric=settings.prometheus_bandwidth_metric,
                numa_label=settings.prometheus_numa_label,
                match_labels=settings.prometheus_match_labels,
                timeout_s=settings.prometheus_timeout_s,
                staleness=staleness,
                clock=clock,
            )
        if kind is SourceKind.RESCTRL:
            return ResctrlBandwidth(settings.resctrl_root, sysfs_root, monotonic=monotonic)
        return FixedNumaMetrics.quiet(numa_ids)

    latency = source(settings.latency_source)
    if settings.bandwidth_source is settings.latency_source:
        return latency
    return SplitNumaMetrics(latency, source(settings.bandwidth_source))


def build_container_memory_reader(settings: BalancerSourceSettings) -> CgroupAnonMemoryReader:
    """The ``ContainerMemoryReader`` on this host's cgroups, as the settings place them."""
    return CgroupAnonMemoryReader(
        settings.memory_cgroup_root,
        driver=settings.cgroup_driver,
        kubelet_cgroup_root=settings.kubelet_cgroup_root,
    )
