"""The CPU plugin's socket: one gRPC server per plugin-watcher directory (wire.md §1.2, §2, §8.1).

Each :class:`PluginServer` serves ``pluginregistration.Registration`` and
``resourceplugin.v1alpha1.ResourcePlugin`` on ``<dir>/qrm_cpu_plugin_dynamic.sock``. It is a
thin layer over ``wire.plugin_socket.PluginSocket``, which creates the socket (path checked,
stale file removed, owner-only, self-dial ``GetInfo``) and follows the registration machine
(``machines.registration``): re-created on ``plugin_registered=false`` or on
``recreate_socket``, retried every 5 s, removed at stop. This layer chooses:

* the path ``<socket_dir>/<name>.sock`` (name ``qrm_cpu_plugin_dynamic``: agent
  ``qrm_cpu_plugin``, policy ``dynamic``, wire.md §12.5), checked when the server starts;
* the ``GetInfo`` answer: type ``ResourcePlugin``, name the resource (``cpu``), versions
  ``v1alpha1``, endpoint empty (the same socket, wire.md §3);
* the connection cap (``--max-connections``, default 1024), enforced by gRPC core's
  ``grpc.max_allowed_incoming_connections`` server argument (``wire.plugin_socket``);
* the service: ``wire.resource_plugin`` asking the Allocator. While ``ready()`` is false the
  socket is not created, and every ResourcePlugin call on a served one answers UNAVAILABLE (a
  StateStore being restarted, shutdown); Registration keeps answering so kubelet keeps the
  plugin.

The reference de-duplicates socket directories by inode (``distinct_socket_dirs``, wire.md §2).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from wire import resource_plugin
from wire.call_watch import KubeletCallWatch
from wire.plugin_socket import DEFAULT_MAX_CONNECTIONS, PluginIdentity, PluginSocket
from wire.rpc import ActorRef, RpcObserver
from wire.sockets import (
    MAX_SOCKET_PATH_BYTES,
    SocketPathError,
    check_socket_path,
    distinct_socket_dirs,
)

__all__ = [
    "MAX_SOCKET_PATH_BYTES",
    "PLUGIN_NAME",
    "PLUGIN_TYPE",
    "SUPPORTED_VERSIONS",
    "PluginServer",
    "RpcObserver",
    "SocketPathError",
    "distinct_socket_dirs",
    "plugin_socket_path",
]

#: The CPU plugin instance name: agent ``qrm_cpu_plugin``, policy ``dynamic`` (wire.md §12.5).
PLUGIN_NAME = "qrm_cpu_plugin_dynamic"
#: ``PluginInfo.type`` of a QRM plugin (wire.md §3).
PLUGIN_TYPE = "ResourcePlugin"
#: ``PluginInfo.supported_versions`` (wire.md §3, §4).
SUPPORTED_VERSIONS = ("v1alpha1",)


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
    try:
        return str(check_socket_path(Path(socket_dir) / f"{name}.sock"))
    except SocketPathError as err:
        # The daemon's configuration error quotes this wording (qrmd.config).
        raise SocketPathError(
            f"socket path {err.path} is {err.size} bytes, longer than a unix socket allows "
            f"({MAX_SOCKET_PATH_BYTES}); choose a shorter socket directory",
            path=err.path,
            size=err.size,
        ) from None


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
        max_connections: the most connections accepted at once (``--max-connections``;
            ``wire.plugin_socket.MAX_CONNECTIONS_ARG`` enforces it), or ``None`` for no cap.
        call_watch: watches whether kubelet's calls are answered (``wire.call_watch``), or
            ``None``.
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
        max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
        call_watch: KubeletCallWatch | None = None,
    ) -> None:
        self.socket_dir = os.path.abspath(socket_dir)
        self.name = name
        self.resource_name = resource_name
        self._socket = PluginSocket(
            Path(self.socket_dir) / f"{name}.sock",
            PluginIdentity(
                type=PLUGIN_TYPE, name=resource_name, supported_versions=SUPPORTED_VERSIONS
            ),
            (resource_plugin.handler(allocator_ref, ready, observer, call_watch),),
            actors_ready=ready,
            observer=observer,
            max_workers=max_workers,
            max_connections=max_connections,
        )

    @property
    def socket_path(self) -> str:
        """The socket file's absolute path."""
        return str(self._socket.path)

    @property
    def state(self) -> str:
        """The registration machine's state (``machines.registration``)."""
        return self._socket.state

    def start(self) -> None:
        """Create the socket and serve (trigger ``serve``).

        Raises:
            NotReady: ``ready()`` is false; nothing was created.
            SocketPathError: the socket path is too long, or a directory is in the way.
            OSError: the directory cannot be created, or the stale file removed.
            RuntimeError: the server cannot bind, or does not answer its own ``GetInfo``
                (``wire.sockets.ServingError``, also an ``OSError``).
            machines.lifecycle.InvalidTransition: already started or stopped.
        """
        self._socket.serve()

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving and remove the socket (trigger ``stop``); a second call does nothing.

        Args:
            grace_s: how long calls in flight may take to finish before they are cancelled.
        """
        self._socket.stop(grace_s)

    def recreate_socket(self) -> None:
        """Re-create the socket of a server found not to serve (``PluginSocket.recreate_socket``).

        kubelet registers the new file; nothing happens unless serving or registered, and a
        failed creation is retried every 5 s until it succeeds or the server is stopped.
        """
        self._socket.recreate_socket()

    def wait_for_state(self, state: str, timeout_s: float) -> bool:
        """Block until the socket's registration state is ``state``, at most ``timeout_s``.

        Args:
            state: a ``machines.registration`` state, e.g. ``registered``.
            timeout_s: the longest wait, in seconds.

        Returns:
            True once in ``state``; False if the time ran out first.
        """
        return self._socket.wait_for_state(state, timeout_s)
