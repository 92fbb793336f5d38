"""katalyst-agent's side of an eviction plugin, as its plugin manager and eviction manager use it.

Registration (wire.md §8.3): ``GetInfo`` (1 s), check the type and the version, dial (10 s),
``GetToken`` (10 s), then ``NotifyRegistrationStatus`` (5 s). One eviction-manager pass
(wire.md §11): ``GetEvictPods{active_pods}``, ``ThresholdMet``, and ``GetTopEvictionPods`` with
``topN=1`` only for a ``HARD_MET`` threshold. Every RPC carries the agent's 10 s deadline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from wire.gen import evictionplugin_pb2 as ep
from wire.gen import evictionplugin_pb2_grpc as ep_grpc
from wire.gen import k8s_core_v1_pb2 as core
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc

GET_INFO_TIMEOUT_S = 1.0
DIAL_TIMEOUT_S = 10.0  # the dial and GetToken have 10 s each
RPC_TIMEOUT_S = 10.0
NOTIFY_TIMEOUT_S = 5.0


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def unknown_fields_of(name: str) -> tuple[bytes, ...]:
    """The encoded fields of ``go_pod(name, ...)`` that the Pod subset does not declare."""
    return (
        _field(17, _field(1, b"kube-controller-manager")),  # ObjectMeta.managedFields
        _field(2, f"registry.example/{name}:1.0".encode()),  # Container.image
        _field(3, b"10.0.0.7"),  # PodStatus.hostIP
    )


def go_pod(name: str, uid: str, namespace: str = "default") -> core.Pod:
    """A pod as the agent sends it: Go-encoded, with fields the subset does not declare."""
    managed_fields, image, host_ip = unknown_fields_of(name)
    metadata = (
        _field(1, name.encode())
        + _field(3, namespace.encode())
        + _field(5, uid.encode())
        + _field(11, _field(1, b"app") + _field(2, name.encode()))  # labels
        + managed_fields
    )
    container = _field(1, name.encode()) + image
    spec = _field(2, container) + _field(10, b"node-a")
    status = _field(1, b"Running") + host_ip + _field(9, b"BestEffort")
    return core.Pod.FromString(_field(1, metadata) + _field(2, spec) + _field(3, status))


class RegistrationFailed(Exception):  # noqa: N818 - what happened, as the agent logs it
    """The agent would not register the plugin."""


@dataclass
class ManagerPass:
    """What one eviction-manager pass got from the plugin."""

    evict: ep.GetEvictPodsResponse
    threshold: ep.ThresholdMetResponse
    top: ep.GetTopEvictionPodsResponse | None


class EvictionAgent:
    """A registered eviction plugin's connection, kept as the agent keeps it."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.channel: grpc.Channel | None = None
        self.token: str | None = None

    def register(self, *, accept: bool = True, error: str = "") -> reg.PluginInfo:
        """Register the plugin; ``accept=False`` plays an agent that then rejects it."""
        target = f"unix:{self.socket_path}"
        with grpc.insecure_channel(target) as watcher:
            registration = reg_grpc.RegistrationStub(watcher)
            # The agent dials blocking (10 s), then asks GetInfo (1 s); wait_for_ready plays the
            # blocking dial without grpc's 200 ms connectivity polling.
            info = registration.GetInfo(
                reg.InfoRequest(), timeout=GET_INFO_TIMEOUT_S, wait_for_ready=True
            )
            if info.type != "EvictionPlugin" or "v1alpha1" not in info.supported_versions:
                raise RegistrationFailed(f"unsupported plugin {info}")
            endpoint = info.endpoint or str(self.socket_path)
            self.channel = grpc.insecure_channel(f"unix:{endpoint}")
            self.token = self.plugin.GetToken(
                ep.Empty(), timeout=DIAL_TIMEOUT_S, wait_for_ready=True
            ).token
            registration.NotifyRegistrationStatus(
                reg.RegistrationStatus(plugin_registered=accept, error=error),
                timeout=NOTIFY_TIMEOUT_S,
            )
        return info

    @property
    def plugin(self) -> ep_grpc.EvictionPluginStub:
        assert self.channel is not None, "register first"
        return ep_grpc.EvictionPluginStub(self.channel)

    def run_pass(self, active_pods: Sequence[core.Pod]) -> ManagerPass:
        """One eviction-manager sync pass over the given active pods."""
        evict = self.plugin.GetEvictPods(
            ep.GetEvictPodsRequest(active_pods=active_pods), timeout=RPC_TIMEOUT_S
        )
        threshold = self.plugin.ThresholdMet(ep.Empty(), timeout=RPC_TIMEOUT_S)
        top = None
        if threshold.met_type == ep.HARD_MET:
            top = self.plugin.GetTopEvictionPods(
                ep.GetTopEvictionPodsRequest(
                    active_pods=active_pods, topN=1, eviction_scope=threshold.eviction_scope
                ),
                timeout=RPC_TIMEOUT_S,
            )
        return ManagerPass(evict, threshold, top)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
