"""Field names, numbers and types of every message, against the tables of wire.md §3–§7.

The tables below are transcribed from wire.md, independently of the `.proto` files, so a
typo in either shows up here. Types read as in wire.md: a type of the message's own
package is named bare, a type of another package in full.
"""

import struct

import pytest
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, FileDescriptor

from wire.gen import (
    advisorsvc_pb2,
    cpuadvisor_pb2,
    evictionplugin_pb2,
    k8s_core_v1_pb2,
    k8s_meta_v1_pb2,
    k8s_resource_pb2,
    pluginregistration_pb2,
    resourceplugin_pb2,
)

FILES: list[FileDescriptor] = [
    pluginregistration_pb2.DESCRIPTOR,
    resourceplugin_pb2.DESCRIPTOR,
    advisorsvc_pb2.DESCRIPTOR,
    cpuadvisor_pb2.DESCRIPTOR,
    evictionplugin_pb2.DESCRIPTOR,
    k8s_core_v1_pb2.DESCRIPTOR,
    k8s_meta_v1_pb2.DESCRIPTOR,
    k8s_resource_pb2.DESCRIPTOR,
]
PROTO2_FILES = {"k8s_core_v1.proto", "k8s_meta_v1.proto", "k8s_resource.proto"}

RP = "resourceplugin.v1alpha1"
EP = "evictionplugin.v1alpha1"
CORE = "k8s.io.api.core.v1"
META = "k8s.io.apimachinery.pkg.apis.meta.v1"

