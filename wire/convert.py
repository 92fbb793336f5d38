"""Protobuf ↔ domain for every ResourcePlugin RPC, in one place (wire.md §4.3).

Requests become the kubelet calls of ``policy.cpu.commands`` (the one type the Allocator
receives and the policy decides on) holding the policy's ``ResourceRequest``; replies
(``policy.cpu.replies``, ``policy.cpu.allocation_listing``) become the response messages
(GetResourcesAllocation's straight into its bytes, pod by pod, for speed at thousands of
containers: ``wire.listing_bytes``).
Nothing else in qrmd touches these message types.

The rules enforced here, because only the wire sees them:

* **No NUMA preference leaves the key out** (wire.md §1.1). ``HintsReply.hints is None`` is sent
  as a ``resource_hints`` map without the ``cpu`` key; an empty tuple is sent as the key with an
  empty ``ListOfTopologyHints`` (nothing fits). Indexing the map with ``[...]`` creates the
  key, so it is indexed in one place only, once the reply's hints are known not to be None.
* **A message is not a request until it converts.** proto3 has open enums, so
  ``container_type`` may hold any int: an unknown value is a ``RequestError``. So are
  annotations or labels past Kubernetes' own limit (256 KiB in total, apimachinery
  ``TotalAnnotationSizeLimitB``): no pod can carry them, and the policy would copy them into
  state and the journal. Every other check (empty uid, NaN or absurd quantities, a hint naming
  a NUMA node twice) is the policy's (``policy.cpu.request.validate_request``/``parse_quantity``).
  Absent strings are ``""`` in proto3, as they are to the Go peers.
* Empty ``labels``/``annotations`` maps become ``None`` (``ResourceRequest`` says so).
* A request's ``hint`` is absent in GetTopologyHints; in Allocate the reference echoes
  ``[req.hint]`` in the allocation's ``resource_hints`` even when it is nil (cpu-policy §7.3
  step 5). Python cannot put nil into a repeated field, so a ``None`` element is written as an
  empty ``TopologyHint`` (no nodes, not preferred), which the Go peer reads as an empty hint
  rather than nil. kubelet only caches these hints (wire.md §4.3), and with topology alignment
  it always sends a hint, so the difference does not reach it in practice.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.commands import (
    Allocate,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PreStartContainer,
    RemovePod,
)
from policy.cpu.replies import (
    RESOURCE_NAME,
    AllocatableReply,
    AllocationReply,
    CPUAllocation,
    HintsReply,
    PluginOptions,
    TopologyAwareQuantity,
    TopologyAwareReply,
)
from policy.cpu.request import (
    ContainerType,
    RequestError,
    ResourceRequest,
    TopologyHint,
)
from policy.errors import describe_container
from wire.gen import resourceplugin_pb2 as pb
from wire.listing_bytes import ListingEncoder

__all__ = [
    "MAX_MAP_BYTES",
    "allocatable_command",
    "allocatable_response",
    "allocate_command",
    "allocation_response",
    "hints_command",
    "hints_response",
    "options_command",
    "options_response",
    "pre_start_command",
    "pre_start_response",
    "remove_pod_command",
    "remove_pod_response",
    "resource_request",
    "resources_allocation_command",
    "resources_allocation_response",
    "topology_aware_command",
    "topology_aware_response",
]

#: Largest total size of a request's labels or annotations (keys plus values, UTF-8 bytes):
#: Kubernetes refuses pods whose annotations exceed 256 KiB, so a bigger map is not a pod's.
MAX_MAP_BYTES = 256 * 1024

_CONTAINER_TYPES = {member.value: member for member in ContainerType}

V_ = TypeVar("V_")


# -- requests ---------------------------------------------------------------------------------


def _string_map(
    field: str, message_map: Mapping[str, str], message: pb.ResourceRequest
) -> Mapping[str, str] | None:
    """A request's label or annotation map as a dict, ``None`` when empty; refuse giant maps."""
    if not message_map:
        return None
    copied = _copied(message_map)
    # A character is at most 4 bytes in UTF-8: a map whose characters are few enough cannot
    # be past the limit, and needs no encoding to prove it (every pod's map, in practice).
    chars = sum(map(len, copied)) + sum(map(len, copied.values()))
    if chars * 4 <= MAX_MAP_BYTES:
        return copied
    size = sum(len(key.encode()) + len(value.encode()) for key, value in copied.items())
    if size > MAX_MAP_BYTES:
        raise RequestError(
            f"{field} hold {size} bytes, more than Kubernetes allows ({MAX_MAP_BYTES})",
            subject=_who(message),
        )
    return copied


