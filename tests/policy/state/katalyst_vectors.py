"""The §13.4 test vectors as JSON text, built from the spec's layout (cpu-policy §13.2, §5.3).

Each is the document the reference writes, checksum field included; the spec gives the
checksum each must carry.
"""

from __future__ import annotations

import json
from typing import Any


def pool_entry(name: str, cpus: str) -> dict[str, Any]:
    """A pool entry exactly as §5.3 stores it on a one-NUMA machine."""
    return {
        "pod_uid": name,
        "owner_pool_name": name,
        "allocation_result": cpus,
        "original_allocation_result": cpus,
        "topology_aware_assignments": {"0": cpus},
        "original_topology_aware_assignments": {"0": cpus},
        "init_timestamp": "",
        "labels": None,
        "annotations": None,
        "qosLevel": "",
    }


CONTAINER_A: dict[str, Any] = {
    "pod_uid": "pod-a",
    "pod_namespace": "ns",
    "pod_name": "a",
    "container_name": "app",
    "container_type": "MAIN",
    "ramp_up": True,
    "allocation_result": "1-3",
    "original_allocation_result": "1-3",
    "topology_aware_assignments": {"0": "1-3"},
    "original_topology_aware_assignments": {"0": "1-3"},
    "init_timestamp": "2024-05-08 15:04:05.123456789 +0800 CST",
    "labels": {"katalyst.kubewharf.io/qos_level": "shared_cores"},
    "annotations": {"katalyst.kubewharf.io/qos_level": "shared_cores"},
    "qosLevel": "shared_cores",
    "request_quantity": 1.5,
}


def _v1(numa_pod_entries: Any = None) -> dict[str, Any]:
    return {
        "policyName": "dynamic",
        "machineState": {
            "0": {
                "default_cpuset": "0-3",
                "allocated_cpuset": "",
                "pod_entries": {} if numa_pod_entries is None else numa_pod_entries,
            }
        },
        "pod_entries": {},
        "checksum": 0,
    }


def _v2() -> dict[str, Any]:
    doc = _v1()
    doc["machineState"]["0"]["pod_entries"] = None
    return doc


def _v3() -> dict[str, Any]:
    doc = _v1()
    doc["pod_entries"] = {
        "reclaim": {"": pool_entry("reclaim", "1-3")},
        "reserve": {"": pool_entry("reserve", "0")},
    }
    return doc


def _v4() -> dict[str, Any]:
    doc = _v1({"pod-a": {"app": CONTAINER_A}})
    doc["pod_entries"] = {
        "pod-a": {"app": CONTAINER_A},
        "reserve": {"": pool_entry("reserve", "0")},
    }
    return doc


#: (name, document with checksum 0, the checksum §13.4 gives)
VECTORS: list[tuple[str, dict[str, Any], int]] = [
    ("V1", _v1(), 3111295241),
    ("V2", _v2(), 3780796496),
    ("V3", _v3(), 128712170),
    ("V4", _v4(), 4093228067),
]


def vector_text(name: str, **dumps: Any) -> str:
    """Vector ``name`` as JSON with its checksum, formatted by ``json.dumps(**dumps)``."""
    for found, doc, checksum in VECTORS:
        if found == name:
            return json.dumps({**doc, "checksum": checksum}, **dumps)
    raise KeyError(name)
