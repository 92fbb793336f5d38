"""The kubelet's gRPC client for one QRM plugin socket: every call with the kubelet's deadline.

This is the only module of the simulator that touches protobuf: it builds ``ResourceRequest``s
from the simulator's pods and turns answers into plain values. Deadlines are the kubelet's
(wire.md §9.6): dial 10 s (blocking), ``GetInfo`` 1 s, ``NotifyRegistrationStatus`` 5 s,
``GetResourcePluginOptions`` none, the six resource calls 10 s each, ``PreStartContainer`` 30 s.

The no-preference rule of wire.md §1.1 is kept apart from "no feasible placement": a hint
answer whose map lacks the resource key is ``None``, a present but empty list is ``()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from qrmd.kubelet_sim.pods import POD_ROLE_LABEL, POD_TYPE_ANNOTATION, ContainerSlot, Pod
from wire.gen import pluginregistration_pb2 as reg_pb
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.gen import resourceplugin_pb2 as rp_pb
from wire.gen import resourceplugin_pb2_grpc as rp_grpc

__all__ = [
    "DIAL_TIMEOUT_S",
    "GET_INFO_TIMEOUT_S",
    "NOTIFY_TIMEOUT_S",
    "PRE_START_TIMEOUT_S",
    "RESOURCE_CALL_TIMEOUT_S",
    "AllocationInfo",
    "Hint",
    "NUMAQuantity",
    "PluginCallError",
    "PluginConnection",
    "PluginInfo",
    "PluginOptions",
    "TopologyAwareResource",
]

DIAL_TIMEOUT_S = 10.0
GET_INFO_TIMEOUT_S = 1.0
NOTIFY_TIMEOUT_S = 5.0
RESOURCE_CALL_TIMEOUT_S = 10.0
PRE_START_TIMEOUT_S = 30.0


class PluginCallError(Exception):
    """A call to the plugin failed: dialing, a deadline, or an error status."""

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"{method} failed: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A plugin's ``GetInfo`` answer (wire.md §3)."""

    type: str
    name: str
    endpoint: str
    supported_versions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PluginOptions:
    """A plugin's ``GetResourcePluginOptions`` answer (wire.md §4.3)."""

    pre_start_required: bool
    with_topology_alignment: bool
    need_reconcile: bool


@dataclass(frozen=True, slots=True)
class Hint:
    """A topology hint: NUMA node ids and whether the placement is preferred."""

    nodes: tuple[int, ...]
    preferred: bool


@dataclass(frozen=True, slots=True)
class AllocationInfo:
    """One resource's allocation for one container (``ResourceAllocationInfo``, wire.md §4.3)."""

    oci_property_name: str
    allocation_result: str
    allocated_quantity: float
    is_scalar_resource: bool
    hints: tuple[Hint, ...] | None = None


@dataclass(frozen=True, slots=True)
class NUMAQuantity:
    """A quantity on one NUMA node."""

    node: int
    value: float


@dataclass(frozen=True, slots=True)
class TopologyAwareResource:
    """A container's per-NUMA breakdown (``TopologyAwareResource``, wire.md §4.3)."""

    aggregated: float
    original_aggregated: float
    per_numa: tuple[NUMAQuantity, ...]
    original_per_numa: tuple[NUMAQuantity, ...]


def _hints(message: rp_pb.ListOfTopologyHints) -> tuple[Hint, ...]:
    return tuple(Hint(tuple(h.nodes), h.preferred) for h in message.hints)


def _allocation_info(message: rp_pb.ResourceAllocationInfo) -> AllocationInfo:
    return AllocationInfo(
        oci_property_name=message.oci_property_name,
        allocation_result=message.allocation_result,
        allocated_quantity=message.allocated_quantity,
        is_scalar_resource=message.is_scalar_resource,
        hints=_hints(message.resource_hints) if message.HasField("resource_hints") else None,
    )


def _quantities(items: Iterable[rp_pb.TopologyAwareQuantity]) -> tuple[NUMAQuantity, ...]:
    return tuple(NUMAQuantity(q.node, q.resource_value) for q in items)


