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
children in list order, starts them in that order and stops them in reverse. Subsystems never
import each other: they meet through the ``Ports`` of ``Shared`` (the pod source, the advisor
calls, the store's latest snapshot and status), which actors' ports type. A value two
subsystems read (``--plugin-registration-dir``, ``--enable-reclaim``) is a field of both
settings types, filled from the one option row.

Only typing and the plain settings pieces (``qrmd.config_values``) are imported at run time:
the heavy types are for the type checker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

# The settings half of the protocol is plain data, beside the option rows (``qrmd.config``
# reads it without loading this module's heavy types).
from qrmd.config_values import Socket, SubsystemSettings

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

    from actors.allocator_advisor import AdvisorCalls
    from actors.ports.clock import Clock
    from actors.ports.pod_source import PodSource
    from actors.store_messages import Snapshot
    from actors.store_status import StoreStatus
    from actors.supervisor import ChildSpec, Supervisor
    from policy.cpu.context import PolicyContext
    from qrmd.status.health import HealthRegistry, ProblemSource
    from qrmd.status.metrics import DaemonMetrics

__all__ = [
    "ALLOCATOR_CHILD",
    "RECOVERY_TIMEOUT_S",
    "STORE_CHILD",
    "DaemonError",
    "Ports",
    "Running",
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


@dataclass(slots=True)
class Shared:
    """The daemon's shared context, given to every subsystem's ``build``.

    Attributes:
        machine: the topology, its system reserve and the policy's fixed inputs.
        clock: the one clock of the actors, the journal and the tickers.
        health: the ``/healthz`` registry (handlers register their periods in it).
        ports: what the subsystems offer each other.
    """

    machine: PolicyContext
    clock: Clock
    health: HealthRegistry
    ports: Ports = field(default_factory=Ports)


@dataclass(frozen=True, slots=True)
class Running:
    """What a subsystem's ``start`` is given once the actors run.

    Attributes:
        supervisor: the running supervision tree (``ref`` a child by name).
        metrics: the metrics registry, also the gRPC servers' observer.
    """

    supervisor: Supervisor
    metrics: DaemonMetrics


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
        """Start what runs beside its actors (tickers, sockets); the actors run."""
        ...

    def stop(self) -> None:
        """Stop what ``start`` started, before the actors stop; safe before ``start``."""
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

    def stop(self) -> None:
        """Nothing to stop."""

    def close(self) -> None:
        """Nothing to close."""
