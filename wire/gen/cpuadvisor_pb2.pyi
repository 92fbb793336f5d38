from wire.gen import advisorsvc_pb2 as _advisorsvc_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OverlapType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OverlapWithPod: _ClassVar[OverlapType]
    OverlapWithPool: _ClassVar[OverlapType]
OverlapWithPod: OverlapType
OverlapWithPool: OverlapType

class ListAndWatchResponse(_message.Message):
    __slots__ = ("entries", "allow_shared_cores_overlap_reclaimed_cores", "extra_entries")
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CalculationEntries
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CalculationEntries, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SHARED_CORES_OVERLAP_RECLAIMED_CORES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, CalculationEntries]
    allow_shared_cores_overlap_reclaimed_cores: bool
    extra_entries: _containers.RepeatedCompositeFieldContainer[_advisorsvc_pb2.CalculationInfo]
    def __init__(self, entries: _Optional[_Mapping[str, CalculationEntries]] = ..., allow_shared_cores_overlap_reclaimed_cores: _Optional[bool] = ..., extra_entries: _Optional[_Iterable[_Union[_advisorsvc_pb2.CalculationInfo, _Mapping]]] = ...) -> None: ...

class CalculationEntries(_message.Message):
    __slots__ = ("entries",)
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CalculationInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CalculationInfo, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, CalculationInfo]
    def __init__(self, entries: _Optional[_Mapping[str, CalculationInfo]] = ...) -> None: ...

class CalculationInfo(_message.Message):
    __slots__ = ("owner_pool_name", "calculation_results_by_numas")
    class CalculationResultsByNumasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: NumaCalculationResult
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[NumaCalculationResult, _Mapping]] = ...) -> None: ...
    OWNER_POOL_NAME_FIELD_NUMBER: _ClassVar[int]
    CALCULATION_RESULTS_BY_NUMAS_FIELD_NUMBER: _ClassVar[int]
    owner_pool_name: str
    calculation_results_by_numas: _containers.MessageMap[int, NumaCalculationResult]
    def __init__(self, owner_pool_name: _Optional[str] = ..., calculation_results_by_numas: _Optional[_Mapping[int, NumaCalculationResult]] = ...) -> None: ...

class NumaCalculationResult(_message.Message):
    __slots__ = ("blocks",)
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedCompositeFieldContainer[Block]
    def __init__(self, blocks: _Optional[_Iterable[_Union[Block, _Mapping]]] = ...) -> None: ...

class Block(_message.Message):
    __slots__ = ("result", "overlap_targets", "block_id")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_TARGETS_FIELD_NUMBER: _ClassVar[int]
    BLOCK_ID_FIELD_NUMBER: _ClassVar[int]
    result: int
    overlap_targets: _containers.RepeatedCompositeFieldContainer[OverlapTarget]
    block_id: str
    def __init__(self, result: _Optional[int] = ..., overlap_targets: _Optional[_Iterable[_Union[OverlapTarget, _Mapping]]] = ..., block_id: _Optional[str] = ...) -> None: ...

class OverlapTarget(_message.Message):
    __slots__ = ("overlap_target_pool_name", "overlap_target_pod_uid", "overlap_target_container_name", "overlap_type")
    OVERLAP_TARGET_POOL_NAME_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_TARGET_POD_UID_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_TARGET_CONTAINER_NAME_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_TYPE_FIELD_NUMBER: _ClassVar[int]
    overlap_target_pool_name: str
    overlap_target_pod_uid: str
    overlap_target_container_name: str
    overlap_type: OverlapType
    def __init__(self, overlap_target_pool_name: _Optional[str] = ..., overlap_target_pod_uid: _Optional[str] = ..., overlap_target_container_name: _Optional[str] = ..., overlap_type: _Optional[_Union[OverlapType, str]] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCheckpointResponse(_message.Message):
    __slots__ = ("entries",)
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AllocationEntries
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AllocationEntries, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, AllocationEntries]
    def __init__(self, entries: _Optional[_Mapping[str, AllocationEntries]] = ...) -> None: ...

