"""Reading the reference's ``cpu_plugin_state`` into a document (spec cpu-policy §13.2).

Readers MUST accept any valid JSON formatting and key order and ignore unknown keys; absent
fields take Go's zero values (``""``, 0, false, the uninitialized CPUSet, a null map), except
the top-level ``machineState`` and ``pod_entries``, which decode as empty maps when absent
and as null when explicitly null. The document's shape is ``policy.state.katalyst_file``'s.

The fields later layouts add (``policy.state.katalyst_layouts``) are read whatever the file's
layout: ``numa_headroom`` decodes as ``machineState`` does (v0.5.16+ ``NewCPUPluginCheckpoint``
makes it an empty map before unmarshalling), ``allow_shared_cores_overlap_reclaimed_cores`` as a
bool and a NUMA's ``pre_occ_pod_entries`` as a null map when absent. Which of them the file
named is kept under ``PRESENT_KEY``, for telling a layout by its fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from policy.errors import CodecError
from policy.state.katalyst_file import (
    AI_FIELDS,
    HEADROOM_KEY,
    OVERLAP_KEY,
    PRE_OCC_KEY,
    PRESENT_KEY,
    Document,
)
from policy.topology.cpuset import CPUSet

__all__ = ["decode_document"]

_UINT64_MAX: Final = 2**64 - 1


def _str(value: object, where: str) -> str:
    if value is None:
        return ""  # Go leaves a string field zero on null
    if not isinstance(value, str):
        raise CodecError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _uint(value: object, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UINT64_MAX:
        raise CodecError(f"{where}: expected an unsigned 64-bit integer, got {value!r:.40}")
    return value


def _bool(value: object, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise CodecError(f"{where}: expected a boolean, got {type(value).__name__}")
    return value


def _float(value: object, where: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"{where}: expected a number, got {type(value).__name__}")
    return float(value)


def _cpuset(value: object, where: str) -> CPUSet:
    if value is None:
        return CPUSet.uninitialized()
    if not isinstance(value, str):
        raise CodecError(f"{where}: expected a cpuset string, got {type(value).__name__}")
    try:
        return CPUSet.from_json(value)
    except ValueError as err:
        raise CodecError(f"{where}: {err}") from None


def _object(value: object, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CodecError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _int_key(key: str, where: str) -> int:
    try:
        return int(key, 10)
    except ValueError:
        raise CodecError(f"{where}: NUMA id {key!r:.20} is not an integer") from None


def _assign(value: object, where: str) -> dict[int, CPUSet] | None:
    items = _object(value, where)
    if items is None:
        return None
    return {_int_key(k, where): _cpuset(v, f"{where}.{k}") for k, v in items.items()}


def _smap(value: object, where: str) -> dict[str, str] | None:
    items = _object(value, where)
    if items is None:
        return None
    return {k: _str(v, f"{where}.{k}") for k, v in items.items()}


_DECODERS: Final[dict[str, Callable[[object, str], Any]]] = {
    "str": _str,
    "uint": _uint,
    "bool": _bool,
    "float": _float,
    "cpuset": _cpuset,
    "assign": _assign,
    "smap": _smap,
}


def _allocation_info(value: object, where: str) -> dict[str, Any] | None:
    items = _object(value, where)
    if items is None:
        return None
    return {key: _DECODERS[kind](items.get(key), f"{where}.{key}") for key, _, kind, _ in AI_FIELDS}


def _pods(value: object, where: str) -> dict[str, dict[str, Any] | None] | None:
    items = _object(value, where)
    if items is None:
        return None
    out: dict[str, dict[str, Any] | None] = {}
    for pod, containers in items.items():
        entries = _object(containers, f"{where}.{pod}")
        out[pod] = (
            None
            if entries is None
            else {
                name: _allocation_info(info, f"{where}.{pod}.{name}")
                for name, info in entries.items()
            }
        )
    return out


def _numa(value: object, where: str, present: set[str]) -> dict[str, Any] | None:
    items = _object(value, where)
    if items is None:
        return None
    if PRE_OCC_KEY in items:
        present.add(PRE_OCC_KEY)
    return {
        "default_cpuset": _cpuset(items.get("default_cpuset"), f"{where}.default_cpuset"),
        "allocated_cpuset": _cpuset(items.get("allocated_cpuset"), f"{where}.allocated_cpuset"),
        "pod_entries": _pods(items.get("pod_entries"), f"{where}.pod_entries"),
        PRE_OCC_KEY: _pods(items.get(PRE_OCC_KEY), f"{where}.{PRE_OCC_KEY}"),
    }


def _headroom(value: object, where: str) -> dict[int, float] | None:
    items = _object(value, where)
    if items is None:
        return None
    return {_int_key(k, where): _float(v, f"{where}.{k}") for k, v in items.items()}


def decode_document(text: str | bytes) -> Document:
    """The document a ``cpu_plugin_state`` file holds (§13.2 decoding defaults).

    Args:
        text: the file's bytes or text, any valid JSON formatting and key order.

    Returns:
        The document; unknown keys are dropped.

    Raises:
        CodecError: not JSON, or a field of the wrong type (the message names it).
    """
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise CodecError(f"checkpoint is not valid JSON: {err}") from None
    top = _object(raw, "checkpoint")
    if top is None:
        raise CodecError("checkpoint: expected an object, got null")
    present: set[str] = {key for key in (OVERLAP_KEY, HEADROOM_KEY) if key in top}
    machine: dict[int, Any] | None = {}
    if "machineState" in top:  # absent decodes as empty, explicit null as null (§13.2)
        numas = _object(top["machineState"], "machineState")
        machine = (
            None
            if numas is None
            else {
                _int_key(k, "machineState"): _numa(v, f"machineState.{k}", present)
                for k, v in numas.items()
            }
        )
    pods = _pods(top["pod_entries"], "pod_entries") if "pod_entries" in top else {}
    headroom = _headroom(top[HEADROOM_KEY], HEADROOM_KEY) if HEADROOM_KEY in top else {}
    return {
        "policyName": _str(top.get("policyName"), "policyName"),
        "machineState": machine,
        HEADROOM_KEY: headroom,
        "pod_entries": pods,
        OVERLAP_KEY: _bool(top.get(OVERLAP_KEY), OVERLAP_KEY),
        "checksum": _uint(top.get("checksum"), "checksum") & 0xFFFFFFFF,
        PRESENT_KEY: frozenset(present),
    }
