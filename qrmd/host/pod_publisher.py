"""The pod list publisher: one fetch per tick, shared by every reader (DESIGN.md "Checkers",
"pod source").

Every reader of the node's pods (the checkers, and the Allocator once it reads pod phases)
asks ``latest()`` for the newest successful listing, an immutable ``PodListSnapshot`` stamped
with its fetch time, and never waits on kubelet: the fetch happens here, on the publisher's own
ticker thread, once per ``refresh``. A failed fetch keeps the previous snapshot (its
``fetched_at`` tells how old it is) and is recorded as the last ``FetchOutcome``, which the
checkers read to tell a fresh listing from a failed round (cpu-policy §12.4 step 1: a failed
listing never counts).

Health and metrics, where an operator looks:

* the handler check ``qrmd_pod_source_fetch`` on ``/healthz`` (§12.3 rules: timeout =
  tolerance = 3 fetch periods): a kubelet that cannot be read for longer than that makes the
  daemon unhealthy until a fetch succeeds again;
* ``qrmd_pod_source_fetches_total{outcome="ok"|"failed"}``, ``qrmd_pod_source_fetch_seconds``
  (a histogram of fetch+parse latency), ``qrmd_pod_source_pods`` (pods in the latest
  snapshot) and ``qrmd_pod_source_snapshot_age_seconds``;
* one warning log line when fetches start failing and one info line when they recover, not a
  line per tick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actors.ports.pod_source import PodListSnapshot
from qrmd.host.kubelet_pods import PodListError
from qrmd.status.health import HandlerHealth

if TYPE_CHECKING:
    from prometheus_client import Histogram
    from prometheus_client.core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = ["FETCH_HANDLER", "FetchOutcome", "PodListPublisher"]

_log = logging.getLogger("qrmd.pod_source")

#: The pod source's own check on ``/healthz``.
FETCH_HANDLER = "qrmd_pod_source_fetch"

_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """What the last fetch did.

    Attributes:
        seq: the fetch's number since start (1 for the first), so a reader can tell a new
            fetch from one it has seen.
        at: wall time the fetch started.
        latency_s: how long fetch + parse took.
        error: why it failed, or ``None`` when it published a snapshot.
    """

    seq: int
    at: float
    latency_s: float
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether the fetch published a snapshot."""
        return self.error is None


class PodListPublisher:
    """Implements the ``PodSource`` port over a fetch function (see the module docstring).

    Thread-safe: ``refresh`` runs on the ticker thread, ``latest``/``outcome`` anywhere.

    Args:
        fetch: one fetch and parse (``KubeletPodFetcher.fetch``); raises ``PodListError``.
        wall: wall clock (outcomes, snapshot age).
        monotonic: monotonic clock (latency, the health check).
        health: the check to report each fetch to, or ``None``.
        registry: where the latency histogram is registered (``None``: a private one, made
            at the first fetch or scrape, so a node's start does not load prometheus_client).
    """

    def __init__(
        self,
        fetch: Callable[[], PodListSnapshot],
        *,
        wall: Callable[[], float],
        monotonic: Callable[[], float],
        health: HandlerHealth | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._fetch = fetch
        self._wall = wall
        self._monotonic = monotonic
        self._health = health
        self._lock = threading.Lock()
        self._snapshot: PodListSnapshot | None = None
        self._outcome: FetchOutcome | None = None
        self._seq = 0
        self._ok = 0
        self._failed = 0
        self._registry = registry
        self._latency: Histogram | None = None
        if registry is not None:
            # A caller's registry (which loaded prometheus_client) lists the histogram now.
            self._latency_histogram()

    def latest(self) -> PodListSnapshot | None:
        """The newest successful listing, or ``None`` before the first (never raises)."""
        with self._lock:
            return self._snapshot

    def outcome(self) -> FetchOutcome | None:
        """The last fetch's outcome, or ``None`` before the first."""
        with self._lock:
            return self._outcome

    def refresh(self) -> FetchOutcome:
        """Fetch once and publish the result.

        Returns:
            The outcome (a failure keeps the previous snapshot).
        """
        at = self._wall()
        started = self._monotonic()
        error: str | None = None
        snapshot: PodListSnapshot | None = None
        try:
            snapshot = self._fetch()
        except PodListError as err:
            error = str(err)
        except Exception as err:  # a bug in parsing must not stop the ticker
            _log.exception("pod list fetch failed unexpectedly")
            error = f"unexpected {type(err).__name__}: {err}"
        finished = self._monotonic()
        latency = finished - started
        with self._lock:
            self._seq += 1
            was_failing = self._outcome is not None and not self._outcome.ok
            outcome = FetchOutcome(self._seq, at, latency, error)
            self._outcome = outcome
            if snapshot is not None:
                self._snapshot = snapshot
                self._ok += 1
            else:
                self._failed += 1
        self._latency_histogram().observe(latency)
        if self._health is not None:
            self._health.update(error, finished)
        if error is not None and not was_failing:
            _log.warning("cannot list the node's pods: %s", error)
        elif error is None and was_failing:
            _log.info(
                "the node's pods are listed again (%d pods)",
                len(snapshot.pods) if snapshot is not None else 0,
            )
        return outcome

    def _latency_histogram(self) -> Histogram:
        """The latency histogram, made at the first fetch or scrape (both after kubelet is
        served), under the lock so the ticker thread and a scrape make one."""
        with self._lock:
            if self._latency is None:
                # prometheus_client loads after kubelet is served: a start pays for every module.
                from prometheus_client import (  # noqa: PLC0415 (after serving)
                    CollectorRegistry,
                    Histogram,
                )

                registry = self._registry if self._registry is not None else CollectorRegistry()
                self._latency = Histogram(
                    "qrmd_pod_source_fetch_seconds",
                    "Time to fetch and parse kubelet's pod list.",
                    buckets=_LATENCY_BUCKETS,
                    registry=registry,
                )
            return self._latency

    def collect(self) -> Iterator[Metric]:
        """The pod source's metrics (a prometheus ``Collector``)."""
        from prometheus_client.core import (  # noqa: PLC0415 (scraped after serving)
            CounterMetricFamily,
            GaugeMetricFamily,
        )

        latency = self._latency_histogram()
        with self._lock:
            ok, failed, snapshot = self._ok, self._failed, self._snapshot
        fetches = CounterMetricFamily(
            "qrmd_pod_source_fetches", "Fetches of kubelet's pod list.", labels=["outcome"]
        )
        fetches.add_metric(["ok"], ok)
        fetches.add_metric(["failed"], failed)
        yield fetches
        yield from latency.collect()
        if snapshot is not None:
            yield GaugeMetricFamily(
                "qrmd_pod_source_pods", "Pods in the latest pod list.", value=len(snapshot.pods)
            )
            yield GaugeMetricFamily(
                "qrmd_pod_source_snapshot_age_seconds",
                "Age of the latest successful pod list.",
                value=max(0.0, self._wall() - snapshot.fetched_at),
            )
