"""The NUMA memory balancer inside ``qrmd run`` (spec memory-balancer §1.1, §4, §10, §11, §12;
DESIGN.md "Actors and messages").

With ``--enable-memory-balancer`` the daemon gains:

1. a ``memory_balancer`` child of the Supervisor, after the StateStore and the Allocator
   (rest-for-one: a restarted StateStore restarts the balancer too, which then rebuilds
   ``current`` and ``last`` from the recovered snapshot, §6.1). Its ports come from the
   configuration: the distance lists of the machine's topology (sysfs on a host, the
   synthetic layout's matrix with ``--topology synthetic:…``), the NUMA metric source of
   ``--numa-metrics-source`` and its keys, cgroup ``memory.numa_stat`` for anonymous memory,
   the pods in pools from the StateStore's CPU snapshot, and a ``CgroupMigrator`` executor
   (a dry run unless ``--memory-balance-execute``). With ``--pod-source kubelet`` the pod
   list publisher is its pod source too: each round takes the containers' IDs from its
   latest listing, reads each container's own ``memory.numa_stat`` and migrates per
   container cgroup (memory-balancer §4.2, §11); without one, pods are read and migrated
   through their pod cgroups;
2. a ``Ticker`` telling ``Tick(now)`` every ``--qos-aware-sync-period`` (the advisor loop);
3. the eviction plugin on ``<plugin-registration-dir>/numa_memory_balancer.sock``, created
   once the actor is ready. As in the reference (§10), a socket that cannot be created does
   not stop the balancer: it is counted (``plugin_start_failed``) and tried again every 5 s;
4. the §12 metrics on the metrics endpoint, read from ``GetBalancerState`` at scrape time;
5. a health check (``ROUND_HEALTH_CHECK``) the balancer reports to after every tick, "update
   by error" with the reference's heartbeat rules (cpu-policy §12.3): rounds that keep failing
   for three periods after the last good one make ``/healthz`` unhealthy with the reason, and
   so does a balancer that stops ticking; a balancer that has not run yet is healthy;
6. its host paths checked at start (``qrmd.balancer.checks``): a missing memory cgroup root
   refuses start naming ``--memory-cgroup-root``; a missing metrics file is a warning.

A simulated metric source (``simulated:pressure=N``) puts node N at a latency above the
force threshold *in force* (vendor-aware, §3.1), so the same flag means "pressure" on an
Intel and an AMD host.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pykka

from actors.balancer_inputs import store_pods
from actors.balancer_messages import BalancerUnavailable, BalancerView, GetBalancerState, Tick
from actors.balancer_ports import BalancerPorts
from actors.memory_balancer import MemoryBalancerActor, MemoryBalancerCore
from actors.ports.balancer import ContainerMemoryReader, NumaMetricSource
from actors.ports.clock import Clock
from actors.ports.commit import StateStoreCommitter
from actors.ports.migration import AdviceExecutor
from actors.ports.pod_source import PodSource
from actors.store_messages import GetSnapshot, Snapshot
from actors.supervisor import ChildSpec, Supervisor
from actors.threads import THREADS
from actors.ticker import Ticker
from policy.balance.constants import EVICTION_PLUGIN_NAME
from policy.topology.model import CPUTopology
from qrmd.balancer.checks import check_memory_cgroup_root, metrics_file_warnings
from qrmd.balancer.settings import BalancerSettings
from qrmd.host.balancer_sources import build_container_memory_reader, build_numa_metric_source
from qrmd.host.cpu_vendor import read_cpu_vendor
from qrmd.host.metrics_fixed import FixedNumaMetrics
from qrmd.host.migrate import CgroupMigrator
from qrmd.host.numa_distances import TopologyNumaDistances
from qrmd.status.health import HEALTH_TOLERATION_MULTIPLIER, HandlerHealth, ProblemSource
from qrmd.subsystem import STORE_CHILD, Running, Runtime, Shared, SubsystemParts
from wire.eviction_server import EVICTION_PLUGIN_TYPE, EvictionPluginServer
from wire.rpc import RpcObserver

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

__all__ = [
    "BALANCER_CHILD",
    "PLUGIN_RETRY_S",
    "ROUND_HEALTH_CHECK",
    "BalancerWiring",
    "build",
]

_log = logging.getLogger("qrmd.balancer")
_Reader = TypeVar("_Reader")

#: The balancer's name among the Supervisor's children.
BALANCER_CHILD = "memory_balancer"
#: §10: the wrapper tries to start the plugin every 5 s until it serves.
PLUGIN_RETRY_S = 5.0
#: The balancer's health check, as the reference names its periodic handlers.
ROUND_HEALTH_CHECK = "numa_memory_balancer_round"
#: How long the balancer may take to answer at start and at a scrape.
READY_TIMEOUT_S = 60.0
SCRAPE_TIMEOUT_S = 2.0


class _BalancerRef:
    """The supervised balancer as the eviction server wants an actor ref: ``ask``, ``tell``
    and ``is_alive`` (its ``actors_ready`` guard), whichever actor runs it now."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._ref = supervisor.ref(BALANCER_CHILD)

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        return self._ref.ask(message, block=block, timeout=timeout)

    def tell(self, message: Any) -> None:
        self._ref.tell(message)

    def is_alive(self) -> bool:
        return any(c.name == BALANCER_CHILD and c.alive for c in self._supervisor.status().children)