def resource_request(
    pod: Pod, slot: ContainerSlot, resource_name: str, hint: Hint | None
) -> rp_pb.ResourceRequest:
    """The ``ResourceRequest`` the kubelet sends for one container (wire.md §4.3, §9.1).

    Args:
        pod: the pod.
        slot: the container, its type and index.
        resource_name: the plugin's resource name (``cpu``), after name mapping.
        hint: the chosen affinity for ``Allocate``; ``None`` leaves ``hint`` unset, as in
            ``GetTopologyHints``.

    Returns:
        The request message.

    Raises:
        ValueError: the container requests nothing.
    """
    if slot.container.request is None:
        raise ValueError(f"container {pod.name}/{slot.container.name} requests no resource")
    requested_name, quantity = slot.container.request
    request = rp_pb.ResourceRequest(
        pod_uid=pod.uid,
        pod_namespace=pod.namespace,
        pod_name=pod.name,
        container_name=slot.container.name,
        container_type=slot.kind.value,  # type: ignore[arg-type]
        container_index=slot.index,
        pod_role=pod.labels.get(POD_ROLE_LABEL, ""),
        pod_type=pod.annotations.get(POD_TYPE_ANNOTATION, ""),
        resource_name=resource_name,
        resource_requests={requested_name: quantity},
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        native_qos_class=pod.native_qos_class,
    )
    if hint is not None:
        request.hint.CopyFrom(rp_pb.TopologyHint(nodes=list(hint.nodes), preferred=hint.preferred))
    return request


