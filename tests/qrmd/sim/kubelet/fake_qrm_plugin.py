"""A fake QRM CPU plugin at the edge of the machine: the real protocol on a real unix socket.

It serves ``pluginregistration.Registration`` and ``resourceplugin.v1alpha1.ResourcePlugin``
on one socket, answers as the reference plugin does on the wire (wire.md §3, §4; cpu-policy
§7, §8, §10), and records every call with the deadline the caller gave it, so tests can check
what the kubelet simulator sent, in which order, and with which deadline.

Its placement is deliberately simple and stated here: a 16-CPU machine, NUMA node ``n`` holds
CPUs ``4n..4n+3``; a dedicated NUMA-binding container takes its hinted NUMA nodes' free CPUs
(all of them when exclusive, the first ``ceil(request)`` otherwise); shared containers hold
every CPU no dedicated container holds; reclaimed containers hold the last two of those.
INIT containers get no ``allocation_result``, a dedicated sidecar mirrors its main container
(or gets an empty answer when the main one is unknown), and "no preference" leaves the map
key out (wire.md §1.1). Knobs make it fail in the ways the kubelet must survive.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from qrmd.sim.kubelet import Kubelet, PluginWatcher, TopologyPolicy
from wire.gen import pluginregistration_pb2 as reg_pb
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.gen import resourceplugin_pb2 as rp_pb
from wire.gen import resourceplugin_pb2_grpc as rp_grpc

SOCKET_NAME = "qrm_cpu_plugin_dynamic.sock"
NUMA_NODES = (0, 1, 2, 3)
CPUS_PER_NUMA = 4
NO_DEADLINE_S = 1e9


def numa_cpus(numa: int) -> set[int]:
    return set(range(numa * CPUS_PER_NUMA, (numa + 1) * CPUS_PER_NUMA))


def cpu_list(cpus: set[int]) -> str:
    """Linux list format, as the plugin writes ``allocation_result`` (wire.md §4.3)."""
    ids = sorted(cpus)
    ranges = []
    for _, run in itertools.groupby(enumerate(ids), key=lambda p: p[1] - p[0]):
        block = [cpu for _, cpu in run]
        ranges.append(f"{block[0]}-{block[-1]}" if len(block) > 1 else str(block[0]))
    return ",".join(ranges)


@dataclass
class Call:
    method: str
    request: object
    time_remaining: float | None  # seconds left of the caller's deadline; None = no deadline


def has_deadline(call: Call, seconds: float) -> bool:
    """Whether the caller gave this call a deadline of about ``seconds`` (grpcio adds ~0.1 s)."""
    return call.time_remaining is not None and seconds / 2 < call.time_remaining <= seconds + 0.2


@dataclass
class Entry:
    qos: str
    cpus: set[int]
    kind: int


@dataclass
class FakeQRMPlugin(reg_grpc.RegistrationServicer, rp_grpc.ResourcePluginServicer):
    """The plugin's behaviour and its knobs; ``serve()`` puts it on a socket."""

    info: reg_pb.PluginInfo = field(
        default_factory=lambda: reg_pb.PluginInfo(
            type="ResourcePlugin", name="cpu", supported_versions=["v1alpha1"]
        )
    )
    options: rp_pb.ResourcePluginOptions = field(
        default_factory=lambda: rp_pb.ResourcePluginOptions(
            pre_start_required=False, with_topology_alignment=True, need_reconcile=True
        )
    )
    remove_pod_failures: int = 0  # RemovePod answers UNAVAILABLE this many times first
    hidden: set[tuple[str, str]] = field(default_factory=set)  # left out of GetResourcesAllocation
    options_error: bool = False  # GetResourcePluginOptions fails
    allocate_error: str = ""  # Allocate fails for this container name
    calls: list[Call] = field(default_factory=list)
    entries: dict[tuple[str, str], Entry] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _record(self, method: str, request: object, context: grpc.ServicerContext) -> None:
        remaining = context.time_remaining()
        if remaining is not None and remaining > NO_DEADLINE_S:
            remaining = None  # grpcio reports "no deadline" as a huge number of seconds
        with self.lock:
            self.calls.append(Call(method, request, remaining))

    def methods(self) -> list[str]:
        with self.lock:
            return [c.method for c in self.calls]

    def calls_of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    # -- Registration ------------------------------------------------------------------------

    def GetInfo(self, request, context):  # type: ignore[no-untyped-def]
        self._record("GetInfo", request, context)
        return self.info

    def NotifyRegistrationStatus(self, request, context):  # type: ignore[no-untyped-def]
        self._record("NotifyRegistrationStatus", request, context)
        return reg_pb.RegistrationStatusResponse()

    # -- ResourcePlugin ----------------------------------------------------------------------

    def GetResourcePluginOptions(self, request, context):  # type: ignore[no-untyped-def]
        self._record("GetResourcePluginOptions", request, context)
        if self.options_error:
            context.abort(grpc.StatusCode.UNAVAILABLE, "plugin is starting")
        return self.options

    @staticmethod
    def _flags(request: rp_pb.ResourceRequest) -> tuple[str, bool, bool]:
        qos = request.annotations.get("katalyst.kubewharf.io/qos_level", "shared_cores")
        enhancement = json.loads(
            request.annotations.get("katalyst.kubewharf.io/memory_enhancement", "{}")
        )
        binding = enhancement.get("numa_binding") == "true"
        return qos, binding, binding and enhancement.get("numa_exclusive") == "true"

    def _dedicated_cpus(self) -> set[int]:
        return {c for e in self.entries.values() if e.qos == "dedicated_cores" for c in e.cpus}

    def _request_cores(self, request: rp_pb.ResourceRequest) -> int:
        ((name, value),) = request.resource_requests.items()
        return math.ceil(value / 1000 if name.endswith("reclaimed_millicpu") else value)

    def GetTopologyHints(self, request, context):  # type: ignore[no-untyped-def]
        self._record("GetTopologyHints", request, context)
        answer = rp_pb.ResourceHintsResponse(
            pod_uid=request.pod_uid, container_name=request.container_name, resource_name="cpu"
        )
        qos, binding, exclusive = self._flags(request)
        if request.container_type != rp_pb.MAIN or qos != "dedicated_cores" or not binding:
            return answer  # no preference: the key stays out (wire.md §1.1)
        cores = self._request_cores(request)
        needed = math.ceil(cores / CPUS_PER_NUMA)
        taken = self._dedicated_cpus()
        hints = answer.resource_hints["cpu"]
        with self.lock:
            for size in range(1, len(NUMA_NODES) + 1):
                if size < needed or (not exclusive and size > 1):
                    continue
                for mask in itertools.combinations(NUMA_NODES, size):
                    free = set().union(*(numa_cpus(n) for n in mask)) - taken
                    busy = any(numa_cpus(n) & taken for n in mask)
                    if (exclusive and busy) or len(free) < cores:
                        continue
                    hints.hints.add(nodes=list(mask), preferred=size == needed)
        return answer

    def Allocate(self, request, context):  # type: ignore[no-untyped-def]
        self._record("Allocate", request, context)
        if request.container_name == self.allocate_error:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "not enough CPUs")
        answer = rp_pb.ResourceAllocationResponse(
            pod_uid=request.pod_uid, container_name=request.container_name, resource_name="cpu"
        )
        if request.container_type == rp_pb.INIT:
            return answer  # no allocation_result for INIT containers
        qos, _, exclusive = self._flags(request)
        key = (request.pod_uid, request.container_name)
        with self.lock:
            if key not in self.entries:
                cpus = self._place(request, qos, exclusive, context)
                if cpus is None:
                    return rp_pb.ResourceAllocationResponse()  # sidecar before its main: empty
                self.entries[key] = Entry(qos, cpus, request.container_type)
            cpus = self._current(key)
        info = answer.allocation_result.resource_allocation["cpu"]
        info.oci_property_name = "CpusetCpus"
        info.is_scalar_resource = True
        info.allocated_quantity = len(cpus)
        info.allocation_result = cpu_list(cpus)
        info.resource_hints.hints.add().CopyFrom(request.hint)
        return answer

    def _place(self, request, qos, exclusive, context):  # type: ignore[no-untyped-def]
        if qos != "dedicated_cores":
            return set()  # shared and reclaimed follow their pool (_current)
        if request.container_type == rp_pb.SIDECAR:
            main = next(
                (e for (p, _), e in self.entries.items() if p == request.pod_uid and e.kind == 1),
                None,
            )
            return None if main is None else set(main.cpus)
        if not request.HasField("hint") or not request.hint.nodes:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "hint is empty")
        free = set().union(*(numa_cpus(n) for n in request.hint.nodes)) - self._dedicated_cpus()
        cores = self._request_cores(request)
        return free if exclusive else set(sorted(free)[:cores])

    def _current(self, key: tuple[str, str]) -> set[int]:
        entry = self.entries[key]
        pooled = set(range(len(NUMA_NODES) * CPUS_PER_NUMA)) - self._dedicated_cpus()
        if entry.qos == "shared_cores":
            return pooled
        if entry.qos == "reclaimed_cores":
            return set(sorted(pooled)[-2:])
        return entry.cpus

    def GetResourcesAllocation(self, request, context):  # type: ignore[no-untyped-def]
        self._record("GetResourcesAllocation", request, context)
        answer = rp_pb.GetResourcesAllocationResponse()
        with self.lock:
            for (pod, container), _ in sorted(self.entries.items()):
                if (pod, container) in self.hidden:
                    continue
                cpus = self._current((pod, container))
                info = (
                    answer.pod_resources[pod]
                    .container_resources[container]
                    .resource_allocation["cpu"]
                )
                info.oci_property_name = "CpusetCpus"
                info.is_scalar_resource = True
                info.allocated_quantity = len(cpus)
                info.allocation_result = cpu_list(cpus)
        return answer

    def RemovePod(self, request, context):  # type: ignore[no-untyped-def]
        self._record("RemovePod", request, context)
        with self.lock:
            if self.remove_pod_failures > 0:
                self.remove_pod_failures -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "state store restarting")
            for key in [k for k in self.entries if k[0] == request.pod_uid]:
                del self.entries[key]
        return rp_pb.RemovePodResponse()

    def GetTopologyAwareResources(self, request, context):  # type: ignore[no-untyped-def]
        self._record("GetTopologyAwareResources", request, context)
        key = (request.pod_uid, request.container_name)
        with self.lock:
            if key not in self.entries:
                context.abort(grpc.StatusCode.NOT_FOUND, f"{key} is not in the plugin state")
            cpus = self._current(key)
        answer = rp_pb.GetTopologyAwareResourcesResponse(pod_uid=request.pod_uid)
        answer.container_topology_aware_resources.container_name = request.container_name
        r = answer.container_topology_aware_resources.allocated_resources["cpu"]
        r.is_scalar_resource = True
        r.aggregated_quantity = r.original_aggregated_quantity = len(cpus)
        for numa in NUMA_NODES:
            if cpus & numa_cpus(numa):
                r.topology_aware_quantity_list.add(
                    resource_value=len(cpus & numa_cpus(numa)), node=numa
                )
        return answer

    def PreStartContainer(self, request, context):  # type: ignore[no-untyped-def]
        self._record("PreStartContainer", request, context)
        return rp_pb.PreStartContainerResponse()

    def GetTopologyAwareAllocatableResources(self, request, context):  # type: ignore[no-untyped-def]
        self._record("GetTopologyAwareAllocatableResources", request, context)
        answer = rp_pb.GetTopologyAwareAllocatableResourcesResponse()
        r = answer.allocatable_resources["cpu"]
        r.is_scalar_resource = True
        r.aggregated_allocatable_quantity = r.aggregated_capacity_quantity = 16
        for numa in NUMA_NODES:
            r.topology_aware_allocatable_quantity_list.add(resource_value=4, node=numa)
            r.topology_aware_capacity_quantity_list.add(resource_value=4, node=numa)
        return answer


