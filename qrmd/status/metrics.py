"""Prometheus metrics of the daemon (spec cpu-policy §14; DESIGN.md "Who uses it": the
daemon exposes metrics and health).

Names. The reference's metrics keep their names exactly, with the tag ``policy="dynamic"``:

* ``heartbeat`` — 1 while the daemon runs (the reference re-emits it every 30 s);
* ``alloc_failed``, ``get_topology_hints_failed``, ``remove_pod_failed`` — the reference emits
  a raw gauge of 1 at each failure; in a pull model that is a number, so here each is the
  count of failed calls since start (0 before the first: alert on ``> 0`` works for both);
* ``pool_size{poolName, pool_type}`` — each pool's CPU count in the latest durable snapshot,
  ``pool_type`` as §6.1 defines it.

The reference's advisor metrics (``lw_advisor_server_failed``, ``handle_advisor_resp_*``,
``lw_recv_stuck``) come with that feature; qrmd does not export a metric nothing sets. The
cpuset check's (``real_state_invalid``, ``cpuset_invalid``, ``cpuset_overlap``) are the
checkers' collector's, with ``--pod-source kubelet`` (``qrmd.pods.subsystem``).

qrmd's own metrics start with ``qrmd_``: RPC latency histograms by method and status code,
the journal's bytes, records and fsync latency, the state store's commits and recovery, and
the actors' liveness and restarts. At scrape time the collector reads only values that
never change once published: the state store's latest ``StoreStatus`` and snapshot (each
actor owns its data and shares only immutable values, DESIGN.md "Actors and messages") and
the supervisor's ``SupervisorStatus``, built under its lock. A scrape is at worst one
publication behind.
"""

from __future__ import annotations

import platform
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.store_messages import Snapshot
from actors.store_status import StoreStatus
from actors.supervisor import SupervisorStatus
from qrmd.status.health import HealthRegistry
from qrmd.version import VERSION

__all__ = ["FAILURE_METRIC_BY_RPC", "DaemonMetrics", "MetricSources", "pool_type"]

POLICY = "dynamic"

#: The reference's failure gauge of each kubelet RPC that has one (§14).
FAILURE_METRIC_BY_RPC = {
    "Allocate": "alloc_failed",
    "GetTopologyHints": "get_topology_hints_failed",
    "RemovePod": "remove_pod_failed",
}

#: Buckets for unix-socket RPCs: from 100 µs (a read) to 10 s (a slow fsync).
_RPC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                0.5, 1.0, 2.5, 10.0)  # fmt: skip


def pool_type(name: str) -> str:
    """The ``pool_type`` tag of a pool (§6.1)."""
    if name.startswith("isolation"):
        return "isolation"
    if name in ("reclaim", "dedicated", "reserve", "fallback"):
        return name
    return "share"


@dataclass(slots=True)
class MetricSources:
    """Where scrape-time values come from; each returns None while there is nothing to read.

    Attributes:
        store: the state store's latest published status.
        snapshot: the latest durable snapshot.
        supervisor: the actors' liveness.
        health: the ``/healthz`` checks.
    """

    store: Callable[[], StoreStatus | None] = lambda: None
    snapshot: Callable[[], Snapshot | None] = lambda: None
    supervisor: Callable[[], SupervisorStatus | None] = lambda: None
    health: HealthRegistry | None = None


class DaemonMetrics:
    """The daemon's registry; also the gRPC servers' ``RpcObserver``.

    Args:
        sources: where the scrape-time values come from.
    """

    def __init__(self, sources: MetricSources) -> None:
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._failures = dict.fromkeys(FAILURE_METRIC_BY_RPC.values(), 0)
        self._rpc_seconds = Histogram(
            "qrmd_rpc_duration_seconds",
            "Time to answer a gRPC call, by method and status code.",
            ["rpc", "code"],
            buckets=_RPC_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_ScrapeCollector(sources, self._failure_counts))
        # process_* (CPU seconds, resident memory, open fds, start time) from /proc, and the
        # release running, for dashboards that compare nodes during an upgrade.
        ProcessCollector(registry=self.registry)
        Gauge(
            "qrmd_build_info",
            "The qrmd release and Python running, value 1.",
            ["version", "python_version"],
            registry=self.registry,
        ).labels(VERSION, platform.python_version()).set(1)

    def observe(self, rpc: str, seconds: float, code: object) -> None:
        """Record one answered RPC (the ``wire.plugin_server.RpcObserver`` protocol).

        Args:
            rpc: the method, bare (``Allocate``) or as a full path.
            seconds: time from receipt to answer.
            code: the status, a ``grpc.StatusCode`` or its name.
        """
        method = rpc.rsplit("/", 1)[-1]
        code_name = str(getattr(code, "name", code))
        self._rpc_seconds.labels(method, code_name).observe(seconds)
        failure = FAILURE_METRIC_BY_RPC.get(method)
        if failure is not None and code_name != "OK":
            with self._lock:
                self._failures[failure] += 1

    def exposition(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    def _failure_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._failures)