class AllocationEntries(_message.Message):
    __slots__ = ("entries",)
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AllocationInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AllocationInfo, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, AllocationInfo]
    def __init__(self, entries: _Optional[_Mapping[str, AllocationInfo]] = ...) -> None: ...

class AllocationInfo(_message.Message):
    __slots__ = ("ramp_up", "owner_pool_name", "topology_aware_assignments", "original_topology_aware_assignments")
    class TopologyAwareAssignmentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    class OriginalTopologyAwareAssignmentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    RAMP_UP_FIELD_NUMBER: _ClassVar[int]
    OWNER_POOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_AWARE_ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_TOPOLOGY_AWARE_ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    ramp_up: bool
    owner_pool_name: str
    topology_aware_assignments: _containers.ScalarMap[int, str]
    original_topology_aware_assignments: _containers.ScalarMap[int, str]
    def __init__(self, ramp_up: _Optional[bool] = ..., owner_pool_name: _Optional[str] = ..., topology_aware_assignments: _Optional[_Mapping[int, str]] = ..., original_topology_aware_assignments: _Optional[_Mapping[int, str]] = ...) -> None: ...

class ContainerAllocationInfo(_message.Message):
    __slots__ = ("metadata", "allocation_info")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_INFO_FIELD_NUMBER: _ClassVar[int]
    metadata: _advisorsvc_pb2.ContainerMetadata
    allocation_info: AllocationInfo
    def __init__(self, metadata: _Optional[_Union[_advisorsvc_pb2.ContainerMetadata, _Mapping]] = ..., allocation_info: _Optional[_Union[AllocationInfo, _Mapping]] = ...) -> None: ...

class ContainerAllocationInfoEntries(_message.Message):
    __slots__ = ("entries",)
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ContainerAllocationInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ContainerAllocationInfo, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, ContainerAllocationInfo]
    def __init__(self, entries: _Optional[_Mapping[str, ContainerAllocationInfo]] = ...) -> None: ...

class GetAdviceRequest(_message.Message):
    __slots__ = ("entries", "wanted_feature_gates")
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ContainerAllocationInfoEntries
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ContainerAllocationInfoEntries, _Mapping]] = ...) -> None: ...
    class WantedFeatureGatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _advisorsvc_pb2.FeatureGate
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_advisorsvc_pb2.FeatureGate, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    WANTED_FEATURE_GATES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, ContainerAllocationInfoEntries]
    wanted_feature_gates: _containers.MessageMap[str, _advisorsvc_pb2.FeatureGate]
    def __init__(self, entries: _Optional[_Mapping[str, ContainerAllocationInfoEntries]] = ..., wanted_feature_gates: _Optional[_Mapping[str, _advisorsvc_pb2.FeatureGate]] = ...) -> None: ...

class GetAdviceResponse(_message.Message):
    __slots__ = ("entries", "allow_shared_cores_overlap_reclaimed_cores", "extra_entries", "supported_feature_gates")
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CalculationEntries
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CalculationEntries, _Mapping]] = ...) -> None: ...
    class SupportedFeatureGatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _advisorsvc_pb2.FeatureGate
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_advisorsvc_pb2.FeatureGate, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SHARED_CORES_OVERLAP_RECLAIMED_CORES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FEATURE_GATES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, CalculationEntries]
    allow_shared_cores_overlap_reclaimed_cores: bool
    extra_entries: _containers.RepeatedCompositeFieldContainer[_advisorsvc_pb2.CalculationInfo]
    supported_feature_gates: _containers.MessageMap[str, _advisorsvc_pb2.FeatureGate]
    def __init__(self, entries: _Optional[_Mapping[str, CalculationEntries]] = ..., allow_shared_cores_overlap_reclaimed_cores: _Optional[bool] = ..., extra_entries: _Optional[_Iterable[_Union[_advisorsvc_pb2.CalculationInfo, _Mapping]]] = ..., supported_feature_gates: _Optional[_Mapping[str, _advisorsvc_pb2.FeatureGate]] = ...) -> None: ...