def build(settings: BalancerSettings, shared: Shared) -> BalancerWiring:
    """The memory balancer subsystem on this host's sources, as the settings choose them."""
    host = shared.host
    return BalancerWiring(
        settings,
        shared.machine.topology,
        shared.clock,
        cpu_vendor=read_cpu_vendor() if host.cpu_vendor is None else host.cpu_vendor,
        metric_source=host.numa_metrics,
        memory=host.container_memory,
        executor=host.page_mover,
        runtime=shared.runtime,
    ).attach(shared)


class BalancerWiring(SubsystemParts):
    """Builds the balancer's ports and actor, and runs its ticker and eviction plugin.

    Args:
        config: the balancer's settings.
        topology: the machine; its distance matrix gives the distance lists (§4.4).
        clock: the daemon's clock: rounds, the cool-down and the ping-pong window use it.
        cpu_vendor: the CPUID vendor string (§3.1).
        metric_source, memory, executor: replace the ports the configuration would build
            (tests, the demo, the simulation); ``executor=None`` builds the ``CgroupMigrator``.
        runtime: starts the actor and the ticker (default: threads).

    Raises:
        ValueError: a source setting cannot be used, or the memory cgroup root is not a
            directory (``--memory-cgroup-root``); MetricSourceUnavailable: resctrl is not
            available on this host.
    """

    def __init__(
        self,
        config: BalancerSettings,
        topology: CPUTopology,
        clock: Clock,
        *,
        cpu_vendor: str,
        metric_source: NumaMetricSource | None = None,
        memory: ContainerMemoryReader | None = None,
        executor: AdviceExecutor | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.config = config
        self._runtime = runtime or THREADS
        self.cpu_vendor = cpu_vendor
        self._clock = clock
        self.distances = TopologyNumaDistances(topology.distances)
        numa_ids = sorted(self.distances.distances())
        resolved = config.memory_balancer.resolve(cpu_vendor)
        settings = config.numa_metric_sources
        if memory is None:
            check_memory_cgroup_root(settings)
        if metric_source is None:
            for warning in metrics_file_warnings(settings):
                _log.warning("memory balancer: %s", warning)
        # Timeout = tolerance = 3 periods (§12.3, §14). Ready until the first tick says
        # otherwise: a balancer that has not run yet is starting, not failing.
        period = config.qos_aware_sync_period_s
        self.round_health = HandlerHealth(
            ROUND_HEALTH_CHECK,
            HEALTH_TOLERATION_MULTIPLIER * period,
            HEALTH_TOLERATION_MULTIPLIER * period,
            clock.monotonic(),
        )
        self.round_health.update(None, clock.monotonic())
        self.metric_source = metric_source or build_numa_metric_source(
            settings,
            latency_metric=resolved.read_latency_metric,
            numa_ids=numa_ids,
            clock=clock.time,
            monotonic=clock.monotonic,
        )
        if isinstance(self.metric_source, FixedNumaMetrics):
            self.metric_source = self.metric_source.under_pressure(
                config.simulated_pressure,
                read_latency=resolved.force_balance_read_latency_threshold + 10,
            )
        reader = None if memory and executor else build_container_memory_reader(settings)
        self.memory: ContainerMemoryReader = memory or _required(reader)
        self.executor: AdviceExecutor = executor or CgroupMigrator(
            _required(reader), len(numa_ids), execute=config.memory_balance_execute
        )
        self.pod_source: PodSource | None = None
        self.ticker: Ticker | None = None
        self.server: EvictionPluginServer | None = None
        self.plugin_start_failures = 0
        self._supervisor: Supervisor | None = None
        self._stop = threading.Event()
        self._retry: threading.Thread | None = None
        self._shared: Shared | None = None

    def attach(self, shared: Shared) -> BalancerWiring:
        """Join the daemon: each round takes the containers' IDs from the pod source's
        publisher, the Allocator's (memory-balancer §4.2), read when the actor starts."""
        self._shared = shared
        return self

    # -- the subsystem ---------------------------------------------------------------------

    def children(self) -> Sequence[ChildSpec]:
        """The balancer, after the Allocator (rest-for-one restarts it with the store)."""
        pods = None if self._shared is None else self._shared.ports.pod_source
        return (self.child_spec(pods),)

    def health_sources(self) -> Sequence[ProblemSource]:
        """The round check (module docstring, point 5)."""
        return (self.problems,)

    def collectors(self) -> Sequence[Collector]:
        """The §12 metrics."""
        return (self.collector(),)

    def start(self, running: Running) -> None:
        """Tick the rounds (the actor runs)."""
        self.start_ticking(running.supervisor)

    def serve(self, running: Running) -> None:
        """Serve the eviction plugin."""
        self.serve_plugin(running.metrics)

    def serving(self) -> str:
        """The rounds and the eviction plugin, for the serving line."""
        plugin = self.server
        return (
            f"memory balancer: every {self.config.qos_aware_sync_period_s:g} s, "
            f"{'executing' if self.config.memory_balance_execute else 'dry run'}, eviction "
            f"plugin {plugin.socket_path if plugin is not None else 'not serving yet'}"
        )

    # -- the supervised actor ----------------------------------------------------------------

    def child_spec(self, pods: PodSource | None = None) -> ChildSpec:
        """The Supervisor's ``memory_balancer`` child: built from the store's snapshot.

        Args:
            pods: the node's pod source (the checkers' publisher), whose latest listing gives
                each round its container IDs; None: pod-level memory and migration.
        """
        # Kept for every (re)start of the actor: a restarted balancer reads the same source.
        self.pod_source = pods
        return ChildSpec(
            BALANCER_CHILD,
            lambda refs: self._start_actor(refs[STORE_CHILD]),
            _wait_ready,
            unavailable=BalancerUnavailable,
        )

    def _start_actor(self, store: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        committer = StateStoreCommitter(store)
        snapshot = store.ask(GetSnapshot(), timeout=READY_TIMEOUT_S)
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"the state store answered GetSnapshot with {type(snapshot).__name__}")
        ports = BalancerPorts(
            metrics=self.metric_source,
            distances=self.distances,
            memory=self.memory,
            pods=store_pods(committer),
            executor=self.executor,
            pod_source=self.pod_source,
            health=self._report_round,
        )
        core = MemoryBalancerCore(
            snapshot,
            committer,
            ports,
            self.config.memory_balancer,
            now_fn=self._clock.time,
            cpu_vendor=self.cpu_vendor,
            round_summary_every_s=self.config.balance_round_summary_every_s,
        )
        return self._runtime.spawn(MemoryBalancerActor, core)

    # -- health ------------------------------------------------------------------------------

    def _report_round(self, error: str | None) -> None:
        """The balancer's tick went well (None) or not; from the actor's thread."""
        self.round_health.update(error, self._clock.monotonic())

    def problems(self) -> list[str]:
        """Why the balancer is unhealthy now: its rounds keep failing, or it stopped."""
        why = self.round_health.failing(self._clock.monotonic())
        return [] if why is None else [f"memory balancer: {why}"]

    # -- ticker and eviction plugin ---------------------------------------------------------

    def start_serving(self, supervisor: Supervisor, observer: RpcObserver | None) -> None:
        """Start ticking and serve the eviction plugin (the actor is running).

        A plugin that cannot be served is retried every ``PLUGIN_RETRY_S`` (§10); nothing
        here raises for it.
        """
        self.start_ticking(supervisor)
        self.serve_plugin(observer)

    def start_ticking(self, supervisor: Supervisor) -> None:
        """Tell the actor ``Tick`` every ``--qos-aware-sync-period`` (the actor is running)."""
        self._supervisor = supervisor
        self.ticker = self._runtime.ticker(
            supervisor.ref(BALANCER_CHILD),
            self.config.qos_aware_sync_period_s,
            self._clock.time,
            Tick,
            name="balancer-ticker",
        )
        self.ticker.start()

    def serve_plugin(self, observer: RpcObserver | None) -> None:
        """Serve the eviction plugin (after ``start_ticking``), retried every
        ``PLUGIN_RETRY_S`` while it cannot be (§10); never raises for it."""
        if not self._serve_plugin(observer):
            self._retry = threading.Thread(
                target=self._retry_plugin, args=(observer,), name="eviction-plugin", daemon=True
            )
            self._retry.start()

    def _serve_plugin(self, observer: RpcObserver | None) -> bool:
        assert self._supervisor is not None
        server = EvictionPluginServer(
            self.config.plugin_registration_dir,
            _BalancerRef(self._supervisor),  # type: ignore[arg-type]  # quacks like an ActorRef
            name=EVICTION_PLUGIN_NAME,
            observer=observer,
        )
        try:
            server.start()
        except (OSError, RuntimeError) as err:
            self.plugin_start_failures += 1
            _log.warning(
                "eviction plugin %s not served (retry in %s s): %s",
                server.socket_path,
                PLUGIN_RETRY_S,
                err,
            )
            server.stop()
            return False
        self.server = server
        _log.info("eviction plugin %s serving (%s)", server.socket_path, EVICTION_PLUGIN_TYPE)
        return True

    def _retry_plugin(self, observer: RpcObserver | None) -> None:
        while not self._stop.wait(PLUGIN_RETRY_S):
            if self._serve_plugin(observer):
                return

    def stop(self) -> None:
        """Stop the plugin (its socket is removed) and the ticker; safe to call twice."""
        self._stop.set()
        if self._retry is not None:
            self._retry.join(PLUGIN_RETRY_S + 1)
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.ticker is not None:
            self.ticker.stop()

    def tick(self) -> bool:
        """Tell one tick now (tests drive rounds with a fake clock this way)."""
        assert self.ticker is not None, "start first"
        return self.ticker.tick()

    # -- observability -----------------------------------------------------------------------

    def view(self) -> BalancerView | None:
        """The balancer's state and counters, or None while it cannot answer."""
        if self._supervisor is None:
            return None
        try:
            reply = self._supervisor.ref(BALANCER_CHILD).ask(
                GetBalancerState(), timeout=SCRAPE_TIMEOUT_S
            )
        except Exception as err:
            _log.debug("balancer state not read: %s", err)
            return None
        return reply if isinstance(reply, BalancerView) else None

    def collector(self) -> Collector:
        """The §12 metrics, read at scrape time (``qrmd.balancer.metrics``)."""
        # The daemon asks once kubelet is served: prometheus_client loads then, not at start.
        from qrmd.balancer.metrics import BalancerCollector  # noqa: PLC0415 (after serving)

        return BalancerCollector(
            self.view, self._executor_counts, lambda: self.plugin_start_failures
        )

    def _executor_counts(self) -> Mapping[str, Any] | None:
        if not isinstance(self.executor, CgroupMigrator):
            return None
        stats = self.executor.stats
        return {
            "handled": stats.handled_total,
            "results": dict(stats.results_total),
            "moved": (stats.bytes_moved_total, stats.batches_total, stats.longest_batch_s),
        }


def _required(reader: _Reader | None) -> _Reader:
    # Built whenever a port needs it (``BalancerWiring``): None only when none does.
    assert reader is not None
    return reader


def _wait_ready(ref: pykka.ActorRef[Any]) -> None:
    ref.ask(GetBalancerState(), timeout=READY_TIMEOUT_S)
