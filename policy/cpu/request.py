"""A kubelet resource request, its validation and its quantity (spec cpu-policy §4.1, §4.2).

``ResourceRequest`` is the domain form of the QRM ``ResourceRequest`` message that both
``GetTopologyHints`` and ``Allocate`` receive (wire.md §4.3); the wire layer builds it from
protobuf, and nothing in ``policy/`` sees protobuf.

The quantity rule (§4.2): ``resource_requests`` holds exactly one resource name; the name
decides the unit, and the request becomes a whole number of CPUs (``req_int``, which drives
all counting) and the exact value (``req_float``, stored as ``request_quantity``):

====================================================  ===========  ======================
key                                                   req_float    req_int
====================================================  ===========  ======================
``cpu``                                               v            ``ceil(v)``
``resource.katalyst.kubewharf.io/reclaimed_millicpu`` v / 1000     ``ceil(v / 1000)``
``memory``, reclaimed memory, net bandwidth           v            ``ceil(v)``
anything else                                         error        error
====================================================  ===========  ======================

Beyond the reference, qrmd refuses values that no honest kubelet sends, because a clear error
is better than a silent clamp (DESIGN.md "Time, config, errors": bad input gets a clear error
and changes nothing): negative, NaN, infinite and absurd
quantities (more than :data:`MAX_CPU_REQUEST` CPUs, or more than :data:`MAX_SCALAR_REQUEST`
units of a byte or bandwidth resource), an empty pod UID or container name, a negative
container index, and a hint naming a NUMA node twice or a negative NUMA node. The reference
instead clamps a negative request to ``max(ceil(v), 0)`` and accepts the rest as they come.
Every string is bounded by Kubernetes' own limits (``policy.names``: ``pod_uid`` 128 bytes,
``pod_name`` 253, …; labels and annotations 256 KiB together), so no request can grow the
journal by more than a pod could; an error quotes at most 80 characters of a name.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from policy import names
from policy.errors import ErrorKind, PolicyError, describe_container
from policy.state.identity import ContainerIdentity, ContainerType

__all__ = [
    "MAX_CPU_REQUEST",
    "MAX_SCALAR_REQUEST",
    "RESOURCE_CPU",
    "RESOURCE_MEMORY",
    "RESOURCE_NET_BANDWIDTH",
    "RESOURCE_RECLAIMED_MEMORY",
    "RESOURCE_RECLAIMED_MILLICPU",
    "ContainerIdentity",
    "ContainerType",
    "Quantity",
    "RequestError",
    "ResourceRequest",
    "TopologyHint",
    "parse_quantity",
    "validate_request",
]

RESOURCE_CPU = "cpu"
RESOURCE_RECLAIMED_MILLICPU = "resource.katalyst.kubewharf.io/reclaimed_millicpu"
RESOURCE_MEMORY = "memory"
RESOURCE_RECLAIMED_MEMORY = "resource.katalyst.kubewharf.io/reclaimed_memory"
RESOURCE_NET_BANDWIDTH = "resource.katalyst.kubewharf.io/net_bandwidth"

#: Largest CPU request accepted, in CPUs: far beyond any machine, small enough that a typo
#: (a millicore count sent as cores, a byte count sent as CPUs) is caught.
MAX_CPU_REQUEST = 1_000_000

#: Largest request of a byte or bandwidth resource: beyond 2**53 a float no longer counts in
#: whole units, so ``ceil`` would be meaningless.
MAX_SCALAR_REQUEST = float(2**53)

# Divisor that turns each accepted resource's value into CPUs (or its own unit).
_UNIT_DIVISORS: Mapping[str, float] = {
    RESOURCE_CPU: 1.0,
    RESOURCE_RECLAIMED_MILLICPU: 1000.0,
    RESOURCE_MEMORY: 1.0,
    RESOURCE_RECLAIMED_MEMORY: 1.0,
    RESOURCE_NET_BANDWIDTH: 1.0,
}

_CPU_RESOURCES = frozenset({RESOURCE_CPU, RESOURCE_RECLAIMED_MILLICPU})


class RequestError(PolicyError):
    """A request is malformed: it names what is wrong and, when known, the pod and container.

    Raising it changes nothing; kubelet gets the message back (InvalidArgument).
    """

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """NUMA affinity chosen by kubelet's topology manager; ``nodes`` in kubelet's order."""

    nodes: tuple[int, ...]
    preferred: bool


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """The fields of a QRM resource request that the policy reads (§4.1).

    ``labels`` and ``annotations`` are the pod's full maps as kubelet sends them (``None``
    where protobuf had an empty map); the policy normalises them before use (§4.5).
    ``hint`` is set only in Allocate. ``pod_role`` and ``pod_type`` are opaque: copied into
    state and replies, never interpreted.
    """

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    container_type: ContainerType
    container_index: int
    resource_name: str
    resource_requests: Mapping[str, float]
    pod_role: str = ""
    pod_type: str = ""
    hint: TopologyHint | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    native_qos_class: str = ""

    @property
    def identity(self) -> ContainerIdentity:
        """The container the request is about (echoed in replies, stored in its entry)."""
        return ContainerIdentity(
            self.pod_uid,
            self.pod_namespace,
            self.pod_name,
            self.container_name,
            self.container_type,
            self.container_index,
        )

    def describe(self) -> str:
        """The request's pod and container for an error message (``describe_container``).

        Returns:
            ``pod <namespace>/<name> (uid <uid>), container <name>``.
        """
        return describe_container(
            self.pod_uid,
            self.container_name,
            pod_namespace=self.pod_namespace,
            pod_name=self.pod_name,
        )


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed request: whole CPUs for counting, and the exact value for the record."""

    req_int: int
    req_float: float


