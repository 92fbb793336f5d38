"""The one protocol every subsystem of ``qrmd run`` implements, and what the daemon gives it
(DESIGN.md "Subsystems and simulation"; STYLE.md, Mopidy's ``Extension``).

A subsystem is a package under ``qrmd/`` (``store``, ``cpu_plugin``, ``balancer``,
``cpu_pressure``, ``pods``, ``advisor``) with

* ``settings.py``: its option rows (flag, config key, default, parser, help; ``qrmd.config``
  lists them, ``--help`` and ``docs/flags.md`` are made from them) and its settings type, a
  frozen dataclass of plain values (``SubsystemSettings``) whose fields are the validated
  configuration's fields of the same name, so ``settings_of(SettingsType, config)``
  (``qrmd.config_values``) builds it in one place and the settings never import the
  configuration that lists every subsystem. The settings say whether the subsystem runs and
  declare the unix sockets it serves: the root checks every declared path when the
  configuration is loaded, and counts every capped one against the open-file limit;
* ``subsystem.py``: ``build(settings, shared) -> Subsystem``, the wiring, given its own
  settings object and nothing else of the configuration. Given the daemon's ``Shared``
  context it builds its parts; the ``Subsystem`` it returns gives the children it adds to
  the supervision tree (in order), its health and readiness sources, its metrics collectors,
  its part of the serving line (its sockets and endpoints), and its start, stop and close
  hooks.

``qrmd.daemon`` is the ordered list of them: it builds every enabled one, supervises their
children in list order, starts them in that order (``start``: what runs beside the actors;
``serve``: the sockets and server threads that open the process to its peers) and stops them
in reverse. Subsystems never import each other: they meet through the ``Ports`` of ``Shared``
(the pod source, the advisor calls, the store's latest snapshot and status), which actors'
ports type. A value two
subsystems read (``--plugin-registration-dir``, ``--enable-reclaim``) is a field of both
settings types, filled from the one option row.

How the parts run and what they reach outside the process are ports of ``Shared`` too
(DESIGN.md "Subsystems and simulation": every port is a seam the simulation uses): the
``Runtime`` starts actors, tickers and background work (pykka threads and daemon threads in
``qrmd run``, a seeded scheduler and the virtual clock under ``qrmd sim``), and the ``Host``
gives the sources, the journal's storage and the peers' clients a subsystem would otherwise
build from its settings. The simulation builds the daemon's own list with both, starts each
subsystem but never calls ``serve``: it speaks to the actors in the domain messages the
servers would convert to.

Only typing and the plain settings pieces (``qrmd.config_values``) are imported at run time:
the heavy types are for the type checker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

# The settings half of the protocol is plain data, beside the option rows (``qrmd.config``
# reads it without loading this module's heavy types).
from qrmd.config_values import Socket, SubsystemSettings

if TYPE_CHECKING:
    import pykka
    from prometheus_client.registry import Collector

    from actors.allocator_advisor import AdvisorCalls
    from actors.ports.advisor import AdvisorClient
    from actors.ports.balancer import ContainerMemoryReader, NumaMetricSource
    from actors.ports.cgroups import CpuIdleSetter, CpusetReader
    from actors.ports.clock import Clock
    from actors.ports.cpu_load import ContainerLoadSource
    from actors.ports.migration import AdviceExecutor
    from actors.ports.pod_source import PodListSnapshot, PodSource
    from actors.ports.reclaim_metrics import ReclaimMetricsSource
    from actors.store_messages import Snapshot
    from actors.store_status import StoreStatus
    from actors.supervisor import ChildSpec, Supervisor
    from actors.ticker import Tellable, Ticker
    from journal.fileops import FileOps
    from policy.cpu.context import PolicyContext
    from qrmd.status.health import HealthRegistry, ProblemSource
    from wire.rpc import RpcObserver

__all__ = [
    "ALLOCATOR_CHILD",
    "RECOVERY_TIMEOUT_S",
    "STORE_CHILD",
    "CheckpointSocket",
    "DaemonError",
    "Host",
    "Joinable",
    "JournalStorage",
    "Ports",
    "Running",
    "Runtime",
    "Shared",
    "Socket",
    "Subsystem",
    "SubsystemParts",
    "SubsystemSettings",
]

#: The state store's name among the Supervisor's children: the first child, whose ref every
#: later child that commits or reads the snapshot is given (``refs[STORE_CHILD]``).
STORE_CHILD = "store"
#: The Allocator's name among the children (the CPU plugin's): the checkers and the advisor
#: link tell it what they find.
ALLOCATOR_CHILD = "allocator"
#: Recovery replays the journal tail; a big one on a slow disk takes a while.
RECOVERY_TIMEOUT_S = 600.0


class DaemonError(Exception):
    """The daemon could not start; the message says what failed and why."""


@dataclass(slots=True)
class Ports:
    """What one subsystem offers the others, filled in while they are built (in list order).

    A subsystem reads a port when its actors start, after every subsystem is built, so the
    order of building does not matter to the reader.

    Attributes:
        latest: the store's latest durable snapshot (the state store's).
        store_status: the store's latest status (the state store's).
        pod_source: kubelet's pod list (the pod source's), or None without one.
        advisor: makes the Allocator's calls to sys-advisor, one set per Allocator start (the
            advisor link's), or None.
    """

    latest: Callable[[], Snapshot | None] = lambda: None
    store_status: Callable[[], StoreStatus | None] = lambda: None
    pod_source: PodSource | None = None
    advisor: Callable[[], AdvisorCalls] | None = None


class Joinable(Protocol):
    """Background work started by ``Runtime.run``: its end can be waited for."""

    def join(self, timeout: float | None = None) -> None:
        """Wait for the work to end, at most ``timeout`` seconds."""
        ...


class Runtime(Protocol):
    """How the daemon's parts run: its actors, its tickers and its one-off background work
    (``actors.threads.THREADS`` in ``qrmd run``; the simulation's scheduler under ``qrmd sim``)."""

    def spawn(self, actor_class: type[pykka.Actor], /, *args: Any) -> pykka.ActorRef[Any]:
        """Start an actor of ``actor_class`` built from ``args``; its ref."""
        ...

    def ticker(
        self,
        target: Tellable,
        period_s: float,
        now: Callable[[], float],
        make_tick: Callable[[float], Any],
        *,
        name: str,
    ) -> Ticker:
        """A ``Ticker`` telling ``target`` ``make_tick(now())`` every period once started."""
        ...

    def run(self, work: Callable[[], None], *, name: str) -> Joinable:
        """Run ``work`` once, off the caller's thread (started at once)."""
        ...


@dataclass(frozen=True, slots=True)
class JournalStorage:
    """The disk the journal writes to (DESIGN.md "Journal").

    Attributes:
        files: the journal's file operations.
        segment_max_bytes: the segment size it rotates at, or None for the journal's own.
    """

    files: FileOps
    segment_max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Host:
    """What the subsystems reach outside the process, when not what their settings name.

    Each field left None is built from the subsystem's settings (the real host's sources,
    files and sockets); the simulation gives its own, and tests may too.

    Attributes:
        journal: the state store's storage (None: the OS's files).
        pod_list: one fetch of the node's pod list (None: kubelet's, ``--pod-source``).
        cpusets: the containers' cgroup cpusets (None: ``--cpuset-cgroup-root``'s).
        cpu_idle: cgroup ``cpu.idle`` (None: the cgroup file system's, when enabled).
        cpu_loads: the CPU load source (None: ``--cpu-load-metrics-source``'s).
        reclaim_metrics: the reclaim pool's metrics the v0.5.47 suppression reads (None:
            ``--reclaim-metrics-source``'s).
        cpu_vendor: the CPUID vendor string (None: read from ``/proc/cpuinfo``).
        numa_metrics: the NUMA metric source (None: ``--numa-metrics-source``'s).
        container_memory: the containers' anonymous memory by NUMA node (None: cgroup
            ``memory.numa_stat``).
        page_mover: the balancer's advice executor (None: the cgroup migrator).
        advisor: the sys-advisor client (None: gRPC on ``--cpu-advisor-socket``).
        advisor_checkpoint: qrmd's own GetCheckpoint socket as the link sees it, given the
            latest CPU state (None: the gRPC server on ``--cpu-plugin-socket``).
    """

    journal: JournalStorage | None = None
    pod_list: Callable[[], PodListSnapshot] | None = None
    cpusets: CpusetReader | None = None
    cpu_idle: CpuIdleSetter | None = None
    cpu_loads: ContainerLoadSource | None = None
    reclaim_metrics: ReclaimMetricsSource | None = None
    cpu_vendor: str | None = None
    numa_metrics: NumaMetricSource | None = None
    container_memory: ContainerMemoryReader | None = None
    page_mover: AdviceExecutor | None = None
    advisor: AdvisorClient | None = None
    advisor_checkpoint: Callable[[Callable[[], Any]], CheckpointSocket] | None = None


class CheckpointSocket(Protocol):
    """qrmd's own GetCheckpoint socket, as the advisor link and its watchdog use it."""

    def serve(self) -> None:
        """Serve it unless it is served already (idempotent across link restarts)."""
        ...

    def served(self) -> bool:
        """Whether it answers now."""
        ...

    def restart(self) -> None:
        """Serve it again (it stopped answering)."""
        ...

    def stop(self) -> None:
        """Stop serving; safe to call twice."""
        ...

    def check(self, timeout_s: float) -> None:
        """The link's self-dial; raises ``AdvisorSick`` when it does not answer."""
        ...


@dataclass(slots=True)
class Shared:
    """The daemon's shared context, given to every subsystem's ``build``.

    Attributes:
        machine: the topology, its system reserve and the policy's fixed inputs.
        clock: the one clock of the actors, the journal and the tickers.
        health: the ``/healthz`` registry (handlers register their periods in it).
        ports: what the subsystems offer each other.
        runtime: how actors, tickers and background work run.
        host: what the subsystems reach outside the process (the simulation's peers).
    """

    machine: PolicyContext
    clock: Clock
    health: HealthRegistry
    runtime: Runtime
    ports: Ports = field(default_factory=Ports)
    host: Host = field(default_factory=Host)


@dataclass(frozen=True, slots=True)
class Running:
    """What a subsystem's ``start`` is given once the actors run.

    Attributes:
        supervisor: the running supervision tree (``ref`` a child by name).
        metrics: the gRPC servers' call observer, which the metrics registry reads (a relay
            that holds the calls answered before the registry is built, right after every
            subsystem serves: ``qrmd.status.observer``); None without ``--metrics-address``
            (nothing would read it).
    """

    supervisor: Supervisor
    metrics: RpcObserver | None


class Subsystem(Protocol):
    """One subsystem of the daemon, built from its settings and the ``Shared`` context."""

    def children(self) -> Sequence[ChildSpec]:
        """The actors it adds to the supervision tree, in their order."""
        ...

    def health_sources(self) -> Sequence[ProblemSource]:
        """What makes ``/healthz`` fail, beyond the handlers it registered in ``health``."""
        ...

    def readiness_sources(self) -> Sequence[ProblemSource]:
        """What keeps ``/readyz`` from passing (kubelet cannot use qrmd yet)."""
        ...

    def collectors(self) -> Sequence[Collector]:
        """Its metrics, registered in the daemon's registry."""
        ...

    def start(self, running: Running) -> None:
        """Start what runs beside its actors (tickers, start-up work); the actors run."""
        ...

    def serve(self, running: Running) -> None:
        """Open its sockets and server threads to the process's peers (after ``start``; the
        simulation never calls it)."""
        ...

    def stop(self) -> None:
        """Stop what ``start`` and ``serve`` started, before the actors stop; safe before
        ``start``."""
        ...

    def close(self) -> None:
        """Release what must outlive its actors, after they stopped; safe to call twice."""
        ...

    def serving(self) -> str:
        """Its part of the ``qrmd serving:`` line: its sockets and endpoints."""
        ...


class SubsystemParts:
    """The hooks a subsystem has nothing for (mixed into a wiring class; each overrides what
    it has)."""

    def children(self) -> Sequence[ChildSpec]:
        """No actors."""
        return ()

    def health_sources(self) -> Sequence[ProblemSource]:
        """No health source beyond its handlers."""
        return ()

    def readiness_sources(self) -> Sequence[ProblemSource]:
        """Nothing to wait for."""
        return ()

    def collectors(self) -> Sequence[Collector]:
        """No metrics."""
        return ()

    def start(self, running: Running) -> None:
        """Nothing to start."""
        del running

    def serve(self, running: Running) -> None:
        """Nothing to serve."""
        del running

    def stop(self) -> None:
        """Nothing to stop."""

    def close(self) -> None:
        """Nothing to close."""
