"""The pod source and the periodic checkers inside ``qrmd run`` (spec cpu-policy §12; DESIGN.md
"Checkers", "pod source").

With ``--pod-source kubelet`` the daemon gains:

1. the **pod list publisher** (``qrmd.host.pod_publisher``) over the kubelet adapter
   (``qrmd.host.kubelet_pods``): one fetch every ``fetch_period_s`` (the most frequent
   checker's period) on its own ticker thread, shared by every reader (the Allocator too);
   after each, the checkers are told ``PodListFetched`` and run the pod handlers due; its
   check ``qrmd_pod_source_fetch`` on ``/healthz``;
2. a ``checkers`` child of the Supervisor, after the Allocator it sends residual rounds to
   (rest-for-one: a restarted Allocator restarts it, and its sightings start again, as the
   reference's in-memory hit map does after a restart);
3. the handlers (``actors.checkers``): clearResidualState every ``--residual-check-period``
   and checkCPUSet every ``--cpuset-check-period``, on the fetches; syncCPUIdle every 30 s
   with ``--enable-syncing-cpu-idle`` and the heartbeat every 30 s, each on a ticker of its
   own. Each handler is a check
   on ``/healthz`` under its reference name, with §12.3's rules (timeout = tolerance = 3
   periods, NotReady until its first run). The reference starts a handler at once and then
   once per period; so here, after the first fetch, every handler runs once before its
   ticker's first period;
4. metrics: the pod source's, the reference's ``real_state_invalid``, ``cpuset_invalid``
   (tags ``podNamespace``, ``podName``, ``containerName``) and ``cpuset_overlap`` for the last
   checkCPUSet round, and ``qrmd_residual_pods`` / ``qrmd_residual_pods_removed_total``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pykka

from actors.checkers import (
    CHECK_CPUSET,
    CLEAR_RESIDUAL_STATE,
    HEARTBEAT,
    SYNC_CPU_IDLE,
    CheckersActor,
    CheckersCore,
    CheckerSettings,
    CheckersPorts,
    CheckersView,
    CheckerTick,
    PodListFetched,
)
from actors.ports.cgroups import CpuIdleSetter, CpusetReader
from actors.ports.clock import Clock
from actors.store_messages import Snapshot
from actors.supervisor import ChildSpec, Supervisor
from actors.threads import THREADS
from actors.ticker import Ticker
from policy.cpu.context import PolicyContext
from policy.state.sections import State
from qrmd.host.cpu_idle import CgroupCpuIdle
from qrmd.host.cpuset_cgroups import CgroupCpusetReader
from qrmd.host.kubelet_pods import KubeletPodFetcher, runs_as_pod
from qrmd.host.pod_publisher import FETCH_HANDLER, PodListPublisher
from qrmd.pods.settings import PodsSettings
from qrmd.status.health import HandlerHealth, HealthRegistry
from qrmd.subsystem import (
    ALLOCATOR_CHILD,
    Joinable,
    Running,
    Runtime,
    Shared,
    SubsystemParts,
)

if TYPE_CHECKING:
    from prometheus_client.core import Metric
    from prometheus_client.registry import Collector

__all__ = [
    "CHECKERS_CHILD",
    "HEARTBEAT_PERIOD_S",
    "SYNC_CPU_IDLE_PERIOD_S",
    "CheckersWiring",
    "build",
]

_log = logging.getLogger("qrmd.checkers")

#: The checkers' name among the Supervisor's children.
CHECKERS_CHILD = "checkers"
#: §14: the heartbeat and syncCPUIdle periods.
HEARTBEAT_PERIOD_S = 30.0
SYNC_CPU_IDLE_PERIOD_S = 30.0
POLICY = "dynamic"


class _Refresh:
    """The fetch ticker's target: each tick is one fetch, on the ticker's own thread, then
    ``PodListFetched`` to the checkers, who run the pod handlers due on that very answer."""

    def __init__(self, publisher: PodListPublisher, checkers: Any) -> None:
        self._publisher = publisher
        self._checkers = checkers

    def tell(self, message: float) -> None:
        self._publisher.refresh()
        self._checkers.tell(PodListFetched(message))


def build(settings: PodsSettings, shared: Shared) -> CheckersWiring:
    """The pod source subsystem; it offers the others kubelet's pod list (its publisher)."""
    ports = shared.ports

    def latest() -> Snapshot | None:
        # Read through the ports at each call: whoever offers the snapshot, built before or after.
        return ports.latest()

    host = shared.host
    checkers = CheckersWiring(
        settings,
        shared.machine,
        shared.clock,
        shared.health,
        latest,
        fetch=host.pod_list,
        cpusets=host.cpusets,
        cpu_idle=host.cpu_idle,
        runtime=shared.runtime,
    )
    ports.pod_source = checkers.publisher
    return checkers