def _copied(message_map: Mapping[str, V_]) -> dict[str, V_]:
    """A protobuf map as a dict, in the map's own order: iterating it and indexing it are
    protobuf's own (C) methods, where ``dict(message_map.items())`` runs the Python of
    ``collections.abc``'s items view (0.7 µs against 1.2 µs per map, three maps a request)."""
    return {key: message_map[key] for key in message_map}


def _who(message: pb.ResourceRequest) -> str:
    """The pod and container a request names, for its error message."""
    return describe_container(
        message.pod_uid,
        message.container_name,
        pod_namespace=message.pod_namespace,
        pod_name=message.pod_name,
    )


def resource_request(message: pb.ResourceRequest) -> ResourceRequest:
    """Convert the ``ResourceRequest`` of GetTopologyHints and Allocate (wire.md §4.3).

    Args:
        message: the parsed request.

    Returns:
        The domain request; identity and quantities are checked later, by the policy.

    Raises:
        RequestError: ``container_type`` is not an enum value, or labels/annotations exceed
            :data:`MAX_MAP_BYTES`; the message names pod and container.
    """
    container_type = _CONTAINER_TYPES.get(message.container_type)
    if container_type is None:
        raise RequestError(
            f"unknown container_type {message.container_type}", subject=_who(message)
        )
    hint = None
    if message.HasField("hint"):
        hint = TopologyHint(tuple(message.hint.nodes), message.hint.preferred)
    # Positional, in ResourceRequest's field order: every kubelet call converts one.
    return ResourceRequest(
        message.pod_uid,
        message.pod_namespace,
        message.pod_name,
        message.container_name,
        container_type,
        message.container_index,
        message.resource_name,
        _copied(message.resource_requests),
        message.pod_role,
        message.pod_type,
        hint,
        _string_map("labels", message.labels, message),
        _string_map("annotations", message.annotations, message),
        message.native_qos_class,
    )


def hints_command(message: pb.ResourceRequest) -> GetTopologyHints:
    """GetTopologyHints request → command (raises as :func:`resource_request`)."""
    return GetTopologyHints(resource_request(message))


def allocate_command(message: pb.ResourceRequest) -> Allocate:
    """Allocate request → command (raises as :func:`resource_request`)."""
    return Allocate(resource_request(message))


def remove_pod_command(message: pb.RemovePodRequest) -> RemovePod:
    """RemovePod request → command; an empty or unknown uid is the policy's to answer."""
    return RemovePod(message.pod_uid)


def resources_allocation_command(
    message: pb.GetResourcesAllocationRequest,
) -> GetResourcesAllocation:
    """GetResourcesAllocation request (no fields) → command."""
    del message
    return GetResourcesAllocation()


def topology_aware_command(
    message: pb.GetTopologyAwareResourcesRequest,
) -> GetTopologyAwareResources:
    """GetTopologyAwareResources request → command."""
    return GetTopologyAwareResources(message.pod_uid, message.container_name)


def allocatable_command(
    message: pb.GetTopologyAwareAllocatableResourcesRequest,
) -> GetTopologyAwareAllocatableResources:
    """GetTopologyAwareAllocatableResources request (no fields) → command."""
    del message
    return GetTopologyAwareAllocatableResources()


def options_command(message: pb.Empty) -> GetResourcePluginOptions:
    """GetResourcePluginOptions request (``Empty``) → command."""
    del message
    return GetResourcePluginOptions()


def pre_start_command(message: pb.PreStartContainerRequest) -> PreStartContainer:
    """PreStartContainer request → command."""
    return PreStartContainer(
        message.pod_uid, message.pod_namespace, message.pod_name, message.container_name
    )


# -- replies ----------------------------------------------------------------------------------


def _hint_list(hints: tuple[TopologyHint | None, ...]) -> pb.ListOfTopologyHints:
    """The hints as a message; a ``None`` element is an empty hint (Go's nil element, see the
    module docstring). Kept by value: the same container asks again with the same free NUMA
    nodes, and every shared container echoes the same hint (``_kept``)."""
    try:
        # Each hint's fields as a plain tuple: hashed and compared in C, where a tuple of
        # hints would call each hint's generated __hash__ and __eq__.
        key: tuple[Any, ...] = tuple(map(_hint_fields, hints))
    except AttributeError:  # a None element (Allocate's echo of a nil hint): kept by value
        key = hints
    return _kept(_HINT_LISTS, key, hints, _build_hint_list)


_hint_fields = operator.attrgetter("nodes", "preferred")


def _build_hint_list(hints: tuple[TopologyHint | None, ...]) -> pb.ListOfTopologyHints:
    message = pb.ListOfTopologyHints()
    add = message.hints.add
    for hint in hints:
        if hint is None:
            add()
        else:
            add(nodes=hint.nodes, preferred=hint.preferred)
    return message