class PluginConnection:
    """One dialed channel to a plugin socket, with both services' calls.

    Args:
        socket_path: absolute path of the unix socket.
        dial_timeout_s: how long dialing may block (kubelet: 10 s).

    Raises:
        PluginCallError: the socket did not accept a connection in time.
    """

    def __init__(self, socket_path: str, dial_timeout_s: float = DIAL_TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self._channel = grpc.insecure_channel(f"unix://{socket_path}")
        try:
            grpc.channel_ready_future(self._channel).result(timeout=dial_timeout_s)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise PluginCallError(
                "dial", "DEADLINE_EXCEEDED", f"{socket_path} not ready in {dial_timeout_s:g} s"
            ) from None
        self._registration = reg_grpc.RegistrationStub(self._channel)  # type: ignore[no-untyped-call]
        self._plugin = rp_grpc.ResourcePluginStub(self._channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Close the channel; later calls fail."""
        self._channel.close()

    @staticmethod
    def _call(
        method: str, stub_method: Callable[..., Any], request: Any, timeout: float | None
    ) -> Any:
        try:
            return stub_method(request, timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code().name if exc.code() is not None else "UNKNOWN"
            raise PluginCallError(method, code, exc.details() or "") from None
        except ValueError as exc:  # a closed channel
            raise PluginCallError(method, "CANCELLED", str(exc)) from None

    # -- pluginregistration.Registration (wire.md §3) ------------------------------------------

    def get_info(self) -> PluginInfo:
        """``GetInfo`` with the 1 s deadline."""
        info = self._call(
            "GetInfo", self._registration.GetInfo, reg_pb.InfoRequest(), GET_INFO_TIMEOUT_S
        )
        return PluginInfo(info.type, info.name, info.endpoint, tuple(info.supported_versions))

    def notify_registration_status(self, registered: bool, error: str = "") -> None:
        """``NotifyRegistrationStatus`` with the 5 s deadline."""
        self._call(
            "NotifyRegistrationStatus",
            self._registration.NotifyRegistrationStatus,
            reg_pb.RegistrationStatus(plugin_registered=registered, error=error),
            NOTIFY_TIMEOUT_S,
        )

    # -- resourceplugin.v1alpha1.ResourcePlugin (wire.md §4) -----------------------------------

    def get_resource_plugin_options(self) -> PluginOptions:
        """``GetResourcePluginOptions`` with no deadline (wire.md §8.1 step 4)."""
        options = self._call(
            "GetResourcePluginOptions",
            self._plugin.GetResourcePluginOptions,
            rp_pb.Empty(),
            None,
        )
        return PluginOptions(
            options.pre_start_required, options.with_topology_alignment, options.need_reconcile
        )

    def get_topology_hints(
        self, pod: Pod, slot: ContainerSlot, resource_name: str
    ) -> tuple[Hint, ...] | None:
        """``GetTopologyHints``: ``None`` for no preference, ``()`` for no feasible placement."""
        answer = self._call(
            "GetTopologyHints",
            self._plugin.GetTopologyHints,
            resource_request(pod, slot, resource_name, None),
            RESOURCE_CALL_TIMEOUT_S,
        )
        if resource_name not in answer.resource_hints:
            return None
        entry = answer.resource_hints[resource_name]
        # A key with an absent value is Go's nil (wire.md §1.1); Python cannot tell it from an
        # empty message, so both read as an empty list here, as a Go kubelet reads the latter.
        return _hints(entry)

    def allocate(
        self, pod: Pod, slot: ContainerSlot, resource_name: str, hint: Hint | None
    ) -> dict[str, AllocationInfo] | None:
        """``Allocate``: the allocation per resource name, ``None`` when the answer has none."""
        answer = self._call(
            "Allocate",
            self._plugin.Allocate,
            resource_request(pod, slot, resource_name, hint),
            RESOURCE_CALL_TIMEOUT_S,
        )
        if not answer.HasField("allocation_result"):
            return None
        return {
            name: _allocation_info(info)
            for name, info in answer.allocation_result.resource_allocation.items()
        }

    def get_resources_allocation(self) -> dict[str, dict[str, dict[str, AllocationInfo]]]:
        """``GetResourcesAllocation``: pod UID → container name → resource → allocation."""
        answer = self._call(
            "GetResourcesAllocation",
            self._plugin.GetResourcesAllocation,
            rp_pb.GetResourcesAllocationRequest(),
            RESOURCE_CALL_TIMEOUT_S,
        )
        return {
            pod_uid: {
                container: {
                    name: _allocation_info(info) for name, info in alloc.resource_allocation.items()
                }
                for container, alloc in resources.container_resources.items()
            }
            for pod_uid, resources in answer.pod_resources.items()
        }

    def pre_start_container(self, pod: Pod, container_name: str) -> None:
        """``PreStartContainer`` with the 30 s deadline (only if the plugin asked for it)."""
        self._call(
            "PreStartContainer",
            self._plugin.PreStartContainer,
            rp_pb.PreStartContainerRequest(
                pod_uid=pod.uid,
                pod_namespace=pod.namespace,
                pod_name=pod.name,
                container_name=container_name,
            ),
            PRE_START_TIMEOUT_S,
        )

    def remove_pod(self, pod_uid: str) -> None:
        """``RemovePod`` with the 10 s deadline."""
        self._call(
            "RemovePod",
            self._plugin.RemovePod,
            rp_pb.RemovePodRequest(pod_uid=pod_uid),
            RESOURCE_CALL_TIMEOUT_S,
        )

    def get_topology_aware_resources(
        self, pod_uid: str, container_name: str
    ) -> dict[str, TopologyAwareResource]:
        """``GetTopologyAwareResources`` for one container: resource name → breakdown."""
        answer = self._call(
            "GetTopologyAwareResources",
            self._plugin.GetTopologyAwareResources,
            rp_pb.GetTopologyAwareResourcesRequest(pod_uid=pod_uid, container_name=container_name),
            RESOURCE_CALL_TIMEOUT_S,
        )
        resources = answer.container_topology_aware_resources.allocated_resources
        return {
            name: TopologyAwareResource(
                aggregated=r.aggregated_quantity,
                original_aggregated=r.original_aggregated_quantity,
                per_numa=_quantities(r.topology_aware_quantity_list),
                original_per_numa=_quantities(r.original_topology_aware_quantity_list),
            )
            for name, r in resources.items()
        }

    def get_topology_aware_allocatable_resources(
        self,
    ) -> dict[str, tuple[tuple[NUMAQuantity, ...], tuple[NUMAQuantity, ...]]]:
        """``GetTopologyAwareAllocatableResources``: resource → (allocatable, capacity) per NUMA."""
        answer = self._call(
            "GetTopologyAwareAllocatableResources",
            self._plugin.GetTopologyAwareAllocatableResources,
            rp_pb.GetTopologyAwareAllocatableResourcesRequest(),
            RESOURCE_CALL_TIMEOUT_S,
        )
        return {
            name: (
                _quantities(r.topology_aware_allocatable_quantity_list),
                _quantities(r.topology_aware_capacity_quantity_list),
            )
            for name, r in answer.allocatable_resources.items()
        }
