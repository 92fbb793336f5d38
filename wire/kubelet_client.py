"""The kubelet's gRPC client for one QRM plugin socket: every call with the kubelet's deadline.

The kubelet's side of the QRM protocol, for the kubelet simulator (``qrmd.sim.kubelet``) and
tests: one channel serving both services a plugin registers with (``pluginregistration``'s
``Registration`` and ``resourceplugin.v1alpha1.ResourcePlugin``). Calls take and return plain
values (``wire.kubelet_convert``, ``policy.cpu.request``), never protobuf messages.

Deadlines are the kubelet's (wire.md §9.6): dial 10 s (blocking), ``GetInfo`` 1 s,
``NotifyRegistrationStatus`` 5 s, ``GetResourcePluginOptions`` none, the six resource calls
10 s each, ``PreStartContainer`` 30 s. Every failure (dialing, a deadline, an error status, a
closed channel) is one ``PluginCallError`` naming the method and the gRPC status code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from policy.cpu.replies import PluginOptions
from policy.cpu.request import ResourceRequest, TopologyHint
from wire import kubelet_convert as convert
from wire.gen import pluginregistration_pb2 as reg_pb
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.gen import resourceplugin_pb2 as rp_pb
from wire.gen import resourceplugin_pb2_grpc as rp_grpc
from wire.kubelet_convert import (
    AllocatableResources,
    AllocationInfo,
    PluginInfo,
    PodAllocations,
    TopologyAwareResource,
)
from wire.sockets import dial

__all__ = [
    "DIAL_TIMEOUT_S",
    "GET_INFO_TIMEOUT_S",
    "NOTIFY_TIMEOUT_S",
    "PRE_START_TIMEOUT_S",
    "RESOURCE_CALL_TIMEOUT_S",
    "PluginCallError",
    "PluginConnection",
]

DIAL_TIMEOUT_S = 10.0
GET_INFO_TIMEOUT_S = 1.0
NOTIFY_TIMEOUT_S = 5.0
RESOURCE_CALL_TIMEOUT_S = 10.0
PRE_START_TIMEOUT_S = 30.0


class PluginCallError(Exception):
    """A call to the plugin failed: dialing, a deadline, or an error status.

    Attributes:
        method: the RPC (``Allocate``), or ``dial``.
        code: the gRPC status code's name (``DEADLINE_EXCEEDED``).
        details: the status message.
    """

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"{method} failed: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details


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
        # A plain blocking dial, not ``grpc.channel_ready_future``: see ``wire.sockets.dial``.
        if not dial(socket_path, dial_timeout_s):
            raise PluginCallError(
                "dial", "DEADLINE_EXCEEDED", f"{socket_path} not ready in {dial_timeout_s:g} s"
            )
        self._channel = grpc.insecure_channel(f"unix://{socket_path}")
        self._registration = reg_grpc.RegistrationStub(self._channel)  # type: ignore[no-untyped-call]
        self._plugin = rp_grpc.ResourcePluginStub(self._channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Close the channel; later calls fail with ``PluginCallError`` (``CANCELLED``)."""
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
        """``GetInfo`` with the 1 s deadline.

        Raises:
            PluginCallError: the call failed.
        """
        info = self._call(
            "GetInfo", self._registration.GetInfo, reg_pb.InfoRequest(), GET_INFO_TIMEOUT_S
        )
        return convert.plugin_info(info)

    def notify_registration_status(self, registered: bool, error: str = "") -> None:
        """``NotifyRegistrationStatus`` with the 5 s deadline.

        Args:
            registered: whether the kubelet registered the plugin.
            error: why not, when it did not.

        Raises:
            PluginCallError: the call failed.
        """
        self._call(
            "NotifyRegistrationStatus",
            self._registration.NotifyRegistrationStatus,
            reg_pb.RegistrationStatus(plugin_registered=registered, error=error),
            NOTIFY_TIMEOUT_S,
        )

    # -- resourceplugin.v1alpha1.ResourcePlugin (wire.md §4) -----------------------------------

    def get_resource_plugin_options(self) -> PluginOptions:
        """``GetResourcePluginOptions`` with no deadline (wire.md §8.1 step 4).

        Raises:
            PluginCallError: the call failed.
        """
        options = self._call(
            "GetResourcePluginOptions",
            self._plugin.GetResourcePluginOptions,
            rp_pb.Empty(),
            None,
        )
        return convert.plugin_options(options)

    def get_topology_hints(self, request: ResourceRequest) -> tuple[TopologyHint, ...] | None:
        """``GetTopologyHints`` for the request's resource (its ``hint`` should be ``None``).

        Args:
            request: the container's request.

        Returns:
            ``None`` for no preference (the answer lacks the resource key, wire.md §1.1),
            ``()`` for no feasible placement, else the hints in the plugin's order.

        Raises:
            PluginCallError: the call failed.
        """
        answer = self._call(
            "GetTopologyHints",
            self._plugin.GetTopologyHints,
            convert.request_message(request),
            RESOURCE_CALL_TIMEOUT_S,
        )
        return convert.hints_for(answer, request.resource_name)

    def allocate(self, request: ResourceRequest) -> dict[str, AllocationInfo] | None:
        """``Allocate`` with the request's ``hint`` (the chosen affinity).

        Args:
            request: the container's request.

        Returns:
            The allocation per resource name; ``None`` when the answer has none.

        Raises:
            PluginCallError: the call failed.
        """
        answer = self._call(
            "Allocate",
            self._plugin.Allocate,
            convert.request_message(request),
            RESOURCE_CALL_TIMEOUT_S,
        )
        return convert.allocation(answer)

    def get_resources_allocation(self) -> PodAllocations:
        """``GetResourcesAllocation``: pod UID → container name → resource → allocation.

        Raises:
            PluginCallError: the call failed.
        """
        answer = self._call(
            "GetResourcesAllocation",
            self._plugin.GetResourcesAllocation,
            rp_pb.GetResourcesAllocationRequest(),
            RESOURCE_CALL_TIMEOUT_S,
        )
        return convert.resources_allocation(answer)

    def pre_start_container(
        self, pod_uid: str, pod_namespace: str, pod_name: str, container_name: str
    ) -> None:
        """``PreStartContainer`` with the 30 s deadline (only if the plugin asked for it).

        Raises:
            PluginCallError: the call failed.
        """
        self._call(
            "PreStartContainer",
            self._plugin.PreStartContainer,
            convert.pre_start_message(pod_uid, pod_namespace, pod_name, container_name),
            PRE_START_TIMEOUT_S,
        )

    def remove_pod(self, pod_uid: str) -> None:
        """``RemovePod`` with the 10 s deadline.

        Raises:
            PluginCallError: the call failed.
        """
        self._call(
            "RemovePod",
            self._plugin.RemovePod,
            rp_pb.RemovePodRequest(pod_uid=pod_uid),
            RESOURCE_CALL_TIMEOUT_S,
        )

    def get_topology_aware_resources(
        self, pod_uid: str, container_name: str
    ) -> dict[str, TopologyAwareResource]:
        """``GetTopologyAwareResources`` for one container: resource name → breakdown.

        Raises:
            PluginCallError: the call failed (``NOT_FOUND`` for a container not held).
        """
        answer = self._call(
            "GetTopologyAwareResources",
            self._plugin.GetTopologyAwareResources,
            rp_pb.GetTopologyAwareResourcesRequest(pod_uid=pod_uid, container_name=container_name),
            RESOURCE_CALL_TIMEOUT_S,
        )
        return convert.topology_aware_resources(answer)

    def get_topology_aware_allocatable_resources(self) -> AllocatableResources:
        """``GetTopologyAwareAllocatableResources``: resource → (allocatable, capacity) per NUMA.

        Raises:
            PluginCallError: the call failed.
        """
        answer = self._call(
            "GetTopologyAwareAllocatableResources",
            self._plugin.GetTopologyAwareAllocatableResources,
            rp_pb.GetTopologyAwareAllocatableResourcesRequest(),
            RESOURCE_CALL_TIMEOUT_S,
        )
        return convert.allocatable_resources(answer)
