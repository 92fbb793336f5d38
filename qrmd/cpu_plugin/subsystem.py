"""The CPU plugin inside ``qrmd run``: the Allocator, the Supervisor's child after the store,
and one kubelet plugin server per socket directory (spec cpu-policy §6.2; wire.md §2, §8.1).

Rules:

* The Allocator is built from the store's recovered snapshot and sent ``StartPolicy``
  (cpu-policy §6.2 steps 4–6); a reserve the machine cannot hold is a configuration error
  naming ``--reserved-cpu-cores`` and ``--topology``. It reads pod phases from the pod
  source's publisher (§7.3) and calls sys-advisor through the advisor link, when those
  subsystems run; each (re)start takes them from the daemon's ports.
* Only once the actors run does a socket appear for kubelet to dial (wire.md §8.1): one
  ``PluginServer`` per distinct socket directory (one per inode; missing directories are
  created 0755), each accepting at most ``--max-connections`` connections
  (``qrmd.cpu_plugin.connection_cap``).
* ``/readyz`` fails until every socket is served and registered with kubelet. ``/healthz``
  fails while kubelet's calls go unanswered for more than 5 s, ``/livez`` past 60 s
  (``qrmd.cpu_plugin.call_health``: one watch that every socket's call grouper joins).
* Stopping stops the servers first (no new calls; in-flight calls get ``SERVER_GRACE_S``;
  their sockets are removed), before the actors stop.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import pykka

from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_messages import AllocatorUnavailable, StartPolicy
from actors.state_store import InTurnCommitter
from actors.store_messages import CommitInTurn
from actors.supervisor import ChildSpec, SupervisedRef
from machines.registration import REGISTERED
from policy.cpu.reserve import ReserveError
from qrmd.config_values import ConfigError
from qrmd.cpu_plugin.call_health import watch_kubelet_calls
from qrmd.cpu_plugin.settings import (
    DEFAULT_MAX_CONNECTIONS,
    PLUGIN_NAME,
    CpuPluginSettings,
    reserve_error,
)
from qrmd.status.health import ProblemSource
from qrmd.subsystem import (
    ALLOCATOR_CHILD,
    RECOVERY_TIMEOUT_S,
    STORE_CHILD,
    Running,
    Shared,
    SubsystemParts,
)
from wire.call_watch import KubeletCallWatch
from wire.plugin_server import PluginServer, distinct_socket_dirs
from wire.rpc import RpcObserver

__all__ = [
    "ALLOCATOR_CHILD",
    "RESOURCE_NAME",
    "CpuPluginWiring",
    "PluginServing",
    "ServerFactory",
    "build",
]

_log = logging.getLogger("qrmd.daemon")

#: wire.md §12.5: ``PluginInfo.name``, the resource kubelet routes to the plugin.
RESOURCE_NAME = "cpu"
START_POLICY_TIMEOUT_S = 60.0
#: How long in-flight kubelet calls may finish when the daemon stops.
SERVER_GRACE_S = 2.0


class PluginServing(Protocol):
    """What the daemon needs of a plugin server (``wire.plugin_server.PluginServer``)."""

    def start(self) -> None:
        """Listen on the socket and serve."""
        ...

    def stop(self, grace_s: float) -> None:
        """Stop serving, let calls in flight finish for ``grace_s``, remove the socket."""
        ...


#: Builds the server of one socket directory: (dir, allocator, ready, observer) → server.
ServerFactory = Callable[
    [str, SupervisedRef, Callable[[], bool], RpcObserver | None], PluginServing
]


def wire_plugin_server(
    socket_dir: str,
    allocator: SupervisedRef,
    ready: Callable[[], bool],
    observer: RpcObserver | None,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    call_watch: KubeletCallWatch | None = None,
) -> PluginServing:
    """The gRPC ``PluginServer`` of one socket directory."""
    return PluginServer(
        socket_dir,
        allocator,
        name=PLUGIN_NAME,
        resource_name=RESOURCE_NAME,
        ready=ready,
        observer=observer,
        max_connections=max_connections,
        call_watch=call_watch,
    )


def build(
    settings: CpuPluginSettings, shared: Shared, *, server_factory: ServerFactory | None = None
) -> CpuPluginWiring:
    """The CPU plugin subsystem.

    Args:
        settings: its settings.
        shared: the daemon's context; the Allocator reads its ports when it starts.
        server_factory: builds each socket's server (default: the gRPC one with the
            connection cap; tests inject one).
    """
    call_watch = watch_kubelet_calls(shared.health, shared.clock.monotonic)
    factory = server_factory or functools.partial(
        wire_plugin_server, max_connections=settings.max_connections, call_watch=call_watch
    )
    return CpuPluginWiring(settings, shared, factory, call_watch)


class CpuPluginWiring(SubsystemParts):
    """The Allocator's child spec and the kubelet servers (module docstring)."""

    def __init__(
        self,
        settings: CpuPluginSettings,
        shared: Shared,
        server_factory: ServerFactory,
        call_watch: KubeletCallWatch,
    ) -> None:
        self.settings = settings
        self._shared = shared
        self._server_factory = server_factory
        self.servers: list[PluginServing] = []
        self.socket_dirs: tuple[str, ...] = ()
        self.call_watch = call_watch

    def children(self) -> Sequence[ChildSpec]:
        """The Allocator, started from the store's snapshot, then sent ``StartPolicy``."""
        return (
            ChildSpec(
                ALLOCATOR_CHILD,
                lambda refs: self._start_allocator(refs[STORE_CHILD]),
                self._start_policy,
                unavailable=AllocatorUnavailable,
            ),
        )

    def readiness_sources(self) -> Sequence[ProblemSource]:
        """Whether kubelet can use qrmd: every socket served and registered."""
        return (self._readiness_problems,)

    def start(self, running: Running) -> None:
        """Say what the Allocator runs without (the servers come with ``serve``)."""
        del running
        if self._shared.ports.pod_source is None:
            _log.info(
                "--pod-source none: residual state of a pod kubelet forgot to remove is never "
                "cleaned and cpusets are not checked (as the reference without pod metadata, "
                "cpu-policy §12.4 step 1)"
            )

    def serve(self, running: Running) -> None:
        """Serve kubelet: one plugin server per distinct socket directory (wire.md §2, §8.1)."""
        supervisor = running.supervisor
        allocator = supervisor.ref(ALLOCATOR_CHILD)
        # Missing directories are created (0755); one socket per inode (wire.md §2).
        self.socket_dirs = tuple(distinct_socket_dirs(self.settings.socket_dirs))
        for socket_dir in self.socket_dirs:
            server = self._server_factory(
                socket_dir, allocator, supervisor.available, running.metrics
            )
            server.start()
            self.servers.append(server)

    def stop(self) -> None:
        """Stop the servers (no new calls; their sockets are removed); safe to call twice."""
        for server in reversed(self.servers):
            try:
                server.stop(SERVER_GRACE_S)
            except Exception:
                _log.exception("a plugin server failed to stop")
        self.servers = []

    def serving(self) -> str:
        """The kubelet sockets, for the serving line."""
        sockets = ", ".join(os.path.join(d, f"{PLUGIN_NAME}.sock") for d in self.socket_dirs)
        return f"sockets: {sockets}"

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

    def _start_allocator(self, store: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        # The Allocator commits in its own turn: one hop per kubelet call, not two
        # (actors.state_store, InTurnCommitter); the store's actor keeps checkpoints and readers.
        committer = store.ask(CommitInTurn(), timeout=RECOVERY_TIMEOUT_S)
        if not isinstance(committer, InTurnCommitter):
            raise TypeError(
                f"the state store answered CommitInTurn with {type(committer).__name__}"
            )
        ports = self._shared.ports
        core = AllocatorCore(
            committer.latest(),
            self._shared.machine,
            committer,
            self._shared.clock.time,
            ports.pod_source,
            advisor=None if ports.advisor is None else ports.advisor(),
        )
        return self._shared.runtime.spawn(AllocatorActor, core)

    def _start_policy(self, allocator: pykka.ActorRef[Any]) -> None:
        try:
            allocator.ask(StartPolicy(), timeout=START_POLICY_TIMEOUT_S)
        except ReserveError as err:
            # The policy names CPUs, not flags; the operator needs the flag to change.
            raise ConfigError(reserve_error(self.settings, err)) from err
