"""Which gRPC status each error answers, in one place (DESIGN.md "Time, config, errors").

kubelet treats every error alike (admission fails, or the call is retried next pass, wire.md
§9), so the codes are for people and for the metrics: they say whose fault a failure is.

==============================================================  ======================
error                                                           status
==============================================================  ======================
``UnknownContainerError`` (a query about a container not held)  ``NOT_FOUND``
``RequestError`` and its ``QoSError`` (malformed request,       ``INVALID_ARGUMENT``
unknown or unserved QoS level)
``SelectionError``; ``AllocationError``/``HintError`` whose      ``RESOURCE_EXHAUSTED``
reason is a shortage ("not enough", "results can't meet",
"get empty pooledCPUs", an empty reclaim pool)
any other ``PolicyError`` (no NUMA binding for a dedicated       ``FAILED_PRECONDITION``
container, a nil or empty hint, a multi-NUMA hint for a
non-exclusive container, a failed pool adjustment)
``AllocatorUnavailable``, ``BalancerUnavailable``,               ``UNAVAILABLE``
``CommitRefused``, the ask timing out (``pykka.Timeout``), the
actor stopped (``pykka.ActorDeadError``), qrmd not ready
anything else (a bug)                                           ``INTERNAL``
==============================================================  ======================

The choice of ``FAILED_PRECONDITION`` for the remaining policy refusals is qrmd's (the reference
answers every error as ``Unknown``): the request is well formed, but this node's state or the
topology manager's hint does not allow it, and retrying the same call will not help.

A policy error wrapped by another (``AllocationError`` raised ``from`` a ``SelectionError`` or
``QoSError``) is classified by the most specific error on its ``__cause__`` chain. The message
is the error's own text with the reason; :func:`status_for` prefixes the RPC's name and the
request's pod (namespace, name, uid) and container, unless the text already holds exactly that
description (the policy's ``describe_container``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pykka

from actors.allocator_messages import AllocatorUnavailable
from actors.balancer_messages import BalancerUnavailable
from actors.store_messages import CommitRefused
from policy.cpu.allocate import AllocationError
from policy.cpu.hints import HintError
from policy.cpu.request import RequestError
from policy.cpu.topology_aware import UnknownContainerError
from policy.errors import PolicyError
from policy.topology.selection import SelectionError

__all__ = ["NotReady", "Status", "status_for"]

#: Reasons that mean "not enough CPUs" in the policy's (the reference's) messages.
_SHORTAGE_REASONS = (
    "not enough",
    "results can't meet",
    "get empty pooledCPUs",
    "is not empty",  # sic: the reference's text for an empty reclaim pool (cpu-policy §7.4)
)


class NotReady(RuntimeError):  # noqa: N818 (a state, like AllocatorUnavailable)
    """qrmd is starting, stopping or recovering an actor: the call may be retried.

    Also what a plugin socket raises when asked to serve before its actors are ready
    (``wire.plugin_socket``), hence a ``RuntimeError``.
    """


_UNAVAILABLE = (
    NotReady,
    AllocatorUnavailable,
    BalancerUnavailable,
    CommitRefused,
    pykka.Timeout,
    pykka.ActorDeadError,
)


@dataclass(frozen=True, slots=True)
class Status:
    """A gRPC status to answer with."""

    code: grpc.StatusCode
    message: str


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and its causes, outermost first (bounded, in case of a cycle)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def _is_shortage(error: PolicyError) -> bool:
    if isinstance(error, SelectionError):
        return True
    if isinstance(error, AllocationError | HintError):
        text = str(error)
        return any(reason in text for reason in _SHORTAGE_REASONS)
    return False


def code_for(error: BaseException) -> grpc.StatusCode:
    """The one status code ``error`` answers (see the module table).

    Args:
        error: what the Allocator's ask (or the conversion) raised.

    Returns:
        The status code.
    """
    if isinstance(error, _UNAVAILABLE):
        return grpc.StatusCode.UNAVAILABLE
    if not isinstance(error, PolicyError):
        return grpc.StatusCode.INTERNAL
    chain = [e for e in _chain(error) if isinstance(e, PolicyError)]
    if any(isinstance(e, UnknownContainerError) for e in chain):
        return grpc.StatusCode.NOT_FOUND
    if any(isinstance(e, RequestError) for e in chain):
        return grpc.StatusCode.INVALID_ARGUMENT
    if any(_is_shortage(e) for e in chain):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    return grpc.StatusCode.FAILED_PRECONDITION


def status_for(error: BaseException, rpc: str, subject: str = "") -> Status:
    """The status and message to answer ``rpc`` with after ``error``.

    Args:
        error: what was raised.
        rpc: the RPC's method name, e.g. ``Allocate``.
        subject: who the request was about (``pod ns/name (uid u), container c``), added
            unless the error's text already holds it (the policy's ``describe_container``).

    Returns:
        ``Status(code, "<rpc>: <subject>: <reason>")``.
    """
    code = code_for(error)
    reason = str(error) or type(error).__name__
    if code is grpc.StatusCode.INTERNAL:
        reason = f"internal error ({type(error).__name__}): {reason}"
    elif code is grpc.StatusCode.UNAVAILABLE and isinstance(error, pykka.Timeout):
        reason = f"no answer from the allocator in time ({reason})"
    # An actor's message may name the RPC already (the MemoryBalancer's do).
    reason = reason.removeprefix(f"{rpc}: ")
    if subject and subject not in reason:
        reason = f"{subject}: {reason}"
    return Status(code, f"{rpc}: {reason}")
