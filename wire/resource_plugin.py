"""The ``resourceplugin.v1alpha1.ResourcePlugin`` service: eight RPCs, each one row of a table.

Each row names the method, its request message, the conversion to the kubelet call the
Allocator serves (``policy.cpu.commands``), the conversion of the reply, and the ask timeout
used when kubelet sets no deadline (wire.md §4.4, §9.6: 10 s, PreStartContainer 30 s;
GetResourcePluginOptions has no deadline and gets 10 s).
Every handler does the same (DESIGN.md): refuse with UNAVAILABLE while qrmd is not ready,
convert the request, ``ask`` the Allocator with the call's remaining deadline, convert the
reply. Concurrent calls are safe: they queue in the Allocator's mailbox, which orders them;
concurrent Allocate, RemovePod and GetTopologyHints calls are asked as one group, whose records
one fsync covers before any of them is answered (``wire.call_groups``).

An ask that times out answers UNAVAILABLE, but its command stays in the mailbox and may still
be decided and committed; kubelet retries, and every call is idempotent (an Allocate of a
container already placed answers the stored placement, wire.md §9.1).

Replies are typed end to end: a row is a ``ResourcePluginRpc[M, R]`` whose request conversion
yields a ``PluginCall[R]`` and whose reply conversion takes an ``R``, so the type checker holds
each row's two halves together; :func:`ask_allocator` is the one place where pykka's untyped
answer becomes the ``R`` the call names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

import grpc
from google.protobuf.message import Message

from policy.cpu.commands import PluginCall
from policy.errors import describe_container
from wire import convert
from wire.call_groups import CallGrouper
from wire.call_watch import KubeletCallWatch
from wire.errors import NotReady
from wire.gen import resourceplugin_pb2 as pb
from wire.listing_bytes import ListingEncoder
from wire.rpc import ActorRef, RpcObserver, ask_timeout, unary_handler

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RESOURCE_PLUGIN_RPCS",
    "SERVICE",
    "ResourcePluginRpc",
    "ask_allocator",
    "handler",
]

M = TypeVar("M", bound=Message)
R = TypeVar("R")

#: The full service name (wire.md §1.3).
SERVICE = "resourceplugin.v1alpha1.ResourcePlugin"

#: The methods whose calls are grouped (``actors.allocator_messages.GROUPED_CALLS``).
GROUPED_RPCS = frozenset({"Allocate", "RemovePod", "GetTopologyHints"})

#: kubelet's deadline for most calls (wire.md §9.6), and the ask timeout without one.
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ResourcePluginRpc(Generic[M, R]):
    """One method of the service: request message ``M``, reply ``R``.

    Attributes:
        name: the method name.
        request_type: its request message.
        command: request message → the kubelet call (may raise ``RequestError``).
        response: the call's reply → response message (or its bytes).
        default_timeout_s: the ask timeout when the caller sets no deadline.
    """

    name: str
    request_type: type[M]
    command: Callable[[M], PluginCall[R]]
    response: Callable[[R], Message | bytes]
    default_timeout_s: float = DEFAULT_TIMEOUT_S


def ask_allocator(allocator: ActorRef, call: PluginCall[R], timeout: float | None) -> R:
    """Ask the Allocator to serve ``call`` and wait for its reply, typed by the call.

    Args:
        allocator: the Allocator actor's ref.
        call: the kubelet call (``Allocate`` answers ``AllocationReply | None``, ...).
        timeout: seconds to wait; ``None`` waits for ever.

    Returns:
        The reply ``call`` names.

    Raises:
        Whatever the Allocator raised serving ``call`` (``AllocatorUnavailable``, a
        ``PolicyError``), or pykka's ``Timeout``.
    """
    # The Allocator answers each call with its façade function's reply, whose type the call's
    # class names (``policy.cpu.commands``); pykka's future is untyped, so say so here, once.
    return cast(R, allocator.ask(call, timeout=timeout))


# The order of the proto file (wire.md §4.1).
RESOURCE_PLUGIN_RPCS = (
    ResourcePluginRpc(
        "GetTopologyHints", pb.ResourceRequest, convert.hints_command, convert.hints_response
    ),
    ResourcePluginRpc(
        "RemovePod", pb.RemovePodRequest, convert.remove_pod_command, convert.remove_pod_response
    ),
    ResourcePluginRpc(
        "GetResourcesAllocation",
        pb.GetResourcesAllocationRequest,
        convert.resources_allocation_command,
        convert.resources_allocation_response,
    ),
    ResourcePluginRpc(
        "GetTopologyAwareResources",
        pb.GetTopologyAwareResourcesRequest,
        convert.topology_aware_command,
        convert.topology_aware_response,
    ),
    ResourcePluginRpc(
        "GetTopologyAwareAllocatableResources",
        pb.GetTopologyAwareAllocatableResourcesRequest,
        convert.allocatable_command,
        convert.allocatable_response,
    ),
    ResourcePluginRpc(
        "GetResourcePluginOptions", pb.Empty, convert.options_command, convert.options_response
    ),
    ResourcePluginRpc(
        "Allocate", pb.ResourceRequest, convert.allocate_command, convert.allocation_response
    ),
    ResourcePluginRpc(
        "PreStartContainer",
        pb.PreStartContainerRequest,
        convert.pre_start_command,
        convert.pre_start_response,
        default_timeout_s=30.0,
    ),
)


def _with_listing_encoder(
    rows: tuple[ResourcePluginRpc[Any, Any], ...],
) -> tuple[ResourcePluginRpc[Any, Any], ...]:
    """The rows with GetResourcesAllocation's reply encoded by a ``ListingEncoder`` of this
    service's own, which keeps the bytes of the pods that did not change between listings
    (``wire.listing_bytes``): the memo belongs to the server that sends the bytes."""
    encoder = ListingEncoder()
    return tuple(
        replace(rpc, response=encoder.encode) if rpc.name == "GetResourcesAllocation" else rpc
        for rpc in rows
    )


def _subject(request: Any) -> str:
    """Who a request is about, for error messages: as much of its pod and container as it
    names (RemovePod only a pod UID), or ``""`` for a request about no pod."""
    if not hasattr(request, "pod_uid"):
        return ""
    return describe_container(
        request.pod_uid,
        getattr(request, "container_name", None),
        pod_namespace=getattr(request, "pod_namespace", None),
        pod_name=getattr(request, "pod_name", None),
    )


def _method(
    rpc: ResourcePluginRpc[M, R],
    allocator: ActorRef,
    ready: Callable[[], bool],
    observer: RpcObserver | None,
    grouper: CallGrouper,
) -> grpc.RpcMethodHandler:
    grouped = rpc.name in GROUPED_RPCS

    def work(request: M, context: grpc.ServicerContext) -> Message | bytes:
        if not ready():
            raise NotReady("qrmd is not ready (starting, stopping or recovering its state)")
        call = rpc.command(request)
        timeout = ask_timeout(context, rpc.default_timeout_s)
        if grouped:
            reply = cast(R, grouper.ask(call, timeout))
        else:
            reply = ask_allocator(allocator, call, timeout)
        return rpc.response(reply)

    return unary_handler(rpc.name, rpc.request_type, work, observer, _subject)


def handler(
    allocator: ActorRef,
    ready: Callable[[], bool],
    observer: RpcObserver | None,
    call_watch: KubeletCallWatch | None = None,
) -> grpc.GenericRpcHandler:
    """The ResourcePlugin service, every method asking ``allocator``.

    Args:
        allocator: the Allocator actor's ref.
        ready: whether qrmd may serve; ``False`` answers UNAVAILABLE.
        observer: told about every call, or ``None``.
        call_watch: watches whether the grouped calls are answered (``/healthz``), or None.

    Returns:
        The generic handler to add to a ``grpc.Server``.
    """
    # Each row was checked on its own where it is written; here they are all just rows.
    rows: tuple[ResourcePluginRpc[Any, Any], ...] = _with_listing_encoder(RESOURCE_PLUGIN_RPCS)
    # Allocate, RemovePod and GetTopologyHints that arrive together share one fsync
    # (wire.call_groups); the other calls are asked one by one.
    grouper = CallGrouper(allocator, watch=call_watch)
    methods = {rpc.name: _method(rpc, allocator, ready, observer, grouper) for rpc in rows}
    return grpc.method_handlers_generic_handler(SERVICE, methods)
