"""sys-advisor's messages ↔ qrmd's plain values (wire.md §1.1, §5.2, §6.3; cpu-policy §11.1).

* ``ContainerMetadata`` ↔ ``advisorsvc.ContainerMetadata`` (the enum by name, wire.md §4.2).
* ``AdvisorResponse`` ↔ the bytes of a ``cpuadvisor.ListAndWatchResponse``. The three map
  levels (entries, sub-entries, NUMA results) are read and written here by hand because Go
  puts nil messages in maps — a map entry with a key and **no value** — and Python's protobuf
  cannot tell that from an empty message (wire.md §1.1). A value absent on the wire is
  ``None`` in the plain value, a present empty one an empty map, so the validation rules for
  nil entries (cpu-policy §11.6) can apply. The messages inside (``NumaCalculationResult``
  and its blocks) go through the generated code. When a key repeats, the last entry wins, as
  in Go.
* Checkpoint entries → ``cpuadvisor.GetCheckpointResponse`` and back (wire.md §6.3): NUMA
  ids as ``uint64`` keys, cpusets as list strings, absent assignments left out.
* Katalyst v0.5.47: ``extra_entries`` (field 3 of the response, read only when asked: a v0.5.3
  plugin does not know the field), of which ``cpu_numa_headroom`` becomes the response's NUMA
  headroom (``policy.cpu.advisor.extra_entries``); the ``GetAdvice`` request and reply
  (``AdviceRequest`` ↔ ``cpuadvisor.GetAdviceRequest``, ``AdviceReply`` ↔ the bytes of a
  ``cpuadvisor.GetAdviceResponse``, whose fields 1-3 are ListAndWatch's); ``FeatureGate``.

A malformed message raises :class:`AdvisorWireError` naming where. So does a name longer than
Kubernetes allows for what it names (the bounds of kubelet's requests, ``policy.names``): an
entry is a pod UID or a pool name, a sub-entry a container name (or ``""`` for a pool), and
pool names, block ids and overlap targets are names too. A response is journaled as the cause
of the decision it feeds, so an advisor sending megabyte names would otherwise grow the journal
by as much on every change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Final

from google.protobuf.message import DecodeError

from policy.cpu.advisor.advice import AdviceReply, AdviceRequest, ContainerAllocation, FeatureGate
from policy.cpu.advisor.checkpoint import CheckpointEntry
from policy.cpu.advisor.extra_entries import (
    CPU_NUMA_HEADROOM,
    HeadroomFormatError,
    numa_headroom_of,
)
from policy.cpu.advisor.push import CONTAINER_TYPES, ContainerMetadata
from policy.cpu.advisor.response import (
    AdvisorResponse,
    Block,
    CalculationInfo,
    OverlapTarget,
    SubEntries,
)
from policy.names import (
    MAX_CONTAINER_NAME_BYTES,
    MAX_OPAQUE_NAME_BYTES,
    MAX_POD_UID_BYTES,
    shown,
    too_long,
)
from policy.topology.cpuset import CPUSet
from wire.gen import advisorsvc_pb2 as svc_pb
from wire.gen import cpuadvisor_pb2 as cpu_pb

__all__ = [
    "AdvisorWireError",
    "advice_reply_from_bytes",
    "advice_reply_to_bytes",
    "advice_request_from_proto",
    "advice_request_to_proto",
    "checkpoint_from_proto",
    "checkpoint_to_proto",
    "metadata_from_proto",
    "metadata_to_proto",
    "response_from_bytes",
    "response_to_bytes",
]

_TYPE_NAMES: Final = {v: k for k, v in CONTAINER_TYPES.items()}
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class AdvisorWireError(ValueError):
    """A message from sys-advisor that is not well formed; the message says where."""


# -- ContainerMetadata -----------------------------------------------------------------------


def metadata_to_proto(
    metadata: ContainerMetadata, *, at_v0_5_47: bool = False
) -> svc_pb.ContainerMetadata:
    """The ``advisorsvc.ContainerMetadata`` of a container.

    Args:
        metadata: the container's metadata.
        at_v0_5_47: send v0.5.47's fields 11-12; a v0.5.3 link leaves them off the wire.

    Raises:
        AdvisorWireError: the container type is not an enum name.
    """
    kind = CONTAINER_TYPES.get(metadata.container_type)
    if kind is None:
        raise AdvisorWireError(f"containerType: {metadata.container_type} not found")
    return svc_pb.ContainerMetadata(
        pod_uid=metadata.pod_uid,
        pod_namespace=metadata.pod_namespace,
        pod_name=metadata.pod_name,
        container_name=metadata.container_name,
        container_type=kind,  # type: ignore[arg-type]
        container_index=metadata.container_index,
        labels=dict(metadata.labels),
        annotations=dict(metadata.annotations),
        qos_level=metadata.qos_level,
        requestQuantity=metadata.request_quantity,
        # v0.5.47's fields; zero values are left off the wire.
        requestMilliQuantity=metadata.request_milli_quantity if at_v0_5_47 else 0,
        useMilliQuantity=metadata.use_milli_quantity and at_v0_5_47,
    )


def metadata_from_proto(message: svc_pb.ContainerMetadata) -> ContainerMetadata:
    """The plain value of a received ``ContainerMetadata`` (an unknown enum value by number)."""
    kind = int(message.container_type)
    return ContainerMetadata(
        pod_uid=message.pod_uid,
        pod_namespace=message.pod_namespace,
        pod_name=message.pod_name,
        container_name=message.container_name,
        container_type=_TYPE_NAMES.get(kind, str(kind)),
        container_index=message.container_index,
        labels=dict(message.labels),
        annotations=dict(message.annotations),
        qos_level=message.qos_level,
        request_quantity=message.requestQuantity,
        request_milli_quantity=message.requestMilliQuantity,
        use_milli_quantity=message.useMilliQuantity,
    )


# -- the wire format, by hand for the map levels --------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _len_field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | _LEN) + _varint(len(data)) + data


def _fields(data: bytes, where: str) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of each field; varints as ints, others as bytes."""
    pos, end = 0, len(data)

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= end or shift > 63:
                raise AdvisorWireError(f"{where}: truncated or overlong varint")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    while pos < end:
        key = varint()
        number, kind = key >> 3, key & 7
        if kind == _VARINT:
            yield number, kind, varint()
        elif kind == _LEN:
            size = varint()
            if pos + size > end:
                raise AdvisorWireError(f"{where}: field {number} runs past the message")
            yield number, kind, data[pos : pos + size]
            pos += size
        elif kind in (_I64, _I32):
            size = 8 if kind == _I64 else 4
            if pos + size > end:
                raise AdvisorWireError(f"{where}: field {number} runs past the message")
            yield number, kind, data[pos : pos + size]
            pos += size
        else:
            raise AdvisorWireError(f"{where}: field {number} has unsupported wire type {kind}")


