"""Every gRPC method of wire.md §1.3, with its request and response types (§3–§7).

The path `/<package>.<Service>/<Method>` is what a peer dials, so it is checked three
ways: in the descriptors, in the client stubs, and in the server registration.
"""

from types import ModuleType
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pool

from wire.gen import (
    advisorsvc_pb2_grpc,
    cpuadvisor_pb2_grpc,
    evictionplugin_pb2_grpc,
    pluginregistration_pb2_grpc,
    resourceplugin_pb2_grpc,
)

UNARY = "unary"
STREAM = "server-streaming"
RP = "resourceplugin.v1alpha1"
EP = "evictionplugin.v1alpha1"

# (full method path, request type, response type, kind): wire.md §1.3 with §3.1–§7.1.
# A type without a dot is in the service's own package.
METHODS = [
    ("/pluginregistration.Registration/GetInfo", "InfoRequest", "PluginInfo", UNARY),
    (
        "/pluginregistration.Registration/NotifyRegistrationStatus",
        "RegistrationStatus",
        "RegistrationStatusResponse",
        UNARY,
    ),
    (f"/{RP}.ResourcePlugin/GetTopologyHints", "ResourceRequest", "ResourceHintsResponse", UNARY),
    (f"/{RP}.ResourcePlugin/RemovePod", "RemovePodRequest", "RemovePodResponse", UNARY),
    (
        f"/{RP}.ResourcePlugin/GetResourcesAllocation",
        "GetResourcesAllocationRequest",
        "GetResourcesAllocationResponse",
        UNARY,
    ),
    (
        f"/{RP}.ResourcePlugin/GetTopologyAwareResources",
        "GetTopologyAwareResourcesRequest",
        "GetTopologyAwareResourcesResponse",
        UNARY,
    ),
    (
        f"/{RP}.ResourcePlugin/GetTopologyAwareAllocatableResources",
        "GetTopologyAwareAllocatableResourcesRequest",
        "GetTopologyAwareAllocatableResourcesResponse",
        UNARY,
    ),
    (f"/{RP}.ResourcePlugin/GetResourcePluginOptions", "Empty", "ResourcePluginOptions", UNARY),
    (f"/{RP}.ResourcePlugin/Allocate", "ResourceRequest", "ResourceAllocationResponse", UNARY),
    (
        f"/{RP}.ResourcePlugin/PreStartContainer",
        "PreStartContainerRequest",
        "PreStartContainerResponse",
        UNARY,
    ),
    (f"/{RP}.Registration/Register", "RegisterRequest", "Empty", UNARY),
    (
        "/cpuadvisor.CPUAdvisor/AddContainer",
        "advisorsvc.ContainerMetadata",
        "advisorsvc.AddContainerResponse",
        UNARY,
    ),
    (
        "/cpuadvisor.CPUAdvisor/RemovePod",
        "advisorsvc.RemovePodRequest",
        "advisorsvc.RemovePodResponse",
        UNARY,
    ),
    ("/cpuadvisor.CPUAdvisor/ListAndWatch", "advisorsvc.Empty", "ListAndWatchResponse", STREAM),
    # Katalyst v0.5.47 (cpuadvisor/cpu.proto at tag v0.5.47); a v0.5.3 advisor answers UNIMPLEMENTED
    ("/cpuadvisor.CPUAdvisor/GetAdvice", "GetAdviceRequest", "GetAdviceResponse", UNARY),
    ("/cpuadvisor.CPUPlugin/GetCheckpoint", "GetCheckpointRequest", "GetCheckpointResponse", UNARY),
    ("/advisorsvc.AdvisorService/AddContainer", "ContainerMetadata", "AddContainerResponse", UNARY),
    ("/advisorsvc.AdvisorService/RemovePod", "RemovePodRequest", "RemovePodResponse", UNARY),
    ("/advisorsvc.AdvisorService/ListAndWatch", "Empty", "ListAndWatchResponse", STREAM),
    ("/advisorsvc.AdvisorService/GetAdvice", "GetAdviceRequest", "GetAdviceResponse", UNARY),
    ("/advisorsvc.QRMService/ListContainers", "Empty", "ListContainersResponse", UNARY),
    (f"/{EP}.EvictionPlugin/GetToken", "Empty", "GetTokenResponse", UNARY),
    (f"/{EP}.EvictionPlugin/ThresholdMet", "Empty", "ThresholdMetResponse", UNARY),
    (
        f"/{EP}.EvictionPlugin/GetTopEvictionPods",
        "GetTopEvictionPodsRequest",
        "GetTopEvictionPodsResponse",
        UNARY,
    ),
    (f"/{EP}.EvictionPlugin/GetEvictPods", "GetEvictPodsRequest", "GetEvictPodsResponse", UNARY),
]

