"""The kubelet call path's gauge, one Prometheus collector the daemon registers (with
``--metrics-address``; ``wire.call_watch`` has the rules).

* ``qrmd_kubelet_calls_unanswered_seconds`` — how long kubelet's grouped calls (Allocate,
  GetTopologyHints, RemovePod) have gone without an answer from the Allocator: 0 while they
  are answered or none waits. ``/healthz`` fails above 5 s, ``/livez`` above 60 s; a value
  that climbs past kubelet's 10 s deadline means every such call fails.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from wire.call_watch import KubeletCallWatch

__all__ = ["KubeletCallCollector"]


class KubeletCallCollector(Collector):
    """Reads the watch at each scrape (no log line: the checks log).

    Args:
        watch: the kubelet call path's watch.
    """

    def __init__(self, watch: KubeletCallWatch) -> None:
        self._watch = watch

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "qrmd_kubelet_calls_unanswered_seconds",
            "Seconds kubelet's calls have gone without an answer from the allocator "
            "(0: answered, or none waits).",
            value=self._watch.stretch().age_s,
        )
