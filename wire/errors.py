"""Which gRPC status each error answers, in one place (DESIGN.md "Time, config, errors").

kubelet treats every error alike (admission fails, or the call is retried next pass, wire.md
§9), so the codes are for people and for the metrics: they say whose fault a failure is.

Every error qrmd raises on purpose says what it is, as an :class:`~policy.errors.ErrorKind`
(``PolicyError.kind``, ``ActorError.kind``, ``NotReady.kind``), set where it is raised; this
module answers each kind with one status, from :data:`STATUS_BY_KIND`:

================  ========================  ===============================================
kind              status                    e.g.
================  ========================  ===============================================
``INVALID``       ``INVALID_ARGUMENT``      ``RequestError``, ``QoSError`` (a malformed
                                            request, an unknown or unserved QoS level)
``NOT_FOUND``     ``NOT_FOUND``             ``UnknownContainerError`` (a query about a
                                            container not held)
``SHORTAGE``      ``RESOURCE_EXHAUSTED``    ``SelectionError``; an ``AllocationError`` for
                                            no pooled CPUs, an empty reclaim pool or hinted
                                            NUMA nodes too small
``REFUSED``       ``FAILED_PRECONDITION``   other policy refusals: no NUMA binding for a
                                            dedicated container, a nil or empty hint, a
                                            multi-NUMA hint for a non-exclusive container,
                                            a failed pool adjustment; sys-advisor refusing
                                            an Allocate's or RemovePod's call
                                            (``AdvisorRefusedError``)
``UNAVAILABLE``   ``UNAVAILABLE``           ``AllocatorUnavailable``, ``CommitRefused``
                                            (nothing persisted), ``CommitOutcomeUnknown``
                                            (perhaps persisted), ``BalancerUnavailable``,
                                            ``NotReady``, the ask timing out, the actor
                                            stopped
``INTERNAL``      ``INTERNAL``              ``ReplayError``; anything that carries no kind
                                            (a bug), logged with its traceback
================  ========================  ===============================================

pykka's own exceptions (``pykka.Timeout``, ``pykka.ActorDeadError``) cannot carry a kind;
:data:`FOREIGN_KINDS` says what they are. The message is never read to choose the status.

``UNAVAILABLE`` asks the caller to retry and, in gRPC's own words, does not promise that the
call had no effect ("it is not always safe to retry non-idempotent operations"), so it is also
the honest answer to a commit whose outcome is unknown (the store's journal could not cut a
failed write back: the record may be replayed at the next start, DESIGN.md, the commit
protocol step 3). The retry is safe because every kubelet call is idempotent: a re-sent
Allocate of a container the state already holds answers the stored allocation (spec
cpu-policy §7.1 step 8). ``DEADLINE_EXCEEDED`` would say the same of an effect, but names a
deadline that did not pass, and the policy's codes say the call was judged and refused.

The choice of ``FAILED_PRECONDITION`` for the policy's refusals is qrmd's (the reference
answers every error as ``Unknown``): the request is well formed, but this node's state or the
topology manager's hint does not allow it, and retrying the same call will not help.

The message is the error's own text; :func:`status_for` puts the RPC's name in front and,
unless the error already names its pod and container (``PolicyError.subject``), the
request's pod and container as :func:`policy.errors.describe_container` writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import grpc
import pykka

from actors.errors import ActorError
from policy.errors import ErrorKind, PolicyError

__all__ = [
    "FOREIGN_KINDS",
    "STATUS_BY_KIND",
    "NotReady",
    "Status",
    "code_for",
    "kind_of",
    "status_for",
]

#: The one table: what each kind of error answers.
STATUS_BY_KIND: Mapping[ErrorKind, grpc.StatusCode] = MappingProxyType(
    {
        ErrorKind.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
        ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
        ErrorKind.SHORTAGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
        ErrorKind.REFUSED: grpc.StatusCode.FAILED_PRECONDITION,
        ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
        ErrorKind.INTERNAL: grpc.StatusCode.INTERNAL,
    }
)

#: What the exceptions of the libraries qrmd asks through are, as they cannot say it: the
#: ask timed out, or the actor asked has stopped (the call may be retried).
FOREIGN_KINDS: tuple[tuple[type[BaseException], ErrorKind], ...] = (
    (pykka.Timeout, ErrorKind.UNAVAILABLE),
    (pykka.ActorDeadError, ErrorKind.UNAVAILABLE),
)


class NotReady(RuntimeError):  # noqa: N818 (a state, like AllocatorUnavailable)
    """qrmd is starting, stopping or recovering an actor: the call may be retried.

    Also what a plugin socket raises when asked to serve before its actors are ready
    (``wire.plugin_socket``), hence a ``RuntimeError``.
    """

    kind: ClassVar[ErrorKind] = ErrorKind.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class Status:
    """A gRPC status to answer with."""

    code: grpc.StatusCode
    message: str


def kind_of(error: BaseException) -> ErrorKind:
    """What ``error`` is: its own kind, a library exception's, or ``INTERNAL`` (a bug).

    Args:
        error: what the actor's ask (or the conversion) raised.

    Returns:
        The error's kind.
    """
    if isinstance(error, PolicyError | ActorError | NotReady):
        return error.kind
    for foreign, kind in FOREIGN_KINDS:
        if isinstance(error, foreign):
            return kind
    return ErrorKind.INTERNAL


def code_for(error: BaseException) -> grpc.StatusCode:
    """The one status code ``error`` answers (see the module table).

    Args:
        error: what the actor's ask (or the conversion) raised.

    Returns:
        The status code.
    """
    return STATUS_BY_KIND[kind_of(error)]


def status_for(error: BaseException, rpc: str, subject: str = "") -> Status:
    """The status and message to answer ``rpc`` with after ``error``.

    Args:
        error: what was raised.
        rpc: the RPC's method name, e.g. ``Allocate``.
        subject: who the request was about (``describe_container``), added unless the error
            names its own (``PolicyError.subject``).

    Returns:
        ``Status(code, "<rpc>: <subject>: <reason>")``.
    """
    kind = kind_of(error)
    reason = str(error) or type(error).__name__
    if kind is ErrorKind.INTERNAL:
        reason = f"internal error ({type(error).__name__}): {reason}"
    elif isinstance(error, pykka.Timeout):
        reason = f"no answer from the allocator in time ({reason})"
    names_its_subject = isinstance(error, PolicyError) and bool(error.subject)
    if subject and not names_its_subject:
        reason = f"{subject}: {reason}"
    return Status(STATUS_BY_KIND[kind], f"{rpc}: {reason}")