def _map_entry(data: bytes, where: str) -> tuple[int | bytes, bytes | None]:
    """A map entry's key (varint or bytes) and value bytes (None: absent, Go's nil)."""
    key: int | bytes = b""
    value: bytes | None = None
    for number, _kind, field in _fields(data, where):
        if number == 1:
            key = field
        elif number == 2:
            if not isinstance(field, bytes):
                raise AdvisorWireError(f"{where}: map value is not a message")
            value = field
    return key, value


#: An entry is a pod UID or a pool name: the longer of the two bounds.
_MAX_ENTRY_BYTES: Final = max(MAX_POD_UID_BYTES, MAX_OPAQUE_NAME_BYTES)


def _text(value: int | bytes, where: str, limit: int) -> str:
    if not isinstance(value, bytes):
        raise AdvisorWireError(f"{where}: expected a string")
    try:
        text = value.decode()
    except UnicodeDecodeError:
        raise AdvisorWireError(f"{where}: not UTF-8") from None
    return _bounded(text, where, limit)


def _bounded(text: str, where: str, limit: int) -> str:
    refusal = too_long(text, where, limit)
    if refusal is not None:
        raise AdvisorWireError(f"{refusal}: {shown(text)!r}")
    return text


def _int64(value: int | bytes, where: str) -> int:
    if not isinstance(value, int):
        raise AdvisorWireError(f"{where}: expected an int64 key")
    return value - (1 << 64) if value >= 1 << 63 else value


