"""The composition root of ``qrmd run``: the ordered list of subsystems, started in order and
stopped in reverse (STYLE.md "Actors", Mopidy's extension registry; DESIGN.md "Subsystems and
simulation", the commit protocol step 5).

``SUBSYSTEMS`` is the list: the state store, the CPU plugin, the memory balancer, CPU
pressure eviction, the pod source and its checkers, the sys-advisor link. Each is a package
under ``qrmd/`` implementing ``qrmd.subsystem.Subsystem``; this module knows them only here,
by their settings type (plain data: whether it runs, the sockets it serves) and the module of
their wiring, imported when the subsystem is enabled (a node that leaves one off never loads
it, as ``qrmd.cli`` loads only the command it runs). Each wiring is given its own settings
object (``qrmd.config_values.settings_of``), never the whole configuration.

Start, in order:

1. the machine (``--topology``), its system reserve and the policy context
   (``qrmd.config.build_context``), shared by every subsystem;
2. every enabled subsystem is built in list order (a subsystem offers the others its ports
   here: the store its snapshot, the pod source its publisher, the advisor link its calls);
   the store first takes katalyst-agent's checkpoint over, or refuses the start
   (``qrmd.store.katalyst_takeover``);
3. the Supervisor of every subsystem's children, in list order: the StateStore, the
   Allocator, the MemoryBalancer, the CPU pressure actor, the checkers, the AdvisorLink (the
   link last, so rest-for-one restarts it with the Allocator); the health sources of each;
4. with ``--metrics-address``, the metrics/health endpoint's port (bound now, so a taken or
   invalid address fails before recovery; nothing answers on it until step 7);
5. the Supervisor starts the actors: the StateStore recovers, then the Allocator starts from
   its snapshot (cpu-policy §6.2 steps 4–6), then the others;
6. in list order, each subsystem's ``start`` and ``serve``: the store's checkpoint ticker
   and the start record, the kubelet sockets (only now, with the state recovered and the
   actors ready, does a socket appear for kubelet to dial: wire.md §8.1), the balancer's
   rounds and eviction plugin, the CPU pressure collections and plugins, the pod list fetch
   and the checkers, the advisor's silence ticker and its checkpoint watchdog. kubelet is
   served whatever the advisor does (beyond the reference, which refuses to start without
   it). The gRPC servers tell a relay (``qrmd.status.observer``) about each call until the
   registry exists;
7. with ``--metrics-address``, the metrics registry with each subsystem's collectors (the
   relay replays the calls answered since step 6 into it) and the endpoint's HTTP server on
   the port bound in step 4: prometheus_client and http.server load after kubelet is
   served, and a probe that connected earlier is answered now, when everything is up.

The simulation (``qrmd sim``) builds the same list with ``assemble``, on its own ``Runtime``
and ``Host`` (``qrmd.subsystem``), supervises the children in the same order under the same
``Supervisor`` and starts each subsystem, but never serves: its peers speak to the actors.

Stop (SIGTERM/SIGINT): each subsystem's ``stop`` in reverse (its tickers, plugins and
servers: no new calls; sockets are removed), then the actors in reverse (the StateStore
writes a checkpoint and closes the journal), then each subsystem's ``close`` in reverse (the
GetCheckpoint server), then the endpoint. An actor still alive afterwards is logged as a bug.
SIGKILL loses nothing acknowledged: with durability ``always`` every answered commit was
fsynced before the answer.
"""

from __future__ import annotations

import gc
import importlib
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import pykka

from actors.ports.clock import SYSTEM_CLOCK, Clock
from actors.supervisor import Supervisor, SupervisorError
from actors.threads import THREADS
from journal import JournalMismatch
from policy.cpu.context import PolicyContext
from qrmd.advisor.settings import AdvisorSettings
from qrmd.balancer.settings import BalancerSettings
from qrmd.config import DaemonConfig, build_context, declared_sockets
from qrmd.config_values import SubsystemSettings, settings_of
from qrmd.cpu_plugin.connection_cap import (
    check_connection_cap,
    log_open_file_limit,
    raise_open_file_limit,
)
from qrmd.cpu_plugin.settings import CpuPluginSettings
from qrmd.cpu_pressure.settings import CPUPressureSettings
from qrmd.pods.settings import PodsSettings
from qrmd.status.health import HealthRegistry
from qrmd.status.listener import listen
from qrmd.status.observer import ObserverRelay
from qrmd.store.settings import StoreSettings
from qrmd.subsystem import DaemonError, Running, Shared, Subsystem
from qrmd.version import VERSION

if TYPE_CHECKING:
    from qrmd.status.endpoint import StatusEndpoint
    from qrmd.status.metrics import DaemonMetrics

