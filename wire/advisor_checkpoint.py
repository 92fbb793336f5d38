"""qrmd's ``CPUPlugin`` server on ``--cpu-plugin-socket``: sys-advisor reads GetCheckpoint
(cpu-policy §11.2 step 3, §11.4; wire.md §6.1, §10.1).

* :class:`CheckpointServer` answers ``GetCheckpoint`` from the latest durable CPU state (a
  callable the daemon gives it: the StateStore's latest snapshot), through
  ``policy.cpu.advisor.checkpoint``. The socket: directory created, owner-only (0600) before it
  listens (``wire.sockets``). A file already at the path is removed only when nothing serves
  it — a second qrmd (or a sys-advisor test double) still listening there keeps its socket and
  this server refuses to start — since the reference's unconditional removal would cut a live
  peer off. After starting it calls itself once, as the reference's 5 s self-dial.
* :class:`GrpcCheckpointProbe` implements the ``CheckpointProbe`` port: the advisor link's
  dial-check of that socket before each attempt.
* :func:`read_checkpoint` is sys-advisor's side of the call (the simulator, tests).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from actors.ports.advisor import AdvisorSick
from policy.cpu.advisor.checkpoint import CheckpointEntry, checkpoint_entries
from policy.state.cpu_state import CPUState
from wire.advisor_convert import checkpoint_from_proto, checkpoint_to_proto
from wire.gen import cpuadvisor_pb2 as cpu_pb
from wire.sockets import (
    BoundSocket,
    ServingError,
    bind_owner_only,
    check_socket_path,
    remove_socket,
)

__all__ = [
    "SELF_DIAL_TIMEOUT_S",
    "CheckpointServer",
    "GrpcCheckpointProbe",
    "is_served",
    "read_checkpoint",
]

logger = logging.getLogger(__name__)

SELF_DIAL_TIMEOUT_S = 5.0
_METHOD = "/cpuadvisor.CPUPlugin/GetCheckpoint"


def is_served(path: Path) -> bool:
    """Whether something accepts connections on the unix socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


class CheckpointServer:
    """The ``CPUPlugin`` service on one socket; ``start`` once, then ``stop``.

    Args:
        socket_path: ``--cpu-plugin-socket``.
        latest_cpu: the latest durable CPU state.
        max_workers: handler threads (sys-advisor calls every few seconds).
        at_v0_5_47: answer as Katalyst v0.5.47 (``policy.cpu.advisor.checkpoint``).
    """

    def __init__(
        self,
        socket_path: str,
        latest_cpu: Callable[[], CPUState],
        max_workers: int = 2,
        *,
        at_v0_5_47: bool = False,
    ) -> None:
        self.path = check_socket_path(Path(socket_path))
        self._latest_cpu = latest_cpu
        self._at_v0_5_47 = at_v0_5_47
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._bound: BoundSocket | None = None

    def _get_checkpoint(self, request: cpu_pb.GetCheckpointRequest, context: Any) -> Any:
        try:
            entries = checkpoint_entries(self._latest_cpu(), at_v0_5_47=self._at_v0_5_47)
            return checkpoint_to_proto(entries)
        except Exception as err:  # a bug, or no snapshot yet: say so rather than hang
            logger.exception("GetCheckpoint failed")
            context.abort(grpc.StatusCode.INTERNAL, f"GetCheckpoint failed: {err}")

    def start(self) -> None:
        """Create the socket and serve, then check that it answers.

        Raises:
            ServingError: something already serves the path, the socket cannot be bound, or
                the server does not answer its own GetCheckpoint within 5 s.
            SocketPathError: the path is too long, or a directory is in the way.
        """
        if self._server is not None:
            raise ServingError(f"the checkpoint server on {self.path} is already started")
        if self.path.exists() and is_served(self.path):
            raise ServingError(
                f"cannot serve GetCheckpoint on {str(self.path)!r}: another process serves "
                "that socket; stop it or choose another --cpu-plugin-socket"
            )
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers))
        handler = grpc.unary_unary_rpc_method_handler(
            self._get_checkpoint,
            request_deserializer=cpu_pb.GetCheckpointRequest.FromString,
            response_serializer=cpu_pb.GetCheckpointResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "cpuadvisor.CPUPlugin", {"GetCheckpoint": handler}
                ),
            )
        )
        self._bound = bind_owner_only(server, self.path)
        server.start()
        self._server = server
        try:
            GrpcCheckpointProbe(str(self.path)).check(SELF_DIAL_TIMEOUT_S)
        except AdvisorSick as err:
            self.stop()
            raise ServingError(f"the checkpoint server does not answer itself: {err}") from err
        logger.info("serving GetCheckpoint for sys-advisor on %s", self.path)

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving and remove the socket if it is still ours; a second call does nothing."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace_s).wait()
        bound, self._bound = self._bound, None
        if bound is not None:
            remove_socket(bound)


def _call(socket_path: str, timeout_s: float) -> cpu_pb.GetCheckpointResponse:
    with grpc.insecure_channel(f"unix:{socket_path}") as channel:
        call = channel.unary_unary(
            _METHOD,
            request_serializer=cpu_pb.GetCheckpointRequest.SerializeToString,
            response_deserializer=cpu_pb.GetCheckpointResponse.FromString,
        )
        reply: cpu_pb.GetCheckpointResponse = call(
            cpu_pb.GetCheckpointRequest(), timeout=timeout_s, wait_for_ready=True
        )
        return reply


class GrpcCheckpointProbe:
    """``CheckpointProbe``: GetCheckpoint on qrmd's own plugin socket."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path

    def check(self, timeout_s: float) -> None:
        """Raises ``AdvisorSick`` (method ``GetCheckpoint``) when it does not answer."""
        try:
            _call(self.socket_path, timeout_s)
        except grpc.RpcError as err:
            code = err.code().name if hasattr(err, "code") else "UNKNOWN"
            details = err.details() if hasattr(err, "details") else str(err)
            raise AdvisorSick("GetCheckpoint", code, f"{self.socket_path}: {details}") from None


def read_checkpoint(
    socket_path: str, timeout_s: float = 5.0
) -> dict[str, dict[str, CheckpointEntry]]:
    """sys-advisor's GetCheckpoint call: the plugin's entries as plain values.

    Raises:
        grpc.RpcError: the call failed.
        AdvisorWireError: the reply does not parse.
    """
    return checkpoint_from_proto(_call(socket_path, timeout_s))
