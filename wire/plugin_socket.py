"""One plugin socket through its plugin-watcher registration (wire.md §3, §8.1, §8.3).

A plugin serves ``pluginregistration.Registration`` next to its own service on one gRPC server
and one unix socket; the kubelet (or katalyst-agent's plugin manager) sees the file appear,
asks ``GetInfo``, dials, and reports the outcome with ``NotifyRegistrationStatus``. The life
cycle is the registration machine of ``machines.registration``; this module carries out its
actions and nothing else decides when they happen:

* ``serve`` (guard ``actors_ready``): create the socket: remove a stale file, bind owner-only,
  start the server, then dial it and ask ``GetInfo`` to confirm it is serving (5 s, as the
  reference's wrapper dials, memory-balancer.md §10).
* ``registration_accepted``: nothing to do. A second ``true`` (a restarted agent re-registers
  existing sockets) keeps the state.
* ``registration_rejected``: the peer has recorded the socket as registered and will not retry
  until the file is created anew (wire.md §8.1), so the socket is torn down and re-created, on
  a thread of its own: the notifying RPC must be answered before its server stops. A failed
  re-creation is retried every 5 s until it succeeds or the plugin stops.
* ``stop``: stop the server and remove the socket file, which makes the peer deregister.

Every step taken is passed to ``on_step`` (health in the composition root), every call to the
RPC observer (metrics). Registration holds no persistent state, so nothing here is journaled.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from machines import registration
from machines.lifecycle import InvalidTransition, Step
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.rpc import RpcObserver, unary_handler
from wire.sockets import BoundSocket, bind_owner_only, check_socket_path, remove_socket

__all__ = [
    "REGISTRATION_SERVICE",
    "PluginIdentity",
    "PluginSocket",
    "RegistrationObserver",
    "registration_handler",
]

logger = logging.getLogger(__name__)

#: Called with every registration step a socket takes, once the socket is in its new state. A
#: rejection is reported at once; its re-creation follows on a thread of its own and is reported
#: as ``socket_recreated`` when done.
RegistrationObserver = Callable[[Step], None]

#: How long the self-check dial may take before serving counts as failed (§10).
VERIFY_TIMEOUT_S = 5.0
#: Pause between attempts to re-create a socket that could not be re-created (§10).
RETRY_PERIOD_S = 5.0
#: How long in-flight calls may finish when the server stops.
STOP_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class PluginIdentity:
    """What ``GetInfo`` answers (wire.md §3).

    Attributes:
        type: ``ResourcePlugin`` for a QRM plugin, ``EvictionPlugin`` for an eviction plugin.
        name: the resource name (``cpu``) or the eviction plugin's name.
        supported_versions: API versions the peer validates (``v1alpha1``).
        endpoint: empty: the main service is on the same socket.
    """

    type: str
    name: str
    supported_versions: tuple[str, ...] = ("v1alpha1",)
    endpoint: str = ""


#: The full service name (wire.md §1.3).
REGISTRATION_SERVICE = "pluginregistration.Registration"


def registration_handler(
    identity: PluginIdentity,
    notify: Callable[[bool, str], None],
    observer: RpcObserver | None = None,
) -> grpc.GenericRpcHandler:
    """``pluginregistration.Registration`` for one socket.

    Args:
        identity: the ``GetInfo`` answer.
        notify: told ``(plugin_registered, error)`` of each ``NotifyRegistrationStatus``.
        observer: told about every call, or ``None``.

    Returns:
        The generic handler to add to a ``grpc.Server``.
    """
    info = reg.PluginInfo(
        type=identity.type,
        name=identity.name,
        endpoint=identity.endpoint,
        supported_versions=list(identity.supported_versions),
    )

    def get_info(request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return info

    def notify_status(
        request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        # Always answered successfully: the peer only logs an error here (wire.md §3).
        notify(request.plugin_registered, request.error)
        return reg.RegistrationStatusResponse()

    methods = {
        "GetInfo": unary_handler("GetInfo", reg.InfoRequest, get_info, observer),
        "NotifyRegistrationStatus": unary_handler(
            "NotifyRegistrationStatus", reg.RegistrationStatus, notify_status, observer
        ),
    }
    return grpc.method_handlers_generic_handler(REGISTRATION_SERVICE, methods)


class PluginSocket:
    """A gRPC server on one unix socket, with its registration life cycle.

    Args:
        path: the socket file, at most 107 bytes long.
        identity: the ``GetInfo`` answer.
        services: the plugin's own services, served next to ``Registration`` by every server
            the socket gets (a re-created socket is a new server).
        actors_ready: the ``actors_ready`` guard: whether the actors behind the services answer.
        on_step: told every registration step taken.
        observer: told about every call, or ``None``.
        max_workers: threads of each server's pool.

    Raises:
        ValueError: ``path`` is longer than 107 bytes.
    """

    def __init__(
        self,
        path: Path,
        identity: PluginIdentity,
        services: Sequence[grpc.GenericRpcHandler],
        *,
        actors_ready: Callable[[], bool],
        on_step: RegistrationObserver | None = None,
        observer: RpcObserver | None = None,
        max_workers: int = 4,
    ) -> None:
        self.path = check_socket_path(path)
        self.identity = identity
        self._services = tuple(services)
        self._actors_ready = actors_ready
        self._on_step = on_step
        self._observer = observer
        self._max_workers = max_workers
        self._lifecycle = registration.lifecycle()
        self._state = registration.NOT_SERVING
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None
        self._bound: BoundSocket | None = None
        self._stopping = threading.Event()
        self._recreator: threading.Thread | None = None

    @property
    def state(self) -> str:
        """The registration state (a ``machines.registration`` state name)."""
        return self._state

    def serve(self) -> None:
        """Create the socket and serve on it (trigger ``serve``).

        Raises:
            RuntimeError: the actors are not ready (the socket is not created).
            InvalidTransition: the socket was served before; nothing changed.
            ValueError, OSError: the socket could not be created; the state is unchanged and
                no file is left behind.
        """
        with self._lock:
            step = self._lifecycle.step(
                self._state, "serve", {"actors_ready": self._actors_ready()}
            )
            if step is None:
                raise RuntimeError(
                    f"not serving {str(self.path)!r}: the actors behind plugin "
                    f"{self.identity.name!r} are not ready"
                )
            self._carry_out(step)
            self._adopt(step)

    def stop(self) -> None:
        """Stop serving and remove the socket file (trigger ``stop``); idempotent."""
        self._stopping.set()
        with self._lock:
            # No re-creation starts once stopping is set (notify checks it under the lock),
            # so after this join no thread of this socket is left.
            recreator = self._recreator
        if recreator is not None:
            recreator.join()
        with self._lock:
            if self._state == registration.DEREGISTERED:
                return
            step = self._lifecycle.step(self._state, "stop")
            assert step is not None  # stop has no guard
            self._carry_out(step)
            self._adopt(step)

    def notify(self, registered: bool, error: str) -> None:
        """What the peer said in ``NotifyRegistrationStatus``.

        Args:
            registered: ``plugin_registered``.
            error: the peer's error text when not registered.
        """
        trigger = "registration_accepted" if registered else "registration_rejected"
        with self._lock:
            if self._stopping.is_set():
                return
            try:
                step = self._lifecycle.step(self._state, trigger)
            except InvalidTransition:
                # A late status for a socket already being re-created: the new socket will
                # be registered afresh, so this one's outcome no longer matters.
                logger.info("%s: ignoring %s in state %s", self.path, trigger, self._state)
                return
            assert step is not None  # neither trigger has a guard
            if not registered:
                logger.warning(
                    "%s: %s rejected plugin %r (%s); re-creating the socket",
                    self.path,
                    self.identity.type,
                    self.identity.name,
                    error or "no reason given",
                )
            self._adopt(step)
            if step.actions:
                # Torn down on another thread: this RPC is answered by the server it stops.
                self._recreator = threading.Thread(
                    target=self._recreate,
                    args=(step,),
                    name=f"recreate {self.path.name}",
                    daemon=True,  # stop() joins it; a process exiting without stop() must not hang
                )
                self._recreator.start()

    def _recreate(self, step: Step) -> None:
        """Carry out a re-creation's actions, retrying until done or stopped."""
        while not self._stopping.is_set():
            with self._lock:
                if self._stopping.is_set():
                    return
                try:
                    self._carry_out(step)
                except (OSError, ValueError) as exc:
                    logger.error("%s: cannot re-create the socket, retrying: %s", self.path, exc)
                else:
                    done = self._lifecycle.step(self._state, "socket_recreated")
                    assert done is not None
                    self._adopt(done)
                    return
            self._stopping.wait(RETRY_PERIOD_S)

    def _adopt(self, step: Step) -> None:
        self._state = step.dest
        if self._on_step is not None:
            self._on_step(step)

    def _carry_out(self, step: Step) -> None:
        for action in step.actions:
            if action == "create_socket":
                self._create_socket()
            elif action == "remove_socket":
                self._remove_socket()
            else:  # pragma: no cover - the table names only these two
                raise AssertionError(f"registration action {action!r} is not implemented")

    def _create_socket(self) -> None:
        server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix=self.identity.name
            )
        )
        registration = registration_handler(self.identity, self.notify, self._observer)
        server.add_generic_rpc_handlers((registration, *self._services))
        bound = bind_owner_only(server, self.path)
        server.start()
        try:
            _verify_serving(self.path, self.identity)
        except OSError:
            server.stop(grace=None).wait()
            remove_socket(bound)
            raise
        self._server, self._bound = server, bound

    def _remove_socket(self) -> None:
        server, bound = self._server, self._bound
        self._server = self._bound = None
        if server is not None:
            # Wait for the old server to be gone before the path is reused: grpc unlinks
            # its socket path when it shuts down, which would take a new file with it.
            server.stop(grace=STOP_GRACE_S).wait()
        if bound is not None:
            remove_socket(bound)


def _verify_serving(path: Path, identity: PluginIdentity) -> None:
    """Dial the socket as the peer will and ask ``GetInfo``, to confirm the server answers."""
    with grpc.insecure_channel(f"unix:{path}") as channel:
        stub = reg_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
        try:
            info = stub.GetInfo(reg.InfoRequest(), timeout=VERIFY_TIMEOUT_S, wait_for_ready=True)
        except grpc.RpcError as exc:
            raise OSError(f"{str(path)!r} does not answer GetInfo: {exc}") from exc
    if (info.type, info.name) != (identity.type, identity.name):
        raise OSError(
            f"{str(path)!r} answers as {info.type} {info.name!r}, "
            f"not {identity.type} {identity.name!r}"
        )