__all__ = [
    "SUBSYSTEMS",
    "Builder",
    "Daemon",
    "DaemonError",
    "Entry",
    "assemble",
    "run_daemon",
    "watch_health",
]

_log = logging.getLogger("qrmd.daemon")

#: Builds a subsystem from its settings (its entry's settings type) and the shared context
#: (the ``build`` of its wiring module; tests give their own by the entry's name).
Builder = Callable[[Any, Shared], Subsystem]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Entry:
    """One subsystem in the daemon's list.

    Attributes:
        name: how tests and logs name it.
        module: the module whose ``build`` makes it (imported only when it is enabled).
        settings: its settings type: the plain data its ``build`` is given, which says
            whether the configuration asks for it.
        off: its part of the serving line when it is not enabled, or "" for none.
    """

    name: str
    module: str
    settings: type[SubsystemSettings]
    off: str = ""


#: The daemon: its subsystems, in start (and supervision) order; stop is the reverse.
SUBSYSTEMS: tuple[Entry, ...] = (
    Entry("store", "qrmd.store.subsystem", StoreSettings),
    Entry("cpu_plugin", "qrmd.cpu_plugin.subsystem", CpuPluginSettings),
    Entry("balancer", "qrmd.balancer.subsystem", BalancerSettings, off="memory balancer: off"),
    Entry(
        "cpu_pressure",
        "qrmd.cpu_pressure.subsystem",
        CPUPressureSettings,
        off="cpu pressure eviction: off",
    ),
    Entry("pods", "qrmd.pods.subsystem", PodsSettings),
    Entry("advisor", "qrmd.advisor.subsystem", AdvisorSettings, off="sys-advisor: off"),
)
#: The serving line names the subsystems in list order, with the metrics endpoint after
#: this many of them (where operators' log searches have always found it).
_METRICS_AFTER = 2


def _builder(entry: Entry) -> Builder:
    build: Builder = importlib.import_module(entry.module).build
    return build


def watch_health(health: HealthRegistry, supervisor: Supervisor, parts: list[Subsystem]) -> None:
    """What ``/healthz`` asks (start step 3): the Supervisor's dead actors and every
    subsystem's health sources, beside the handlers they registered while built."""
    health.add_source(lambda: supervisor.status().problems())
    for part in parts:
        for source in part.health_sources():
            health.add_source(source)


def assemble(
    config: DaemonConfig, shared: Shared, builders: Mapping[str, Builder] | None = None
) -> Iterator[tuple[Entry, Subsystem]]:
    """Build every enabled subsystem of ``SUBSYSTEMS``, in list order (start step 2), each
    yielded as it is built (a caller keeps what was built when a later one fails).

    Args:
        config: the validated configuration; each subsystem is given its own settings.
        shared: the shared context the subsystems are built in (and offer their ports to).
        builders: replace the ``build`` of subsystems, by their entry's name.
    """
    for entry in SUBSYSTEMS:
        settings = settings_of(entry.settings, config)
        if settings.enabled:
            build = (builders or {}).get(entry.name) or _builder(entry)
            yield entry, build(settings, shared)


