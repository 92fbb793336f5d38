"""How the advisor link talks to sys-advisor (cpu-policy §11.1–§11.5; wire.md §6, §10).

``wire.advisor_client.GrpcAdvisorClient`` implements :class:`AdvisorClient` over the unix socket
``--cpu-advisor-socket``; ``wire.advisor_checkpoint.CheckpointProbe`` implements
:class:`CheckpointProbe` on qrmd's own ``--cpu-plugin-socket``. Only plain values cross: the
metadata of ``policy.cpu.advisor.push``, the responses of ``policy.cpu.advisor.response``.

Two ways a call fails, kept apart because qrmd answers them differently — a deliberate
deviation from the reference, which fails kubelet's call for both (DESIGN.md, AdvisorLink:
kubelet's calls never wait on a link that is not watching):

* :class:`AdvisorSick` — the advisor did not answer: no answer within the timeout, UNAVAILABLE,
  the connection or the stream gone. The link backs off and kubelet's calls proceed without
  it; every stored container is pushed at the next connect.
* :class:`AdvisorRefused` — the advisor answered with any other error status. The call failed
  for this container (or pod) only; the link stays as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Protocol, runtime_checkable

from actors.errors import ActorError
from policy.cpu.advisor.advice import AdviceReply, AdviceRequest
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from policy.errors import ErrorKind

__all__ = [
    "AdviceClient",
    "AdvisorCallError",
    "AdvisorClient",
    "AdvisorRefused",
    "AdvisorSick",
    "CheckpointProbe",
    "ResponseStream",
]


class AdvisorCallError(ActorError):
    """A call to sys-advisor failed.

    Attributes:
        method: ``AddContainer``, ``RemovePod``, ``ListAndWatch`` or ``dial``.
        code: the gRPC status code's name (``UNAVAILABLE``), or ``TIMEOUT`` for a dial.
        details: the status message.
    """

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"{method} to sys-advisor failed: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details


class AdvisorSick(AdvisorCallError):  # noqa: N818 - an outcome, like AdvisorRefused
    """The advisor did not answer (timeout, UNAVAILABLE, connection or stream gone)."""

    kind: ClassVar[ErrorKind] = ErrorKind.UNAVAILABLE


class AdvisorRefused(AdvisorCallError):  # noqa: N818 - the advisor's answer, not our error
    """The advisor answered the call with an error status other than UNAVAILABLE."""

    kind: ClassVar[ErrorKind] = ErrorKind.REFUSED


@runtime_checkable
class ResponseStream(Protocol):
    """An open ListAndWatch stream: iterate for responses, ``cancel`` to end it.

    Iteration blocks until the next response; it ends by raising ``AdvisorSick`` (the stream
    broke or the advisor went away) or ``AdvisorRefused`` (it ended with another status), or
    stops after ``cancel``. A clean end of the stream by the server is ``AdvisorSick`` too: the
    reference treats every end of the stream as a failure (§11.5).
    """

    def __iter__(self) -> Iterator[AdvisorResponse]: ...

    def cancel(self) -> None:
        """End the stream from this side; the iterating thread stops soon after."""
        ...


@runtime_checkable
class AdvisorClient(Protocol):
    """sys-advisor's ``CPUAdvisor`` service (wire.md §6.1), one connection."""

    def connect(self, timeout_s: float) -> None:
        """Wait until the advisor's socket accepts a connection.

        Raises:
            AdvisorSick: not within ``timeout_s``.
        """
        ...

    def add_container(self, metadata: ContainerMetadata, timeout_s: float) -> None:
        """``AddContainer``.

        Raises:
            AdvisorSick, AdvisorRefused: see the module docstring.
        """
        ...

    def remove_pod(self, pod_uid: str, timeout_s: float) -> None:
        """``RemovePod``.

        Raises:
            AdvisorSick, AdvisorRefused: see the module docstring.
        """
        ...

    def list_and_watch(self) -> ResponseStream:
        """Open ``ListAndWatch``; failures surface while iterating the stream."""
        ...

    def close(self) -> None:
        """Close the connection; calls in flight fail as ``AdvisorSick``."""
        ...


@runtime_checkable
class AdviceClient(Protocol):
    """Katalyst v0.5.47's ``GetAdvice`` on sys-advisor's ``CPUAdvisor`` service."""

    def get_advice(self, request: AdviceRequest, timeout_s: float) -> AdviceReply:
        """``GetAdvice``: the state in, the calculation result out.

        Raises:
            AdvisorSick, AdvisorRefused: see the module docstring; an advisor without the
                RPC refuses it with code ``UNIMPLEMENTED``.
        """
        ...


@runtime_checkable
class CheckpointProbe(Protocol):
    """Confirms qrmd's own ``CPUPlugin`` socket answers (the reference's self-dial, §11.2)."""

    def check(self, timeout_s: float) -> None:
        """Call ``GetCheckpoint`` on the plugin socket.

        Raises:
            AdvisorSick: no answer within ``timeout_s`` (method ``GetCheckpoint``).
        """
        ...
