"""The composition root of ``qrmd run``: one function starts everything in order, one stops it
in reverse (STYLE.md "Actors"; DESIGN.md "Actors and messages", the commit protocol step 5).

Start, in order:

1. the machine (``--topology``), its system reserve (spec cpu-policy §3) and the policy
   context (QoS configuration, ``enable-reclaim``, transition period, hint limits);
2. the metrics/health endpoint's socket (bound now, so a taken port fails before recovery);
3. the Supervisor: the StateStore (it recovers from the journal), then the Allocator, built
   from the recovered snapshot and sent ``StartPolicy`` (§6.2 steps 4–6); then the store's
   checkpoint ticker, so an idle node still writes its time-due checkpoint
   (``qrmd.store_wiring``);
4. the endpoint starts answering; with ``--pod-source kubelet`` the pod list publisher (built
   in step 3, the Allocator reads pod phases from it, cpu-policy §7.3) and the periodic
   checkers start (``qrmd.checkers_wiring``; their actor is the Supervisor's
   child after the Allocator); without a pod source, like the reference without pod metadata
   (§12.4 step 1), no checker runs and a log line says that residual state is never cleaned;
5. one PluginServer per socket directory (wire.md §2, §8.1): only now, with the state
   recovered and the actors ready, does a socket appear for kubelet to dial;
6. with ``--enable-memory-balancer``: the MemoryBalancer is the Supervisor's third child
   (after the StateStore and the Allocator, so rest-for-one restarts it with the store), and
   once it runs, its ticker and eviction plugin start (``qrmd.balancer_wiring``);
7. with ``--enable-cpu-pressure-eviction``: the CPU pressure actor is the next child, and
   once it runs, its ticker and its two eviction plugins start (``qrmd.cpu_pressure_wiring``);
8. with ``--enable-cpu-advisor``: the policy context has ``advisor_enabled``, the Allocator
   calls the advisor, and the AdvisorLink is the Supervisor's last child, which serves
   GetCheckpoint on ``--cpu-plugin-socket`` before it dials; once it runs, the fallback's
   silence ticker starts (``qrmd.advisor_wiring``). kubelet is served whatever the advisor
   does (beyond the reference, which refuses to start without it).

Stop (SIGTERM/SIGINT): the advisor's ticker, the CPU pressure plugins and ticker, the
balancer's plugin and ticker, then the kubelet servers (no new calls; their sockets are
removed), then the checkpoint ticker, then the actors in reverse (the link first; the
StateStore writes a checkpoint and closes the journal), then the GetCheckpoint server, then
the endpoint. An actor still alive afterwards is logged as a bug. SIGKILL loses nothing
acknowledged: with durability ``always`` every answered commit was fsynced before the answer.
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import pykka

from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_advisor import AdvisorCalls
from actors.allocator_messages import AllocatorUnavailable, StartPolicy
from actors.ports.clock import SYSTEM_CLOCK, Clock
from actors.ports.commit import StateStoreCommitter
from actors.ports.pod_source import PodSource
from actors.state_store import StoreConfig
from actors.store_messages import Commit, CommitRefused, GetSnapshot, Snapshot
from actors.supervisor import ChildSpec, SupervisedRef, Supervisor, SupervisorError
from journal import JournalMismatch
from machines.registration import REGISTERED
from policy.cpu.context import PolicyContext
from policy.cpu.qos import QoSConfig
from policy.cpu.reserve import (
    ReserveError,
    most_reservable_cpus,
    require_cpus_outside_reserve,
    reserved_cpus,
)
from policy.topology.model import CPUTopology
from qrmd.config import ConfigError, DaemonConfig
from qrmd.hardening_settings import (
    DEFAULT_MAX_CONNECTIONS,
    check_connection_cap,
    log_open_file_limit,
    raise_open_file_limit,
)
from qrmd.health import HealthRegistry
from qrmd.journal_settings import journal_retention
from qrmd.katalyst_takeover import adopt_katalyst_state
from qrmd.metrics import DaemonMetrics, MetricSources
from qrmd.start_record import start_cause
from qrmd.store_wiring import RECOVERY_TIMEOUT_S, STORE_CHILD, StoreWiring
from qrmd.topology_source import DEFAULT_TOPOLOGY_SPEC, load_topology
from qrmd.version import VERSION
from wire.plugin_server import PLUGIN_NAME, PluginServer, distinct_socket_dirs

if TYPE_CHECKING:
    # The optional subsystems are imported where they are built (``Daemon._start``), so a
    # node that leaves them off does not load them: the advisor link, the memory balancer,
    # CPU pressure eviction, the pod source's checkers, and the HTTP endpoint with
    # ``--metrics-address off`` (DESIGN.md "Who uses it": ``qrmd run`` on every node).
    from qrmd.advisor_wiring import AdvisorWiring
    from qrmd.balancer_wiring import BalancerWiring
    from qrmd.checkers_wiring import CheckersWiring
    from qrmd.cpu_pressure_wiring import CPUPressureWiring
    from qrmd.endpoint import StatusEndpoint

__all__ = [
    "RESOURCE_NAME",
    "BalancerFactory",
    "Daemon",
    "DaemonError",
    "PluginServing",
    "ServerFactory",
    "run_daemon",
]

_log = logging.getLogger("qrmd.daemon")

#: wire.md §12.5: ``PluginInfo.name``, the resource kubelet routes to the plugin.
RESOURCE_NAME = "cpu"

START_POLICY_TIMEOUT_S = 60.0
#: How long in-flight kubelet calls may finish when the daemon stops.
SERVER_GRACE_S = 2.0


class DaemonError(Exception):
    """The daemon could not start; the message says what failed and why."""


class PluginServing(Protocol):
    """What the daemon needs of a plugin server (``wire.plugin_server.PluginServer``)."""

    def start(self) -> None:
        """Listen on the socket and serve."""
        ...

    def stop(self, grace_s: float) -> None:
        """Stop serving, let calls in flight finish for ``grace_s``, remove the socket."""
        ...


#: Builds the server of one socket directory: (dir, allocator, ready, observer) → server.
ServerFactory = Callable[[str, SupervisedRef, Callable[[], bool], DaemonMetrics], PluginServing]


#: Builds the balancer's wiring: (config, topology, clock) → wiring (tests inject sources).
BalancerFactory = Callable[[DaemonConfig, CPUTopology, Clock], "BalancerWiring"]


def _host_balancer(config: DaemonConfig, topology: CPUTopology, clock: Clock) -> BalancerWiring:
    from qrmd.balancer_wiring import BalancerWiring  # noqa: PLC0415 (lazy: optional)
    from qrmd.host.cpu_vendor import read_cpu_vendor  # noqa: PLC0415

    return BalancerWiring(config, topology, clock, cpu_vendor=read_cpu_vendor())


#: Builds the CPU pressure wiring: (config, clock, policy context) → wiring (tests inject loads).
CPUPressureFactory = Callable[[DaemonConfig, Clock, PolicyContext], "CPUPressureWiring"]


def _host_cpu_pressure(config: DaemonConfig, clock: Clock, ctx: PolicyContext) -> CPUPressureWiring:
    from qrmd.cpu_pressure_wiring import CPUPressureWiring  # noqa: PLC0415 (lazy: optional)

    return CPUPressureWiring(config, clock, reserved=ctx.reserved, qos=ctx.qos)


def _wire_plugin_server(
    socket_dir: str,
    allocator: SupervisedRef,
    ready: Callable[[], bool],
    observer: DaemonMetrics,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> PluginServing:
    return PluginServer(
        socket_dir,
        allocator,
        name=PLUGIN_NAME,
        resource_name=RESOURCE_NAME,
        ready=ready,
        observer=observer,
        max_connections=max_connections,
    )


def build_context(config: DaemonConfig) -> PolicyContext:
    """The policy's fixed inputs from the configuration (topology, reserve, QoS, options).

    Raises:
        TopologyError, QoSConfigError: the machine or an option is invalid.
        ConfigError: ``--reserved-cpu-cores`` asks for more CPUs than the node has, or all.
    """
    topology = load_topology(config.topology)
    _require_reserve_fits(config, topology)
    try:
        reserved = reserved_cpus(
            topology,
            use_kubelet_reserved_config=False,
            reserved_cpu_cores=config.reserved_cpu_cores,
        )
        require_cpus_outside_reserve(topology, reserved)
    except ReserveError as err:
        raise ConfigError(_reserve_flag(config, err)) from err
    qos = QoSConfig.build(
        enhancement_defaults=dict(config.qos_enhancement_defaults),
        debug_annotation_keys=config.pod_debug_anno_keys,
    )
    return PolicyContext(
        topology=topology,
        reserved=reserved,
        qos=qos,
        enable_reclaim=config.enable_reclaim,
        advisor_enabled=config.cpu_advisor.enabled,
        transition_period_s=config.transition_period_s,
        max_full_hint_numa_nodes=config.max_full_hint_numa_nodes,
        max_hints=config.max_hints,
        residual_sightings=config.pod_source.residual_sightings,
    )


class Daemon:
    """The running daemon: ``start`` brings everything up in order, ``stop`` takes it down.

    Args:
        config: the validated configuration.
        server_factory: builds each socket's plugin server (default: the gRPC one).
        clock: the clock the actors and the journal use.
        balancer_factory: builds the memory balancer's wiring when it is enabled (default:
            this host's sources, as the configuration chooses them).
        cpu_pressure_factory: builds the CPU pressure eviction wiring when it is enabled.
    """

    def __init__(
        self,
        config: DaemonConfig,
        *,
        server_factory: ServerFactory = _wire_plugin_server,
        clock: Clock = SYSTEM_CLOCK,
        balancer_factory: BalancerFactory = _host_balancer,
        cpu_pressure_factory: CPUPressureFactory = _host_cpu_pressure,
    ) -> None:
        self.config = config
        self._balancer_factory = balancer_factory
        self.balancer: BalancerWiring | None = None
        if server_factory is _wire_plugin_server:
            # The default server takes the connection cap (the connection cap).
            server_factory = functools.partial(
                _wire_plugin_server, max_connections=config.max_connections
            )
        self._cpu_pressure_factory = cpu_pressure_factory
        self.cpu_pressure: CPUPressureWiring | None = None
        self._server_factory = server_factory
        self._clock = clock
        self.supervisor: Supervisor | None = None
        self.metrics: DaemonMetrics | None = None
        self.health = HealthRegistry(clock.monotonic)
        self.endpoint: StatusEndpoint | None = None
        self.servers: list[PluginServing] = []
        self.socket_dirs: tuple[str, ...] = ()
        self.store: StoreWiring | None = None
        self.context: PolicyContext | None = None
        self.advisor: AdvisorWiring | None = None
        self.checkers: CheckersWiring | None = None

    def start(self) -> None:
        """Start everything in order (module docstring); on a failure, stop what started.

        Raises:
            DaemonError: a step failed; the message names it.
            TopologyError, ReserveError, QoSConfigError, OSError: bad machine or option.
        """
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        config = self.config
        # 1. The machine, its reserve and the policy context.
        ctx = build_context(config)
        self.context = ctx
        # 1b. Katalyst's state is taken over, or the start refused (qrmd.katalyst_takeover).
        adopt_katalyst_state(config.takeover, config.state_dir, config.node_name, ctx.topology)
        store = StoreWiring(
            StoreConfig(
                config.state_dir,
                config.node_name,
                config.durability,
                checkpoint_every_records=config.checkpoint_every_records,
                checkpoint_every_s=config.checkpoint_every_s,
                retention=journal_retention(
                    config.journal_retention_max_bytes, config.journal_retention_max_age_s
                ),
            ),
            ctx.topology,
            self._clock,
        )
        self.store = store
        if config.pod_source.enabled:
            from qrmd.checkers_wiring import CheckersWiring  # noqa: PLC0415 (lazy: optional)

            self.checkers = CheckersWiring(
                config, ctx, self._clock, self.health, lambda: store.latest
            )
        # The Allocator reads pod phases from the same publisher the checkers read (§7.3).
        pods = self.checkers.publisher if self.checkers is not None else None
        if config.cpu_advisor.enabled:
            from qrmd.advisor_wiring import AdvisorWiring  # noqa: PLC0415 (lazy: optional)

            self.advisor = AdvisorWiring(
                config.cpu_advisor, self._clock, self.health, lambda: store.latest
            )
        advisor = self.advisor
        children = [
            store.child_spec(),
            ChildSpec(
                "allocator",
                lambda refs: _start_allocator(
                    refs[STORE_CHILD],
                    ctx,
                    self._clock,
                    pods,
                    None if advisor is None else advisor.advisor_calls(),
                ),
                lambda allocator: _start_policy(allocator, config),
                unavailable=AllocatorUnavailable,
            ),
        ]
        if config.enable_memory_balancer:
            self.balancer = self._balancer_factory(config, ctx.topology, self._clock)
            self.balancer.watch_health(self.health)
            # Each round takes the containers' IDs from the same publisher (memory §4.2).
            children.append(self.balancer.child_spec(pods))
        if config.enable_cpu_pressure_eviction:
            self.cpu_pressure = self._cpu_pressure_factory(config, self._clock, ctx)
            children.append(self.cpu_pressure.child_spec())
        if self.checkers is not None:
            children.append(self.checkers.child_spec())
        if advisor is not None:
            # Last, so rest-for-one restarts it with the Allocator (it then pushes again).
            children.append(advisor.child_spec())
        supervisor = Supervisor(children, clock=self._clock)
        self.supervisor = supervisor
        self.health.add_source(lambda: supervisor.status().problems())
        self.health.add_source(store.problems)
        self.metrics = DaemonMetrics(
            MetricSources(
                store=lambda: store.status,
                snapshot=lambda: store.latest,
                supervisor=supervisor.status,
                health=self.health,
            )
        )
        if self.balancer is not None:
            self.metrics.registry.register(self.balancer.collector())
        if self.cpu_pressure is not None:
            self.metrics.registry.register(self.cpu_pressure.collector())
        if self.checkers is not None:
            self.metrics.registry.register(self.checkers)
        if advisor is not None:
            self.metrics.registry.register(advisor.collector())
        # 2. The endpoint's socket, before recovery: a taken port fails fast.
        if config.metrics_address is not None:
            from qrmd.endpoint import StatusEndpoint  # noqa: PLC0415 (lazy: optional)

            host, port = config.metrics_address
            self.endpoint = StatusEndpoint(
                host,
                port,
                self.metrics,
                self.health,
                liveness=lambda: supervisor.status().problems(),
                readiness=self._readiness_problems,
            )
        # 3. The actors: the StateStore recovers, then the Allocator starts from its snapshot.
        try:
            supervisor.start()
        except SupervisorError as err:
            where = f"state directory {config.state_dir}"
            if isinstance(err.__cause__, JournalMismatch):
                # The journal names fingerprints; the operator needs the flags that made them.
                where += (
                    f": it was written with another --topology or --node-name than "
                    f"--topology {config.topology} --node-name {config.node_name}"
                )
            raise DaemonError(f"{err} ({where})") from err
        store.start_ticker(supervisor)
        # 3b. The start itself is a record (version, settings, what recovery did).
        self._journal_start(supervisor, ctx, store)
        # 4. The endpoint answers; the checkers run on the pod source, if there is one.
        if self.endpoint is not None:
            self.endpoint.start()
        if self.checkers is not None:
            self.checkers.start(supervisor)
        else:
            _log.info(
                "--pod-source none: residual state of a pod kubelet forgot to remove is never "
                "cleaned and cpusets are not checked (as the reference without pod metadata, "
                "cpu-policy §12.4 step 1)"
            )
        # 5. Only now a socket appears for kubelet (wire.md §8.1).
        allocator = supervisor.ref("allocator")
        # Missing directories are created (0755); one socket per inode (wire.md §2).
        self.socket_dirs = tuple(distinct_socket_dirs(config.socket_dirs))
        for socket_dir in self.socket_dirs:
            server = self._server_factory(socket_dir, allocator, supervisor.available, self.metrics)
            server.start()
            self.servers.append(server)
        # 6. The balancer's rounds and eviction plugin, its actor now running.
        if self.balancer is not None:
            self.balancer.start(supervisor, self.metrics)
        # 7. The CPU pressure collections and eviction plugins.
        if self.cpu_pressure is not None:
            self.cpu_pressure.start(supervisor, self.metrics)
        # 8. The fallback's silence ticker, the link running.
        if advisor is not None:
            advisor.start(supervisor)
        _log.info(self._serving_line())

    def stop(self) -> None:
        """Stop servers, then actors in reverse, then the endpoint; safe to call twice."""
        if self.advisor is not None:
            self.advisor.stop()
        if self.cpu_pressure is not None:
            self.cpu_pressure.stop()
        if self.balancer is not None:
            self.balancer.stop()
        for server in reversed(self.servers):
            try:
                server.stop(SERVER_GRACE_S)
            except Exception:
                _log.exception("a plugin server failed to stop")
        self.servers = []
        if self.checkers is not None:
            self.checkers.stop()
        if self.store is not None:
            self.store.stop_ticker()
        if self.supervisor is not None:
            self.supervisor.stop()
            self.supervisor = None
        if self.advisor is not None:
            self.advisor.close()
        if self.endpoint is not None:
            self.endpoint.stop()
            self.endpoint = None
        for ref in pykka.ActorRegistry.get_all():
            _log.error("bug: actor %s is still alive after shutdown", ref)

    def _readiness_problems(self) -> list[str]:
        """Why kubelet cannot use qrmd yet (``/readyz``): no socket served, or one that kubelet
        has not registered (wire.md §8.1). A server without a registration state (a test's)
        counts as registered."""
        if not self.servers:
            return ["not serving kubelet yet"]
        out = []
        for server in self.servers:
            state = getattr(server, "state", REGISTERED)
            if state != REGISTERED:
                path = getattr(server, "socket_path", "a plugin socket")
                out.append(f"{path} is {state}, not registered with kubelet")
        return out

    def _journal_start(
        self, supervisor: Supervisor, ctx: PolicyContext, store: StoreWiring
    ) -> None:
        # The Supervisor has started the store: it recovered and published its status.
        assert store.status is not None
        try:
            # Blocking on the store is the commit protocol's one wait (DESIGN.md): it calls no one.
            supervisor.ref(STORE_CHILD).ask(
                Commit((), start_cause(ctx, store.status.recovery)), timeout=RECOVERY_TIMEOUT_S
            )
        except CommitRefused as err:
            raise DaemonError(f"cannot journal the daemon's start: {err}") from err

    def _serving_line(self) -> str:
        store = self.store
        recovered = "nothing recovered"
        if store is not None and store.status is not None:
            r = store.status.recovery
            recovered = (
                f"recovered seq {r.last_seq} from {r.directory} ({r.records_replayed} records "
                f"replayed, {r.bytes_truncated} bytes truncated, in {r.elapsed_s:.3f} s)"
            )
        sockets = ", ".join(os.path.join(d, f"{PLUGIN_NAME}.sock") for d in self.socket_dirs)
        endpoint = "off"
        if self.endpoint is not None:
            host, port = self.endpoint.address
            endpoint = f"http://{host}:{port}/metrics and /healthz"
        balancer = "off"
        if self.balancer is not None:
            plugin = self.balancer.server
            balancer = (
                f"every {self.config.qos_aware_sync_period_s:g} s, "
                f"{'executing' if self.config.memory_balance_execute else 'dry run'}, eviction "
                f"plugin {plugin.socket_path if plugin is not None else 'not serving yet'}"
            )
        pressure = "off"
        if self.cpu_pressure is not None:
            pressure = ", ".join(str(p.socket_path) for p in self.cpu_pressure.servers.values())
        advisor = "off"
        if self.advisor is not None:
            link = self.advisor.config
            advisor = f"dialling {link.advisor_socket}, GetCheckpoint on {link.plugin_socket}"
        return (
            f"qrmd serving: qrmd {VERSION}; {recovered}; sockets: {sockets}; "
            f"metrics: {endpoint}; "
            f"memory balancer: {balancer}; cpu pressure eviction: {pressure or 'not serving yet'}; "
            f"sys-advisor: {advisor}"
        )


def _start_allocator(
    store: pykka.ActorRef[Any],
    ctx: PolicyContext,
    clock: Clock,
    pods: PodSource | None,
    advisor: AdvisorCalls | None,
) -> pykka.ActorRef[Any]:
    snapshot = store.ask(GetSnapshot(), timeout=RECOVERY_TIMEOUT_S)
    if not isinstance(snapshot, Snapshot):
        raise TypeError(f"the state store answered GetSnapshot with {type(snapshot).__name__}")
    core = AllocatorCore(
        snapshot, ctx, StateStoreCommitter(store), clock.time, pods, advisor=advisor
    )
    return AllocatorActor.start(core)


def _start_policy(allocator: pykka.ActorRef[Any], config: DaemonConfig) -> None:
    try:
        allocator.ask(StartPolicy(), timeout=START_POLICY_TIMEOUT_S)
    except ReserveError as err:
        # The policy names CPUs, not flags; the operator needs the flag to change.
        raise ConfigError(_reserve_flag(config, err)) from err


def _require_reserve_fits(config: DaemonConfig, topology: CPUTopology) -> None:
    # The operator's terms (the flag, the node's CPUs, the most it takes) rather than the
    # reference's construction error, which names neither the flag nor the limit.
    most = most_reservable_cpus(topology)
    if config.reserved_cpu_cores <= most:
        return
    node = (
        "this node" if config.topology == DEFAULT_TOPOLOGY_SPEC else f"--topology {config.topology}"
    )
    raise ConfigError(
        f"--reserved-cpu-cores {config.reserved_cpu_cores}: {node} has {topology.cpus().size()} "
        f"CPUs; reserve at most {most} (the reclaim pool needs one)"
    )


def _reserve_flag(config: DaemonConfig, err: ReserveError) -> str:
    return (
        f"--reserved-cpu-cores={config.reserved_cpu_cores} on --topology {config.topology}: {err}"
    )


def _collect_from_now_on() -> None:
    """Move what start-up built out of the cyclic collector's reach, then turn it on.

    ``qrmd run`` starts with the collector off (``qrmd.cli``); everything allocated since is
    still in the youngest generation, so the first collection would walk the whole recovered
    state, holding the GIL while kubelet's first calls wait. ``gc.freeze`` moves it to the
    permanent generation instead, at no cost: reference counting still frees those objects;
    only the few hundred objects of start-up's garbage cycles stay, once.
    """
    gc.freeze()
    gc.enable()


def run_daemon(config: DaemonConfig, *, server_factory: ServerFactory | None = None) -> int:
    """Run until SIGTERM or SIGINT, then stop cleanly.

    The cyclic garbage collector runs from the end of the start on (``_collect_from_now_on``).

    Args:
        config: the validated configuration.
        server_factory: see ``Daemon`` (tests inject one).

    Returns:
        The exit status, 0 after a clean stop.

    Raises:
        DaemonError: the daemon could not start (nothing is left running).
    """
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            _log.warning("%s again: already stopping", signal.Signals(signum).name)
        else:
            _log.info("%s: stopping", signal.Signals(signum).name)
        stop.set()

    # Room for the journal and health beside the capped connections (qrmd.hardening_settings).
    limit = raise_open_file_limit()
    sockets = len(config.socket_dirs) + (1 if config.enable_memory_balancer else 0)
    try:
        check_connection_cap(config.max_connections, sockets, limit)
    except ValueError as err:
        raise DaemonError(str(err)) from None
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    daemon = Daemon(config, server_factory=server_factory or _wire_plugin_server)
    try:
        try:
            daemon.start()
        finally:
            _collect_from_now_on()
        # Said once started: a refused setting above is one error line, not a log line first.
        log_open_file_limit(limit)
        # A bounded wait, so the signal handler runs promptly on every platform.
        while not stop.wait(0.5):
            pass
        daemon.stop()
        _log.info("qrmd stopped")
        return 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