class Daemon:
    """The running daemon: ``start`` brings everything up in order, ``stop`` takes it down.

    Args:
        config: the validated configuration.
        clock: the clock the actors and the journal use.
        builders: replace the ``build`` of subsystems, by their entry's name (tests inject
            plugin servers, metric sources and loads this way).
    """

    def __init__(
        self,
        config: DaemonConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        builders: Mapping[str, Builder] | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._builders = dict(builders or {})
        self.context: PolicyContext | None = None
        self.subsystems: list[tuple[Entry, Subsystem]] = []
        self.supervisor: Supervisor | None = None
        self.metrics: DaemonMetrics | None = None
        self.health = HealthRegistry(clock.monotonic)
        self.endpoint: StatusEndpoint | None = None
        self._listener: socket.socket | None = None

    def find(self, kind: type[_T]) -> _T | None:
        """The running subsystem of this type, or None (tests reach its parts this way)."""
        for _, subsystem in self.subsystems:
            if isinstance(subsystem, kind):
                return subsystem
        return None

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
        machine = build_context(config)
        self.context = machine
        shared = Shared(machine, self._clock, self.health, THREADS)
        # 2. The enabled subsystems, in order.
        for built in assemble(config, shared, self._builders):
            self.subsystems.append(built)
        parts = [subsystem for _, subsystem in self.subsystems]
        # 3. The supervision tree, health and metrics.
        supervisor = Supervisor(
            [child for part in parts for child in part.children()], clock=self._clock
        )
        self.supervisor = supervisor
        watch_health(self.health, supervisor, parts)
        # 4. The metrics/health endpoint's port, bound before recovery: a taken port fails
        # fast. Its registry, collectors and HTTP server come once kubelet is served (step
        # 7): prometheus_client and http.server are some sixty modules a restart would load
        # before kubelet's socket appears. Without an address nothing would read them: no
        # port, no registry, no prometheus_client.
        observer: ObserverRelay | None = None
        if config.metrics_address is not None:
            self._listener = listen(*config.metrics_address)
            observer = ObserverRelay()
        # 5. The actors: the StateStore recovers, then the Allocator starts from its snapshot.
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
        # 6. Each subsystem starts what runs beside its actors, then serves; the gRPC servers
        # tell the relay about every call until the registry is built.
        running = Running(supervisor, observer)
        for part in parts:
            part.start(running)
            part.serve(running)
        # 7. The registry with every subsystem's collectors (the calls answered since step 6
        # replayed into it), and the endpoint answering on the port bound in step 4.
        if observer is not None:
            self._serve_status(shared, supervisor, parts, observer)
        _log.info(self._serving_line())

    def _serve_status(
        self,
        shared: Shared,
        supervisor: Supervisor,
        parts: list[Subsystem],
        observer: ObserverRelay,
    ) -> None:
        """Start step 7: build the metrics registry and the endpoint on the bound port."""
        from qrmd.status.endpoint import StatusEndpoint  # noqa: PLC0415 (only with metrics)
        from qrmd.status.metrics import DaemonMetrics, MetricSources  # noqa: PLC0415 (idem)

        assert self._listener is not None and self.config.metrics_address is not None
        metrics = DaemonMetrics(
            MetricSources(
                store=shared.ports.store_status,
                snapshot=shared.ports.latest,
                supervisor=supervisor.status,
                health=self.health,
            )
        )
        for part in parts:
            for collector in part.collectors():
                metrics.registry.register(collector)
        self.metrics = metrics
        observer.attach(metrics)
        readiness = [source for part in parts for source in part.readiness_sources()]
        host, port = self.config.metrics_address
        self.endpoint = StatusEndpoint(
            host,
            port,
            metrics,
            self.health,
            liveness=lambda: supervisor.status().problems(),
            readiness=lambda: [problem for source in readiness for problem in source()],
            listener=self._listener,
        )
        self._listener = None  # the endpoint's now: its stop closes it
        self.endpoint.start()

    def stop(self) -> None:
        """Stop each subsystem in reverse, then the actors, then what outlives them, then the
        endpoint; safe to call twice."""
        for entry, subsystem in reversed(self.subsystems):
            try:
                subsystem.stop()
            except Exception:
                _log.exception("the %s subsystem failed to stop", entry.name)
        if self.supervisor is not None:
            self.supervisor.stop()
            self.supervisor = None
        for entry, subsystem in reversed(self.subsystems):
            try:
                subsystem.close()
            except Exception:
                _log.exception("the %s subsystem failed to close", entry.name)
        if self.endpoint is not None:
            self.endpoint.stop()
            self.endpoint = None
        if self._listener is not None:  # bound, but the start failed before the endpoint
            self._listener.close()
            self._listener = None
        for ref in pykka.ActorRegistry.get_all():
            _log.error("bug: actor %s is still alive after shutdown", ref)

    def _serving_line(self) -> str:
        running = {entry.name: subsystem for entry, subsystem in self.subsystems}
        parts = []
        for entry in SUBSYSTEMS:
            subsystem = running.get(entry.name)
            part = subsystem.serving() if subsystem is not None else entry.off
            if part:
                parts.append(part)
        endpoint = "off"
        if self.endpoint is not None:
            host, port = self.endpoint.address
            endpoint = f"http://{host}:{port}/metrics and /healthz"
        parts.insert(_METRICS_AFTER, f"metrics: {endpoint}")
        return f"qrmd serving: qrmd {VERSION}; " + "; ".join(parts)


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


def run_daemon(
    config: DaemonConfig,
    *,
    builders: Mapping[str, Builder] | None = None,
    serving: Callable[[], object] | None = None,
) -> int:
    """Run until SIGTERM or SIGINT, then stop cleanly.

    The cyclic garbage collector runs from the end of the start on (``_collect_from_now_on``).

    Args:
        config: the validated configuration.
        builders: see ``Daemon`` (tests inject some).
        serving: called once the daemon serves (``qrmd run`` keeps its dataclasses' code then).

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

    # Room for the journal and health beside the capped connections of every socket the
    # subsystems declare (qrmd.cpu_plugin.connection_cap).
    limit = raise_open_file_limit()
    caps = [s.max_connections for s in declared_sockets(config) if s.max_connections is not None]
    try:
        check_connection_cap(caps, limit)
    except ValueError as err:
        raise DaemonError(str(err)) from None
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    daemon = Daemon(config, builders=builders)
    try:
        try:
            daemon.start()
        finally:
            _collect_from_now_on()
        if serving is not None:
            serving()
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
