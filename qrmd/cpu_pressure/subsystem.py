"""CPU pressure eviction inside ``qrmd run`` (spec cpu-policy §12.7; katalyst-core v0.5.3
``cpueviction/cpu_eviciton.go``; DESIGN.md "Actors and messages").

With ``--enable-cpu-pressure-eviction`` the daemon gains:

1. a ``cpu_pressure`` child of the Supervisor, after the StateStore (rest-for-one: a restarted
   store restarts it, and it starts again from the recovered section, load rings cleared). Its
   ports are the container load source of ``--cpu-load-metrics-source`` and, at
   ``--reference-version v0.5.47``, the reclaim metrics source of ``--reclaim-metrics-source``
   (``qrmd.host.reclaim_metrics``; the reclaim root is ``--reclaim-relative-root-cgroup-path``);
   it reads the CPU state only through the store's snapshots;
2. a ``Ticker`` telling ``CollectLoad(now)`` every ``--eviction-load-sync-period``;
3. the two eviction plugins, ``<plugin-registration-dir>/cpu-pressure-load-plugin.sock`` and
   ``cpu-pressure-suppression-plugin.sock``, registered through katalyst-agent's plugin
   watcher (wire.md §8.3). As the reference's registration wrapper, a socket that cannot be
   created does not stop the daemon: it is counted and tried again
   every 5 s;
4. metrics: the reference's ``load_pressure_threshold_met_count``, ``pool_metric_value_raw``
   and ``pool_metric_bound_raw``, and ``qrmd_cpu_pressure_<counter>``, read at scrape time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pykka

from actors.cpu_pressure import CPUPressureActor, CPUPressureCore, PressurePorts
from actors.cpu_pressure_messages import (
    CollectLoad,
    GetPressureState,
    PressureUnavailable,
    PressureView,
)
from actors.ports.clock import Clock
from actors.ports.commit import StateStoreCommitter
from actors.ports.cpu_load import ContainerLoadSource
from actors.ports.reclaim_metrics import ReclaimMetricsSource
from actors.store_messages import GetSnapshot, Snapshot
from actors.supervisor import ChildSpec, Supervisor
from actors.threads import THREADS
from actors.ticker import Ticker
from policy.cpu.context import PolicyContext
from policy.cpu.pressure import EVICTION_NAME_LOAD, EVICTION_NAME_SUPPRESSION
from policy.cpu.pressure.suppression_numa import numa_reclaim_cgroups
from policy.cpu.qos import QoSConfig
from policy.topology.cpuset import CPUSet
from qrmd.cpu_pressure.settings import CPUPressureSettings
from qrmd.host.cpu_load_sources import build_container_load_source
from qrmd.host.reclaim_metrics import build_reclaim_metrics_source
from qrmd.subsystem import STORE_CHILD, Running, Runtime, Shared, SubsystemParts
from wire.cpu_pressure_rpcs import LOAD_PLUGIN_RPCS, SUPPRESSION_PLUGIN_RPCS
from wire.eviction_server import EVICTION_PLUGIN_TYPE, EvictionPluginRpc, EvictionPluginServer
from wire.rpc import RpcObserver

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

__all__ = ["CPU_PRESSURE_CHILD", "CPUPressureWiring", "build"]

_log = logging.getLogger("qrmd.cpu_pressure")

#: The actor's name among the Supervisor's children.
CPU_PRESSURE_CHILD = "cpu_pressure"
#: The registration wrapper tries to start a plugin every 5 s until it serves.
PLUGIN_RETRY_S = 5.0
READY_TIMEOUT_S = 60.0
SCRAPE_TIMEOUT_S = 2.0
_PLUGINS: tuple[tuple[str, tuple[EvictionPluginRpc, ...]], ...] = (
    (EVICTION_NAME_LOAD, LOAD_PLUGIN_RPCS),
    (EVICTION_NAME_SUPPRESSION, SUPPRESSION_PLUGIN_RPCS),
)


class _PluginObserver:
    """Names each RPC after its plugin (``cpu-pressure-load-plugin:ThresholdMet``), so the two
    plugins' calls and the balancer's are told apart in ``qrmd_rpc_duration_seconds``."""

    def __init__(self, inner: RpcObserver, plugin: str) -> None:
        self._inner = inner
        self._plugin = plugin

    def observe(self, rpc: str, seconds: float, code: str) -> None:
        # Not "/": the daemon reads a path's last part as the method.
        self._inner.observe(f"{self._plugin}:{rpc}", seconds, code)


class _SupervisedPressureRef:
    """The supervised actor as the eviction server wants a ref: ``ask``, ``tell``, ``is_alive``,
    whichever actor runs it now."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self._ref = supervisor.ref(CPU_PRESSURE_CHILD)

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        return self._ref.ask(message, block=block, timeout=timeout)

    def tell(self, message: Any) -> None:
        self._ref.tell(message)

    def is_alive(self) -> bool:
        children = self._supervisor.status().children
        return any(c.name == CPU_PRESSURE_CHILD and c.alive for c in children)


