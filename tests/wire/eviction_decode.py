"""An eviction plugin's response, decoded as ``qrmd eviction plan --json`` prints an answer.

protobuf's ``json_format`` decodes every field (enums by name, int64 as numbers, fields left
at their default included); on top of it a message field that is not set is ``None`` (proto3
JSON leaves it out) and a pod object is its UID (``EvictPod.pod`` as ``pod_uid``,
``target_pods`` as ``pod_uids``), as ``policy.cpu.pressure.answers`` names them. A pod field
of another name is refused, so a field added to the protocol is noticed, not dropped.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

__all__ = ["decoded"]

_POD = "k8s.io.api.core.v1.Pod"
_POD_FIELDS = {"pod": "pod_uid", "target_pods": "pod_uids"}


def decoded(message: Message) -> dict[str, Any]:
    """``message`` as plain values (the module docstring)."""
    values = json_format.MessageToDict(
        message,
        always_print_fields_with_no_presence=True,
        preserving_proto_field_name=True,
        unquote_int64_if_possible=True,
    )
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is None:
            out[field.name] = values[field.name]
        elif field.message_type.full_name == _POD:
            if field.name not in _POD_FIELDS:
                raise AssertionError(f"a pod field {field.name!r} the plan does not name")
            key = _POD_FIELDS[field.name]
            if field.is_repeated:
                out[key] = [pod.metadata.uid for pod in value]
            else:
                out[key] = value.metadata.uid if message.HasField(field.name) else None
        elif field.is_repeated:
            out[field.name] = [decoded(item) for item in value]
        else:
            out[field.name] = decoded(value) if message.HasField(field.name) else None
    return out