# Service full name → the generated module that holds its stub and servicer.
SERVICES: dict[str, ModuleType] = {
    "pluginregistration.Registration": pluginregistration_pb2_grpc,
    f"{RP}.ResourcePlugin": resourceplugin_pb2_grpc,
    f"{RP}.Registration": resourceplugin_pb2_grpc,
    "cpuadvisor.CPUAdvisor": cpuadvisor_pb2_grpc,
    "cpuadvisor.CPUPlugin": cpuadvisor_pb2_grpc,
    "advisorsvc.AdvisorService": advisorsvc_pb2_grpc,
    "advisorsvc.QRMService": advisorsvc_pb2_grpc,
    f"{EP}.EvictionPlugin": evictionplugin_pb2_grpc,
}

WANT_KINDS = {path: kind for path, _, _, kind in METHODS}


def _split(path: str) -> tuple[str, str, str]:
    service, method = path.lstrip("/").split("/")
    return service.rsplit(".", 1)[0], service, method


def _qualified(package: str, type_name: str) -> str:
    return type_name if "." in type_name else f"{package}.{type_name}"


@pytest.mark.parametrize(
    ("path", "request_type", "response_type", "kind"), METHODS, ids=[m[0] for m in METHODS]
)
def test_descriptor_has_the_method(
    path: str, request_type: str, response_type: str, kind: str
) -> None:
    package, service_name, method_name = _split(path)
    service = descriptor_pool.Default().FindServiceByName(service_name)
    method = service.methods_by_name[method_name]
    assert method.input_type.full_name == _qualified(package, request_type)
    assert method.output_type.full_name == _qualified(package, response_type)
    assert not method.client_streaming
    assert method.server_streaming == (kind == STREAM)


def test_no_method_beyond_the_table() -> None:
    pool = descriptor_pool.Default()
    declared = {
        f"/{name}/{method.name}"
        for name in SERVICES
        for method in pool.FindServiceByName(name).methods
    }
    assert declared == set(WANT_KINDS)


class RecordingChannel:
    """Stands in for grpc.Channel: records the paths a generated stub binds."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def unary_unary(self, path: str, *args: Any, **kwargs: Any) -> None:
        self.paths[path] = UNARY

    def unary_stream(self, path: str, *args: Any, **kwargs: Any) -> None:
        self.paths[path] = STREAM


class RecordingServer:
    """Stands in for grpc.Server: records the handlers a servicer registers."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        for name, handler in handlers.items():
            assert not handler.request_streaming
            self.paths[f"/{service}/{name}"] = STREAM if handler.response_streaming else UNARY


def test_client_stubs_dial_the_table_paths() -> None:
    channel = RecordingChannel()
    for service_name, module in SERVICES.items():
        getattr(module, service_name.rsplit(".", 1)[1] + "Stub")(channel)
    assert channel.paths == WANT_KINDS


def test_servicers_register_the_table_paths() -> None:
    server = RecordingServer()
    for service_name, module in SERVICES.items():
        short = service_name.rsplit(".", 1)[1]
        servicer = getattr(module, short + "Servicer")()
        getattr(module, f"add_{short}Servicer_to_server")(servicer, server)
    assert server.paths == WANT_KINDS