class CheckersWiring(SubsystemParts):
    """Builds the pod source and the checkers, and runs their tickers.

    Args:
        config: its settings (``pod_source.enabled``).
        ctx: the CPU policy's context (the residual threshold is ``ctx.residual_sightings``).
        clock: the daemon's clock.
        health: where the handlers' checks are registered.
        state: the latest durable snapshot (the StateStore's published one), or None.
        fetch: replaces the kubelet adapter's fetch (tests).
        cpusets, cpu_idle: replace the cgroup ports (tests, the demo, the simulation).
        runtime: starts the actor, the tickers and the first round (default: threads).
    """

    def __init__(
        self,
        config: PodsSettings,
        ctx: PolicyContext,
        clock: Clock,
        health: HealthRegistry,
        state: Callable[[], Snapshot | None],
        *,
        fetch: Callable[[], Any] | None = None,
        cpusets: CpusetReader | None = None,
        cpu_idle: CpuIdleSetter | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self._runtime = runtime or THREADS
        settings = config.pod_source
        self.settings = settings
        self._ctx = ctx
        self._clock = clock
        self._state = state
        self.endpoint = settings.endpoint()
        if fetch is None:
            fetcher = KubeletPodFetcher(
                self.endpoint,
                empty_is_error=runs_as_pod(),
                wall=clock.time,
                monotonic=clock.monotonic,
            )
            fetch = fetcher.fetch
        self.publisher = PodListPublisher(
            fetch,
            wall=clock.time,
            monotonic=clock.monotonic,
            health=health.register_handler(FETCH_HANDLER, settings.fetch_period_s),
        )
        self.periods: dict[str, float] = {
            CLEAR_RESIDUAL_STATE: settings.residual_check_period_s,
            CHECK_CPUSET: settings.cpuset_check_period_s,
        }
        if settings.enable_syncing_cpu_idle:
            self.periods[SYNC_CPU_IDLE] = SYNC_CPU_IDLE_PERIOD_S
        self.checks: dict[str, HandlerHealth] = {
            name: health.register_handler(name, period) for name, period in self.periods.items()
        }
        sources = config.numa_metric_sources
        self.cpusets = cpusets or CgroupCpusetReader(
            settings.cpuset_cgroup_root, sources.cgroup_driver, sources.kubelet_cgroup_root
        )
        self.cpu_idle = cpu_idle or (CgroupCpuIdle() if settings.enable_syncing_cpu_idle else None)
        self.core: CheckersCore | None = None
        self.tickers: list[Ticker] = []
        self._first: Joinable | None = None

    # -- the subsystem ---------------------------------------------------------------------

    def children(self) -> Sequence[ChildSpec]:
        """The checkers, after the Allocator they tell."""
        return (self.child_spec(),)

    def collectors(self) -> Sequence[Collector]:
        """The pod source's and the checkers' metrics (this wiring is the collector)."""
        return (self,)

    def start(self, running: Running) -> None:
        """Fetch the pod list and run the handlers (the checkers' actor runs)."""
        self.start_tickers(running.supervisor)

    def serving(self) -> str:
        """Nothing of its own in the serving line (it logs its own line at start)."""
        return ""

    # -- the supervised actor ----------------------------------------------------------------

    def child_spec(self) -> ChildSpec:
        """The Supervisor's ``checkers`` child, after the Allocator."""
        return ChildSpec(CHECKERS_CHILD, lambda refs: self._start_actor(refs[ALLOCATOR_CHILD]))

    def _report(self, handler: str, error: str | None) -> None:
        self.checks[handler].update(error, self._clock.monotonic())

    def _current_state(self) -> State | None:
        snapshot = self._state()
        return None if snapshot is None else snapshot.state

    def _fetch_error(self) -> str | None:
        outcome = self.publisher.outcome()
        return None if outcome is None else outcome.error

    def _start_actor(self, allocator: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        ports = CheckersPorts(
            pods=self.publisher,
            state=self._current_state,
            allocator=allocator,
            cpusets=self.cpusets,
            report=self._report,
            cpu_idle=self.cpu_idle,
            fetch_error=self._fetch_error,
        )
        settings = CheckerSettings(
            residual_sightings=self._ctx.residual_sightings,
            residual_period_s=self.settings.residual_check_period_s,
            cpuset_period_s=self.settings.cpuset_check_period_s,
            sync_cpu_idle=self.settings.enable_syncing_cpu_idle,
            enable_cpu_idle=self.settings.enable_cpu_idle,
            reclaim_cgroup_path=self.settings.reclaim_relative_root_cgroup_path,
        )
        self.core = CheckersCore(ports, self._ctx, settings)
        return self._runtime.spawn(CheckersActor, self.core)

    # -- tickers ------------------------------------------------------------------------------

    def start_tickers(self, supervisor: Supervisor) -> None:
        """Start the fetch ticker and one ticker per handler (the actor is running)."""
        ref = supervisor.ref(CHECKERS_CHILD)
        fetch = self._runtime.ticker(
            _Refresh(self.publisher, ref),
            self.settings.fetch_period_s,
            self._clock.time,
            lambda now: now,
            name="pod-source",
        )
        own = [(HEARTBEAT, HEARTBEAT_PERIOD_S)]
        if SYNC_CPU_IDLE in self.periods:
            own.append((SYNC_CPU_IDLE, self.periods[SYNC_CPU_IDLE]))
        handlers = [
            self._runtime.ticker(
                ref, period, self._clock.time, _tick_of(name), name=f"checker-{name}"
            )
            for name, period in own
        ]
        self.tickers = [fetch, *handlers]
        # The reference runs a handler as soon as it starts: the first fetch (and the pod
        # handlers on it), then the others once, off the daemon's start-up thread (a kubelet
        # that does not answer would otherwise hold start-up for the whole fetch timeout).
        self._first = self._runtime.run(
            lambda: self._first_round(fetch, handlers), name="checkers-first-round"
        )
        for ticker in self.tickers:
            ticker.start()
        if self.settings.kubelet_ca_file is not None and not self.endpoint.is_secure:
            _log.warning(
                "--kubelet-ca-file %s is not used: the read-only port is plain HTTP (give "
                "--enable-kubelet-secure-port to read the secure port)",
                self.settings.kubelet_ca_file,
            )
        _log.info(
            "pod source: %s every %g s; residual state removed after %d consecutive misses "
            "%g s apart; cpusets checked every %g s%s",
            self.endpoint.url,
            self.settings.fetch_period_s,
            self._ctx.residual_sightings,
            self.settings.residual_check_period_s,
            self.settings.cpuset_check_period_s,
            "; cpu.idle synced" if self.settings.enable_syncing_cpu_idle else "",
        )

    @staticmethod
    def _first_round(fetch: Ticker, handlers: list[Ticker]) -> None:
        fetch.tick()
        for ticker in handlers:
            ticker.tick()

    def stop(self) -> None:
        """Stop every ticker; safe to call twice.

        A fetch in flight may take up to its timeout, so the fetch ticker is given that long.
        """
        fetch_s = self.endpoint.timeout_s + 1
        for ticker in self.tickers:
            ticker.stop(fetch_s if ticker.name == "pod-source" else 5.0)
        if self._first is not None:
            self._first.join(fetch_s)
        self.tickers = []

    # -- metrics ------------------------------------------------------------------------------

    def view(self) -> CheckersView | None:
        """The handlers' last findings (read from another thread: an immutable value)."""
        return None if self.core is None else self.core.view

    def collect(self) -> Iterator[Metric]:
        """The pod source's and the checkers' metrics (a prometheus ``Collector``)."""
        from prometheus_client.core import (  # noqa: PLC0415 (scraped after serving)
            CounterMetricFamily,
            GaugeMetricFamily,
        )

        yield from self.publisher.collect()
        view = self.view()
        if view is None:
            return
        labels = ["policy", "podNamespace", "podName", "containerName"]
        cpuset = view.cpuset
        if cpuset is not None:
            for name, readings, text in (
                ("real_state_invalid", cpuset.unreadable, "container cpusets not readable"),
                ("cpuset_invalid", cpuset.invalid, "dedicated cpusets unlike the allocation"),
            ):
                gauge = GaugeMetricFamily(name, f"1 per {text} at the last check.", labels=labels)
                for reading in readings:
                    c = reading.container
                    gauge.add_metric([POLICY, c.pod_namespace, c.pod_name, c.container_name], 1)
                yield gauge
            overlap = GaugeMetricFamily(
                "cpuset_overlap", "1 when the last check found cpusets overlap.", labels=["policy"]
            )
            overlap.add_metric([POLICY], 1 if cpuset.overlap else 0)
            yield overlap
        yield GaugeMetricFamily(
            "qrmd_residual_pods",
            "Pods in the state that the pod list misses now.",
            value=len(view.residual.sightings),
        )
        yield CounterMetricFamily(
            "qrmd_residual_pods_removed",
            "Pods removed as residual since start.",
            value=view.residual_removed,
        )
        if view.heartbeat_at is not None:
            yield GaugeMetricFamily(
                "qrmd_checkers_heartbeat_timestamp_seconds",
                "Wall time of the checkers' last heartbeat (every 30 s).",
                value=view.heartbeat_at,
            )


def _tick_of(handler: str) -> Callable[[float], CheckerTick]:
    def make(now: float) -> CheckerTick:
        return CheckerTick(handler, now)

    return make
