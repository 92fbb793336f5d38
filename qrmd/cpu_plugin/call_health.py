"""The kubelet call path's watch in the daemon's health (``wire.call_watch`` has the rules):
``/healthz`` fails while kubelet's grouped calls go unanswered for more than 5 s, ``/livez``
past 60 s, and one gauge shows the count:

* ``qrmd_kubelet_calls_unanswered_seconds`` — how long kubelet's Allocate, GetTopologyHints
  and RemovePod calls have gone without an answer from the Allocator: 0 while they are
  answered or none waits. Past kubelet's 10 s deadline every such call fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from qrmd.status.health import HealthGauge, HealthRegistry
from wire.call_watch import KubeletCallWatch

__all__ = ["UNANSWERED_GAUGE", "watch_kubelet_calls"]

UNANSWERED_GAUGE: Final = "qrmd_kubelet_calls_unanswered_seconds"


def watch_kubelet_calls(health: HealthRegistry, monotonic: Callable[[], float]) -> KubeletCallWatch:
    """A watch of the kubelet call path, its checks and its gauge added to ``health``.

    Args:
        health: the daemon's health registry.
        monotonic: the clock the watch and its groupers measure on.

    Returns:
        The watch every socket's call grouper joins.
    """
    watch = KubeletCallWatch(monotonic)
    health.add_source(watch.health_problems)
    health.add_liveness_source(watch.liveness_problems)
    health.add_gauge(
        HealthGauge(
            UNANSWERED_GAUGE,
            "Seconds kubelet's calls have gone without an answer from the allocator "
            "(0: answered, or none waits).",
            lambda: watch.stretch().age_s,
        )
    )
    return watch
