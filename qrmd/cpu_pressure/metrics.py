"""The CPU pressure eviction plugins' metrics, as one Prometheus collector the daemon registers
once kubelet is served: ``qrmd.cpu_pressure.subsystem`` imports this module only then, so a
node with CPU pressure eviction on starts without prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.cpu_pressure_messages import PressureView
from policy.cpu.pressure.settings import EVICTION_SCOPE_LOAD
from wire.eviction_server import EVICTION_PLUGIN_TYPE

__all__ = ["CPUPressureCollector"]


class CPUPressureCollector(Collector):
    """The CPU pressure plugins' metrics.

    * ``load_pressure_threshold_met_count{pool_name, metric_name, threshold_type}``: met
      answers since start (the reference emits 1 per met ``ThresholdMet``; pulled, a count);
    * ``pool_metric_value_raw{pool_name, metric_name}`` and ``pool_metric_bound_raw{pool_name,
      metric_name, bound_type}``: each pool's newest sample and its upper and lower bounds, as
      the reference emits them at each push;
    * ``qrmd_cpu_pressure_plugin_start_failed{pluginName, pluginType}``: failed starts of
      each plugin (the reference's ``plugin_start_failed``, renamed: the balancer's has it);
    * ``qrmd_cpu_pressure_<counter>``: collections, failures, calls, offers, commit failures.
    """

    def __init__(
        self,
        view: Callable[[], PressureView | None],
        plugin_failures: Callable[[], dict[str, int]],
    ) -> None:
        self._view = view
        self._plugin_failures = plugin_failures

    def collect(self) -> Iterator[Metric]:
        # Not the balancer's ``plugin_start_failed``: one registry cannot hold a name twice.
        failed = GaugeMetricFamily(
            "qrmd_cpu_pressure_plugin_start_failed",
            "Failed starts of each CPU pressure eviction plugin since start.",
            labels=["pluginName", "pluginType"],
        )
        for name, count in sorted(self._plugin_failures().items()):
            failed.add_metric([name, EVICTION_PLUGIN_TYPE], count)
        yield failed
        view = self._view()
        if view is None:
            return
        met = GaugeMetricFamily(
            "load_pressure_threshold_met_count",
            "Met ThresholdMet answers of the load plugin since start.",
            labels=["pool_name", "metric_name", "threshold_type"],
        )
        for (pool, kind), count in sorted(view.threshold_met.items()):
            met.add_metric([pool, EVICTION_SCOPE_LOAD, kind], count)
        yield met
        newest = GaugeMetricFamily(
            "pool_metric_value_raw",
            "The newest load sample of each pool's ring.",
            labels=["pool_name", "metric_name"],
        )
        bound = GaugeMetricFamily(
            "pool_metric_bound_raw",
            "The bounds the newest load sample of each pool was judged by.",
            labels=["pool_name", "metric_name", "bound_type"],
        )
        for pool, ring in sorted(view.history.pool_rings.items()):
            sample = ring.latest
            if sample is None:
                continue
            newest.add_metric([pool, EVICTION_SCOPE_LOAD], sample.value)
            bound.add_metric([pool, EVICTION_SCOPE_LOAD, "upper"], sample.upper_bound)
            bound.add_metric([pool, EVICTION_SCOPE_LOAD, "lower"], sample.lower_bound)
        yield newest
        yield bound
        for name, value in sorted(view.counters.items()):
            yield CounterMetricFamily(
                f"qrmd_cpu_pressure_{name.removesuffix('_total')}",
                f"CPU pressure eviction: {name.removesuffix('_total').replace('_', ' ')}.",
                value=value,
            )
