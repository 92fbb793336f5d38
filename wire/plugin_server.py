"""The CPU plugin's socket: one gRPC server per plugin-watcher directory (wire.md §1.2, §2, §8.1).

Each :class:`PluginServer` serves ``pluginregistration.Registration`` and
``resourceplugin.v1alpha1.ResourcePlugin`` on ``<dir>/qrm_cpu_plugin_dynamic.sock`` and follows
the registration machine (``machines.registration``), whose actions it carries out:

* **serve** (``start``), only once qrmd is ready (guard ``actors_ready``): kubelet dials as soon
  as the file appears and asks ``GetResourcePluginOptions`` once. *create_socket*: the path is
  checked (unix socket paths stop at 107 bytes; a longer one is an error naming it, before any
  bind), the directory is created if missing (0755, as the reference does), a stale file is
  removed, the server binds, the socket is made owner-only (0600) at once, serving starts, and
  the server dials itself and calls ``GetInfo`` (5 s) to confirm it answers (§8.1 step 1).
* **registration_accepted**: kubelet's ``NotifyRegistrationStatus(true)``.
* **registration_rejected**: ``NotifyRegistrationStatus(false)``. kubelet has recorded the socket
  and retries only for a new file, so the socket is torn down and created anew (new inode and
  ctime), then **socket_recreated**. A failed re-creation is retried every 5 s, as the
  reference retries a server that failed to serve.
* **stop** (``stop``): the server stops (in-flight calls get ``grace_s``) and the file is
  removed, which makes kubelet deregister the plugin.

``NotifyRegistrationStatus`` always answers at once (wire.md §3); the transition it triggers
runs on its own thread, because re-creating the socket stops the very server answering it.
While ``ready()`` is false every ResourcePlugin call answers UNAVAILABLE (a StateStore being
restarted, shutdown); Registration keeps answering so kubelet keeps the plugin.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterable
from concurrent import futures

import grpc

from machines import registration
from machines.lifecycle import Step
from wire import resource_plugin
from wire.errors import NotReady
from wire.gen import pluginregistration_pb2 as reg
from wire.rpc import ActorRef, RpcObserver, unary_handler

__all__ = [
    "MAX_SOCKET_PATH_BYTES",
    "PLUGIN_NAME",
    "PLUGIN_TYPE",
    "SUPPORTED_VERSIONS",
    "PluginServer",
    "SocketPathError",
    "distinct_socket_dirs",
    "plugin_socket_path",
]

logger = logging.getLogger(__name__)

#: The CPU plugin instance name: agent ``qrm_cpu_plugin``, policy ``dynamic`` (wire.md §12.5).
PLUGIN_NAME = "qrm_cpu_plugin_dynamic"
#: ``PluginInfo.type`` of a QRM plugin (wire.md §3).
PLUGIN_TYPE = "ResourcePlugin"
#: ``PluginInfo.supported_versions`` (wire.md §3, §4).
SUPPORTED_VERSIONS = ("v1alpha1",)
#: Longest unix socket path: ``sun_path`` is 108 bytes with its terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
#: The reference dials its own socket with this timeout after serving (wire.md §8.1 step 1).
SELF_DIAL_TIMEOUT_S = 5.0
#: Pause between attempts to re-create a socket that could not be created.
RECREATE_RETRY_S = 5.0
_REGISTRATION_SERVICE = "pluginregistration.Registration"


class SocketPathError(ValueError):
    """The socket cannot live at this path (too long for a unix socket, or a directory)."""


def plugin_socket_path(socket_dir: str, name: str = PLUGIN_NAME) -> str:
    """The absolute socket path ``<socket_dir>/<name>.sock``, checked for length.

    Args:
        socket_dir: a plugin-watcher directory.
        name: the plugin instance name.

    Returns:
        The absolute path.

    Raises:
        SocketPathError: the path is longer than :data:`MAX_SOCKET_PATH_BYTES` bytes; the
            message names it and its length.
    """
    path = os.path.join(os.path.abspath(socket_dir), f"{name}.sock")
    length = len(os.fsencode(path))
    if length > MAX_SOCKET_PATH_BYTES:
        raise SocketPathError(
            f"socket path {path} is {length} bytes, longer than a unix socket allows "
            f"({MAX_SOCKET_PATH_BYTES}); choose a shorter socket directory"
        )
    return path


def distinct_socket_dirs(socket_dirs: Iterable[str]) -> list[str]:
    """Create missing socket directories (0755) and drop those that are the same directory.

    The reference de-duplicates directories by inode (wire.md §2), so a directory listed twice,
    or through a symlink, gets one socket.

    Args:
        socket_dirs: the configured directories, in order.

    Returns:
        The absolute directories, first occurrence of each inode kept.

    Raises:
        OSError: a directory cannot be created or read.
    """
    seen: set[tuple[int, int]] = set()
    distinct = []
    for directory in socket_dirs:
        absolute = os.path.abspath(directory)
        os.makedirs(absolute, mode=0o755, exist_ok=True)
        info = os.stat(absolute)
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            distinct.append(absolute)
    return distinct


class PluginServer:
    """The CPU plugin's gRPC server on one socket directory; see the module docstring.

    A server is used once: ``start``, then ``stop``; build a new one to serve again.

    Args:
        socket_dir: the plugin-watcher directory (kubelet's ``plugins_registry``).
        allocator_ref: the Allocator actor's ref; every ResourcePlugin call asks it.
        name: the plugin instance name, the socket's base name.
        resource_name: ``PluginInfo.name``, the resource kubelet routes to this plugin.
        ready: whether qrmd may serve (state recovered, actors up); ``False`` answers
            UNAVAILABLE and keeps ``start`` from creating the socket.
        observer: told about every call (metrics), or ``None``.
        max_workers: gRPC handler threads; calls beyond them wait in grpcio's queue.
    """

    def __init__(
        self,
        socket_dir: str,
        allocator_ref: ActorRef,
        *,
        name: str = PLUGIN_NAME,
        resource_name: str = "cpu",
        ready: Callable[[], bool],
        observer: RpcObserver | None = None,
        max_workers: int = 4,
    ) -> None:
        self.socket_dir = os.path.abspath(socket_dir)
        self.name = name
        self.resource_name = resource_name
        self._socket_path = os.path.join(self.socket_dir, f"{name}.sock")
        self._allocator = allocator_ref
        self._ready = ready
        self._observer = observer
        self._max_workers = max_workers
        self._state = registration.NOT_SERVING
        self._changed = threading.Condition(threading.RLock())
        self._server: grpc.Server | None = None
        self._retry: threading.Timer | None = None
        self._stop_grace_s = 1.0

    # -- public ---------------------------------------------------------------------------

    @property
    def socket_path(self) -> str:
        """The socket file's absolute path."""
        return self._socket_path

    @property
    def state(self) -> str:
        """The registration machine's state (``machines.registration``)."""
        return self._state

    def start(self) -> None:
        """Create the socket and serve (trigger ``serve``); see the module docstring.

        Raises:
            NotReady: ``ready()`` is false; nothing was created.
            SocketPathError: the socket path is too long, or a directory is in the way.
            OSError: the directory cannot be created, or the stale file removed.
            RuntimeError: the server cannot bind, or does not answer its own ``GetInfo``.
            machines.lifecycle.InvalidTransition: already started or stopped.
        """
        with self._changed:
            step = self._step("serve", {"actors_ready": self._ready()})
            if step is None:
                raise NotReady(f"not serving {self._socket_path}: qrmd is not ready")
            self._create_socket()
            self._enter(step.dest)

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving and remove the socket (trigger ``stop``); a second call does nothing.

        Args:
            grace_s: how long calls in flight may take to finish before they are cancelled.
        """
        with self._changed:
            if self._state == registration.DEREGISTERED:
                return
            step = self._step("stop")
            assert step is not None  # stop has no guard
            if self._retry is not None:
                self._retry.cancel()
            self._remove_socket(grace_s)
            self._enter(step.dest)

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

    def _step(self, trigger: str, guards: dict[str, bool] | None = None) -> Step | None:
        return registration.lifecycle().step(self._state, trigger, guards)

    def _enter(self, state: str) -> None:
        if state != self._state:
            logger.info("plugin socket %s: %s -> %s", self._socket_path, self._state, state)
        self._state = state
        self._changed.notify_all()

    def _registration_status(self, registered: bool, error: str) -> None:
        """kubelet's verdict, on a thread of its own (module docstring)."""
        with self._changed:
            if self._state not in (registration.SERVING, registration.REGISTERED):
                logger.info("registration status %s ignored in %s", registered, self._state)
                return
            if registered:
                step = self._step("registration_accepted")
                assert step is not None
                self._enter(step.dest)
                return
            logger.warning(
                "kubelet did not register %s (%s); re-creating the socket so it retries",
                self._socket_path,
                error or "no reason given",
            )
            step = self._step("registration_rejected")
            assert step is not None
            self._remove_socket(self._stop_grace_s)
            self._enter(step.dest)
            self._try_recreate()

    def _try_recreate(self) -> None:
        with self._changed:
            self._retry = None
            if self._state != registration.RECREATING_SOCKET:
                return  # stopped meanwhile
            try:
                self._create_socket()
            except (OSError, RuntimeError) as err:
                logger.error(
                    "cannot re-create %s (%s); retrying in %.0f s",
                    self._socket_path,
                    err,
                    RECREATE_RETRY_S,
                )
                self._retry = threading.Timer(RECREATE_RETRY_S, self._try_recreate)
                self._retry.daemon = True
                self._retry.start()
                return
            step = self._step("socket_recreated")
            assert step is not None
            self._enter(step.dest)

    # -- the actions ----------------------------------------------------------------------

    def _create_socket(self) -> None:
        """The ``create_socket`` action: check, clear, bind, chmod, serve, dial ourselves."""
        path = plugin_socket_path(self.socket_dir, self.name)
        os.makedirs(self.socket_dir, mode=0o755, exist_ok=True)
        _remove_stale(path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers))
        server.add_generic_rpc_handlers(
            (
                self._registration_handler(),
                resource_plugin.handler(self._allocator, self._ready, self._observer),
            )
        )
        try:
            # "unix:<path>", not "unix://<path>": grpcio refuses the latter form from 106 bytes,
            # two short of the real limit.
            server.add_insecure_port(f"unix:{path}")
            # Owner-only at once: only root's kubelet may call (DESIGN.md, errors and config).
            os.chmod(path, 0o600)
            server.start()
            _confirm_serving(path, self.resource_name)
        except BaseException:
            server.stop(None)
            _unlink(path)
            raise
        self._server = server
        logger.info("serving the %s plugin on %s", self.resource_name, path)

    def _remove_socket(self, grace_s: float) -> None:
        """The ``remove_socket`` action: stop the server, delete the file."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace_s).wait()
        _unlink(self._socket_path)

    # -- the Registration service -------------------------------------------------------------

    def _registration_handler(self) -> grpc.GenericRpcHandler:
        def get_info(request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
            # endpoint "": the same socket, as the reference plugins answer (wire.md §3).
            return reg.PluginInfo(
                type=PLUGIN_TYPE,
                name=self.resource_name,
                endpoint="",
                supported_versions=SUPPORTED_VERSIONS,
            )

        def notify(
            request: reg.RegistrationStatus, context: grpc.ServicerContext
        ) -> reg.RegistrationStatusResponse:
            worker = threading.Thread(
                target=self._registration_status,
                args=(request.plugin_registered, request.error),
                name=f"registration-{self.name}",
                daemon=True,
            )
            worker.start()
            return reg.RegistrationStatusResponse()

        methods = {
            "GetInfo": unary_handler("GetInfo", reg.InfoRequest, get_info, self._observer),
            "NotifyRegistrationStatus": unary_handler(
                "NotifyRegistrationStatus", reg.RegistrationStatus, notify, self._observer
            ),
        }
        return grpc.method_handlers_generic_handler(_REGISTRATION_SERVICE, methods)


def _remove_stale(path: str) -> None:
    """Remove a file left at ``path`` (a previous run's socket); refuse to remove a directory."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        raise SocketPathError(f"cannot create socket {path}: a directory is in the way")
    logger.info("removing stale file %s", path)
    os.unlink(path)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _confirm_serving(path: str, resource_name: str) -> None:
    """Dial our own socket and call ``GetInfo``, as the reference does after serving."""
    with grpc.insecure_channel(f"unix:{path}") as channel:
        try:
            get_info = channel.unary_unary(
                f"/{_REGISTRATION_SERVICE}/GetInfo",
                request_serializer=reg.InfoRequest.SerializeToString,
                response_deserializer=reg.PluginInfo.FromString,
            )
            info = get_info(reg.InfoRequest(), timeout=SELF_DIAL_TIMEOUT_S, wait_for_ready=True)
        except grpc.RpcError as err:
            raise RuntimeError(f"the server on {path} does not answer GetInfo: {err}") from err
    if info.name != resource_name:
        raise RuntimeError(f"the server on {path} answers as {info.name!r}, not {resource_name!r}")
