"""The NUMA memory balancer's eviction plugin server (wire.md §7, §8.3, §11; memory-balancer.md
§9, §10).

katalyst-agent's eviction manager finds ``<plugin-registration-dir>/numa_memory_balancer.sock``
through its plugin watcher, asks ``GetInfo`` (type ``EvictionPlugin``, version ``v1alpha1``),
dials, asks ``GetToken`` and reports ``NotifyRegistrationStatus``; then, every 5 s, it asks
``GetEvictPods{active_pods}``, ``ThresholdMet`` and, for a HARD_MET threshold only,
``GetTopEvictionPods``. One gRPC server on that socket serves both services; the socket's
registration life cycle is ``wire.plugin_socket``'s.

The ``evictionplugin.v1alpha1.EvictionPlugin`` service is a table, one row per RPC, as the
ResourcePlugin's is (``wire.resource_plugin``). Each handler converts the request (pods become
their UIDs), ``ask``s the MemoryBalancer actor with the call's remaining deadline (10 s when
the caller set none: the agent's own deadline, wire.md §9.6) and converts the reply (offers
become the received pod objects). The balancer answers as §9 says: an empty token, an
all-default NOT_MET threshold, no top pods, and the current record's eviction pods found among
the active pods, once per record.

Errors take their status from ``wire.errors``: a balancer that cannot make the "taken" mark
durable, does not answer in time or is not running is UNAVAILABLE (nothing was taken; the agent
asks again at its next poll); anything else is INTERNAL, logged with its traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pykka
from google.protobuf.message import Message

from actors.balancer_messages import (
    BalancerUnavailable,
    GetEvictPods,
    GetToken,
    GetTopEvictionPods,
    ThresholdMet,
)
from policy.balance.constants import EVICTION_PLUGIN_NAME
from wire.eviction_convert import (
    active_pod_uids,
    evict_pods_response,
    threshold_met_response,
    token_response,
    top_eviction_pods_response,
)
from wire.gen import evictionplugin_pb2 as ep
from wire.plugin_socket import PluginSocket, RegistrationObserver
from wire.registration_service import PluginIdentity
from wire.rpc import ActorRef, RpcObserver, ask_timeout, unary_handler
from wire.sockets import check_socket_path

__all__ = [
    "DEFAULT_SOCKET_DIR",
    "DEFAULT_TIMEOUT_S",
    "EVICTION_PLUGIN_RPCS",
    "EVICTION_PLUGIN_TYPE",
    "SERVICE",
    "EvictionPluginRpc",
    "EvictionPluginServer",
    "handler",
]

#: The full service name (wire.md §1.3).
SERVICE = "evictionplugin.v1alpha1.EvictionPlugin"
#: katalyst-agent's ``--plugin-registration-dir`` default (wire.md §2).
DEFAULT_SOCKET_DIR = Path("/var/lib/katalyst/plugin-socks")
#: ``PluginInfo.type`` of an eviction plugin (wire.md §3).
EVICTION_PLUGIN_TYPE = "EvictionPlugin"
#: The eviction manager's deadline for each RPC (wire.md §9.6); the ask timeout without one.
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class EvictionPluginRpc:
    """One method of the service.

    Attributes:
        name: the method name.
        request_type: its request message.
        command: request message → the actor's command (the MemoryBalancer's here; a plugin
            may bring its own table, ``wire.cpu_pressure_rpcs``), or None for a method
            answered without asking (a constant answer).
        response: (request message, the actor's reply, None without a command) → response
            message; the request is there for its pod objects.
    """

    name: str
    request_type: type[Message]
    command: Callable[[Any], Any] | None
    response: Callable[[Any, Any], Message]


# The order of the proto file (wire.md §7.1).
EVICTION_PLUGIN_RPCS = (
    EvictionPluginRpc(
        "GetToken", ep.Empty, lambda request: GetToken(), lambda request, t: token_response(t)
    ),
    EvictionPluginRpc(
        "ThresholdMet",
        # A later agent sends GetThresholdMetRequest here; as Empty its pods are unknown
        # fields, ignored (wire.md §13).
        ep.Empty,
        lambda request: ThresholdMet(),
        lambda request, answer: threshold_met_response(answer),
    ),
    EvictionPluginRpc(
        "GetTopEvictionPods",
        ep.GetTopEvictionPodsRequest,
        lambda request: GetTopEvictionPods(active_pod_uids(request.active_pods), request.topN),
        lambda request, uids: top_eviction_pods_response(uids, request.active_pods),
    ),
    EvictionPluginRpc(
        "GetEvictPods",
        ep.GetEvictPodsRequest,
        lambda request: GetEvictPods(active_pod_uids(request.active_pods)),
        lambda request, offers: evict_pods_response(offers, request.active_pods),
    ),
)


def _ask(actor: ActorRef, command: Any, timeout: float, who: str) -> Any:
    """Ask the actor; a silent or stopped one is ``BalancerUnavailable`` (UNAVAILABLE), saying
    which."""
    try:
        return actor.ask(command, timeout=timeout)
    except pykka.Timeout as exc:
        raise BalancerUnavailable(f"{who} did not answer within {timeout:.3g} s") from exc
    except pykka.ActorDeadError as exc:
        raise BalancerUnavailable(f"{who} is not running") from exc


def _method(
    rpc: EvictionPluginRpc, actor: ActorRef, observer: RpcObserver | None, who: str
) -> grpc.RpcMethodHandler:
    def work(request: Message, context: grpc.ServicerContext) -> Message:
        if rpc.command is None:
            return rpc.response(request, None)
        timeout = ask_timeout(context, DEFAULT_TIMEOUT_S)
        return rpc.response(request, _ask(actor, rpc.command(request), timeout, who))

    return unary_handler(rpc.name, rpc.request_type, work, observer)


def handler(
    balancer: ActorRef,
    observer: RpcObserver | None = None,
    *,
    rpcs: tuple[EvictionPluginRpc, ...] = EVICTION_PLUGIN_RPCS,
    who: str = "the memory balancer",
) -> grpc.GenericRpcHandler:
    """The EvictionPlugin service, every method asking ``balancer``.

    Args:
        balancer: the actor's ref (the MemoryBalancer's by default).
        observer: told about every call, or ``None``.
        rpcs: the method table (``EVICTION_PLUGIN_RPCS``: the balancer's).
        who: the actor's name in errors ("the memory balancer did not answer").

    Returns:
        The generic handler to add to a ``grpc.Server``.
    """
    methods = {rpc.name: _method(rpc, balancer, observer, who) for rpc in rpcs}
    return grpc.method_handlers_generic_handler(SERVICE, methods)


class EvictionPluginServer:
    """An eviction plugin on ``<socket_dir>/<name>.sock``: the balancer's by default.

    Args:
        socket_dir: the agent's plugin-registration directory (``DEFAULT_SOCKET_DIR`` on a
            node); created if missing.
        balancer_ref: the MemoryBalancer actor; the socket is created only while it is alive.
        name: the plugin's name, in ``GetInfo`` and the socket's file name.
        observer: told about every call (metrics), or ``None``.
        on_registration: told every registration step the socket takes, or ``None``.
        rpcs: the method table; the balancer's by default (the CPU pressure plugins bring
            theirs, ``wire.cpu_pressure_rpcs``).
        who: the actor's name in errors.

    Raises:
        SocketPathError: the socket path is longer than 107 bytes (a ``ValueError``).
    """

    def __init__(
        self,
        socket_dir: Path | str,
        balancer_ref: pykka.ActorRef[Any],
        *,
        name: str = EVICTION_PLUGIN_NAME,
        observer: RpcObserver | None = None,
        on_registration: RegistrationObserver | None = None,
        rpcs: tuple[EvictionPluginRpc, ...] = EVICTION_PLUGIN_RPCS,
        who: str = "the memory balancer",
    ) -> None:
        self._socket = PluginSocket(
            # Refused here, before any actor is asked: the directory is the operator's choice.
            check_socket_path(Path(socket_dir) / f"{name}.sock"),
            PluginIdentity(type=EVICTION_PLUGIN_TYPE, name=name),
            (handler(balancer_ref, observer, rpcs=rpcs, who=who),),
            actors_ready=balancer_ref.is_alive,
            on_step=on_registration,
            observer=observer,
        )

    @property
    def socket_path(self) -> Path:
        """The socket file the agent dials."""
        return self._socket.path

    @property
    def registration_state(self) -> str:
        """Where the socket is in its registration life cycle (``machines.registration``)."""
        return self._socket.state

    def start(self) -> None:
        """Create the socket and serve; returns once the socket answers ``GetInfo``.

        Raises:
            NotReady: the balancer actor is not running (a ``RuntimeError``); no socket was
                created.
            InvalidTransition: started before.
            OSError: the socket cannot be created or does not answer within 5 s
                (``SocketPathError`` for a directory in the way, ``ServingError``).
        """
        self._socket.serve()

    def stop(self) -> None:
        """Stop serving and remove the socket, so the agent deregisters the plugin; idempotent."""
        self._socket.stop()
