"""sys-advisor's side of the CPU advisor protocol: a ``CPUAdvisor`` server over plain values
(wire.md §6.1, §10), for the sys-advisor simulator (``qrmd.sim.advisor``) and tests.

The served behaviour is a :class:`AdvisorBehaviour`: what to answer to ``AddContainer`` and
``RemovePod`` (return, or raise :class:`AdvisorStatus` to answer an error status), and the
responses of a ListAndWatch stream (an iterator; raising :class:`AdvisorStatus` ends the stream
with that status, as a Go server returning an error does). Responses are written by
``wire.advisor_convert.response_to_bytes``, so nil map values go out as Go sends them.

Given an :class:`AdviceBehaviour` too, the server answers Katalyst v0.5.47's ``GetAdvice``;
without one it answers ``UNIMPLEMENTED``, as a v0.5.3 sys-advisor does (the method is not
registered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any, Protocol

import grpc

from policy.cpu.advisor.advice import AdviceReply, AdviceRequest
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from wire.advisor_convert import (
    AdvisorWireError,
    advice_reply_to_bytes,
    advice_request_from_proto,
    metadata_from_proto,
    response_to_bytes,
)
from wire.gen import advisorsvc_pb2 as svc_pb
from wire.gen import cpuadvisor_pb2 as cpu_pb
from wire.sockets import BoundSocket, bind_owner_only, remove_socket

__all__ = ["AdviceBehaviour", "AdvisorBehaviour", "AdvisorStatus", "CPUAdvisorServer"]


class AdvisorStatus(Exception):  # noqa: N818 - a status to answer, not our failure
    """Answer the call with gRPC status ``code`` (a ``grpc.StatusCode`` name) and ``details``."""

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details


class AdvisorBehaviour(Protocol):
    """What the served advisor does."""

    def add_container(self, metadata: ContainerMetadata) -> None: ...

    def remove_pod(self, pod_uid: str) -> None: ...

    def list_and_watch(self, is_active: Callable[[], bool]) -> Iterator[AdvisorResponse]:
        """The stream's responses; stop when ``is_active()`` turns false (client gone)."""
        ...


class AdviceBehaviour(Protocol):
    """A served advisor that answers Katalyst v0.5.47's ``GetAdvice``."""

    def get_advice(self, request: AdviceRequest) -> AdviceReply:
        """The reply; raise :class:`AdvisorStatus` to answer an error status."""
        ...


class CPUAdvisorServer:
    """A ``CPUAdvisor`` server on a unix socket; ``start`` once, then ``stop``.

    Args:
        socket_path: where to serve (owner-only).
        behaviour: what to answer.
        max_workers: handler threads; a stalled stream or a slow call holds one each.
        advice: what to answer GetAdvice (Katalyst v0.5.47); None: ``UNIMPLEMENTED``.
    """

    def __init__(
        self,
        socket_path: str,
        behaviour: AdvisorBehaviour,
        max_workers: int = 16,
        *,
        advice: AdviceBehaviour | None = None,
    ) -> None:
        self.path = Path(socket_path)
        self._behaviour = behaviour
        self._advice = advice
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._bound: BoundSocket | None = None

    @staticmethod
    def _abort(context: Any, status: AdvisorStatus) -> None:
        context.abort(getattr(grpc.StatusCode, status.code), status.details)

    def _add_container(self, request: svc_pb.ContainerMetadata, context: Any) -> Any:
        try:
            self._behaviour.add_container(metadata_from_proto(request))
        except AdvisorStatus as status:
            self._abort(context, status)
        return svc_pb.AddContainerResponse()

    def _remove_pod(self, request: svc_pb.RemovePodRequest, context: Any) -> Any:
        try:
            self._behaviour.remove_pod(request.pod_uid)
        except AdvisorStatus as status:
            self._abort(context, status)
        return svc_pb.RemovePodResponse()

    def _list_and_watch(self, request: svc_pb.Empty, context: Any) -> Iterator[bytes]:
        try:
            for response in self._behaviour.list_and_watch(context.is_active):
                yield response_to_bytes(response)
        except AdvisorStatus as status:
            self._abort(context, status)

    def _get_advice(self, request: cpu_pb.GetAdviceRequest, context: Any) -> bytes:
        assert self._advice is not None
        try:
            plain = advice_request_from_proto(request)
        except AdvisorWireError as err:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
        try:
            return advice_reply_to_bytes(self._advice.get_advice(plain))
        except AdvisorStatus as status:
            self._abort(context, status)
            raise  # abort raises; this keeps the type checker's flow honest

    def start(self) -> None:
        """Bind (a stale file removed) and serve.

        Raises:
            ServingError, SocketPathError: see ``wire.sockets.bind_owner_only``.
        """
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers))
        handlers = {
            "AddContainer": grpc.unary_unary_rpc_method_handler(
                self._add_container,
                request_deserializer=svc_pb.ContainerMetadata.FromString,
                response_serializer=svc_pb.AddContainerResponse.SerializeToString,
            ),
            "RemovePod": grpc.unary_unary_rpc_method_handler(
                self._remove_pod,
                request_deserializer=svc_pb.RemovePodRequest.FromString,
                response_serializer=svc_pb.RemovePodResponse.SerializeToString,
            ),
            "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                self._list_and_watch,
                request_deserializer=svc_pb.Empty.FromString,
                response_serializer=None,  # already bytes
            ),
        }
        if self._advice is not None:
            handlers["GetAdvice"] = grpc.unary_unary_rpc_method_handler(
                self._get_advice,
                request_deserializer=cpu_pb.GetAdviceRequest.FromString,
                response_serializer=None,  # already bytes
            )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("cpuadvisor.CPUAdvisor", handlers),)
        )
        self._bound = bind_owner_only(server, self.path)
        server.start()
        self._server = server

    def stop(self, grace_s: float = 0.5) -> None:
        """Stop serving (streams are cancelled) and remove the socket."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace_s).wait()
        bound, self._bound = self._bound, None
        if bound is not None:
            remove_socket(bound)
