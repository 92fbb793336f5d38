"""The ResourcePlugin served in process: kubelet's plain values through both halves of the wire
conversion, with no socket (the deterministic simulation's seam, ``qrmd sim``).

A call goes the whole way a gRPC call goes, minus the transport: the kubelet's plain request
becomes the message kubelet sends (``wire.kubelet_convert``), its bytes are parsed as the
server parses them, the server's row converts it to the Allocator's command
(``wire.resource_plugin.RESOURCE_PLUGIN_RPCS``); the Allocator's reply is converted by the
same row, its bytes parsed as the kubelet client parses them, and converted back to the plain
value the kubelet client returns. So the simulation exercises the conversion code the real
node runs, and protobuf types stay inside ``wire``.

The ask itself is the caller's (``command`` then ``answer``): the simulation's kubelet sends
without blocking and reads the reply when its scheduler delivers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from policy.cpu.commands import PluginCall
from policy.cpu.request import ResourceRequest
from wire import kubelet_convert
from wire.gen import resourceplugin_pb2 as pb
from wire.listing_bytes import ListingEncoder
from wire.resource_plugin import RESOURCE_PLUGIN_RPCS, ResourcePluginRpc

__all__ = ["LoopbackPlugin"]

_ROWS: dict[str, ResourcePluginRpc[Any, Any]] = {rpc.name: rpc for rpc in RESOURCE_PLUGIN_RPCS}


@dataclass(slots=True)
class LoopbackPlugin:
    """One kubelet's view of the plugin's service, in process.

    Its listing encoder is the server's (``wire.listing_bytes``): one per plugin, reused
    across listings, as the gRPC server keeps one.
    """

    encoder: ListingEncoder

    @classmethod
    def new(cls) -> LoopbackPlugin:
        """A plugin with a fresh listing encoder (a new server, after a restart)."""
        return cls(ListingEncoder())

    def hints(self, request: ResourceRequest) -> PluginCall[Any]:
        """``GetTopologyHints``' command, from kubelet's request (its hint unset)."""
        return _command("GetTopologyHints", kubelet_convert.request_message(request))

    def allocate(self, request: ResourceRequest) -> PluginCall[Any]:
        """``Allocate``'s command, from kubelet's request (the chosen hint set)."""
        return _command("Allocate", kubelet_convert.request_message(request))

    def remove_pod(self, pod_uid: str) -> PluginCall[Any]:
        """``RemovePod``'s command."""
        return _command("RemovePod", pb.RemovePodRequest(pod_uid=pod_uid))

    def resources_allocation(self) -> PluginCall[Any]:
        """``GetResourcesAllocation``'s command."""
        return _command("GetResourcesAllocation", pb.GetResourcesAllocationRequest())

    def options(self) -> PluginCall[Any]:
        """``GetResourcePluginOptions``' command."""
        return _command("GetResourcePluginOptions", pb.Empty())

    def answer(self, rpc: str, reply: Any, resource_name: str = "cpu") -> Any:
        """The plain value kubelet's client returns for the Allocator's ``reply`` to ``rpc``.

        Returns:
            GetTopologyHints: the hints (``kubelet_convert.hints_for``); Allocate: resource →
            ``AllocationInfo`` or None; GetResourcesAllocation: ``PodAllocations``;
            GetResourcePluginOptions: ``PluginOptions``; RemovePod: None.

        Raises:
            KeyError: ``rpc`` is not one of those.
        """
        row = _ROWS[rpc]
        if rpc == "GetResourcesAllocation":
            data = self.encoder.encode(reply)
        else:
            data = _bytes(row.response(reply))
        if rpc == "GetTopologyHints":
            hints = pb.ResourceHintsResponse.FromString(data)
            return kubelet_convert.hints_for(hints, resource_name)
        if rpc == "Allocate":
            return kubelet_convert.allocation(pb.ResourceAllocationResponse.FromString(data))
        if rpc == "GetResourcesAllocation":
            listing = pb.GetResourcesAllocationResponse.FromString(data)
            return kubelet_convert.resources_allocation(listing)
        if rpc == "GetResourcePluginOptions":
            return kubelet_convert.plugin_options(pb.ResourcePluginOptions.FromString(data))
        if rpc == "RemovePod":
            pb.RemovePodResponse.FromString(data)
            return None
        raise KeyError(f"the loopback plugin does not answer {rpc}")


def _command(rpc: str, message: Message) -> PluginCall[Any]:
    """The server's half: the bytes kubelet sends, parsed and converted as the server does."""
    row = _ROWS[rpc]
    return row.command(row.request_type.FromString(message.SerializeToString()))


def _bytes(response: Message | bytes) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()
