"""The NUMA memory balancer's eviction plugin server (wire.md §7, §8.3, §11; memory-balancer.md
§9, §10).

katalyst-agent's eviction manager finds ``<plugin-registration-dir>/numa_memory_balancer.sock``
through its plugin watcher, asks ``GetInfo`` (type ``EvictionPlugin``, version ``v1alpha1``),
dials, asks ``GetToken`` and reports ``NotifyRegistrationStatus``; then, every 5 s, it asks
``GetEvictPods{active_pods}``, ``ThresholdMet`` and, for a HARD_MET threshold only,
``GetTopEvictionPods``. One gRPC server on that socket serves both services; the socket's
registration life cycle is ``wire.plugin_socket``'s.

Each handler converts the request (pods become their UIDs), ``ask``s the MemoryBalancer actor
with the RPC's remaining deadline (10 s when the caller set none, the agent's own deadline,
wire.md §9.6) and converts the reply (offers become the received pod objects). The balancer
answers the four RPCs as §9 says: an empty token, an all-default NOT_MET threshold, no top
pods, and the current record's eviction pods found among the active pods, once per record.

Errors become gRPC statuses in one place (``STATUS_OF``): a balancer that cannot make the
"taken" mark durable, or is not running, is UNAVAILABLE (the agent asks again at its next
poll, and nothing was taken); one that does not answer in time is DEADLINE_EXCEEDED; anything
else is INTERNAL, logged with its traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import grpc
import pykka

from actors.balancer_messages import (
    BalancerCommand,
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
from wire.gen import evictionplugin_pb2_grpc as ep_grpc
from wire.plugin_socket import PluginIdentity, PluginSocket, RegistrationObserver

__all__ = [
    "DEADLINE_MARGIN_S",
    "DEFAULT_ASK_TIMEOUT_S",
    "DEFAULT_SOCKET_DIR",
    "EVICTION_PLUGIN_TYPE",
    "STATUS_OF",
    "EvictionPluginServer",
    "status_of",
]

logger = logging.getLogger(__name__)

#: katalyst-agent's ``--plugin-registration-dir`` default (wire.md §2).
DEFAULT_SOCKET_DIR = Path("/var/lib/katalyst/plugin-socks")
#: ``PluginInfo.type`` of an eviction plugin (wire.md §3).
EVICTION_PLUGIN_TYPE = "EvictionPlugin"
#: The eviction manager's deadline for each RPC (wire.md §9.6), used when a caller sets none.
DEFAULT_ASK_TIMEOUT_S = 10.0
#: Time kept back from the caller's deadline, to answer before the caller gives up.
DEADLINE_MARGIN_S = 0.05
#: A remaining time beyond a day means the caller set no deadline.
NO_DEADLINE_S = 86_400.0

#: The gRPC status of each error a handler can meet, most specific first.
STATUS_OF: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (BalancerUnavailable, grpc.StatusCode.UNAVAILABLE),
    (pykka.ActorDeadError, grpc.StatusCode.UNAVAILABLE),
    (pykka.Timeout, grpc.StatusCode.DEADLINE_EXCEEDED),
)

R = TypeVar("R")


def status_of(exc: BaseException) -> grpc.StatusCode:
    """The gRPC status an error of a handler is answered with (``STATUS_OF``, else INTERNAL)."""
    for kind, code in STATUS_OF:
        if isinstance(exc, kind):
            return code
    return grpc.StatusCode.INTERNAL


def _abort(context: grpc.ServicerContext, rpc: str, exc: BaseException) -> NoReturn:
    code = status_of(exc)
    if code is grpc.StatusCode.INTERNAL:
        logger.exception("%s failed", rpc)
    reason = str(exc) or type(exc).__name__
    # The balancer's own messages may already name the RPC.
    context.abort(code, reason if reason.startswith(f"{rpc}:") else f"{rpc}: {reason}")
    raise AssertionError("grpc's abort returned")  # pragma: no cover - abort always raises


class _EvictionService(ep_grpc.EvictionPluginServicer):
    """``evictionplugin.v1alpha1.EvictionPlugin``: each RPC is one ask of the balancer."""

    def __init__(self, balancer: pykka.ActorRef[Any]) -> None:
        self._balancer = balancer

    def _serve(
        self,
        context: grpc.ServicerContext,
        rpc: str,
        command: BalancerCommand,
        convert: Callable[[Any], R],
    ) -> R:
        """Ask the balancer within the RPC's deadline and convert its reply."""
        remaining: float | None = context.time_remaining()
        if remaining is None or remaining > NO_DEADLINE_S:
            # grpc reports "no deadline" as None or as the far future (about 9.2e18 s).
            timeout = DEFAULT_ASK_TIMEOUT_S
        else:
            # A margin kept back lets the caller hear why (DEADLINE_EXCEEDED with a reason)
            # before its own deadline cuts the call.
            timeout = remaining - DEADLINE_MARGIN_S
        try:
            if timeout <= 0:
                raise pykka.Timeout("too little of the deadline is left to ask the memory balancer")
            try:
                reply = self._balancer.ask(command, timeout=timeout)
            except pykka.Timeout as exc:
                raise pykka.Timeout(
                    f"the memory balancer did not answer within {timeout:.3g} s"
                ) from exc
            except pykka.ActorDeadError as exc:
                raise pykka.ActorDeadError("the memory balancer is not running") from exc
            return convert(reply)
        except Exception as exc:
            _abort(context, rpc, exc)

    def GetToken(  # noqa: N802 - the RPC's name
        self, request: ep.Empty, context: grpc.ServicerContext
    ) -> ep.GetTokenResponse:
        return self._serve(context, "GetToken", GetToken(), token_response)

    def ThresholdMet(  # noqa: N802 - the RPC's name
        self, request: ep.Empty, context: grpc.ServicerContext
    ) -> ep.ThresholdMetResponse:
        return self._serve(context, "ThresholdMet", ThresholdMet(), threshold_met_response)

    def GetTopEvictionPods(  # noqa: N802 - the RPC's name
        self, request: ep.GetTopEvictionPodsRequest, context: grpc.ServicerContext
    ) -> ep.GetTopEvictionPodsResponse:
        command = GetTopEvictionPods(
            active_pod_uids=active_pod_uids(request.active_pods), top_n=request.topN
        )
        return self._serve(
            context,
            "GetTopEvictionPods",
            command,
            lambda uids: top_eviction_pods_response(uids, request.active_pods),
        )

    def GetEvictPods(  # noqa: N802 - the RPC's name
        self, request: ep.GetEvictPodsRequest, context: grpc.ServicerContext
    ) -> ep.GetEvictPodsResponse:
        command = GetEvictPods(active_pod_uids=active_pod_uids(request.active_pods))
        return self._serve(
            context,
            "GetEvictPods",
            command,
            lambda offers: evict_pods_response(offers, request.active_pods),
        )


