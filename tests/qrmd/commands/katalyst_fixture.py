"""A ``cpu_plugin_state`` as katalyst-agent v0.5.3 writes it, built from the spec's layout alone.

The node is the spec's (16,2,4) synthetic machine (cpu-policy §1.3, §16.2): NUMA 0 ``0-1,8-9``,
1 ``2-3,10-11``, 2 ``4-5,12-13``, 3 ``6-7,14-15``, reserve ``0,2``. It holds a dedicated
NUMA-binding exclusive container on NUMA 3, a shared container in ``share`` and a reclaimed
one in ``reclaim``, none ramping. Records follow §5.1 (field order, omissions), pools §5.3,
the machine state §5.4 as the reference regenerates it (``null`` for a NUMA with no
container), the bytes §13.2 and the checksum §13.4 — computed here with the function the V1–V4
vectors check. Local time with a named zone, as the reference writes timestamps (§5.7).
"""

from __future__ import annotations

import json
from typing import Any

from policy.state.katalyst_decode import decode_document
from policy.state.katalyst_file import HEADROOM_KEY, checksum_of, encode_document
from policy.state.katalyst_layouts import KatalystLayout

TOPOLOGY_SPEC = "synthetic:cpus=16,sockets=2,numas=4"
NUMA_CPUS = {0: "0-1,8-9", 1: "2-3,10-11", 2: "4-5,12-13", 3: "6-7,14-15"}
QOS_KEY = "katalyst.kubewharf.io/qos_level"
STAMP = "2024-05-08 15:04:05.123456789 +0800 CST"


def _pool(name: str, cpus: str, split: dict[str, str]) -> dict[str, Any]:
    return {
        "pod_uid": name,
        "owner_pool_name": name,
        "allocation_result": cpus,
        "original_allocation_result": cpus,
        "topology_aware_assignments": split,
        "original_topology_aware_assignments": split,
        "init_timestamp": "",
        "labels": None,
        "annotations": None,
        "qosLevel": "",
    }


def _container(
    pod: str, qos: str, owner: str, cpus: str, split: dict[str, str], quantity: float, **extra: str
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "pod_uid": pod,
        "pod_namespace": "default",
        "pod_name": f"name-{pod}",
        "container_name": "app",
        "container_type": "MAIN",
        "owner_pool_name": owner,
        "allocation_result": cpus,
        "original_allocation_result": cpus,
        "topology_aware_assignments": split,
        "original_topology_aware_assignments": split,
        "init_timestamp": STAMP,
        "labels": {QOS_KEY: qos},
        "annotations": {QOS_KEY: qos, **extra},
        "qosLevel": qos,
        "request_quantity": quantity,
    }
    return record


SHARE = ("1,3-4,9,11-12", {"0": "1,9", "1": "3,11", "2": "4,12"})
RECLAIM = ("5,8,10,13", {"0": "8", "1": "10", "2": "5,13"})
RESERVE = ("0,2", {"0": "0", "1": "2"})
DEDICATED = ("6-7,14-15", {"3": "6-7,14-15"})

WEB = _container("uid-web", "shared_cores", "share", *SHARE, 2)
BATCH = _container("uid-batch", "reclaimed_cores", "reclaim", *RECLAIM, 1.5)
DB = _container(
    "uid-db",
    "dedicated_cores",
    "dedicated",
    *DEDICATED,
    4,
    numa_binding="true",
    numa_exclusive="true",
)


def _on_numa(record: dict[str, Any], numa: int) -> dict[str, Any] | None:
    part = record["topology_aware_assignments"].get(str(numa))
    if part is None:
        return None
    return {
        **record,
        "allocation_result": part,
        "original_allocation_result": part,
        "topology_aware_assignments": {str(numa): part},
        "original_topology_aware_assignments": {str(numa): part},
    }


def document() -> dict[str, Any]:
    """The checkpoint as a JSON-ready dict, its checksum filled in."""
    containers = {"uid-batch": BATCH, "uid-db": DB, "uid-web": WEB}
    machine: dict[str, Any] = {}
    for numa, cpus in NUMA_CPUS.items():
        pods = {
            pod: {"app": part}
            for pod, record in containers.items()
            if (part := _on_numa(record, numa)) is not None
        }
        allocated = DEDICATED[0] if numa == 3 else ""
        machine[str(numa)] = {
            "default_cpuset": "" if numa == 3 else cpus,
            "allocated_cpuset": allocated,
            "pod_entries": pods or None,
        }
    pod_entries = {pod: {"app": record} for pod, record in containers.items()} | {
        "reclaim": {"": _pool("reclaim", *RECLAIM)},
        "reserve": {"": _pool("reserve", *RESERVE)},
        "share": {"": _pool("share", *SHARE)},
    }
    doc: dict[str, Any] = {
        "policyName": "dynamic",
        "machineState": machine,
        "pod_entries": dict(sorted(pod_entries.items())),
        "checksum": 0,
    }
    doc["checksum"] = checksum_of(decode_document(json.dumps(doc)))
    return doc


def file_bytes() -> bytes:
    """The file's bytes: compact, fields in the order above (the reference's)."""
    return json.dumps(document(), separators=(",", ":"), ensure_ascii=False).encode()


def file_bytes_in(layout: KatalystLayout) -> bytes:
    """The same checkpoint as the release ``layout`` would write it: its keys, its checksum.

    The later layouts' fields hold what a freshly started reference writes (no overlap, no
    advisor headroom, no pre-occupation). The checksum function is pinned to the reference's
    own vectors in ``tests/policy/state/test_katalyst_layouts.py``.
    """
    document = decode_document(file_bytes())
    document[HEADROOM_KEY] = None
    document["checksum"] = checksum_of(document, layout)
    return encode_document(document, layout)