def build(settings: CPUPressureSettings, shared: Shared) -> CPUPressureWiring:
    """The CPU pressure eviction subsystem on the load source the settings name."""
    return CPUPressureWiring(
        settings,
        shared.clock,
        reserved=shared.machine.reserved,
        qos=shared.machine.qos,
        loads=shared.host.cpu_loads,
        runtime=shared.runtime,
        machine=shared.machine,
        reclaim=shared.host.reclaim_metrics,
    )


class CPUPressureWiring(SubsystemParts):
    """Builds the CPU pressure actor and runs its ticker and its two eviction plugins.

    Args:
        config: its settings.
        clock: the daemon's clock.
        reserved: the system's reserved CPUs.
        qos: how QoS levels are resolved (the Allocator's configuration).
        loads: replaces the load source the configuration would build (tests, the demo,
            the simulation).
        runtime: starts the actor and the ticker (default: threads).
        machine: the reference level, its options and the reclaim root cgroup (default: the
            v0.5.3 level).
        reclaim: replaces the reclaim metrics source the configuration would build at v0.5.47
            (tests).

    Raises:
        ValueError: ``--cpu-load-metrics-source`` or ``--reclaim-metrics-source`` names no
            source.
    """

    def __init__(
        self,
        config: CPUPressureSettings,
        clock: Clock,
        *,
        reserved: CPUSet,
        qos: QoSConfig,
        loads: ContainerLoadSource | None = None,
        runtime: Runtime | None = None,
        machine: PolicyContext | None = None,
        reclaim: ReclaimMetricsSource | None = None,
    ) -> None:
        self.config = config
        self._runtime = runtime or THREADS
        self.settings = config.plugins
        self._clock = clock
        self._reserved = reserved
        self._qos = qos
        # Three sync periods without a new file: the collector is not running.
        max_age = 3 * self.settings.load_eviction_sync_period_s
        self.loads = loads or build_container_load_source(
            config.cpu_load_metrics_source, max_age_s=max_age, clock=clock.time
        )
        self._machine = machine
        self.reclaim = reclaim
        if reclaim is None and machine is not None and machine.at_v0_5_47:
            # Baselines of the root and per-NUMA cgroups now, so the first call has a window.
            root = machine.reclaim_relative_root_cgroup_path
            numas = machine.topology.numa_masks()
            prime = [root, *numa_reclaim_cgroups(root, numas).values()]
            self.reclaim = build_reclaim_metrics_source(config.reclaim_metrics_source, prime=prime)
        self.ticker: Ticker | None = None
        self.servers: dict[str, EvictionPluginServer] = {}
        self.plugin_start_failures: dict[str, int] = {name: 0 for name, _ in _PLUGINS}
        self._supervisor: Supervisor | None = None
        self._stop = threading.Event()
        self._retry: threading.Thread | None = None

    # -- the subsystem ---------------------------------------------------------------------

    def children(self) -> Sequence[ChildSpec]:
        """The CPU pressure actor, after the Allocator."""
        return (self.child_spec(),)

    def collectors(self) -> Sequence[Collector]:
        """Its metrics."""
        return (self.collector(),)

    def start(self, running: Running) -> None:
        """Collect the loads (the actor runs)."""
        self.start_ticking(running.supervisor)

    def serve(self, running: Running) -> None:
        """Serve both plugins."""
        self.serve_plugins(running.metrics)

    def serving(self) -> str:
        """The two plugins' sockets, for the serving line."""
        sockets = ", ".join(str(p.socket_path) for p in self.servers.values())
        return f"cpu pressure eviction: {sockets or 'not serving yet'}"

    def child_spec(self) -> ChildSpec:
        """The Supervisor's ``cpu_pressure`` child: built from the store's snapshot."""
        return ChildSpec(
            CPU_PRESSURE_CHILD,
            lambda refs: self._start_actor(refs[STORE_CHILD]),
            _wait_ready,
            unavailable=PressureUnavailable,
        )

    def _start_actor(self, store: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        committer = StateStoreCommitter(store)
        snapshot = store.ask(GetSnapshot(), timeout=READY_TIMEOUT_S)
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"the state store answered GetSnapshot with {type(snapshot).__name__}")
        core = CPUPressureCore(
            snapshot,
            committer,
            PressurePorts(self.loads, self.reclaim),
            self.settings,
            reserved=self._reserved,
            now_fn=self._clock.time,
            qos=self._qos,
            **self._reference_args(),
        )
        return self._runtime.spawn(CPUPressureActor, core)

    def _reference_args(self) -> dict[str, Any]:
        machine = self._machine
        if machine is None:
            return {}
        return {
            "reference_version": machine.reference_version,
            "reference": machine.reference,
            "reclaim_root": machine.reclaim_relative_root_cgroup_path,
        }

    def start_serving(self, supervisor: Supervisor, observer: RpcObserver | None) -> None:
        """Start collecting and serve both plugins (the actor is running); a plugin that
        cannot be served is retried every ``PLUGIN_RETRY_S``. Never raises for a plugin."""
        self.start_ticking(supervisor)
        self.serve_plugins(observer)

    def start_ticking(self, supervisor: Supervisor) -> None:
        """Tell the actor ``CollectLoad`` every ``--eviction-load-sync-period``."""
        self._supervisor = supervisor
        self.ticker = self._runtime.ticker(
            supervisor.ref(CPU_PRESSURE_CHILD),
            self.settings.load_eviction_sync_period_s,
            self._clock.time,
            CollectLoad,
            name="cpu-pressure-ticker",
        )
        self.ticker.start()

    def serve_plugins(self, observer: RpcObserver | None) -> None:
        """Serve both plugins (after ``start_ticking``); a plugin that cannot be served is
        retried every ``PLUGIN_RETRY_S``. Never raises for a plugin."""
        if not self._serve_plugins(observer):
            self._retry = threading.Thread(
                target=self._retry_plugins,
                args=(observer,),
                name="cpu-pressure-plugins",
                daemon=True,
            )
            self._retry.start()

    def _serve_plugins(self, observer: RpcObserver | None) -> bool:
        assert self._supervisor is not None
        for name, rpcs in _PLUGINS:
            if name in self.servers:
                continue
            server = EvictionPluginServer(
                self.config.plugin_registration_dir,
                _SupervisedPressureRef(self._supervisor),  # type: ignore[arg-type]  # quacks like an ActorRef
                name=name,
                observer=None if observer is None else _PluginObserver(observer, name),
                rpcs=rpcs,
                who="the CPU pressure actor",
            )
            try:
                server.start()
            except (OSError, RuntimeError) as err:
                self.plugin_start_failures[name] += 1
                _log.warning(
                    "eviction plugin %s not served (retry in %s s): %s",
                    server.socket_path,
                    PLUGIN_RETRY_S,
                    err,
                )
                server.stop()
                continue
            self.servers[name] = server
            _log.info("eviction plugin %s serving (%s)", server.socket_path, EVICTION_PLUGIN_TYPE)
        return len(self.servers) == len(_PLUGINS)

    def _retry_plugins(self, observer: RpcObserver | None) -> None:
        while not self._stop.wait(PLUGIN_RETRY_S):
            if self._serve_plugins(observer):
                return

    def stop(self) -> None:
        """Stop both plugins (their sockets are removed) and the ticker; safe to call twice."""
        self._stop.set()
        if self._retry is not None:
            self._retry.join(PLUGIN_RETRY_S + 1)
        for server in self.servers.values():
            server.stop()
        self.servers = {}
        if self.ticker is not None:
            self.ticker.stop()

    def tick(self) -> bool:
        """Tell one collection now (tests drive collections with a fake clock this way)."""
        assert self.ticker is not None, "start first"
        return self.ticker.tick()

    def view(self) -> PressureView | None:
        """The section and counters, or None while the actor cannot answer."""
        if self._supervisor is None:
            return None
        try:
            reply = self._supervisor.ref(CPU_PRESSURE_CHILD).ask(
                GetPressureState(), timeout=SCRAPE_TIMEOUT_S
            )
        except Exception as err:
            _log.debug("CPU pressure state not read: %s", err)
            return None
        return reply if isinstance(reply, PressureView) else None

    def collector(self) -> Collector:
        """The metrics, read at scrape time (``qrmd.cpu_pressure.metrics``)."""
        # The daemon asks once kubelet is served: prometheus_client loads then, not at start.
        from qrmd.cpu_pressure.metrics import CPUPressureCollector  # noqa: PLC0415 (after serving)

        return CPUPressureCollector(self.view, lambda: dict(self.plugin_start_failures))


def _wait_ready(ref: pykka.ActorRef[Any]) -> None:
    ref.ask(GetPressureState(), timeout=READY_TIMEOUT_S)