def _blocks(data: bytes, where: str) -> tuple[Block, ...]:
    message = cpu_pb.NumaCalculationResult()
    try:
        message.ParseFromString(data)
    except DecodeError as err:
        raise AdvisorWireError(f"{where}: {err}") from None
    return tuple(
        Block(
            b.result,
            _bounded(b.block_id, f"{where}.block_id", MAX_OPAQUE_NAME_BYTES),
            tuple(
                OverlapTarget(
                    _bounded(
                        t.overlap_target_pool_name,
                        f"{where}.overlap_target_pool_name",
                        MAX_OPAQUE_NAME_BYTES,
                    ),
                    _bounded(
                        t.overlap_target_pod_uid,
                        f"{where}.overlap_target_pod_uid",
                        MAX_POD_UID_BYTES,
                    ),
                    _bounded(
                        t.overlap_target_container_name,
                        f"{where}.overlap_target_container_name",
                        MAX_CONTAINER_NAME_BYTES,
                    ),
                    int(t.overlap_type),
                )
                for t in b.overlap_targets
            ),
        )
        for b in message.blocks
    )


def _info(data: bytes, where: str) -> CalculationInfo:
    owner = ""
    numas: dict[int, tuple[Block, ...] | None] = {}
    for number, _kind, field in _fields(data, where):
        if number == 1:
            owner = _text(field, f"{where}.owner_pool_name", MAX_OPAQUE_NAME_BYTES)
        elif number == 2 and isinstance(field, bytes):
            key, value = _map_entry(field, f"{where}.numas")
            numa = _int64(key, f"{where}.numas key")
            numas[numa] = None if value is None else _blocks(value, f"{where}[{numa}]")
    return CalculationInfo(owner, numas)


def _extra_values(data: bytes, where: str) -> dict[str, str] | None:
    """An extra entry's control-knob values; None when it has no calculation result."""
    message = svc_pb.CalculationInfo()
    try:
        message.ParseFromString(data)
    except DecodeError as err:
        raise AdvisorWireError(f"{where}: {err}") from None
    if not message.HasField("calculation_result"):
        return None
    return dict(message.calculation_result.values)


def response_from_bytes(data: bytes, *, extra_entries: bool = False) -> AdvisorResponse:
    """A ``cpuadvisor.ListAndWatchResponse`` as received, nil map values kept as ``None``.

    Args:
        data: the message's bytes (a ``GetAdviceResponse``'s read the same way; its field 4
            is skipped here).
        extra_entries: read v0.5.47's ``extra_entries`` (their NUMA headroom); a v0.5.3
            plugin skips the field, as an unknown one.

    Raises:
        AdvisorWireError: the bytes are not a well-formed message, or the NUMA headroom does
            not decode.
    """
    entries: dict[str, SubEntries | None] = {}
    allow = False
    extras: list[dict[str, str] | None] = []
    for number, _kind, field in _fields(data, "ListAndWatchResponse"):
        if number == 2 and isinstance(field, int):
            allow = bool(field)
        elif number == 3 and extra_entries and isinstance(field, bytes):
            extras.append(_extra_values(field, f"extra_entries[{len(extras)}]"))
        elif number == 1 and isinstance(field, bytes):
            key, value = _map_entry(field, "entries")
            name = _text(key, "entries key", _MAX_ENTRY_BYTES)
            if value is None:
                entries[name] = None
                continue
            subs: dict[str, CalculationInfo | None] = {}
            for sub_number, _k, sub_field in _fields(value, f"entries[{name}]"):
                if sub_number != 1 or not isinstance(sub_field, bytes):
                    continue
                sub_key, sub_value = _map_entry(sub_field, f"entries[{name}]")
                sub = _text(sub_key, f"entries[{name}] key", MAX_CONTAINER_NAME_BYTES)
                where = f"entries[{name}][{sub}]"
                subs[sub] = None if sub_value is None else _info(sub_value, where)
            entries[name] = subs
    try:
        headroom = numa_headroom_of(extras)
    except HeadroomFormatError as err:
        raise AdvisorWireError(str(err)) from None
    if headroom is None:
        return AdvisorResponse(entries, allow)
    return AdvisorResponse(entries, allow, headroom, numa_headroom_sent=True)


