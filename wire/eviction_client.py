"""katalyst-agent's side of an eviction plugin: registration and ``GetEvictPods`` in plain values.

For ``qrmd demo`` (and anyone trying the memory balancer's plugin by hand), which may not
touch protobuf messages: pods go in as ``ActivePod`` and offers come back as ``Offer``.

The agent's plugin manager registers an eviction plugin it finds in its plugin-registration
directory (wire.md §8.3): ``GetInfo`` on the socket (type ``EvictionPlugin``, a supported
version), ``GetToken`` on the plugin service, then ``NotifyRegistrationStatus``. Its eviction
manager then polls the plugin every sync period with ``GetEvictPods{active_pods}`` (wire.md
§11, memory-balancer §9.1): the pods it may evict, each a whole Kubernetes ``Pod``. The
balancer offers the pod it chose for eviction once per stored round, so a second poll on the
same round answers nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from wire.gen import evictionplugin_pb2 as ep
from wire.gen import evictionplugin_pb2_grpc as ep_grpc
from wire.gen import k8s_core_v1_pb2 as core
from wire.gen import k8s_meta_v1_pb2 as meta
from wire.gen import k8s_resource_pb2 as resource
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc

__all__ = ["ActivePod", "EvictionManager", "EvictionManagerError", "Offer", "PluginInfo"]

# The agent's deadlines: GetInfo 1 s, dial and GetToken 10 s, NotifyRegistrationStatus 5 s, and
# 10 s for each eviction-manager call.
GET_INFO_TIMEOUT_S = 1.0
DIAL_TIMEOUT_S = 10.0
NOTIFY_TIMEOUT_S = 5.0
RPC_TIMEOUT_S = 10.0
PLUGIN_TYPE = "EvictionPlugin"
PLUGIN_VERSION = "v1alpha1"


class EvictionManagerError(Exception):
    """A call to the eviction plugin failed; the message names the call and the status."""


@dataclass(frozen=True, slots=True)
class ActivePod:
    """A pod the eviction manager may evict: what it sends of it.

    ``annotations`` and ``containers`` (each ``(name, ((resource, quantity), ...))``, the
    quantity as Kubernetes writes it, ``"2"`` or ``"1500m"``) are what the CPU suppression
    plugin reads: the QoS level, the tolerance rate and the CPU requests.
    """

    namespace: str
    name: str
    uid: str
    qos_class: str = "BestEffort"  # Guaranteed, Burstable or BestEffort
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    containers: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """What ``GetInfo`` and ``GetToken`` answered."""

    type: str
    name: str
    versions: tuple[str, ...]
    token: str


@dataclass(frozen=True, slots=True)
class Offer:
    """One ``EvictPod`` of a ``GetEvictPods`` answer."""

    namespace: str
    name: str
    uid: str
    reason: str
    force_evict: bool
    plugin_name: str


def _pod_message(pod: ActivePod) -> core.Pod:
    """The ``Pod`` object the eviction manager sends for an active pod (name, namespace, UID,
    labels, phase and QoS class; the rest of a real pod object is of no use to the plugin)."""
    containers = [
        core.Container(
            name=name,
            resources=core.ResourceRequirements(
                requests={r: resource.Quantity(string=q) for r, q in requests}
            ),
        )
        for name, requests in pod.containers
    ]
    message = core.Pod(
        metadata=meta.ObjectMeta(
            name=pod.name,
            namespace=pod.namespace,
            uid=pod.uid,
            labels=dict(pod.labels),
            annotations=dict(pod.annotations),
        ),
        status=core.PodStatus(phase="Running", qosClass=pod.qos_class),
    )
    if containers:
        message.spec.containers.extend(containers)
    return message


class EvictionManager:
    """A registered connection to the eviction plugin at ``socket_path``.

    Args:
        socket_path: ``<plugin-registration-dir>/numa_memory_balancer.sock``.
    """

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._channel: grpc.Channel | None = None

    def register(self) -> PluginInfo:
        """The plugin manager's registration: ``GetInfo``, ``GetToken``, notify.

        Raises:
            EvictionManagerError: a call failed, or the plugin is not an eviction plugin of
                a supported version.
        """
        try:
            with grpc.insecure_channel(f"unix:{self.socket_path}") as watcher:
                registration = reg_grpc.RegistrationStub(watcher)  # type: ignore[no-untyped-call]
                info = registration.GetInfo(
                    reg.InfoRequest(), timeout=GET_INFO_TIMEOUT_S, wait_for_ready=True
                )
                if info.type != PLUGIN_TYPE or PLUGIN_VERSION not in info.supported_versions:
                    raise EvictionManagerError(
                        f"{self.socket_path}: plugin type {info.type!r} versions "
                        f"{list(info.supported_versions)}, expected {PLUGIN_TYPE} {PLUGIN_VERSION}"
                    )
                self._channel = grpc.insecure_channel(f"unix:{info.endpoint or self.socket_path}")
                token = self._plugin.GetToken(
                    ep.Empty(), timeout=DIAL_TIMEOUT_S, wait_for_ready=True
                ).token
                registration.NotifyRegistrationStatus(
                    reg.RegistrationStatus(plugin_registered=True), timeout=NOTIFY_TIMEOUT_S
                )
        except grpc.RpcError as err:
            self.close()
            raise EvictionManagerError(_rpc_failure("registration", err)) from None
        return PluginInfo(info.type, info.name, tuple(info.supported_versions), token)

    @property
    def _plugin(self) -> ep_grpc.EvictionPluginStub:
        if self._channel is None:
            raise EvictionManagerError("the eviction plugin is not registered")
        return ep_grpc.EvictionPluginStub(self._channel)  # type: ignore[no-untyped-call]

    def get_evict_pods(self, pods: Sequence[ActivePod]) -> list[Offer]:
        """One ``GetEvictPods`` with these active pods.

        Raises:
            EvictionManagerError: the call failed.
        """
        request = ep.GetEvictPodsRequest(active_pods=[_pod_message(p) for p in pods])
        try:
            answer = self._plugin.GetEvictPods(request, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as err:
            raise EvictionManagerError(_rpc_failure("GetEvictPods", err)) from None
        return [
            Offer(
                e.pod.metadata.namespace,
                e.pod.metadata.name,
                e.pod.metadata.uid,
                e.reason,
                e.force_evict,
                e.eviction_plugin_name,
            )
            for e in answer.evict_pods
        ]

    def close(self) -> None:
        """Close the plugin connection; safe to call twice."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None


def _rpc_failure(call: str, err: grpc.RpcError) -> str:
    code = err.code() if isinstance(err, grpc.Call) else None
    details = err.details() if isinstance(err, grpc.Call) else str(err)
    return f"{call}: {code.name if code is not None else 'error'}: {details}"
