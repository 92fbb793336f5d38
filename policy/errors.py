"""The root of the policy package's errors, what kind each one is, and who it is about.

Every error the pure domain raises on purpose derives from ``PolicyError``, so the layers
above can tell a refused decision (bad input, not enough CPUs) from a bug. It is a
``ValueError`` because every such refusal is about the value the caller passed in.

**Kinds.** Each error says what it is with an :class:`ErrorKind`: a class attribute ``kind``
that each subclass sets, and that one raise may override (``kind=``) where the same class
means two things: an ``AllocationError`` is a refusal, but "results can't meet cpus request"
is a shortage. An error that wraps another to add the reference's context ("generatePools...
failed with error: %v") is raised with the wrapped error's kind, so the kind of the outermost
error is the kind of what went wrong. The wire layer answers each kind with one gRPC status
(``wire.errors``); the actors' errors use the same kinds (``actors.errors``). No layer reads
an error's message to learn what it is.

**Who.** :func:`describe_container` is the one place that writes "pod ns/name (uid u),
container c". An error whose message starts with that description is raised with it as
``subject=``; the wire then knows not to name the container a second time.

Subclasses live next to the rule that raises them (``policy.cpu.request.RequestError``,
``policy.topology.selection.SelectionError``, ``StateError``, ``policy.cpu.errors``, ...).
"""

from __future__ import annotations

import enum

from policy.names import shown

__all__ = ["CodecError", "ErrorKind", "PolicyError", "StateError", "describe_container"]


class ErrorKind(enum.Enum):
    """What an error is, as the caller needs to know it: whose fault, and whether to retry."""

    #: The input is malformed: a request field, a QoS annotation, a configuration value, an
    #: encoded record. Retrying the same input fails the same way.
    INVALID = "invalid"
    #: The input names something the state does not hold (a query about an unknown container).
    NOT_FOUND = "not found"
    #: Not enough CPUs: the request is well formed, but the free CPUs cannot satisfy it.
    SHORTAGE = "shortage"
    #: The request is well formed, but this node's state or the topology manager's hint does
    #: not allow it (no NUMA binding for a dedicated container, a nil hint, a pool adjustment
    #: that fails); retrying the same call will not help.
    REFUSED = "refused"
    #: The answer cannot be given now (an actor starting or stopped, a commit not durable, a
    #: sample not readable); the same call may succeed later. Policy errors are never this.
    UNAVAILABLE = "unavailable"
    #: A bug or damaged data of qrmd's own; nobody else can fix it by retrying.
    INTERNAL = "internal"


def describe_container(
    pod_uid: str,
    container_name: str | None = None,
    *,
    pod_namespace: str | None = None,
    pod_name: str | None = None,
) -> str:
    """Name a pod and, when known, its container, for an error message.

    Args:
        pod_uid: the pod's UID (possibly empty: the message then shows that it is).
        container_name: the container's name; ``None`` when the request names no container
            (RemovePod).
        pod_namespace: the pod's namespace; ``None`` with ``pod_name`` when the request
            carries neither (RemovePod, GetTopologyAwareResources).
        pod_name: the pod's name.

    Returns:
        ``pod <namespace>/<name> (uid <uid>), container <name>``; without namespace and name
        ``pod (uid <uid>)``, and without a container name no ``, container`` part.
    """
    # Each name is cut to 80 characters (policy.names.shown): a request refused for a giant
    # name must not echo it into the status message, which grpc limits to 16 KiB.
    uid = shown(pod_uid)
    if pod_namespace is None and pod_name is None:
        pod = f"pod (uid {uid})"
    else:
        pod = f"pod {shown(pod_namespace or '')}/{shown(pod_name or '')} (uid {uid})"
    return pod if container_name is None else f"{pod}, container {shown(container_name)}"


class PolicyError(ValueError):
    """A policy decision refused because of its input; the message names the numbers.

    A policy call that raises leaves every value it was given unchanged: decisions are pure,
    so nothing needs undoing.

    Attributes:
        kind: what the error is; the class's, unless the raise gave another.
        subject: the pod and container (:func:`describe_container`) the message starts
            with, or ``""`` when the message names none.
    """

    kind: ErrorKind = ErrorKind.REFUSED

    def __init__(
        self, reason: str = "", *, kind: ErrorKind | None = None, subject: str = ""
    ) -> None:
        """Build the message once: ``"<subject>: <reason>"``, or ``reason`` alone.

        Args:
            reason: what is wrong, with the numbers (the reference's text where it has one).
            kind: overrides the class's kind for this error (a shortage among refusals, or
                the kind of the error this one wraps).
            subject: who the request was about, from :func:`describe_container`.
        """
        super().__init__(f"{subject}: {reason}" if subject else reason)
        if kind is not None:
            self.kind = kind
        self.subject = subject


class StateError(PolicyError):
    """An event that does not fit the state (unknown container, missing pool, bad cpuset).

    Applying it produces no state: the StateStore then refuses the commit, so a wrong decision
    never reaches the journal (spec cpu-policy §5). Raised inside a decision, it refuses the
    request: this state does not allow the change.
    """

    kind = ErrorKind.REFUSED


class CodecError(StateError):
    """An encoded event or state that is not well formed; the message names the field."""

    kind = ErrorKind.INVALID
