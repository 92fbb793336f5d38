"""qrmd's client of sys-advisor's ``CPUAdvisor`` (cpu-policy §11.1, §11.3, §11.5; wire.md §6.1).

``GrpcAdvisorClient`` implements the ``AdvisorClient`` port over ``unix:<--cpu-advisor-socket>``
with plain values in and out. Each failure is one of the port's two errors:

==============================================================  =================
what happened                                                   raised
==============================================================  =================
no answer within the call's timeout (``DEADLINE_EXCEEDED``),     ``AdvisorSick``
``UNAVAILABLE`` (nobody listens, the connection dropped),
``CANCELLED`` by the channel closing, a dial that times out,
the stream ending (even cleanly: the reference treats every
end of ListAndWatch as a failure)
any other status from an advisor that answered                  ``AdvisorRefused``
(``INVALID_ARGUMENT``, ``UNKNOWN``, ``INTERNAL``, ...)
==============================================================  =================

A v0.5.3 advisor answers Katalyst v0.5.47's ``GetAdvice`` with ``UNIMPLEMENTED``: that is an
``AdvisorRefused`` with that code, which the link takes as "fall back to ListAndWatch".

At ``--reference-version v0.5.47`` the client sends AddContainer's fields 11-12 and reads the
responses' ``extra_entries``; at v0.5.3 it does neither, so its bytes are v0.5.3's.

No client keepalive pings: Go servers answer frequent pings with GOAWAY (wire.md §1.2).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import grpc

from actors.ports.advisor import AdvisorCallError, AdvisorRefused, AdvisorSick
from policy.cpu.advisor.advice import AdviceReply, AdviceRequest
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from wire.advisor_convert import (
    AdvisorWireError,
    advice_reply_from_bytes,
    advice_request_to_proto,
    metadata_to_proto,
    response_from_bytes,
)
from wire.gen import advisorsvc_pb2 as svc_pb
from wire.sockets import dial

__all__ = ["SICK_CODES", "GrpcAdvisorClient", "GrpcResponseStream", "call_error"]

#: Status codes that mean the advisor did not answer, "sick": the link backs off and kubelet's
#: calls go on without it (DESIGN.md, AdvisorLink).
SICK_CODES = frozenset(
    {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}
)

_SERVICE = "/cpuadvisor.CPUAdvisor/"


def call_error(method: str, err: grpc.RpcError) -> AdvisorCallError:
    """The port's error for a failed call: sick or refused, by status code."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else None) or str(code)
    kind = AdvisorSick if code in SICK_CODES else AdvisorRefused
    return kind(method, code.name, details)


class GrpcResponseStream:
    """An open ListAndWatch call; iterating yields responses (see ``ResponseStream``)."""

    def __init__(self, call: Any, *, extra_entries: bool = False) -> None:
        self._call = call
        self._extra_entries = extra_entries
        self._cancelled = threading.Event()

    def __iter__(self) -> Iterator[AdvisorResponse]:
        try:
            for raw in self._call:
                try:
                    yield response_from_bytes(raw, extra_entries=self._extra_entries)
                except AdvisorWireError as err:
                    # A message we cannot read: the stream is no use any more.
                    self._call.cancel()
                    raise AdvisorRefused("ListAndWatch", "INTERNAL", str(err)) from err
        except grpc.RpcError as err:
            if self._cancelled.is_set():
                return
            raise call_error("ListAndWatch", err) from None
        if not self._cancelled.is_set():
            raise AdvisorSick("ListAndWatch", "OK", "the advisor ended the stream")

    def cancel(self) -> None:
        self._cancelled.set()
        self._call.cancel()


