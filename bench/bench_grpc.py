"""qrmd over its unix socket against an empty servicer on the same kind of socket (wire.md §1.2).

Run: ``PYTHONPATH=. python bench/bench_grpc.py [--quick]``.

For 50 and 5,000 shared pods (ramp-up finished, so they sit in pool ``share``) on a 256-CPU,
2-socket, 8-NUMA synthetic node, and for durability ``none`` and ``always``, it serves the real
Allocator, committing through the real StateStore journalling in a temporary directory, with a
``PluginServer`` on a unix socket, and times with a gRPC client on that socket:

* **Allocate** of a new shared container (decide, journal one record, fsync with ``always``,
  apply, reply); the pod is removed again between samples, untimed, so the pod count holds;
* **GetTopologyHints** of a dedicated NUMA-binding container (read-only);
* **GetResourcesAllocation**, listing every container (at 5,000 pods: 5,000 containers).

The baseline is an empty servicer on a socket of its own in the same process: it parses the
same request message and answers the very reply message qrmd answered, so the ratio is what
qrmd adds over gRPC and protobuf themselves. Client and servers share this process (and its
GIL), as both sides of the comparison do. Resident memory (VmRSS of /proc/self/status) is
printed after the imports, and with the 5,000-pod node loaded.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message

import actors.store_messages as store_messages
from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_messages import (
    Allocate,
    GetResourcesAllocation,
    RemovePod,
    StartPolicy,
)
from actors.ports.commit import StateStoreCommitter
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from policy.cpu.context import PolicyContext
from policy.cpu.request import ContainerType, ResourceRequest
from policy.cpu.reserve import reserved_cpus
from policy.topology.synthetic import generate_dummy_cpu_topology
from wire.gen import resourceplugin_pb2 as pb
from wire.plugin_server import PluginServer

TOPOLOGY = generate_dummy_cpu_topology(256, 2, 8)
CTX = PolicyContext(
    topology=TOPOLOGY,
    reserved=reserved_cpus(TOPOLOGY, use_kubelet_reserved_config=False, reserved_cpu_cores=4),
)
QOS = "katalyst.kubewharf.io/qos_level"
ENHANCEMENT = "katalyst.kubewharf.io/memory_enhancement"
SERVICE = "resourceplugin.v1alpha1.ResourcePlugin"


class Clock:
    """Wall time the bench moves: ramp-up ends when it says so, not when 30 s have passed."""

    def __init__(self) -> None:
        self.now = 1715180645.0

    def time(self) -> float:
        return self.now


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def shared_request(pod: str) -> ResourceRequest:
    return ResourceRequest(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=pod,
        container_name="app",
        container_type=ContainerType.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": 0.04},
        annotations={QOS: "shared_cores"},
    )


def shared_message(pod: str) -> pb.ResourceRequest:
    return pb.ResourceRequest(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=pod,
        container_name="app",
        container_type=pb.MAIN,
        resource_name="cpu",
        resource_requests={"cpu": 0.04},
        annotations={QOS: "shared_cores"},
        hint=pb.TopologyHint(),
    )


DEDICATED_HINTS_REQUEST = pb.ResourceRequest(
    pod_uid="bench-dedicated",
    pod_namespace="default",
    pod_name="bench-dedicated",
    container_name="app",
    container_type=pb.MAIN,
    resource_name="cpu",
    resource_requests={"cpu": 8},
    annotations={QOS: "dedicated_cores", ENHANCEMENT: '{"numa_binding":"true"}'},
)


@dataclass
class Node:
    allocator: Any
    store: Any
    server: PluginServer
    channel: grpc.Channel
    directory: str


def open_store(journal: str, durability: str) -> Any:
    config = StoreConfig(directory=journal, node_name="bench", durability=durability)  # type: ignore[arg-type]
    return StateStoreActor.start(lambda: StateStoreCore.open(config, TOPOLOGY))


def start_allocator(store: Any, clock: Clock) -> tuple[Any, AllocatorCore]:
    """The Allocator as the daemon wires it: committing in its own turn where the store offers
    it (``CommitInTurn``); through the store's mailbox on a tree without it, so these benches
    can measure an older checkout (``PYTHONPATH=<tree>``) for a before/after."""
    in_turn = getattr(store_messages, "CommitInTurn", None)
    committer = StateStoreCommitter(store) if in_turn is None else store.ask(in_turn(), timeout=60)
    core = AllocatorCore(committer.latest(), CTX, committer, clock.time)
    allocator = AllocatorActor.start(core)
    allocator.ask(StartPolicy(), timeout=60)
    return allocator, core


@contextmanager
def served_node(pods: int, durability: str) -> Iterator[Node]:
    """``pods`` shared pods, ramp-up done, journalled; then reopened with ``durability``."""
    directory = tempfile.mkdtemp(dir="/tmp", prefix="qb")
    journal = f"{directory}/journal"
    clock = Clock()
    # Build with durability none (5,000 fsyncs would only slow the set-up) ...
    store = open_store(journal, "none")
    allocator, _ = start_allocator(store, clock)
    for i in range(pods):
        allocator.ask(Allocate(shared_request(f"pod-{i:05d}")), timeout=60)
    clock.now += 31
    allocator.ask(GetResourcesAllocation(), timeout=60)  # ramp-up ends: into pool share
    allocator.stop()
    store.stop()
    # ... then serve from the recovered journal with the durability under test.
    store = open_store(journal, durability)
    allocator, _ = start_allocator(store, clock)
    server = PluginServer(directory, allocator, ready=lambda: True)
    server.start()
    channel = grpc.insecure_channel(f"unix:{server.socket_path}")
    try:
        yield Node(allocator, store, server, channel, directory)
    finally:
        channel.close()
        server.stop(grace_s=0.5)
        allocator.stop()
        store.stop()
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def baseline_server(replies: dict[str, tuple[type[Message], Message]]) -> Iterator[grpc.Channel]:
    """An empty servicer: parses each request, answers the recorded reply message."""
    directory = tempfile.mkdtemp(dir="/tmp", prefix="qb")
    path = f"{directory}/baseline.sock"

    def method(request_type: type[Message], reply: Message) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            lambda request, context: reply,
            request_deserializer=request_type.FromString,
            response_serializer=lambda message: message.SerializeToString(),
        )

    handlers = {name: method(*pair) for name, pair in replies.items()}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_insecure_port(f"unix:{path}")
    server.start()
    channel = grpc.insecure_channel(f"unix:{path}")
    try:
        yield channel
    finally:
        channel.close()
        server.stop(None)
        shutil.rmtree(directory, ignore_errors=True)


def stub(channel: grpc.Channel, name: str, reply_type: type[Message]) -> Callable[..., Any]:
    return channel.unary_unary(
        f"/{SERVICE}/{name}",
        request_serializer=lambda message: message.SerializeToString(),
        response_deserializer=reply_type.FromString,
    )


def timed(
    call: Callable[[int], Any], samples: int, between: Callable[[int], None] | None = None
) -> list[float]:
    """Seconds per call; ``between`` runs untimed after each sample."""
    times = []
    for i in range(samples):
        started = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - started)
        if between is not None:
            between(i)
    return times


def p50_p99(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def report(label: str, qrmd: list[float], base: list[float]) -> None:
    q50, q99 = p50_p99(qrmd)
    b50, b99 = p50_p99(base)
    print(
        f"  {label:<34} qrmd p50 {q50:8.3f} ms  p99 {q99:8.3f} ms | "
        f"baseline p50 {b50:7.3f} ms  p99 {b99:7.3f} ms | ratio p50 {q50 / b50:6.1f}x  "
        f"p99 {q99 / b99:6.1f}x"
    )


def bench(pods: int, durability: str, samples: int, list_samples: int) -> None:
    print(f"{pods} pods, durability {durability}:")
    with served_node(pods, durability) as node:
        allocate = stub(node.channel, "Allocate", pb.ResourceAllocationResponse)
        hints = stub(node.channel, "GetTopologyHints", pb.ResourceHintsResponse)
        listing = stub(node.channel, "GetResourcesAllocation", pb.GetResourcesAllocationResponse)

        def remove(i: int) -> None:
            node.allocator.ask(RemovePod(f"bench-{i}"), timeout=60)

        for i in range(5):  # warm up the channel and the code paths
            allocate(shared_message(f"bench-{i}"), timeout=10)
            remove(i)
            hints(DEDICATED_HINTS_REQUEST, timeout=10)
        alloc_t = timed(
            lambda i: allocate(shared_message(f"bench-{i}"), timeout=10), samples, remove
        )
        hint_t = timed(lambda i: hints(DEDICATED_HINTS_REQUEST, timeout=10), samples)
        list_request = pb.GetResourcesAllocationRequest()
        list_t = timed(lambda i: listing(list_request, timeout=30), list_samples)
        # The replies the baseline answers: exactly what qrmd answered.
        allocate_reply = allocate(shared_message("bench-reply"), timeout=10)
        replies = {
            "Allocate": (pb.ResourceRequest, allocate_reply),
            "GetTopologyHints": (pb.ResourceRequest, hints(DEDICATED_HINTS_REQUEST, timeout=10)),
            "GetResourcesAllocation": (
                pb.GetResourcesAllocationRequest,
                listing(list_request, timeout=30),
            ),
        }
        containers = sum(
            len(pod.container_resources)
            for pod in replies["GetResourcesAllocation"][1].pod_resources.values()  # type: ignore[attr-defined]
        )
        rss = rss_mib()
    with baseline_server(replies) as channel:
        b_allocate = stub(channel, "Allocate", pb.ResourceAllocationResponse)
        b_hints = stub(channel, "GetTopologyHints", pb.ResourceHintsResponse)
        b_listing = stub(channel, "GetResourcesAllocation", pb.GetResourcesAllocationResponse)
        for i in range(5):
            b_allocate(shared_message(f"bench-{i}"), timeout=10)
        b_alloc_t = timed(lambda i: b_allocate(shared_message(f"bench-{i}"), timeout=10), samples)
        b_hint_t = timed(lambda i: b_hints(DEDICATED_HINTS_REQUEST, timeout=10), samples)
        b_list_t = timed(lambda i: b_listing(list_request, timeout=30), list_samples)
    report("Allocate (new shared container)", alloc_t, b_alloc_t)
    report("GetTopologyHints (dedicated, NUMA)", hint_t, b_hint_t)
    report(f"GetResourcesAllocation ({containers} ctrs)", list_t, b_list_t)
    print(f"  resident memory with the node loaded: {rss:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    samples, list_samples = (30, 5) if args.quick else (300, 30)
    print(f"resident memory after imports: {rss_mib():.1f} MiB")
    print(f"node: synthetic 256 CPUs, 2 sockets, 8 NUMA nodes; {samples} samples per RPC")
    for pods in (50, 5000):
        for durability in ("none", "always"):
            bench(pods, durability, samples, list_samples)


if __name__ == "__main__":
    main()