class ServedPlugin:
    """A FakeQRMPlugin on ``<dir>/qrm_cpu_plugin_dynamic.sock``, restartable in place."""

    def __init__(self, plugin: FakeQRMPlugin, socket_dir: Path) -> None:
        self.plugin = plugin
        self.socket_path = socket_dir / SOCKET_NAME
        self._server: grpc.Server | None = None

    def start(self) -> None:
        self.socket_path.unlink(missing_ok=True)  # a stale socket is removed first (§1.2)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        reg_grpc.add_RegistrationServicer_to_server(self.plugin, server)
        rp_grpc.add_ResourcePluginServicer_to_server(self.plugin, server)
        assert server.add_insecure_port(f"unix://{self.socket_path}") != 0
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def restart(self) -> None:
        self.stop()
        time.sleep(0.01)  # a new change time for the re-created socket file
        self.start()


@contextlib.contextmanager
def short_socket_dir() -> Iterator[Path]:
    """A directory under /tmp: unix socket paths stop at 107 bytes, pytest's tmp_path is deep."""
    directory = tempfile.mkdtemp(prefix="qrmd-sim-", dir="/tmp")
    try:
        yield Path(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def registered_kubelet(
    policy: TopologyPolicy = TopologyPolicy.BEST_EFFORT, **knobs: object
) -> Iterator[tuple[FakeQRMPlugin, Kubelet]]:
    """A fake plugin on a socket, registered with a simulated kubelet through the watcher."""
    with short_socket_dir() as directory:
        served = ServedPlugin(FakeQRMPlugin(**knobs), directory)  # type: ignore[arg-type]
        served.start()
        try:
            kubelet = Kubelet(NUMA_NODES, topology_policy=policy)
            (outcome,) = PluginWatcher(directory, {"ResourcePlugin": kubelet.endpoints}).poll_once()
            assert outcome.registered, outcome.error
            with served.plugin.lock:
                served.plugin.calls.clear()
            yield served.plugin, kubelet
        finally:
            served.stop()
