"""What every unary RPC handler of qrmd does around its work: parse, time, map errors.

One shape for all services (DESIGN.md: "gRPC handlers run on grpcio's thread pool, convert the
request, ask the right actor with the RPC's remaining deadline as timeout, and convert the
reply"):

1. The request bytes are parsed by :func:`tolerant_parser`, which never raises: garbage becomes
   a :class:`Malformed` value that the handler answers with INVALID_ARGUMENT. (grpcio would
   otherwise answer INTERNAL "Exception deserializing request", which blames qrmd for the
   caller's bytes.)
2. The work runs; any exception becomes one status through ``wire.errors.status_for``. A bug
   (INTERNAL) is logged with its traceback; refusals are logged at INFO, as kubelet also logs
   them and retries.
3. The call's duration and status code go to the :class:`RpcObserver` (the daemon's metrics).

:func:`ask_timeout` turns the caller's remaining deadline into the actor ask's timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from actors.ports.actor_ref import ActorRef
from policy.cpu.request import RequestError
from wire.errors import status_for

__all__ = [
    "DEADLINE_MARGIN_S",
    "ActorRef",
    "Malformed",
    "RpcObserver",
    "ask_timeout",
    "tolerant_parser",
    "unary_handler",
]

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

#: Time kept back from the caller's deadline so that the answer (even UNAVAILABLE) is sent
#: before the caller gives up, rather than the caller seeing DEADLINE_EXCEEDED.
DEADLINE_MARGIN_S = 0.05


class RpcObserver(Protocol):
    """Told about every finished RPC (the daemon implements it with prometheus histograms)."""

    def observe(self, rpc: str, seconds: float, code: str) -> None:
        """Record one call.

        Args:
            rpc: the method name, e.g. ``Allocate``.
            seconds: wall time from the request's arrival to its answer.
            code: the gRPC status code's name, e.g. ``OK``, ``INVALID_ARGUMENT``.
        """
        ...


@dataclass(frozen=True, slots=True)
class Malformed:
    """Request bytes that do not parse as the method's message."""

    message_type: str
    reason: str

    def error(self) -> RequestError:
        """The request error to answer with."""
        return RequestError(f"request is not a valid {self.message_type}: {self.reason}")


def tolerant_parser(message_type: type[M]) -> Callable[[bytes], M | Malformed]:
    """A request deserializer that returns :class:`Malformed` instead of raising.

    Args:
        message_type: the method's request message class.

    Returns:
        ``bytes -> message | Malformed``.
    """
    name = message_type.DESCRIPTOR.full_name

    def parse(data: bytes) -> M | Malformed:
        try:
            return message_type.FromString(data)
        except (DecodeError, RuntimeError, ValueError) as err:
            return Malformed(name, str(err) or type(err).__name__)

    return parse


def ask_timeout(context: grpc.ServicerContext, default_s: float) -> float:
    """The actor ask's timeout: the caller's remaining deadline less a margin, at most a default.

    Args:
        context: the call's context.
        default_s: used when the caller set no deadline (kubelet's GetResourcePluginOptions)
            or a later one.

    Returns:
        Seconds, never negative.
    """
    remaining: float | None = context.time_remaining()
    # grpcio reports a far-away deadline (not None) when the caller set none.
    if remaining is None or remaining >= default_s + DEADLINE_MARGIN_S:
        return default_s
    return max(0.0, remaining - DEADLINE_MARGIN_S)


def unary_handler(
    rpc: str,
    request_type: type[M],
    work: Callable[[M, grpc.ServicerContext], Message | bytes],
    observer: RpcObserver | None,
    subject: Callable[[M], str] | None = None,
) -> grpc.RpcMethodHandler:
    """A unary method handler running ``work`` with parsing, error mapping and observation.

    Args:
        rpc: the method name, for logs, metrics and error messages.
        request_type: the request message class.
        work: computes the response, a message or its serialized bytes; may raise any error
            (mapped by ``wire.errors``).
        observer: told about each call, or ``None``.
        subject: ``request -> who`` naming the pod and container for error messages.

    Returns:
        The handler to register under ``rpc``.
    """

    def behaviour(request: M | Malformed, context: grpc.ServicerContext) -> Message | bytes:
        started = time.monotonic()
        code = grpc.StatusCode.OK
        try:
            if isinstance(request, Malformed):
                raise request.error()
            return work(request, context)
        except Exception as err:
            who = ""
            if subject is not None and not isinstance(request, Malformed):
                who = subject(request)
            status = status_for(err, rpc, who)
            code = status.code
            if code is grpc.StatusCode.INTERNAL:
                logger.error("%s failed: %s", rpc, status.message, exc_info=err)
            else:
                # UNAVAILABLE is the node's trouble (a commit the disk refused, an actor
                # restarting), which the operator must see; the rest is the caller's.
                level = logging.WARNING if code is grpc.StatusCode.UNAVAILABLE else logging.INFO
                logger.log(level, "%s refused (%s): %s", rpc, code.name, status.message)
            context.abort(code, status.message)
            raise  # unreachable: abort raises; keeps the type checker sure of the flow
        finally:
            if observer is not None:
                _observe(observer, rpc, time.monotonic() - started, code.name)

    return grpc.unary_unary_rpc_method_handler(
        behaviour,
        request_deserializer=tolerant_parser(request_type),
        response_serializer=_serialize,
    )


def _observe(observer: RpcObserver, rpc: str, seconds: float, code: str) -> None:
    """Tell the observer; metrics that fail must not fail the call they measure."""
    try:
        observer.observe(rpc, seconds, code)
    except Exception:
        logger.exception("the RPC observer failed on %s (%s)", rpc, code)


def _serialize(response: Message | bytes) -> bytes:
    if isinstance(response, bytes):
        return response
    return response.SerializeToString()
