from wire.gen import resourceplugin_pb2 as _resourceplugin_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ContainerMetadata(_message.Message):
    __slots__ = ("pod_uid", "pod_namespace", "pod_name", "container_name", "container_type", "container_index", "labels", "annotations", "qos_level", "requestQuantity", "requestMilliQuantity", "useMilliQuantity")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    POD_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    POD_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_INDEX_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    QOS_LEVEL_FIELD_NUMBER: _ClassVar[int]
    REQUESTQUANTITY_FIELD_NUMBER: _ClassVar[int]
    REQUESTMILLIQUANTITY_FIELD_NUMBER: _ClassVar[int]
    USEMILLIQUANTITY_FIELD_NUMBER: _ClassVar[int]
    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    container_type: _resourceplugin_pb2.ContainerType
    container_index: int
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    qos_level: str
    requestQuantity: int
    requestMilliQuantity: int
    useMilliQuantity: bool
    def __init__(self, pod_uid: _Optional[str] = ..., pod_namespace: _Optional[str] = ..., pod_name: _Optional[str] = ..., container_name: _Optional[str] = ..., container_type: _Optional[_Union[_resourceplugin_pb2.ContainerType, str]] = ..., container_index: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., qos_level: _Optional[str] = ..., requestQuantity: _Optional[int] = ..., requestMilliQuantity: _Optional[int] = ..., useMilliQuantity: _Optional[bool] = ...) -> None: ...

class AddContainerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RemovePodRequest(_message.Message):
    __slots__ = ("pod_uid",)
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    pod_uid: str
    def __init__(self, pod_uid: _Optional[str] = ...) -> None: ...

class RemovePodResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAndWatchResponse(_message.Message):
    __slots__ = ("pod_entries", "extra_entries")
    class PodEntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CalculationEntries
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CalculationEntries, _Mapping]] = ...) -> None: ...
    POD_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    pod_entries: _containers.MessageMap[str, CalculationEntries]
    extra_entries: _containers.RepeatedCompositeFieldContainer[CalculationInfo]
    def __init__(self, pod_entries: _Optional[_Mapping[str, CalculationEntries]] = ..., extra_entries: _Optional[_Iterable[_Union[CalculationInfo, _Mapping]]] = ...) -> None: ...

class CalculationEntries(_message.Message):
    __slots__ = ("container_entries",)
    class ContainerEntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CalculationInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CalculationInfo, _Mapping]] = ...) -> None: ...
    CONTAINER_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    container_entries: _containers.MessageMap[str, CalculationInfo]
    def __init__(self, container_entries: _Optional[_Mapping[str, CalculationInfo]] = ...) -> None: ...

class CalculationInfo(_message.Message):
    __slots__ = ("cgroup_path", "calculation_result")
    CGROUP_PATH_FIELD_NUMBER: _ClassVar[int]
    CALCULATION_RESULT_FIELD_NUMBER: _ClassVar[int]
    cgroup_path: str
    calculation_result: CalculationResult
    def __init__(self, cgroup_path: _Optional[str] = ..., calculation_result: _Optional[_Union[CalculationResult, _Mapping]] = ...) -> None: ...

class CalculationResult(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ContainerMetadataEntries(_message.Message):
    __slots__ = ("entries",)
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ContainerMetadata
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ContainerMetadata, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, ContainerMetadata]
    def __init__(self, entries: _Optional[_Mapping[str, ContainerMetadata]] = ...) -> None: ...

class GetAdviceRequest(_message.Message):
    __slots__ = ("entries", "wanted_feature_gates")
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ContainerMetadataEntries
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ContainerMetadataEntries, _Mapping]] = ...) -> None: ...
    class WantedFeatureGatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureGate
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureGate, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    WANTED_FEATURE_GATES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, ContainerMetadataEntries]
    wanted_feature_gates: _containers.MessageMap[str, FeatureGate]
    def __init__(self, entries: _Optional[_Mapping[str, ContainerMetadataEntries]] = ..., wanted_feature_gates: _Optional[_Mapping[str, FeatureGate]] = ...) -> None: ...

class GetAdviceResponse(_message.Message):
    __slots__ = ("pod_entries", "extra_entries", "supported_feature_gates")
    class PodEntriesEntry(_message.Message):
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
        value: FeatureGate
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureGate, _Mapping]] = ...) -> None: ...
    POD_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    EXTRA_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FEATURE_GATES_FIELD_NUMBER: _ClassVar[int]
    pod_entries: _containers.MessageMap[str, CalculationEntries]
    extra_entries: _containers.RepeatedCompositeFieldContainer[CalculationInfo]
    supported_feature_gates: _containers.MessageMap[str, FeatureGate]
    def __init__(self, pod_entries: _Optional[_Mapping[str, CalculationEntries]] = ..., extra_entries: _Optional[_Iterable[_Union[CalculationInfo, _Mapping]]] = ..., supported_feature_gates: _Optional[_Mapping[str, FeatureGate]] = ...) -> None: ...

class FeatureGate(_message.Message):
    __slots__ = ("name", "type", "must_mutually_supported")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MUST_MUTUALLY_SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    must_mutually_supported: bool
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., must_mutually_supported: _Optional[bool] = ...) -> None: ...

class ListContainersResponse(_message.Message):
    __slots__ = ("containers",)
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedCompositeFieldContainer[ContainerMetadata]
    def __init__(self, containers: _Optional[_Iterable[_Union[ContainerMetadata, _Mapping]]] = ...) -> None: ...
