"""The reference's own checkpoint test state and the checksum each layout gives it.

Provenance: kubewharf/katalyst-core, file
``pkg/agent/qrm-plugins/cpu/dynamicpolicy/state/state_test.go``, ``TestNewCheckpointState``,
case "Restore valid checkpoint". Every release from v0.5.0 to v0.5.47 carries the same state
(three pods on the dummy (16,2,4) machine, pools ``reclaim`` and ``share``, no ``reserve``) and
the same JSON text, whose ``checksum`` the tag's own code verifies; only that number changes,
exactly where the layout does. The case "Restore checkpoint with invalid checksum" carries the
same text with checksum 2840585175 at every tag and must fail with "checkpoint is corrupted".

The state is rebuilt here from its description rather than copied; the checksums are quoted.
"""

from __future__ import annotations

import json
from typing import Any

from policy.state.katalyst_layouts import V0_5_0, V0_5_5, V0_5_12, V0_5_16, V0_5_34, KatalystLayout

#: The (16,2,4) dummy topology's NUMA nodes, as ``machine.GenerateDummyCPUTopology`` numbers them.
NUMA_CPUS = {0: "0-1,8-9", 1: "2-3,10-11", 2: "4-5,12-13", 3: "6-7,14-15"}
TOPOLOGY_SPEC = "synthetic:cpus=16,sockets=2,numas=4"
QOS_KEY = "katalyst.kubewharf.io/qos_level"

RECLAIMED_POD = "2432d068-c5a0-46ba-a7bd-b69d9bd16961"
SHARED_PODS = ("373d08e4-7a6b-4293-aaaf-b135ff8123bf", "ec6e2f30-c78a-4bc4-9576-c916db5281a3")
RECLAIM = ("5-8,10,13-15", {"0": "8", "1": "10", "2": "5,13", "3": "6-7,14-15"})
SHARE = ("1,3-4,9,11-12", {"0": "1,9", "1": "3,11", "2": "4,12"})

#: (layout, checksum its tests quote, the tags quoting it). Each tag range is the layout's.
UPSTREAM_VECTORS: list[tuple[KatalystLayout, int, str]] = [
    (V0_5_0, 1743112210, "v0.5.0 to v0.5.4"),
    (V0_5_5, 1563971849, "v0.5.5 to v0.5.11"),
    (V0_5_12, 4030123680, "v0.5.12 to v0.5.15"),
    (V0_5_16, 2664240898, "v0.5.16 to v0.5.33"),
    (V0_5_34, 219359606, "v0.5.34 to v0.5.47"),
]
#: "Restore checkpoint with invalid checksum", every tag.
INVALID_CHECKSUM = 2840585175


def _container(pod: str, qos: str, owner: str, cpus: str, split: dict[str, str]) -> dict[str, Any]:
    return {
        "pod_uid": pod,
        "pod_namespace": "test",
        "pod_name": "test",
        "container_name": "test",
        "container_type": "MAIN",
        "owner_pool_name": owner,
        "allocation_result": cpus,
        "original_allocation_result": cpus,
        "topology_aware_assignments": split,
        "original_topology_aware_assignments": split,
        "init_timestamp": "",
        "labels": {QOS_KEY: qos},
        "annotations": {QOS_KEY: qos},
        "qosLevel": qos,
        "request_quantity": 2,
    }


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


def _on_numa(record: dict[str, Any], numa: str) -> dict[str, Any] | None:
    part = record["topology_aware_assignments"].get(numa)
    if part is None:
        return None
    split = {numa: part}
    return {
        **record,
        "allocation_result": part,
        "original_allocation_result": part,
        "topology_aware_assignments": split,
        "original_topology_aware_assignments": split,
    }


def upstream_document(checksum: int) -> dict[str, Any]:
    """The "Restore valid checkpoint" file as a JSON-ready dict, ``checksum`` stored."""
    containers = {RECLAIMED_POD: _container(RECLAIMED_POD, "reclaimed_cores", "reclaim", *RECLAIM)}
    for pod in SHARED_PODS:
        containers[pod] = _container(pod, "shared_cores", "share", *SHARE)
    machine = {}
    for numa, cpus in NUMA_CPUS.items():
        pods = {
            pod: {"test": part}
            for pod, record in containers.items()
            if (part := _on_numa(record, str(numa))) is not None
        }
        machine[str(numa)] = {"default_cpuset": cpus, "allocated_cpuset": "", "pod_entries": pods}
    pod_entries = {pod: {"test": record} for pod, record in containers.items()}
    pod_entries["reclaim"] = {"": _pool("reclaim", *RECLAIM)}
    pod_entries["share"] = {"": _pool("share", *SHARE)}
    return {
        "policyName": "dynamic",
        "machineState": machine,
        "pod_entries": pod_entries,
        "checksum": checksum,
    }


def upstream_text(checksum: int) -> str:
    """The file, indented as the reference's test writes it."""
    return json.dumps(upstream_document(checksum), indent="\t")