def _info_bytes(info: CalculationInfo) -> bytes:
    out = _len_field(1, info.owner_pool_name.encode()) if info.owner_pool_name else b""
    for numa, blocks in sorted(info.numa_blocks.items()):
        entry = _varint(1 << 3 | _VARINT) + _varint(numa)
        if blocks is not None:
            result = cpu_pb.NumaCalculationResult(
                blocks=[
                    cpu_pb.Block(
                        result=b.result,
                        block_id=b.block_id,
                        overlap_targets=[
                            cpu_pb.OverlapTarget(
                                overlap_target_pool_name=t.pool_name,
                                overlap_target_pod_uid=t.pod_uid,
                                overlap_target_container_name=t.container_name,
                                overlap_type=t.overlap_type,  # type: ignore[arg-type]
                            )
                            for t in b.overlap_targets
                        ],
                    )
                    for b in blocks
                ]
            )
            entry += _len_field(2, result.SerializeToString())
        out += _len_field(2, entry)
    return out


def response_to_bytes(response: AdvisorResponse) -> bytes:
    """The wire bytes of a response; ``None`` values become keys with no value, as Go sends
    its nil messages (the simulator uses this to send what a Go advisor can)."""
    out = b""
    for name, subs in sorted(response.entries.items()):
        entry = _len_field(1, name.encode())
        if subs is not None:
            inner = b""
            for sub, info in sorted(subs.items()):
                sub_entry = _len_field(1, sub.encode())
                if info is not None:
                    sub_entry += _len_field(2, _info_bytes(info))
                inner += _len_field(1, sub_entry)
            entry += _len_field(2, inner)
        out += _len_field(1, entry)
    if response.allow_shared_cores_overlap_reclaimed_cores:
        out += _varint(2 << 3 | _VARINT) + _varint(1)
    if response.numa_headroom_sent:
        # As sys-advisor's assembleHeadroom sends it: one extra entry, JSON object by NUMA id.
        text = json.dumps(
            {str(numa): cpus for numa, cpus in sorted(response.numa_headroom.items())},
            separators=(",", ":"),
        )
        extra = svc_pb.CalculationInfo()
        extra.calculation_result.values[CPU_NUMA_HEADROOM] = text
        out += _len_field(3, extra.SerializeToString())
    return out


# -- GetAdvice (Katalyst v0.5.47) --------------------------------------------------------------


def _gate_to_proto(gate: FeatureGate) -> svc_pb.FeatureGate:
    return svc_pb.FeatureGate(
        name=gate.name, type=gate.type, must_mutually_supported=gate.must_mutually_supported
    )


def _gate_from_proto(message: svc_pb.FeatureGate) -> FeatureGate:
    return FeatureGate(message.name, message.type, message.must_mutually_supported)


def _allocation_to_proto(entry: CheckpointEntry, target: cpu_pb.AllocationInfo) -> None:
    target.ramp_up = entry.ramp_up
    target.owner_pool_name = entry.owner_pool_name
    if entry.topology_aware_assignments is not None:
        target.topology_aware_assignments.update(_assignments(entry.topology_aware_assignments))
    if entry.original_topology_aware_assignments is not None:
        target.original_topology_aware_assignments.update(
            _assignments(entry.original_topology_aware_assignments)
        )


def advice_request_to_proto(request: AdviceRequest) -> cpu_pb.GetAdviceRequest:
    """The ``cpuadvisor.GetAdviceRequest`` of a request.

    Raises:
        AdvisorWireError: a container type is not an enum name.
    """
    message = cpu_pb.GetAdviceRequest()
    for name, subs in request.entries.items():
        target = message.entries[name]
        for sub, item in subs.items():
            info = target.entries[sub]
            info.metadata.CopyFrom(metadata_to_proto(item.metadata, at_v0_5_47=True))
            _allocation_to_proto(item.allocation, info.allocation_info)
    for name, gate in request.wanted_feature_gates.items():
        message.wanted_feature_gates[name].CopyFrom(_gate_to_proto(gate))
    return message