# message full name → "name number type" lines (wire.md §3, §4.3, §5.2, §6.3, §7.3, §7.4).
FIELDS: dict[str, str] = {
    # §3 pluginregistration
    "pluginregistration.InfoRequest": "",
    "pluginregistration.PluginInfo": """
        type                 1  string
        name                 2  string
        endpoint             3  string
        supported_versions   4  repeated string
    """,
    "pluginregistration.RegistrationStatus": """
        plugin_registered    1  bool
        error                2  string
    """,
    "pluginregistration.RegistrationStatusResponse": "",
    # §4.3 resourceplugin.v1alpha1
    f"{RP}.ResourcePluginOptions": """
        pre_start_required        1  bool
        with_topology_alignment   2  bool
        need_reconcile            3  bool
    """,
    f"{RP}.RegisterRequest": """
        version         1  string
        endpoint        2  string
        resource_name   3  string
        options         4  ResourcePluginOptions
    """,
    f"{RP}.ResourceRequest": """
        pod_uid             1  string
        pod_namespace       2  string
        pod_name            3  string
        container_name      4  string
        container_type      5  ContainerType
        container_index     6  uint64
        pod_role            7  string
        pod_type            8  string
        resource_name       9  string
        hint               10  TopologyHint
        resource_requests  11  map<string, double>
        labels             12  map<string, string>
        annotations        13  map<string, string>
        native_qos_class   14  string
    """,
    f"{RP}.ResourceHintsResponse": """
        pod_uid             1  string
        pod_namespace       2  string
        pod_name            3  string
        container_name      4  string
        container_type      5  ContainerType
        container_index     6  uint64
        pod_role            7  string
        pod_type            8  string
        resource_name       9  string
        resource_hints     10  map<string, ListOfTopologyHints>
        labels             11  map<string, string>
        annotations        12  map<string, string>
        native_qos_class   13  string
    """,
    f"{RP}.ResourceAllocationResponse": """
        pod_uid             1  string
        pod_namespace       2  string
        pod_name            3  string
        container_name      4  string
        container_type      5  ContainerType
        container_index     6  uint64
        pod_role            7  string
        pod_type            8  string
        resource_name       9  string
        allocation_result  10  ResourceAllocation
        labels             11  map<string, string>
        annotations        12  map<string, string>
        native_qos_class   13  string
    """,
    f"{RP}.ListOfTopologyHints": """
        hints   1  repeated TopologyHint
    """,
    f"{RP}.TopologyHint": """
        nodes       1  repeated uint64 (packed)
        preferred   2  bool
    """,
    f"{RP}.Empty": "",
    f"{RP}.RemovePodRequest": """
        pod_uid   1  string
    """,
    f"{RP}.RemovePodResponse": "",
    f"{RP}.GetResourcesAllocationRequest": "",
    f"{RP}.GetResourcesAllocationResponse": """
        pod_resources   1  map<string, ContainerResources>
    """,
    f"{RP}.ContainerResources": """
        container_resources   1  map<string, ResourceAllocation>
    """,
    f"{RP}.ResourceAllocation": """
        resource_allocation   1  map<string, ResourceAllocationInfo>
    """,
    f"{RP}.ResourceAllocationInfo": """
        oci_property_name    1  string
        is_node_resource     2  bool
        is_scalar_resource   3  bool
        allocated_quantity   4  double
        allocation_result    5  string
        envs                 6  map<string, string>
        annotations          7  map<string, string>
        resource_hints       8  ListOfTopologyHints
    """,
    f"{RP}.GetTopologyAwareResourcesRequest": """
        pod_uid          1  string
        container_name   2  string
    """,
    f"{RP}.GetTopologyAwareResourcesResponse": """
        pod_uid                              1  string
        pod_name                             2  string
        pod_namespace                        3  string
        container_topology_aware_resources   4  ContainerTopologyAwareResources
    """,
    f"{RP}.ContainerTopologyAwareResources": """
        container_name        1  string
        allocated_resources   2  map<string, TopologyAwareResource>
    """,
    f"{RP}.TopologyAwareResource": """
        is_node_resource                        1  bool
        is_scalar_resource                      2  bool
        aggregated_quantity                     3  double
        original_aggregated_quantity            4  double
        topology_aware_quantity_list            5  repeated TopologyAwareQuantity
        original_topology_aware_quantity_list   6  repeated TopologyAwareQuantity
    """,
    f"{RP}.TopologyAwareQuantity": """
        resource_value   1  double
        node             2  uint64
        name             3  string
        type             4  string
        topology_level   5  TopologyLevel
        annotations      6  map<string, string>
    """,
    f"{RP}.GetTopologyAwareAllocatableResourcesRequest": "",
    f"{RP}.GetTopologyAwareAllocatableResourcesResponse": """
        allocatable_resources   1  map<string, AllocatableTopologyAwareResource>
    """,
    f"{RP}.AllocatableTopologyAwareResource": """
        is_node_resource                           1  bool
        is_scalar_resource                         2  bool
        aggregated_allocatable_quantity            3  double
        topology_aware_allocatable_quantity_list   4  repeated TopologyAwareQuantity
        aggregated_capacity_quantity               5  double
        topology_aware_capacity_quantity_list      6  repeated TopologyAwareQuantity
    """,
    f"{RP}.PreStartContainerRequest": """
        pod_uid          1  string
        pod_namespace    2  string
        pod_name         3  string
        container_name   4  string
    """,
    f"{RP}.PreStartContainerResponse": "",
    # §5.2 advisorsvc
    "advisorsvc.ContainerMetadata": f"""
        pod_uid            1  string
        pod_namespace      2  string
        pod_name           3  string
        container_name     4  string
        container_type     5  {RP}.ContainerType
        container_index    6  uint64
        labels             7  map<string, string>
        annotations        8  map<string, string>
        qos_level          9  string
        requestQuantity        10  uint64
        requestMilliQuantity   11  uint64
        useMilliQuantity       12  bool
    """,
    "advisorsvc.AddContainerResponse": "",
    "advisorsvc.Empty": "",
    "advisorsvc.RemovePodRequest": """
        pod_uid   1  string
    """,
    "advisorsvc.RemovePodResponse": "",
    "advisorsvc.ListAndWatchResponse": """
        pod_entries     1  map<string, CalculationEntries>
        extra_entries   2  repeated CalculationInfo
    """,
    "advisorsvc.CalculationEntries": """
        container_entries   1  map<string, CalculationInfo>
    """,
    "advisorsvc.CalculationInfo": """
        cgroup_path          1  string
        calculation_result   2  CalculationResult
    """,
    "advisorsvc.CalculationResult": """
        values   1  map<string, string>
    """,
    "advisorsvc.ListContainersResponse": """
        containers   1  repeated ContainerMetadata
    """,
    # Katalyst v0.5.47's additions (pkg/agent/qrm-plugins/advisorsvc/advisor_svc.proto at tag)
    "advisorsvc.ContainerMetadataEntries": """
        entries   1  map<string, ContainerMetadata>
    """,
    "advisorsvc.GetAdviceRequest": """
        entries                1  map<string, ContainerMetadataEntries>
        wanted_feature_gates   2  map<string, FeatureGate>
    """,
    "advisorsvc.GetAdviceResponse": """
        pod_entries               1  map<string, CalculationEntries>
        extra_entries             2  repeated CalculationInfo
        supported_feature_gates   3  map<string, FeatureGate>
    """,
    "advisorsvc.FeatureGate": """
        name                      1  string
        type                      2  string
        must_mutually_supported   3  bool
    """,
    # §6.3 cpuadvisor
    "cpuadvisor.ListAndWatchResponse": """
        entries                                      1  map<string, CalculationEntries>
        allow_shared_cores_overlap_reclaimed_cores   2  bool
        extra_entries                                3  repeated advisorsvc.CalculationInfo
    """,
    "cpuadvisor.CalculationEntries": """
        entries   1  map<string, CalculationInfo>
    """,
    "cpuadvisor.CalculationInfo": """
        owner_pool_name                1  string
        calculation_results_by_numas   2  map<int64, NumaCalculationResult>
    """,
    "cpuadvisor.NumaCalculationResult": """
        blocks   2  repeated Block
    """,
    "cpuadvisor.Block": """
        result            1  uint64
        overlap_targets   2  repeated OverlapTarget
        block_id          3  string
    """,
    "cpuadvisor.OverlapTarget": """
        overlap_target_pool_name        1  string
        overlap_target_pod_uid          2  string
        overlap_target_container_name   3  string
        overlap_type                    4  OverlapType
    """,
    "cpuadvisor.GetCheckpointRequest": "",
    "cpuadvisor.GetCheckpointResponse": """
        entries   1  map<string, AllocationEntries>
    """,
    "cpuadvisor.AllocationEntries": """
        entries   1  map<string, AllocationInfo>
    """,
    "cpuadvisor.AllocationInfo": """
        ramp_up                               1  bool
        owner_pool_name                       2  string
        topology_aware_assignments            3  map<uint64, string>
        original_topology_aware_assignments   4  map<uint64, string>
    """,
    # Katalyst v0.5.47's additions (cpu/dynamicpolicy/cpuadvisor/cpu.proto at tag)
    "cpuadvisor.ContainerAllocationInfo": """
        metadata          1  advisorsvc.ContainerMetadata
        allocation_info   2  AllocationInfo
    """,
    "cpuadvisor.ContainerAllocationInfoEntries": """
        entries   1  map<string, ContainerAllocationInfo>
    """,
    "cpuadvisor.GetAdviceRequest": """
        entries                1  map<string, ContainerAllocationInfoEntries>
        wanted_feature_gates   2  map<string, advisorsvc.FeatureGate>
    """,
    "cpuadvisor.GetAdviceResponse": """
        entries                                      1  map<string, CalculationEntries>
        allow_shared_cores_overlap_reclaimed_cores   2  bool
        extra_entries                                3  repeated advisorsvc.CalculationInfo
        supported_feature_gates                      4  map<string, advisorsvc.FeatureGate>
    """,
    # §7.3 evictionplugin.v1alpha1
    f"{EP}.Empty": "",
    f"{EP}.Condition": """
        condition_type   1  ConditionType
        effects          2  repeated string
        condition_name   3  string
        met_condition    4  bool
    """,
    f"{EP}.ThresholdMetResponse": """
        threshold_value        1  double
        observed_value         2  double
        threshold_operator     3  ThresholdOperator
        met_type               4  ThresholdMetType
        eviction_scope         5  string
        grace_period_seconds   6  int64
        condition              7  Condition
    """,
    # §13: a later agent's ThresholdMet request, declared to be future-proof.
    f"{EP}.GetThresholdMetRequest": f"""
        active_pods   1  repeated {CORE}.Pod
    """,
    f"{EP}.GetTopEvictionPodsRequest": f"""
        active_pods      1  repeated {CORE}.Pod
        topN             2  uint64
        eviction_scope   3  string
    """,
    f"{EP}.GetTopEvictionPodsResponse": f"""
        target_pods        1  repeated {CORE}.Pod
        deletion_options   2  DeletionOptions
    """,
    f"{EP}.EvictPod": f"""
        pod                    1  {CORE}.Pod
        reason                 2  string
        deletion_options       3  DeletionOptions
        force_evict            4  bool
        eviction_plugin_name   5  string
    """,
    f"{EP}.GetEvictPodsRequest": f"""
        active_pods   1  repeated {CORE}.Pod
    """,
    f"{EP}.GetEvictPodsResponse": """
        evict_pods   1  repeated EvictPod
        condition    2  Condition
    """,
    f"{EP}.GetTokenResponse": """
        token   1  string
    """,
    f"{EP}.DeletionOptions": """
        grace_period_seconds   1  int64
    """,
    # §7.4 the Pod subset
    f"{CORE}.Pod": f"""
        metadata   1  {META}.ObjectMeta
        spec       2  PodSpec
        status     3  PodStatus
    """,
    f"{CORE}.PodSpec": """
        volumes             1  repeated Volume
        containers          2  repeated Container
        nodeName           10  string
        hostNetwork        11  bool
        initContainers     20  repeated Container
        priorityClassName  24  string
        priority           25  int32
    """,
    f"{CORE}.Volume": """
        name   1  string
    """,
    f"{CORE}.Container": """
        name        1  string
        resources   8  ResourceRequirements
    """,
    f"{CORE}.ResourceRequirements": """
        limits     1  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity>
        requests   2  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity>
    """,
    f"{CORE}.PodStatus": """
        phase                    1  string
        containerStatuses        8  repeated ContainerStatus
        qosClass                 9  string
        initContainerStatuses   10  repeated ContainerStatus
    """,
    f"{CORE}.ContainerStatus": """
        name          1  string
        containerID   8  string
    """,
    f"{META}.ObjectMeta": """
        name                         1  string
        generateName                 2  string
        namespace                    3  string
        selfLink                     4  string
        uid                          5  string
        resourceVersion              6  string
        generation                   7  int64
        creationTimestamp            8  Time
        deletionTimestamp            9  Time
        deletionGracePeriodSeconds  10  int64
        labels                      11  map<string, string>
        annotations                 12  map<string, string>
        ownerReferences             13  repeated OwnerReference
        finalizers                  14  repeated string
        clusterName                 15  string
    """,
    f"{META}.Time": """
        seconds   1  int64
        nanos     2  int32
    """,
    f"{META}.OwnerReference": """
        kind                 1  string
        name                 3  string
        uid                  4  string
        apiVersion           5  string
        controller           6  bool
        blockOwnerDeletion   7  bool
    """,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": """
        string   1  string
    """,
}

# enum full name → "NAME value" pairs (wire.md §4.2, §6.2, §7.2).
ENUMS: dict[str, str] = {
    f"{RP}.ContainerType": "INIT 0 MAIN 1 SIDECAR 2 EPHEMERAL 3",
    f"{RP}.TopologyLevel": "NUMA 0 SOCKET 1",
    "cpuadvisor.OverlapType": "OverlapWithPod 0 OverlapWithPool 1",
    f"{EP}.ThresholdMetType": "NOT_MET 0 SOFT_MET 1 HARD_MET 2",
    f"{EP}.ThresholdOperator": "LESS_THAN 0 GREATER_THAN 1",
    f"{EP}.ConditionType": "NODE_CONDITION 0 CNR_CONDITION 1",
}


def _all_messages() -> dict[str, Descriptor]:
    return {m.full_name: m for f in FILES for m in f.message_types_by_name.values()}


def _all_enums() -> dict[str, EnumDescriptor]:
    return {e.full_name: e for f in FILES for e in f.enum_types_by_name.values()}


_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
}


def _type_name(field: FieldDescriptor, package: str) -> str:
    """The field's type as wire.md writes it, without `repeated`."""
    named = field.message_type or field.enum_type
    if named is None:
        return _SCALARS[field.type]
    local = named.full_name.removeprefix(package + ".")
    return local if "." not in local else named.full_name


def describe(field: FieldDescriptor, package: str) -> str:
    """`map<K, V>`, `repeated T`, `repeated T (packed)` or `T`, as in the wire.md tables."""
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return f"map<{_type_name(key, package)}, {_type_name(value, package)}>"
    text = _type_name(field, package)
    if field.is_repeated:
        text = f"repeated {text}" + (" (packed)" if field.is_packed else "")
    return text


def _rows(table: str) -> list[tuple[str, int, str]]:
    rows = []
    for line in table.strip().splitlines():
        name, number, type_text = line.split(maxsplit=2)
        rows.append((name, int(number), type_text))
    return rows


@pytest.mark.parametrize(("message", "table"), FIELDS.items(), ids=list(FIELDS))
def test_fields_match_wire_md(message: str, table: str) -> None:
    descriptor = _all_messages()[message]
    package = descriptor.file.package
    got = [(f.name, f.number, describe(f, package)) for f in descriptor.fields]
    assert sorted(got, key=lambda r: r[1]) == sorted(_rows(table), key=lambda r: r[1])


def test_every_declared_message_is_in_the_table() -> None:
    assert set(_all_messages()) == set(FIELDS)


@pytest.mark.parametrize(("enum", "values"), ENUMS.items(), ids=list(ENUMS))
def test_enum_values_match_wire_md(enum: str, values: str) -> None:
    words = values.split()
    want = {name: int(number) for name, number in zip(words[::2], words[1::2], strict=True)}
    assert {v.name: v.number for v in _all_enums()[enum].values} == want


def test_every_declared_enum_is_in_the_table() -> None:
    assert set(_all_enums()) == set(ENUMS)


def test_kubernetes_subset_keeps_presence_like_go_pointers() -> None:
    # proto2 upstream: an explicit zero (priority: 0, controller: false) is sent and kept,
    # while the proto3 protocols never carry presence for scalars.
    for file in FILES:
        for message in file.message_types_by_name.values():
            for field in message.fields:
                if field.is_repeated or field.message_type is not None:
                    continue
                assert field.has_presence == (file.name in PROTO2_FILES), field.full_name


# --- encodings wire.md §1 calls out -------------------------------------------------


def test_topology_hint_nodes_are_packed() -> None:
    hint = resourceplugin_pb2.TopologyHint(nodes=[0, 1], preferred=True)
    assert hint.SerializeToString() == b"\x0a\x02\x00\x01" + b"\x10\x01"


def test_not_numa_specific_key_is_a_ten_byte_varint() -> None:
    info = cpuadvisor_pb2.CalculationInfo()
    info.calculation_results_by_numas[-1].blocks.add(result=2, block_id="b")
    entry_key = b"\x08" + b"\xff" * 9 + b"\x01"
    assert entry_key in info.SerializeToString()
    assert cpuadvisor_pb2.CalculationInfo.FromString(info.SerializeToString()) == info


def test_request_quantity_is_a_fixed64_double() -> None:
    request = resourceplugin_pb2.ResourceRequest(resource_requests={"cpu": 1.5})
    entry = b"\x0a\x03cpu" + b"\x11" + struct.pack("<d", 1.5)
    assert request.SerializeToString() == b"\x5a" + bytes([len(entry)]) + entry
