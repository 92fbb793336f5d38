"""A node for wire tests: the real Allocator actor behind a real PluginServer on a unix socket.

The spec's example node (cpu-policy §16): ``synthetic:cpus=16,sockets=2,numas=4`` with reserve
``0,2``, started (pools ``reserve = 0,2``, ``reclaim = 1,3,9,11``). Decisions are committed by
the in-memory committer of ``tests.actors.fakes`` (the StateStore's answers without a journal)
unless a test passes its own.

Sockets live in a short directory under /tmp (``tempfile.mkdtemp(dir="/tmp")``): unix socket
paths stop at 107 bytes, and pytest's ``tmp_path`` can be longer than that.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

import grpc

from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_messages import StartPolicy
from actors.ports.commit import Committer, StateStoreCommitter
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from policy.cpu.context import PolicyContext
from policy.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_LEVEL_KEY
from policy.state.sections import empty_state
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.policy.decision_fixtures import CTX, DEBUG_KEY, SYNTH_16_2_4, T0
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.gen import resourceplugin_pb2 as pb
from wire.gen import resourceplugin_pb2_grpc as pb_grpc
from wire.plugin_server import PluginServer

__all__ = [
    "DEBUG_KEY",
    "Client",
    "RecordingObserver",
    "WireNode",
    "dedicated_annotations",
    "resource_request",
    "short_dir",
]


def short_dir() -> str:
    """A fresh directory short enough for a socket path."""
    return tempfile.mkdtemp(dir="/tmp", prefix="q")


def dedicated_annotations(*, exclusive: bool = False) -> dict[str, str]:
    enhancement = {"numa_binding": "true"}
    if exclusive:
        enhancement["numa_exclusive"] = "true"
    return {QOS_LEVEL_KEY: "dedicated_cores", MEMORY_ENHANCEMENT_KEY: json.dumps(enhancement)}


def resource_request(
    pod: str = "pod-a",
    container: str = "app",
    *,
    cpu: float = 2,
    qos: str | None = None,
    annotations: Mapping[str, str] | None = None,
    hint: tuple[int, ...] | None = None,
    container_type: int = pb.MAIN,
) -> pb.ResourceRequest:
    """A kubelet ``ResourceRequest`` for ``cpu`` as the QoS resource manager sends it."""
    notes = dict(annotations or {})
    if qos is not None:
        notes[QOS_LEVEL_KEY] = qos
    message = pb.ResourceRequest(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=f"name-{pod}",
        container_name=container,
        container_type=container_type,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": cpu},
        annotations=notes,
        native_qos_class="Guaranteed",
    )
    if hint is not None:
        message.hint.CopyFrom(pb.TopologyHint(nodes=hint, preferred=True))
    return message


class RecordingObserver:
    """An RpcObserver that keeps every observation."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, str]] = []
        self._lock = threading.Lock()

    def observe(self, rpc: str, seconds: float, code: str) -> None:
        with self._lock:
            self.calls.append((rpc, seconds, code))

    def codes(self, rpc: str) -> list[str]:
        with self._lock:
            return [code for name, _, code in self.calls if name == rpc]


class Client:
    """kubelet's side of one socket: both services' stubs on one channel."""

    def __init__(self, socket_path: str) -> None:
        self.channel = grpc.insecure_channel(f"unix:{socket_path}")
        self.plugin = pb_grpc.ResourcePluginStub(self.channel)
        self.registration = reg_grpc.RegistrationStub(self.channel)

    def raw(self, method: str) -> Any:
        """A unary callable of ResourcePlugin ``method`` sending and receiving raw bytes."""
        return self.channel.unary_unary(f"/resourceplugin.v1alpha1.ResourcePlugin/{method}")

    def get_info(self) -> reg.PluginInfo:
        return self.registration.GetInfo(reg.InfoRequest(), timeout=1.0)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WireNode:
    """The Allocator actor on the started (16,2,4) node, served on one or more socket dirs.

    Args:
        socket_dirs: how many socket directories (one server each).
        committer: the Allocator's committer (its ``latest()`` is the starting state); the
            in-memory one by default.
        ctx: the policy's settings (the spec's node at v0.5.3 by default).
        start: run the start-up decision first; without it the committer's state is served
            as it is (a reference test's hand-made state).
    """

    def __init__(
        self,
        socket_dirs: int = 1,
        committer: Committer | None = None,
        ctx: PolicyContext = CTX,
        *,
        start: bool = True,
    ) -> None:
        self.clock = FakeClock(T0)
        self.store = committer or ApplyingCommitter(empty_state(SYNTH_16_2_4))
        self.core = AllocatorCore(self.store.latest(), ctx, self.store, self.clock.time)
        self.allocator = AllocatorActor.start(self.core)
        if start:
            self.allocator.ask(StartPolicy(), timeout=10)
        self.is_ready = True
        self.observer = RecordingObserver()
        self.dirs = [short_dir() for _ in range(socket_dirs)]
        self.servers = [
            PluginServer(
                directory, self.allocator, ready=lambda: self.is_ready, observer=self.observer
            )
            for directory in self.dirs
        ]
        self.clients: list[Client] = []
        self.store_actor: Any = None

    @classmethod
    def on_journal(cls, directory: str, durability: str = "none", socket_dirs: int = 1) -> WireNode:
        """A node whose Allocator commits through the real StateStore journalling in
        ``directory``; ``close`` stops the store too."""
        config = StoreConfig(
            directory=directory,
            node_name="node-a",
            durability=durability,  # type: ignore[arg-type]
        )
        store = StateStoreActor.start(lambda: StateStoreCore.open(config, SYNTH_16_2_4))
        node = cls(socket_dirs, committer=StateStoreCommitter(store))
        node.store_actor = store
        return node

    def start(self) -> WireNode:
        for server in self.servers:
            server.start()
        self.clients = [Client(server.socket_path) for server in self.servers]
        return self

    @property
    def client(self) -> Client:
        return self.clients[0]

    @property
    def seq(self) -> int:
        return int(self.core.snapshot.seq)

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for server in self.servers:
            server.stop(grace_s=0.5)
        self.allocator.stop()
        if self.store_actor is not None:
            self.store_actor.stop()
        for directory in self.dirs:
            shutil.rmtree(directory, ignore_errors=True)