class GrpcAdvisorClient:
    """One channel to sys-advisor's socket (``AdvisorClient``).

    Args:
        socket_path: ``--cpu-advisor-socket``, absolute.
        at_v0_5_47: speak Katalyst v0.5.47's protocol (see the module docstring).
    """

    def __init__(self, socket_path: str, *, at_v0_5_47: bool = False) -> None:
        self.socket_path = socket_path
        self.at_v0_5_47 = at_v0_5_47
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None

    def _open(self) -> grpc.Channel:
        with self._lock:
            if self._channel is None:
                # No keepalive options: see the module docstring.
                self._channel = grpc.insecure_channel(f"unix:{self.socket_path}")
            return self._channel

    def connect(self, timeout_s: float) -> None:
        """Wait for the socket to accept a connection (the reference's blocking dial).

        Raises:
            AdvisorSick: not within ``timeout_s``.
        """
        # A fresh channel each attempt, as the reference dials a new connection: an old one
        # may sit in gRPC's reconnect back-off and fail the first call although the
        # advisor is back.
        self.close()
        if not dial(self.socket_path, timeout_s):
            raise AdvisorSick(
                "dial", "TIMEOUT", f"no connection to {self.socket_path} within {timeout_s} s"
            )
        self._open()

    def _unary(self, method: str, request: Any, reply_type: Any, timeout_s: float) -> Any:
        call = self._open().unary_unary(
            _SERVICE + method,
            request_serializer=type(request).SerializeToString,
            response_deserializer=None if reply_type is None else reply_type.FromString,
        )
        try:
            return call(request, timeout=timeout_s)
        except grpc.RpcError as err:
            raise call_error(method, err) from None

    def add_container(self, metadata: ContainerMetadata, timeout_s: float) -> None:
        """``AddContainer`` (§7.2, §11.3).

        Raises:
            AdvisorSick, AdvisorRefused: see the module docstring.
            AdvisorRefused: also when the container type has no enum value (nothing sent).
        """
        try:
            request = metadata_to_proto(metadata, at_v0_5_47=self.at_v0_5_47)
        except AdvisorWireError as err:
            raise AdvisorRefused("AddContainer", "INVALID_ARGUMENT", str(err)) from err
        self._unary("AddContainer", request, svc_pb.AddContainerResponse, timeout_s)

    def remove_pod(self, pod_uid: str, timeout_s: float) -> None:
        """``RemovePod`` (§10.6).

        Raises:
            AdvisorSick, AdvisorRefused: see the module docstring.
        """
        request = svc_pb.RemovePodRequest(pod_uid=pod_uid)
        self._unary("RemovePod", request, svc_pb.RemovePodResponse, timeout_s)

    def get_advice(self, request: AdviceRequest, timeout_s: float) -> AdviceReply:
        """Katalyst v0.5.47's ``GetAdvice``; the reply is decoded from its bytes (nil map
        values kept, ``extra_entries`` read).

        Raises:
            AdvisorSick, AdvisorRefused: see the module docstring (``UNIMPLEMENTED`` from a
                v0.5.3 advisor is ``AdvisorRefused``).
            AdvisorRefused: also for a container type with no enum value (nothing sent) or
                a reply that does not decode (code ``INTERNAL``).
        """
        try:
            message = advice_request_to_proto(request)
        except AdvisorWireError as err:
            raise AdvisorRefused("GetAdvice", "INVALID_ARGUMENT", str(err)) from err
        raw = self._unary("GetAdvice", message, None, timeout_s)
        try:
            return advice_reply_from_bytes(raw)
        except AdvisorWireError as err:
            raise AdvisorRefused("GetAdvice", "INTERNAL", str(err)) from err

    def list_and_watch(self) -> GrpcResponseStream:
        """Open ``ListAndWatch`` (no deadline: the stream lives until it breaks or is
        cancelled); the responses are decoded from their bytes (nil map values kept)."""
        call = self._open().unary_stream(
            _SERVICE + "ListAndWatch",
            request_serializer=svc_pb.Empty.SerializeToString,
            response_deserializer=None,  # raw bytes: see wire.advisor_convert
        )
        return GrpcResponseStream(call(svc_pb.Empty()), extra_entries=self.at_v0_5_47)

    def close(self) -> None:
        """Close the channel; calls in flight end as ``CANCELLED`` (sick)."""
        with self._lock:
            channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
