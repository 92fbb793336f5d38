"""One plugin socket through its plugin-watcher registration (wire.md §1.2, §2, §3, §8.1, §8.3).

The one way qrmd serves a plugin socket; the CPU plugin (``wire.plugin_server``) and the
eviction plugin (``wire.eviction_server``) are thin layers that choose the path, the
``GetInfo`` identity and the plugin's own service.

A plugin serves ``pluginregistration.Registration`` (``wire.registration_service``) next to its
own service on one gRPC server and one unix socket; the kubelet (or katalyst-agent's plugin
manager) sees the file appear, asks ``GetInfo``, dials, and reports the outcome with
``NotifyRegistrationStatus``. The life cycle is the registration machine of
``machines.registration``; this module carries out its actions and nothing else decides when
they happen:

* ``serve`` (guard ``actors_ready``), only once the actors behind the services answer: the peer
  dials as soon as the file appears (kubelet asks ``GetResourcePluginOptions`` only once).
  *create_socket*: the path is checked (107 bytes) before anything is created, the directory
  is created if missing, a stale file (one nobody answers on) removed — a live one refuses
  with ``SocketInUseError`` and is left alone — the server bound owner-only (``wire.sockets``)
  and started; then it is dialled as the peer will and asked ``GetInfo`` (5 s, waiting for
  the channel to be ready) to confirm it serves (wire.md §8.1 step 1).
* ``registration_accepted``: nothing to do. A second ``true`` (a restarted peer re-registers
  existing sockets) keeps the state. Taken before the status call is answered.
* ``registration_rejected``: the peer has recorded the socket as registered and will not retry
  until the file is created anew (wire.md §8.1), so the socket is torn down and re-created (a
  new inode and ctime), on a thread of its own: the notifying RPC must be answered before its
  server stops.
* ``serving_failed`` (``recreate_socket``): the same re-creation for a server found not to
  serve, the first attempt on the caller's thread.
* A failed re-creation is retried every 5 s until it succeeds or the plugin stops, as the
  reference's wrapper restarts a server that failed to serve.
* The socket file is watched (``check_socket``, every :data:`WATCH_PERIOD_S` seconds on a
  thread of its own, or called by a test): if it disappeared (an operator's ``rm``, a
  cleanup script) or was replaced by a file nobody answers on, kubelet can no longer reach
  the plugin, so the socket is re-created (trigger ``serving_failed``: a new inode, which
  kubelet's plugin watcher registers anew) and a warning says so. A file replaced by one a
  live server answers on belongs to that server now: it is left alone and an error says so
  at every check until it goes away.
* ``stop``: stop the server (calls in flight get a grace period), shut its thread pool down
  and remove the socket file if it is still the one bound, which makes the peer deregister.

A status for a socket that is not serving or registered (late, or for a socket being
re-created) is logged and ignored. Every step taken is passed to ``on_step`` (health in the
composition root) and ``wait_for_state`` sees it; every call goes to the RPC observer
(metrics). Registration holds no persistent state, so nothing here is journaled.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from pathlib import Path

import grpc

from machines import registration
from machines.lifecycle import InvalidTransition, Step
from wire.errors import NotReady
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.registration_service import PluginIdentity, registration_handler
from wire.rpc import RpcObserver
from wire.sockets import (
    BoundSocket,
    ServingError,
    answers,
    bind_owner_only,
    check_socket_path,
    remove_socket,
)

# PluginIdentity is ``wire.registration_service``'s, exported here with the class that takes it.
__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "MAX_CONNECTIONS_ARG",
    "PluginIdentity",
    "PluginSocket",
    "RegistrationObserver",
]

logger = logging.getLogger(__name__)

#: Called with every registration step a socket takes, once the socket is in its new state. A
#: rejection is reported at once; its re-creation follows on a thread of its own and is reported
#: as ``socket_recreated`` when done.
RegistrationObserver = Callable[[Step], None]

#: How long the self-check dial may take before serving counts as failed (wire.md §8.1).
VERIFY_TIMEOUT_S = 5.0
#: Pause between attempts to re-create a socket that could not be re-created (wire.md §8.1).
RETRY_PERIOD_S = 5.0
#: How long in-flight calls may finish when a re-created socket's old server stops.
STOP_GRACE_S = 1.0
#: The gRPC core channel argument that caps a server's concurrent connections (the
#: connection cap). grpcio's ``maximum_concurrent_rpcs`` caps RPCs, not connections: 5,000 idle
#: connections each hold a descriptor and exhaust ``nofile`` without a single RPC. With this
#: argument the server's resource quota refuses a connection past the cap right after
#: ``accept`` (the peer sees the connection closed: UNAVAILABLE), so the descriptors this
#: socket holds stay bounded; a connection that closes frees its place.
MAX_CONNECTIONS_ARG = "grpc.max_allowed_incoming_connections"
#: ``--max-connections``'s default: far below any sane ``nofile`` limit, far above what kubelet
#: and katalyst-agent open (one channel each).
DEFAULT_MAX_CONNECTIONS = 1024
#: How often a served socket checks that its file is still the one it bound.
WATCH_PERIOD_S = 5.0
#: What a failed socket creation raises (``wire.sockets``, grpc) and a retry outlives.
_CREATE_ERRORS = (OSError, ValueError, RuntimeError)


class PluginSocket:
    """A gRPC server on one unix socket, with its registration life cycle.

    Used once: ``serve``, then ``stop``; build a new one to serve again.

    Args:
        path: the socket file; made absolute here, checked for length (107 bytes) when the
            socket is created.
        identity: the ``GetInfo`` answer.
        services: the plugin's own services, served next to ``Registration`` by every server
            the socket gets (a re-created socket is a new server).
        actors_ready: the ``actors_ready`` guard: whether the actors behind the services answer.
        on_step: told every registration step taken.
        observer: told about every call, or ``None``.
        max_workers: threads of each server's pool; calls beyond them wait in grpcio's queue.
        watch_period_s: seconds between two ``check_socket`` calls on the socket's own
            thread, or ``None`` for no thread (a test calls ``check_socket`` itself).
        max_connections: the most connections each server accepts at once
            (:data:`DEFAULT_MAX_CONNECTIONS`), or ``None`` for no cap; see
            :data:`MAX_CONNECTIONS_ARG`.
    """

    def __init__(
        self,
        path: Path | str,
        identity: PluginIdentity,
        services: Sequence[grpc.GenericRpcHandler],
        *,
        actors_ready: Callable[[], bool],
        on_step: RegistrationObserver | None = None,
        observer: RpcObserver | None = None,
        max_workers: int = 4,
        watch_period_s: float | None = WATCH_PERIOD_S,
        max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.path = Path(os.path.abspath(path))
        self._watch_period_s = watch_period_s
        self._server_options = (
            () if max_connections is None else ((MAX_CONNECTIONS_ARG, max_connections),)
        )
        self._watcher: threading.Thread | None = None
        self.identity = identity
        self._services = tuple(services)
        self._actors_ready = actors_ready
        self._on_step = on_step
        self._observer = observer
        self._max_workers = max_workers
        self._lifecycle = registration.lifecycle()
        self._state = registration.NOT_SERVING
        # Guards the state and the server; waited on by wait_for_state.
        self._changed = threading.Condition()
        self._server: grpc.Server | None = None
        self._executor: futures.ThreadPoolExecutor | None = None
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
            NotReady: the actors are not ready (a ``RuntimeError``); the socket is not created.
            InvalidTransition: the socket was served before; nothing changed.
            SocketPathError: the path is longer than 107 bytes (checked before anything is
                created), or a directory is in the way.
            ServingError: the server cannot bind, or does not answer its own ``GetInfo``.
            OSError: the directory cannot be created or the stale file removed.

            On any error the state is unchanged and no file is left behind.
        """
        with self._changed:
            step = self._lifecycle.step(
                self._state, "serve", {"actors_ready": self._actors_ready()}
            )
            if step is None:
                raise NotReady(
                    f"not serving {str(self.path)!r}: the actors behind plugin "
                    f"{self.identity.name!r} are not ready"
                )
            self._carry_out(step, STOP_GRACE_S)
            self._adopt(step)
            if self._watch_period_s is not None:
                self._watcher = threading.Thread(
                    target=self._watch,
                    args=(self._watch_period_s,),
                    name=f"watch {self.path.name}",
                    daemon=True,  # stop() joins it; a process exiting without stop() must not hang
                )
                self._watcher.start()

    def check_socket(self) -> bool:
        """Re-create the socket if its file disappeared or was replaced by a dead one.

        Does nothing unless serving or registered. A file replaced by one a live server
        answers on is left to it (logged as an error).

        Returns:
            Whether a re-creation was started (its first attempt runs here; a failed one is
            retried every :data:`RETRY_PERIOD_S` seconds, as ``recreate_socket``).
        """
        with self._changed:
            bound = self._bound
            if bound is None or self._state not in (registration.SERVING, registration.REGISTERED):
                return False
            try:
                info = bound.path.lstat()
            except FileNotFoundError:
                logger.warning(
                    "%s: the socket file disappeared; re-creating it (kubelet registers the "
                    "new one)",
                    self.path,
                )
            else:
                if (info.st_dev, info.st_ino) == (bound.device, bound.inode):
                    return False
                if answers(bound.path):
                    logger.error(
                        "%s: the socket file was replaced by another process that serves "
                        "it; not re-creating it while that process answers. kubelet reaches "
                        "that process, not this %s %r",
                        self.path,
                        self.identity.type,
                        self.identity.name,
                    )
                    return False
                logger.warning(
                    "%s: the socket file was replaced by one nobody answers on; re-creating "
                    "it (kubelet registers the new one)",
                    self.path,
                )
            self.recreate_socket()
            return True

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop serving and remove the socket file (trigger ``stop``); idempotent.

        A pending re-creation is abandoned without waiting out its retry period.

        Args:
            grace_s: how long calls in flight may take to finish before they are cancelled.
        """
        self._stopping.set()
        with self._changed:
            # No re-creation starts once stopping is set (_take checks it under the lock),
            # so after this join no thread of this socket is left.
            recreator = self._recreator
        if recreator is not None and recreator is not threading.current_thread():
            recreator.join()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join()
        with self._changed:
            if self._state == registration.DEREGISTERED:
                return
            step = self._lifecycle.step(self._state, "stop")
            assert step is not None  # stop has no guard
            self._carry_out(step, grace_s)
            self._adopt(step)

    def notify(self, registered: bool, error: str) -> None:
        """What the peer said in ``NotifyRegistrationStatus``.

        Args:
            registered: ``plugin_registered``.
            error: the peer's error text when not registered.
        """
        trigger = "registration_accepted" if registered else "registration_rejected"
        with self._changed:
            step = self._take(trigger)
            if step is None:
                return
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
                self._retry_on_thread(step, attempt_now=True)

    def recreate_socket(self) -> None:
        """Tear the socket down and create it anew (trigger ``serving_failed``).

        For a server found not to serve; the peer registers the new file. Does nothing unless
        serving or registered. The first attempt runs on the caller's thread; a failed one is
        retried every :data:`RETRY_PERIOD_S` seconds until it succeeds or the socket stops.
        """
        with self._changed:
            step = self._take("serving_failed")
            if step is None:
                return
            self._adopt(step)
            if not self._attempt(step):
                self._retry_on_thread(step, attempt_now=False)

    def wait_for_state(self, state: str, timeout_s: float) -> bool:
        """Wait until the registration machine is in ``state``.

        Args:
            state: one of ``machines.registration``'s states.
            timeout_s: how long to wait.

        Returns:
            Whether it got there in time.
        """
        with self._changed:
            return self._changed.wait_for(lambda: self._state == state, timeout_s)

    # -- the machine ----------------------------------------------------------------------

    def _take(self, trigger: str) -> Step | None:
        """The step ``trigger`` takes now, or ``None`` if it is to be ignored (logged)."""
        if self._stopping.is_set():
            return None
        try:
            step = self._lifecycle.step(self._state, trigger)
        except InvalidTransition:
            # A late status, or one for a socket already being re-created: the new socket
            # will be registered afresh, so this one's outcome no longer matters.
            logger.info("%s: ignoring %s in state %s", self.path, trigger, self._state)
            return None
        assert step is not None  # none of these triggers has a guard
        return step

    def _adopt(self, step: Step) -> None:
        if step.dest != self._state:
            logger.info("plugin socket %s: %s -> %s", self.path, self._state, step.dest)
        self._state = step.dest
        self._changed.notify_all()
        if self._on_step is not None:
            self._on_step(step)

    def _attempt(self, step: Step) -> bool:
        """One attempt at a re-creation's actions (lock held); whether it is done."""
        try:
            self._carry_out(step, STOP_GRACE_S)
        except _CREATE_ERRORS as exc:
            logger.error(
                "%s: cannot re-create the socket (%s); retrying in %.3g s",
                self.path,
                exc,
                RETRY_PERIOD_S,
            )
            return False
        done = self._lifecycle.step(self._state, "socket_recreated")
        assert done is not None  # no guard
        self._adopt(done)
        return True

    def _retry_on_thread(self, step: Step, *, attempt_now: bool) -> None:
        self._recreator = threading.Thread(
            target=self._retry,
            args=(step, attempt_now),
            name=f"recreate {self.path.name}",
            daemon=True,  # stop() joins it; a process exiting without stop() must not hang
        )
        self._recreator.start()

    def _watch(self, period_s: float) -> None:
        """``check_socket`` every ``period_s`` seconds until stopped; a failure is logged."""
        while not self._stopping.wait(period_s):
            try:
                self.check_socket()
            except Exception:  # the watch must outlive one bad check
                logger.exception("%s: checking the socket file failed", self.path)

    def _retry(self, step: Step, attempt_now: bool) -> None:
        """Attempt the re-creation until done or stopped, every ``RETRY_PERIOD_S``."""
        if not attempt_now and self._stopping.wait(RETRY_PERIOD_S):
            return
        while True:
            with self._changed:
                if self._stopping.is_set() or self._attempt(step):
                    return
            if self._stopping.wait(RETRY_PERIOD_S):
                return

    def _carry_out(self, step: Step, grace_s: float) -> None:
        """Run the step's actions, in the table's order (``machines.registration``)."""
        for action in step.actions:
            if action == "create_socket":
                self._create_socket()
            elif action == "remove_socket":
                self._remove_socket(grace_s)
            else:  # pragma: no cover - the table names only these two
                raise AssertionError(f"registration table names an unknown action {action!r}")

    # -- the actions ----------------------------------------------------------------------

    def _create_socket(self) -> None:
        """The ``create_socket`` action: check, clear, bind owner-only, serve, dial ourselves."""
        path = check_socket_path(self.path)  # before any thread or file is made
        # grpcio does not shut down the executor it is given: _remove_socket does.
        executor = futures.ThreadPoolExecutor(
            max_workers=self._max_workers, thread_name_prefix=f"grpc-{path.stem}"
        )
        server = grpc.server(executor, options=self._server_options)
        handlers = registration_handler(self.identity, self.notify, self._observer)
        server.add_generic_rpc_handlers((handlers, *self._services))
        bound: BoundSocket | None = None
        try:
            bound = bind_owner_only(server, path)
            server.start()
            _verify_serving(path, self.identity)
        except BaseException:
            server.stop(grace=None).wait()
            executor.shutdown(wait=False)
            if bound is not None:
                remove_socket(bound)
            raise
        self._server, self._executor, self._bound = server, executor, bound
        logger.info("serving %s %r on %s", self.identity.type, self.identity.name, path)

    def _remove_socket(self, grace_s: float) -> None:
        """The ``remove_socket`` action: stop the server, its pool, delete the file we bound."""
        server, executor, bound = self._server, self._executor, self._bound
        self._server = self._executor = self._bound = None
        if server is not None:
            # Wait for the old server to be gone before the path is reused: grpc unlinks
            # its socket path when it shuts down, which would take a new file with it.
            server.stop(grace=grace_s).wait()
        if executor is not None:
            # Not waiting: a handler may be blocked on this socket's lock, held here.
            executor.shutdown(wait=False)
        if bound is not None:
            remove_socket(bound)


def _verify_serving(path: Path, identity: PluginIdentity) -> None:
    """Dial the socket as the peer will and ask ``GetInfo``, to confirm the server answers."""
    with grpc.insecure_channel(f"unix:{path}") as channel:
        stub = reg_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
        try:
            info = stub.GetInfo(reg.InfoRequest(), timeout=VERIFY_TIMEOUT_S, wait_for_ready=True)
        except grpc.RpcError as exc:
            raise ServingError(f"{str(path)!r} does not answer GetInfo: {exc}") from exc
    if (info.type, info.name) != (identity.type, identity.name):
        raise ServingError(
            f"{str(path)!r} answers as {info.type} {info.name!r}, "
            f"not {identity.type} {identity.name!r}"
        )