def advice_request_from_proto(message: cpu_pb.GetAdviceRequest) -> AdviceRequest:
    """A received ``GetAdviceRequest`` as plain values (what a simulated advisor reads).

    Raises:
        AdvisorWireError: a cpuset string that does not parse.
    """
    entries: dict[str, dict[str, ContainerAllocation]] = {}
    for name, subs in message.entries.items():
        for sub, info in subs.entries.items():
            allocation = cpu_pb.GetCheckpointResponse()
            allocation.entries["x"].entries["x"].CopyFrom(info.allocation_info)
            entry = checkpoint_from_proto(allocation)["x"]["x"]
            entries.setdefault(name, {})[sub] = ContainerAllocation(
                metadata_from_proto(info.metadata), entry
            )
    gates = {k: _gate_from_proto(v) for k, v in message.wanted_feature_gates.items()}
    return AdviceRequest(entries, gates)


def advice_reply_from_bytes(data: bytes) -> AdviceReply:
    """A ``cpuadvisor.GetAdviceResponse`` as received: its fields 1-3 as a ListAndWatch
    response (nil map values kept, extra entries read), field 4 the supported feature gates.

    Raises:
        AdvisorWireError: the bytes are not a well-formed message.
    """
    response = response_from_bytes(data, extra_entries=True)
    gates: dict[str, FeatureGate] = {}
    for number, _kind, field in _fields(data, "GetAdviceResponse"):
        if number != 4 or not isinstance(field, bytes):
            continue
        key, value = _map_entry(field, "supported_feature_gates")
        name = _text(key, "supported_feature_gates key", MAX_OPAQUE_NAME_BYTES)
        message = svc_pb.FeatureGate()
        try:
            message.ParseFromString(value or b"")
        except DecodeError as err:
            raise AdvisorWireError(f"supported_feature_gates[{name}]: {err}") from None
        gates[name] = _gate_from_proto(message)
    return AdviceReply(response, gates)


def advice_reply_to_bytes(reply: AdviceReply) -> bytes:
    """The wire bytes of a GetAdvice reply (nil values as Go sends them)."""
    out = response_to_bytes(reply.response)
    for name, gate in sorted(reply.supported_feature_gates.items()):
        entry = _len_field(1, name.encode()) + _len_field(
            2, _gate_to_proto(gate).SerializeToString()
        )
        out += _len_field(4, entry)
    return out


# -- GetCheckpoint -----------------------------------------------------------------------------


def _assignments(value: Mapping[int, CPUSet]) -> dict[int, str]:
    return {numa: str(cpus) for numa, cpus in value.items() if numa >= 0}


def checkpoint_to_proto(
    entries: Mapping[str, Mapping[str, CheckpointEntry]],
) -> cpu_pb.GetCheckpointResponse:
    """The ``GetCheckpointResponse`` of checkpoint entries (cpu-policy §11.4)."""
    reply = cpu_pb.GetCheckpointResponse()
    for name, subs in entries.items():
        target = reply.entries[name]
        for sub, entry in subs.items():
            info = target.entries[sub]
            info.ramp_up = entry.ramp_up
            info.owner_pool_name = entry.owner_pool_name
            if entry.topology_aware_assignments is not None:
                info.topology_aware_assignments.update(
                    _assignments(entry.topology_aware_assignments)
                )
            if entry.original_topology_aware_assignments is not None:
                info.original_topology_aware_assignments.update(
                    _assignments(entry.original_topology_aware_assignments)
                )
    return reply


def checkpoint_from_proto(
    reply: cpu_pb.GetCheckpointResponse,
) -> dict[str, dict[str, CheckpointEntry]]:
    """Checkpoint entries as sys-advisor reads them (an empty assignment map reads as None,
    as proto3 cannot tell it from an absent one).

    Raises:
        AdvisorWireError: a cpuset string that does not parse.
    """
    out: dict[str, dict[str, CheckpointEntry]] = {}
    for name, subs in reply.entries.items():
        for sub, info in subs.entries.items():
            try:
                current = {k: CPUSet.parse(v) for k, v in info.topology_aware_assignments.items()}
                original = {
                    k: CPUSet.parse(v) for k, v in info.original_topology_aware_assignments.items()
                }
            except ValueError as err:
                raise AdvisorWireError(f"checkpoint entry {name}/{sub}: {err}") from None
            out.setdefault(name, {})[sub] = CheckpointEntry(
                info.ramp_up, info.owner_pool_name, current or None, original or None
            )
    return out