class _ScrapeCollector(Collector):
    """Reads the owners' counters at scrape time."""

    def __init__(self, sources: MetricSources, failures: Callable[[], dict[str, int]]) -> None:
        self._sources = sources
        self._failures = failures

    def collect(self) -> Iterator[Metric]:
        yield from self._reference()
        store = self._sources.store()
        if store is not None:
            yield from _store_metrics(store)
        status = self._sources.supervisor()
        if status is not None:
            yield from _actor_metrics(status)
        if self._sources.health is not None:
            healthy = GaugeMetricFamily("qrmd_healthy", "1 when /healthz answers 200.")
            healthy.add_metric([], 1 if self._sources.health.check().healthy else 0)
            yield healthy
            for gauge in self._sources.health.gauges():  # the figures behind its checks
                yield _gauge(gauge.name, gauge.doc, gauge.read())

    def _reference(self) -> Iterator[Metric]:
        heartbeat = GaugeMetricFamily("heartbeat", "1 while the plugin runs.", labels=["policy"])
        heartbeat.add_metric([POLICY], 1)
        yield heartbeat
        for name, count in self._failures().items():
            gauge = GaugeMetricFamily(
                name, f"Failed {name.removesuffix('_failed')} calls since start.", labels=["policy"]
            )
            gauge.add_metric([POLICY], count)
            yield gauge
        snapshot = self._sources.snapshot()
        if snapshot is not None:
            sizes = GaugeMetricFamily(
                "pool_size",
                "CPUs in each pool of the latest durable state.",
                labels=["policy", "poolName", "pool_type"],
            )
            for name, cpus in sorted(snapshot.state.cpu.pools.items()):
                sizes.add_metric([POLICY, name, pool_type(name)], len(cpus))
            yield sizes
            seq = GaugeMetricFamily("qrmd_state_seq", "Sequence number of the durable state.")
            seq.add_metric([], snapshot.seq)
            yield seq


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _store_metrics(status: StoreStatus) -> Iterator[Metric]:
    j, m, r = status.journal, status, status.recovery
    yield _counter("qrmd_journal_records_appended", "Journal records appended.",
                   j.records_appended)  # fmt: skip
    yield _counter("qrmd_journal_bytes_appended", "Journal frame bytes appended.",
                   j.bytes_appended)  # fmt: skip
    yield _counter("qrmd_journal_append_failures", "Failed journal appends.", j.append_failures)
    yield _counter("qrmd_journal_rotations", "Journal segments started.", j.rotations)
    yield _counter("qrmd_journal_checkpoints", "Checkpoints written.", j.checkpoints)
    fsync = CounterMetricFamily("qrmd_journal_fsync_seconds", "Time spent in fsync.")
    fsync.add_metric([], j.fsync.total_s)
    yield fsync
    yield _counter("qrmd_journal_fsyncs", "fsync calls made by the journal.", j.fsync.count)
    yield _counter("qrmd_journal_fsync_slow", "fsyncs slower than the warning threshold.",
                   j.fsync.slow)  # fmt: skip
    yield _gauge("qrmd_journal_fsync_max_seconds", "Longest fsync since start.", j.fsync.max_s)
    yield _counter("qrmd_state_commits", "Commits acknowledged.", m.commits_total)
    yield _counter("qrmd_state_commits_refused", "Commits refused (nothing written).",
                   m.refusals_total)  # fmt: skip
    yield _counter("qrmd_state_commits_outcome_unknown",
                   "Records whose failed write could not be cut back (maybe replayed at start).",
                   m.commits_outcome_unknown_total)  # fmt: skip
    yield _gauge("qrmd_state_store_healthy", "1 while the store is healthy.",
                 1 if m.health.healthy else 0)  # fmt: skip
    yield _gauge("qrmd_state_checkpoint_seq", "Seq of the newest checkpoint (0: none).",
                 m.checkpoint_seq)  # fmt: skip
    yield _counter("qrmd_state_checkpoint_failures", "Checkpoints that failed (commits go on).",
                   m.checkpoint_failures_total)  # fmt: skip
    yield _gauge("qrmd_recovery_records_replayed", "Records replayed at start.",
                 r.records_replayed)  # fmt: skip
    yield _gauge("qrmd_recovery_events_replayed", "Events replayed at start.", r.events_replayed)
    yield _gauge("qrmd_recovery_bytes_truncated", "Torn-tail bytes cut at start.",
                 r.bytes_truncated)  # fmt: skip
    yield _gauge("qrmd_recovery_seconds", "Time recovery took at start.", r.elapsed_s)


def _actor_metrics(status: SupervisorStatus) -> Iterator[Metric]:
    up = GaugeMetricFamily("qrmd_actor_up", "1 while the actor runs.", labels=["actor"])
    restarts = CounterMetricFamily(
        "qrmd_actor_restarts", "Restarts by the supervisor.", labels=["actor"]
    )
    for child in status.children:
        up.add_metric([child.name], 1 if child.alive else 0)
        restarts.add_metric([child.name], child.restarts)
    yield up
    yield restarts