def _resource_allocation(allocation: CPUAllocation) -> pb.ResourceAllocation:
    """``{"cpu": info}`` as a message, kept by value: the containers of one pool are all
    answered the same allocation. A quantity of zero is not kept, as ``-0.0`` equals ``0.0``
    but is written to the wire and ``0.0`` is not."""
    if allocation.allocated_quantity == 0:
        return _build_resource_allocation(allocation)
    return _kept(_ALLOCATIONS, allocation, allocation, _build_resource_allocation)


def _build_resource_allocation(allocation: CPUAllocation) -> pb.ResourceAllocation:
    info = pb.ResourceAllocationInfo(
        oci_property_name=allocation.oci_property_name,
        is_node_resource=allocation.is_node_resource,
        is_scalar_resource=allocation.is_scalar_resource,
        allocated_quantity=allocation.allocated_quantity,
        allocation_result=allocation.allocation_result,
    )
    if allocation.resource_hints is not None:
        info.resource_hints.CopyFrom(_hint_list(allocation.resource_hints))
    return pb.ResourceAllocation(resource_allocation={RESOURCE_NAME: info})


K = TypeVar("K")
V = TypeVar("V", pb.ListOfTopologyHints, pb.ResourceAllocation)

#: The most messages kept per kind; past it the memo starts afresh (a node has a few pools
#: and a few NUMA layouts, so a handful of values repeat).
MAX_KEPT_MESSAGES = 256
_HINT_LISTS: dict[Any, pb.ListOfTopologyHints] = {}
_ALLOCATIONS: dict[Any, pb.ResourceAllocation] = {}


def _kept(memo: dict[Any, V], key: Any, value: K, build: Callable[[K], V]) -> V:
    """``build(value)``, kept in ``memo`` under ``key``; two values' keys are equal only if
    the values build the same message (a reply value is immutable, so is its message: every
    caller copies it into its response, none changes it).

    gRPC's threads share the memo: a lookup, an insertion and a clearing are each atomic, so
    a thread sees a message or none, and at worst builds one twice.
    """
    try:
        message = memo.get(key)
    except TypeError:  # an unhashable value (a list where a tuple is declared): not kept
        return build(value)
    if message is None:
        message = build(value)
        if len(memo) >= MAX_KEPT_MESSAGES:
            memo.clear()
        memo[key] = message
    return message


def allocation_response(reply: AllocationReply | None) -> pb.ResourceAllocationResponse:
    """Allocate's reply → ``ResourceAllocationResponse``.

    Args:
        reply: the policy's reply; ``None`` (no reply at all) gives the empty response.

    Returns:
        The echo of the request and, unless ``reply.allocation is None`` (INIT containers),
        ``allocation_result = {"cpu": info}``.
    """
    if reply is None:
        return pb.ResourceAllocationResponse()
    identity = reply.identity
    response = pb.ResourceAllocationResponse(
        pod_uid=identity.pod_uid,
        pod_namespace=identity.pod_namespace,
        pod_name=identity.pod_name,
        container_name=identity.container_name,
        container_type=_wire_type(identity.container_type),
        container_index=identity.container_index,
        pod_role=reply.pod_role,
        pod_type=reply.pod_type,
        resource_name=reply.resource_name,
        native_qos_class=reply.native_qos_class,
    )
    _fill_maps(response, reply.labels, reply.annotations)
    if reply.allocation is not None:
        response.allocation_result.CopyFrom(_resource_allocation(reply.allocation))
    return response


def hints_response(reply: HintsReply) -> pb.ResourceHintsResponse:
    """GetTopologyHints' reply → ``ResourceHintsResponse``, honouring wire.md §1.1.

    Args:
        reply: the policy's reply.

    Returns:
        The echo of the request; ``resource_hints`` without the ``cpu`` key when
        ``reply.hints is None`` (no preference), else ``{"cpu": [hints...]}`` (possibly empty:
        nothing fits).
    """
    identity = reply.identity
    response = pb.ResourceHintsResponse(
        pod_uid=identity.pod_uid,
        pod_namespace=identity.pod_namespace,
        pod_name=identity.pod_name,
        container_name=identity.container_name,
        container_type=_wire_type(identity.container_type),
        container_index=identity.container_index,
        pod_role=reply.pod_role,
        pod_type=reply.pod_type,
        resource_name=reply.resource_name,
        native_qos_class=reply.native_qos_class,
    )
    if reply.hints is not None:
        # Indexing creates the key: only here, where the key is due (module docstring).
        response.resource_hints[RESOURCE_NAME].CopyFrom(_hint_list(reply.hints))
    _fill_maps(response, reply.labels, reply.annotations)
    return response