def _number_text(value: float) -> str:
    """A quantity as people write it: ``-1``, ``1.5``, ``nan``, not ``-1.0``."""
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def _check_value(resource: str, value: object) -> float:
    """The request value of ``resource`` as a float, or RequestError saying why not."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"{resource} request {value!r} is not a number")
    try:
        number = float(value)
    except OverflowError:  # an int past the float range; too long even to print safely
        bits = value.bit_length() if isinstance(value, int) else 0
        raise RequestError(f"{resource} request is absurd: a {bits}-bit integer") from None
    # The value as people write it only for an error: every Allocate and hint checks one.
    if math.isnan(number):
        raise RequestError(f"{resource} request {_number_text(number)} is not a number")
    if math.isinf(number):
        raise RequestError(f"{resource} request {_number_text(number)} is infinite")
    if number < 0:
        raise RequestError(f"{resource} request {_number_text(number)} is negative")
    divisor = _UNIT_DIVISORS.get(resource, 1.0)
    if resource in _CPU_RESOURCES and number / divisor > MAX_CPU_REQUEST:
        raise RequestError(
            f"{resource} request {_number_text(number)} is absurd: more than {MAX_CPU_REQUEST} CPUs"
        )
    if resource not in _CPU_RESOURCES and number > MAX_SCALAR_REQUEST:
        raise RequestError(
            f"{resource} request {_number_text(number)} is absurd: more than 2**53 units"
        )
    return number + 0.0  # folds -0.0 into 0.0


def parse_quantity(resource_requests: Mapping[str, object]) -> Quantity:
    """Turn ``resource_requests`` into whole CPUs and the exact value (§4.2).

    Args:
        resource_requests: the request's ``{resource name: value}`` map.

    Returns:
        ``Quantity(req_int, req_float)``; ``cpu: 1.2`` gives ``(2, 1.2)`` and
        ``reclaimed_millicpu: 1500`` gives ``(2, 1.5)``.

    Raises:
        RequestError: "invalid req.ResourceRequests length: %d" unless there is exactly one
            key; "invalid request resource name: %s" for a key outside the table; or the
            value is not a number, is negative, infinite, or absurd.
    """
    if len(resource_requests) != 1:
        raise RequestError(f"invalid req.ResourceRequests length: {len(resource_requests)}")
    ((resource, raw),) = resource_requests.items()
    divisor = _UNIT_DIVISORS.get(resource)
    if divisor is None:
        raise RequestError(f"invalid request resource name: {resource}")
    value = _check_value(resource, raw) / divisor
    return Quantity(req_int=math.ceil(value), req_float=value)


def _check_hint(hint: TopologyHint) -> None:
    nodes = hint.nodes
    if not nodes or (min(nodes) >= 0 and len(set(nodes)) == len(nodes)):
        return  # every hint kubelet sends: nothing to name
    negative = sorted({node for node in hint.nodes if node < 0})
    if negative:
        raise RequestError(f"hint names negative NUMA nodes {negative}")
    twice = sorted(node for node, count in Counter(hint.nodes).items() if count > 1)
    if twice:
        raise RequestError(f"hint names NUMA nodes {twice} more than once")


#: Each bounded string field of a request, its bound (``policy.names``), and the length up to
#: which it fits whatever its characters: a character is at most 4 UTF-8 bytes, so a field
#: that short is not measured (every name kubelet sends is far shorter than its bound).
_STRING_BOUNDS = tuple(
    (field, limit, limit // 4)
    for field, limit in (
        ("pod_uid", names.MAX_POD_UID_BYTES),
        ("pod_name", names.MAX_POD_NAME_BYTES),
        ("pod_namespace", names.MAX_NAMESPACE_BYTES),
        ("container_name", names.MAX_CONTAINER_NAME_BYTES),
        ("pod_role", names.MAX_OPAQUE_NAME_BYTES),
        ("pod_type", names.MAX_OPAQUE_NAME_BYTES),
        ("resource_name", names.MAX_OPAQUE_NAME_BYTES),
    )
)


def _map_chars(mapping: Mapping[str, str] | None) -> int:
    """Characters of every key and value of ``mapping`` (None counts as empty)."""
    if not mapping:
        return 0
    return sum(map(len, mapping)) + sum(map(len, mapping.values()))


def _string_too_long(request: ResourceRequest) -> str | None:
    """Why a string of the request is past Kubernetes' bounds (``policy.names``), or None."""
    for field, limit, always_fits in _STRING_BOUNDS:
        value = getattr(request, field)
        if len(value) > always_fits:
            reason = names.too_long(value, field, limit)
            if reason is not None:
                return reason
    for key, value in (request.labels or {}).items():
        reason = names.too_long(key, "labels key", names.MAX_LABEL_KEY_BYTES) or names.too_long(
            value, f"labels value of {names.shown(key)!r}", names.MAX_LABEL_VALUE_BYTES
        )
        if reason is not None:
            return reason
    if (_map_chars(request.labels) + _map_chars(request.annotations)) * 4 <= names.MAX_MAPS_BYTES:
        return None  # fits whatever the characters, as above
    size = names.map_bytes(request.labels, request.annotations)
    if size > names.MAX_MAPS_BYTES:
        return (
            f"labels and annotations hold {size} bytes together, more than Kubernetes allows "
            f"({names.MAX_MAPS_BYTES})"
        )
    return None


def validate_request(request: ResourceRequest) -> None:
    """Refuse a request whose identity or hint is malformed (qrmd's checks, not the reference's).

    Quantities are checked by :func:`parse_quantity`.

    Args:
        request: the request as converted from the wire.

    Raises:
        RequestError: naming pod and container, e.g. ``pod default/web (uid ), container
            app: pod uid is empty``; or the field past Kubernetes' bounds, e.g. ``…:
            pod_name is 300 bytes, more than Kubernetes allows (253)``.
    """
    reason = ""
    if not request.pod_uid:
        reason = "pod uid is empty"
    elif too_long := _string_too_long(request):
        reason = too_long
    elif not request.container_name:
        reason = "container name is empty"
    elif request.container_index < 0:
        reason = f"container index {request.container_index} is negative"
    elif request.hint is not None:
        try:
            _check_hint(request.hint)
        except RequestError as err:
            reason = str(err)
    if reason:
        raise RequestError(reason, subject=request.describe())