class EvictionPluginServer:
    """The balancer's eviction plugin on ``<socket_dir>/<name>.sock``.

    Args:
        socket_dir: the agent's plugin-registration directory (``DEFAULT_SOCKET_DIR`` on a
            node); created if missing.
        balancer_ref: the MemoryBalancer actor; the plugin serves only while it is alive.
        name: the plugin's name, in ``GetInfo`` and the socket's file name.
        observer: told every registration step the socket takes.

    Raises:
        ValueError: the socket path is longer than 107 bytes.
    """

    def __init__(
        self,
        socket_dir: Path | str,
        balancer_ref: pykka.ActorRef[Any],
        *,
        name: str = EVICTION_PLUGIN_NAME,
        observer: RegistrationObserver | None = None,
    ) -> None:
        service = _EvictionService(balancer_ref)

        def add_services(server: grpc.Server) -> None:
            # The generated registration function is untyped.
            ep_grpc.add_EvictionPluginServicer_to_server(service, server)  # type: ignore[no-untyped-call]

        self._socket = PluginSocket(
            Path(socket_dir) / f"{name}.sock",
            PluginIdentity(type=EVICTION_PLUGIN_TYPE, name=name),
            add_services,
            actors_ready=balancer_ref.is_alive,
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
        """Create the socket and serve; returns once a dial of the socket succeeds.

        Raises:
            RuntimeError: the balancer actor is not running.
            InvalidTransition: started before.
            OSError: the socket cannot be created or does not accept connections within 5 s.
        """
        self._socket.serve()

    def stop(self) -> None:
        """Stop serving and remove the socket, so the agent deregisters the plugin; idempotent."""
        self._socket.stop()