def _fill_maps(
    response: pb.ResourceAllocationResponse | pb.ResourceHintsResponse,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
) -> None:
    """Copy a reply's labels and annotations into ``response``, key by key, in their order.

    Not as constructor arguments: protobuf fills a map argument through
    ``collections.abc``'s Python ``update`` (2 µs per map, even an empty one), where a
    protobuf map's own item assignment is C.
    """
    if labels:
        response_labels = response.labels
        for key, value in labels.items():
            response_labels[key] = value
    if annotations:
        response_annotations = response.annotations
        for key, value in annotations.items():
            response_annotations[key] = value


#: The wire enum's number of each container type (the same names, wire.md §4.3).
_WIRE_TYPES: dict[ContainerType, pb.ContainerType] = {
    member: getattr(pb, member.name) for member in ContainerType
}


def _wire_type(container_type: ContainerType) -> pb.ContainerType | str:
    """A container type as the response's enum: its number, or its name for a value that is
    not a ``ContainerType`` (which protobuf then judges, as it always did)."""
    if type(container_type) is ContainerType:
        return _WIRE_TYPES[container_type]
    return container_type.name


def remove_pod_response(reply: None) -> pb.RemovePodResponse:
    """RemovePod answers nothing."""
    del reply
    return pb.RemovePodResponse()


def resources_allocation_response(reply: ResourcesAllocation) -> bytes:
    """GetResourcesAllocation's reply → the serialized ``GetResourcesAllocationResponse``,
    encoded afresh; a served plugin keeps a ``wire.listing_bytes.ListingEncoder``, which
    reuses the bytes of the pods that did not change.

    Args:
        reply: the policy's listing.

    Returns:
        The response message's bytes, as ``ListingEncoder.encode`` writes them.
    """
    return ListingEncoder().encode(reply)


def _quantities(
    quantities: Iterable[TopologyAwareQuantity] | None,
) -> list[pb.TopologyAwareQuantity]:
    if quantities is None:
        return []
    return [
        pb.TopologyAwareQuantity(resource_value=q.resource_value, node=q.node) for q in quantities
    ]


def topology_aware_response(reply: TopologyAwareReply) -> pb.GetTopologyAwareResourcesResponse:
    """GetTopologyAwareResources' reply → response (name is field 2, namespace 3)."""
    resource = reply.resource
    aware = pb.TopologyAwareResource(
        is_node_resource=resource.is_node_resource,
        is_scalar_resource=resource.is_scalar_resource,
        aggregated_quantity=resource.aggregated_quantity,
        original_aggregated_quantity=resource.original_aggregated_quantity,
        topology_aware_quantity_list=_quantities(resource.topology_aware_quantity_list),
        original_topology_aware_quantity_list=_quantities(
            resource.original_topology_aware_quantity_list
        ),
    )
    return pb.GetTopologyAwareResourcesResponse(
        pod_uid=reply.pod_uid,
        pod_name=reply.pod_name,
        pod_namespace=reply.pod_namespace,
        container_topology_aware_resources=pb.ContainerTopologyAwareResources(
            container_name=reply.container_name,
            allocated_resources={RESOURCE_NAME: aware},
        ),
    )


def allocatable_response(
    reply: AllocatableReply,
) -> pb.GetTopologyAwareAllocatableResourcesResponse:
    """GetTopologyAwareAllocatableResources' reply → response (allocatable 3–4, capacity 5–6)."""
    resource = reply.resource
    allocatable = pb.AllocatableTopologyAwareResource(
        is_node_resource=resource.is_node_resource,
        is_scalar_resource=resource.is_scalar_resource,
        aggregated_allocatable_quantity=resource.aggregated_allocatable_quantity,
        topology_aware_allocatable_quantity_list=_quantities(
            resource.topology_aware_allocatable_quantity_list
        ),
        aggregated_capacity_quantity=resource.aggregated_capacity_quantity,
        topology_aware_capacity_quantity_list=_quantities(
            resource.topology_aware_capacity_quantity_list
        ),
    )
    return pb.GetTopologyAwareAllocatableResourcesResponse(
        allocatable_resources={RESOURCE_NAME: allocatable}
    )


def options_response(reply: PluginOptions) -> pb.ResourcePluginOptions:
    """GetResourcePluginOptions' reply → ``ResourcePluginOptions`` (wire.md §12.6)."""
    return pb.ResourcePluginOptions(
        pre_start_required=reply.pre_start_required,
        with_topology_alignment=reply.with_topology_alignment,
        need_reconcile=reply.need_reconcile,
    )


def pre_start_response(reply: None) -> pb.PreStartContainerResponse:
    """PreStartContainer answers nothing."""
    del reply
    return pb.PreStartContainerResponse()
