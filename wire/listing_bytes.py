"""GetResourcesAllocation's reply as the bytes of ``GetResourcesAllocationResponse``, pod by pod
(wire.md §4.3; kubelet lists every container every few seconds, wire.md §9.2).

The message is ``{pod uid: {container name: {"cpu": ResourceAllocationInfo}}}``: two nested
protobuf maps, and a map is a repeated field of entries (key = 1, value = 2). A message may be
written one field record at a time, so entries encoded apart and concatenated are the message;
the encoder writes each pod's entry itself and leaves each distinct ``ResourceAllocation`` to
protobuf. ``tests/wire/test_convert.py`` parses the bytes back with the generated class.

Written as bytes rather than built as a message: building 5,000 nested map entries with
protobuf's Python API costs ~100 ms where joining bytes costs ~10 ms (``bench/bench_grpc.py``),
and the bytes of a pod that did not change can be kept from one listing to the next.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy.cpu.allocation_listing import ContainerCPUAllocation, ResourcesAllocation
from policy.cpu.replies import RESOURCE_NAME
from wire.gen import resourceplugin_pb2 as pb

__all__ = ["ListingEncoder"]


def _container_allocation(allocation: ContainerCPUAllocation) -> bytes:
    """One container's serialized ``ResourceAllocation`` ``{"cpu": info}``, by protobuf."""
    # GetResourcesAllocation leaves resource_hints out (wire.md §4.3, ResourceAllocationInfo).
    info = pb.ResourceAllocationInfo(
        oci_property_name=allocation.oci_property_name,
        is_node_resource=allocation.is_node_resource,
        is_scalar_resource=allocation.is_scalar_resource,
        allocated_quantity=float(allocation.allocated_quantity),
        allocation_result=allocation.allocation_result,
    )
    return pb.ResourceAllocation(resource_allocation={RESOURCE_NAME: info}).SerializeToString()


_ONE_BYTE_VARINTS = tuple(bytes((value,)) for value in range(0x80))


def _varint(value: int) -> bytes:
    if value < 0x80:  # most lengths in a listing: one byte
        return _ONE_BYTE_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """One length-delimited field: ``tag``, the length as a varint, ``payload``."""
    return tag + _varint(len(payload)) + payload


# Tags of the length-delimited fields of a map entry and of the two maps (wire type 2):
# map entry key = 1, value = 2; GetResourcesAllocationResponse.pod_resources = 1;
# ContainerResources.container_resources = 1.
_KEY = b"\x0a"
_VALUE = b"\x12"
_ENTRY = b"\x0a"

#: A pod's allocations map (kept to compare by identity), its encoded map entry, and the key
#: field of that entry (its uid's, kept for when the pod's allocations change).
_PodBytes = tuple[Mapping[str, ContainerCPUAllocation], bytes, bytes]


class ListingEncoder:
    """Encodes GetResourcesAllocation replies, each pod's entry once per version of the pod.

    The policy hands out the very same reply value while the state has not changed, and, for
    a pod that has not changed, the very same allocations map
    (``policy.cpu.listing_parts``); both are immutable by contract, so their bytes are too.
    The encoder keeps the last reply's bytes and each of its pods' entry bytes, with the
    value encoded, and reuses them when handed the same value again; it keeps no pod the
    last reply did not list.

    One per served ResourcePlugin (``wire.resource_plugin.handler``). gRPC's threads may call
    it at once: what it keeps is one tuple replaced by a single assignment, so a call sees the
    old memo or the new one, never a mix, and a memo only ever saves work.
    """

    def __init__(self) -> None:
        self._last: tuple[ResourcesAllocation, bytes, dict[str, _PodBytes]] | None = None

    def kept_pods(self) -> frozenset[str]:
        """The pods whose entry bytes it keeps: those of the last reply encoded."""
        last = self._last
        return frozenset() if last is None else frozenset(last[2])

    def encode(self, reply: ResourcesAllocation) -> bytes:
        """The serialized ``GetResourcesAllocationResponse`` of ``reply``.

        Args:
            reply: the policy's listing.

        Returns:
            The response message's bytes; the same bytes object again for the same reply value.
        """
        last = self._last
        if last is not None and last[0] is reply:
            return last[1]
        kept = {} if last is None else last[2]
        pods: dict[str, _PodBytes] = {}
        # Within one call: the bytes of each distinct allocation and allocations map (pods on
        # one cpuset share them); keyed by id, the values being alive in ``reply`` meanwhile.
        values: dict[int, bytes] = {}
        bodies: dict[int, bytes] = {}
        for pod_uid, containers in reply.pod_resources.items():
            encoded = kept.get(pod_uid)
            if encoded is None or encoded[0] is not containers:
                body = bodies.get(id(containers))
                if body is None:
                    body = _field(_VALUE, _containers_bytes(containers, values))
                    bodies[id(containers)] = body
                key = _field(_KEY, pod_uid.encode()) if encoded is None else encoded[2]
                length = _varint(len(key) + len(body))
                encoded = (containers, b"".join((_ENTRY, length, key, body)), key)
            pods[pod_uid] = encoded
        answer = b"".join([encoded[1] for encoded in pods.values()])
        self._last = (reply, answer, pods)
        return answer


def _containers_bytes(
    containers: Mapping[str, ContainerCPUAllocation], values: dict[int, bytes]
) -> bytes:
    """A pod's ``ContainerResources`` message: its ``container_resources`` map entries."""
    entries = []
    for name, allocation in containers.items():
        value = values.get(id(allocation))
        if value is None:
            value = _container_allocation(allocation)
            values[id(allocation)] = value
        entries.append(_field(_ENTRY, _field(_KEY, name.encode()) + _field(_VALUE, value)))
    return b"".join(entries)
