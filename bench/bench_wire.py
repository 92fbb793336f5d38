"""What kubelet sees on the socket, each figure against a baseline measured in the same run.

Run: ``PYTHONPATH=. python bench/bench_wire.py [--quick] [--reference-version v0.5.47]``.

One row per figure of the performance table (DESIGN.md: "its cost per request does not grow with
the number of pods"), printed as a ratio to its baseline. Durability ``always`` throughout, on a
256-CPU, 2-socket, 8-NUMA synthetic node. The machine is shared and noisy, so every comparison
is measured in interleaved blocks (a block of the figure, a block of its baseline, again), and
only ratios are meant to be compared between runs.

* **Allocate p50, 5,000 shared pods** vs an empty servicer answering the very reply over the same
  kind of socket that also appends and fsyncs 300 raw bytes in the state directory per call: the
  floor of gRPC, protobuf and one durable write.
* **Allocate p50 at 5,000 pods vs 50**, and **RemovePod p50 at 5,000 vs 50** with the pods ramping
  (ramp-up not over) and pooled (in pool ``share``): flat in pod count means 1.0x.
* **GetResourcesAllocation p50, 5,000 containers** vs an empty servicer sending the very reply
  qrmd gave, re-serialised by protobuf per call.
* **Restart to serving** (exec → first answered GetResourcePluginOptions) of ``qrmd run`` with
  5,000 pods in its journal, after SIGKILL and after SIGTERM, with ``--metrics-address off``
  and with the metrics and health endpoint on as by default (on a port the kernel picks), vs a
  Python process that imports grpc and serves an empty servicer on a unix socket; both read
  compiled bytecode, as an installed wheel does (``bench/bench_startup.py`` has the
  step-by-step breakdown).
* **Journal replay** of the daemon's own journal (``read_records``, and a full StateStore
  recovery) in records/s vs raw ``msgpack.Unpacker`` over the same record payloads.
* **16 concurrent clients** (Allocate / GetTopologyHints / RemovePod mix) p99 vs one client's p99
  of the same mix, clients as threads of this process.
* **Kubelet-like clients in processes of their own** (``bench/kubelet_clients.py``): 16 (4
  processes × 4 threads) and 1, Allocate → hints → RemovePod loops on a node of 500 pods,
  throughput and p50/p99 vs an empty servicer that fsyncs 300 B per Allocate and per RemovePod,
  interleaved; then a check that every call answered OK, no client pod is left and no prefilled
  pod is missing, in the listing and in the journal recovered by a fresh StateStore.
  ``--only-kubelets`` runs these rows alone.
* **Resident memory** of the daemon serving 5,000 pods (absolute).

* **Balance rounds inside the daemon** (``bench/bench_balance_round.py``: the real MemoryBalancer
  on the real StateStore, 32 NUMA nodes, 2,000 pods): a quiet round vs the planner alone on the
  same inputs, and a pressured round, its inputs journaled, vs msgpack-encoding those inputs once.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_grpc
from bench_grpc import (
    DEDICATED_HINTS_REQUEST,
    SERVICE,
    TOPOLOGY,
    Clock,
    open_store,
    p50_p99,
    shared_message,
    shared_request,
    start_allocator,
    stub,
)
from daemon_process import EMPTY_SERVER, METRICS_ON, fill_journal, qrmd_run_args, start

from actors.allocator_messages import Allocate, GetResourcesAllocation
from actors.state_store import StateStoreCore, StoreConfig
from journal import read_records
from journal.framing import decode_frame
from journal.records import encode_record
from journal.segments import read_segment_header
from wire.gen import resourceplugin_pb2 as pb
from wire.plugin_server import PluginServer

PYTHON = sys.executable
RAW_WRITE = b"\0" * 300


# --- nodes served in this process -------------------------------------------------------------


class ServedNode:
    """``pods`` shared pods journalled, then served with durability ``always``."""

    def __init__(self, pods: int, *, pooled: bool) -> None:
        self.directory = tempfile.mkdtemp(dir="/tmp", prefix="qw")
        journal = f"{self.directory}/journal"
        clock = Clock()
        store = open_store(journal, "none")  # set-up only: 5,000 fsyncs would prove nothing
        allocator, _ = start_allocator(store, clock)
        for i in range(pods):
            allocator.ask(Allocate(shared_request(f"pod-{i:05d}")), timeout=60)
        if pooled:
            clock.now += 31
            allocator.ask(GetResourcesAllocation(), timeout=60)  # ramp-up ends: into share
        allocator.stop()
        store.stop()
        self.store = open_store(journal, "always")
        self.allocator, _ = start_allocator(self.store, clock)
        self.server = PluginServer(self.directory, self.allocator, ready=lambda: True)
        self.server.start()
        self.channel = grpc.insecure_channel(f"unix:{self.server.socket_path}")
        self.allocate = stub(self.channel, "Allocate", pb.ResourceAllocationResponse)
        self.hints = stub(self.channel, "GetTopologyHints", pb.ResourceHintsResponse)
        self.remove = stub(self.channel, "RemovePod", pb.RemovePodResponse)
        self.listing = stub(
            self.channel, "GetResourcesAllocation", pb.GetResourcesAllocationResponse
        )
        self.serial = 0
        # As qrmd run does once it serves (qrmd/daemon.py, _collect_from_now_on): the state
        # built above leaves the cyclic collector's reach, so a call's collections walk what the
        # call allocates, not the 5,000 pods' entries (a gen-2 pass over them took 25-60 ms,
        # landing on whichever call was allocating).
        gc.freeze()

    def close(self) -> None:
        self.close_servers()
        self.remove_files()

    def close_servers(self) -> None:
        self.channel.close()
        self.server.stop(grace_s=0.5)
        self.allocator.stop()
        self.store.stop()

    def recovered_pods(self) -> set[str]:
        """The pods a fresh StateStore recovers from the journal (after ``close_servers``)."""
        config = StoreConfig(directory=f"{self.directory}/journal", node_name="bench")
        core = StateStoreCore.open(config, TOPOLOGY)
        try:
            return set(core.snapshot.state.cpu.pods)
        finally:
            core.close(checkpoint=False)

    def remove_files(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def new_pod(self) -> str:
        self.serial += 1
        return f"bench-{self.serial}"

    def allocate_remove(self) -> tuple[float, float]:
        """Seconds of one Allocate of a new shared pod, and of its RemovePod."""
        pod = self.new_pod()
        started = time.perf_counter()
        self.allocate(shared_message(pod), timeout=30)
        middle = time.perf_counter()
        self.remove(pb.RemovePodRequest(pod_uid=pod), timeout=30)
        return middle - started, time.perf_counter() - middle


def baseline_socket(directory: str) -> str:
    """Where ``baseline_server`` serves."""
    return f"{directory}/baseline.sock"


@contextmanager
def baseline_server(
    replies: dict[str, tuple[type[Any], Any]],
    fsync_dir: str,
    durable_methods: tuple[str, ...] = ("Allocate",),
) -> Iterator[grpc.Channel]:
    """An empty servicer: parses each request, answers the recorded reply (serialised per call);
    each of ``durable_methods`` also appends and fsyncs 300 raw bytes in ``fsync_dir``."""
    path = baseline_socket(fsync_dir)
    fd = os.open(f"{fsync_dir}/raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    lock = threading.Lock()

    def durable(reply: Any) -> Callable[[Any, Any], Any]:
        def answer(request: Any, context: Any) -> Any:
            with lock:
                os.write(fd, RAW_WRITE)
                os.fsync(fd)
            return reply

        return answer

    def method(name: str, request_type: type[Any], reply: Any) -> grpc.RpcMethodHandler:
        behaviour = durable(reply) if name in durable_methods else (lambda request, context: reply)
        return grpc.unary_unary_rpc_method_handler(
            behaviour,
            request_deserializer=request_type.FromString,
            response_serializer=lambda message: message.SerializeToString(),
        )

    handlers = {name: method(name, *pair) for name, pair in replies.items()}
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
        os.close(fd)


def row(label: str, figure: float, baseline: float, target: str, unit: str = "ms") -> None:
    ratio = figure / baseline if baseline else float("nan")
    print(
        f"  {label:<58} {figure:9.3f} {unit:<5} baseline {baseline:9.3f} {unit:<5} "
        f"ratio {ratio:6.2f}x  (target {target})"
    )


def p50(times: list[float]) -> float:
    """Milliseconds."""
    return p50_p99(times)[0]


def p99(times: list[float]) -> float:
    """Milliseconds."""
    return p50_p99(times)[1]


def bench_in_process(samples: int, blocks: int, list_samples: int) -> None:
    print("building nodes (50 and 5,000 shared pods, ramping and pooled) ...", flush=True)
    nodes = {
        (pods, pooled): ServedNode(pods, pooled=pooled)
        for pods in (50, 5000)
        for pooled in (False, True)
    }
    big = nodes[(5000, True)]
    try:
        for node in nodes.values():  # warm channels and code paths
            for _ in range(5):
                node.allocate_remove()
                node.hints(DEDICATED_HINTS_REQUEST, timeout=30)
        listing_bytes = big.listing(pb.GetResourcesAllocationRequest(), timeout=60)
        replies = {
            "Allocate": (pb.ResourceRequest, big.allocate(shared_message("reply"), timeout=30)),
            "GetTopologyHints": (pb.ResourceRequest, big.hints(DEDICATED_HINTS_REQUEST)),
            "RemovePod": (pb.RemovePodRequest, pb.RemovePodResponse()),
            "GetResourcesAllocation": (pb.GetResourcesAllocationRequest, listing_bytes),
        }
        big.remove(pb.RemovePodRequest(pod_uid="reply"), timeout=30)
        containers = sum(len(p.container_resources) for p in listing_bytes.pod_resources.values())
        with baseline_server(replies, big.directory) as channel:
            b_allocate = stub(channel, "Allocate", pb.ResourceAllocationResponse)
            b_listing = stub(channel, "GetResourcesAllocation", pb.GetResourcesAllocationResponse)
            b_hints = stub(channel, "GetTopologyHints", pb.ResourceHintsResponse)
            b_remove = stub(channel, "RemovePod", pb.RemovePodResponse)
            for i in range(5):
                b_allocate(shared_message(f"w{i}"), timeout=30)
            alloc: dict[tuple[int, bool], list[float]] = {key: [] for key in nodes}
            remove: dict[tuple[int, bool], list[float]] = {key: [] for key in nodes}
            base_alloc: list[float] = []
            for _ in range(blocks):
                for key, node in nodes.items():
                    for _ in range(samples):
                        a, r = node.allocate_remove()
                        alloc[key].append(a)
                        remove[key].append(r)
                for i in range(samples):
                    started = time.perf_counter()
                    b_allocate(shared_message(f"b{i}"), timeout=30)
                    base_alloc.append(time.perf_counter() - started)
            listing: list[float] = []
            changed_listing: list[float] = []
            base_listing: list[float] = []
            request = pb.GetResourcesAllocationRequest()
            for _ in range(blocks):
                for _ in range(list_samples):
                    started = time.perf_counter()
                    big.listing(request, timeout=60)
                    listing.append(time.perf_counter() - started)
                for _ in range(list_samples):
                    big.allocate_remove()  # a new state: nothing of the last listing is reused
                    started = time.perf_counter()
                    big.listing(request, timeout=60)
                    changed_listing.append(time.perf_counter() - started)
                for _ in range(list_samples):
                    started = time.perf_counter()
                    b_listing(request, timeout=60)
                    base_listing.append(time.perf_counter() - started)
            del b_hints, b_remove
            single, concurrent = mix(big, samples * blocks)
        print("in-process daemon (Allocator + StateStore + PluginServer), durability always:")
        row(
            "Allocate p50, 5,000 pooled pods vs empty servicer+fsync",
            p50(alloc[(5000, True)]),
            p50(base_alloc),
            "<= 1.3x",
        )
        row(
            "Allocate p50, 5,000 vs 50 pods",
            p50(alloc[(5000, True)]),
            p50(alloc[(50, True)]),
            "<= 1.1x",
        )
        for pooled, name in ((False, "ramping"), (True, "pooled")):
            row(
                f"RemovePod p50, 5,000 vs 50 pods, {name}",
                p50(remove[(5000, pooled)]),
                p50(remove[(50, pooled)]),
                "<= 1.1x",
            )
            print(
                f"    (p99 {p99(remove[(5000, pooled)]):.3f} ms vs "
                f"{p99(remove[(50, pooled)]):.3f} ms)"
            )
        row(
            f"GetResourcesAllocation p50, {containers} containers vs empty servicer",
            p50(listing),
            p50(base_listing),
            "<= 2x",
        )
        row(
            "  the same, the state changed since the last listing",
            p50(changed_listing),
            p50(base_listing),
            "<= 2x",
        )
        row(
            "16 concurrent clients p99 vs single-client p99 (mix)",
            p99(concurrent),
            p99(single),
            "<= 3x",
        )
        print(f"    (16 clients p50 {p50(concurrent):.3f} ms)")
    finally:
        for node in nodes.values():
            node.close()


def mix(node: ServedNode, calls: int) -> tuple[list[float], list[float]]:
    """One client, then 16 at once, each call of the Allocate / hints / RemovePod mix timed."""

    def one_client(count: int, out: list[float]) -> None:
        for _ in range(count):
            pod = node.new_pod()
            calls = (
                (node.allocate, shared_message(pod)),
                (node.hints, DEDICATED_HINTS_REQUEST),
                (node.remove, pb.RemovePodRequest(pod_uid=pod)),
            )
            for method, message in calls:
                started = time.perf_counter()
                method(message, timeout=60)
                out.append(time.perf_counter() - started)

    single: list[float] = []
    one_client(calls, single)
    concurrent: list[float] = []
    per_client = max(1, calls // 16)
    threads = [
        threading.Thread(target=one_client, args=(per_client, concurrent)) for _ in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return single, concurrent


# --- kubelets in processes of their own -------------------------------------------------------

CLIENTS_SCRIPT = str(Path(__file__).resolve().parent / "kubelet_clients.py")
PREFILLED_PODS = 500


def run_kubelets(socket: str, processes: int, threads: int, loops: int) -> dict[str, Any]:
    """``processes`` × ``threads`` kubelet-like clients (``kubelet_clients.py``) on ``socket``,
    started together; their latencies, failures, unplaced pods, and calls per second over the
    span from the first call to the last."""
    start_at = time.time() + 1.0 + 0.3 * processes  # after every client process imported grpc
    # This process serves (qrmd's node or the empty servicer, the other idle) and only waits
    # here: its CPU time over the run is the server's.
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    children = [
        subprocess.Popen(
            [PYTHON, CLIENTS_SCRIPT, socket, str(threads), str(loops), f"k{p}", str(start_at)],
            stdout=subprocess.PIPE,
        )
        for p in range(processes)
    ]
    results = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise RuntimeError(f"a kubelet client process failed with exit code {child.returncode}")
        results.append(json.loads(out))
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    latencies = [t for r in results for t in r["latencies"]]
    span = max(r["last"] for r in results) - min(r["first"] for r in results)
    return {
        "latencies": latencies,
        "failures": [f for r in results for f in r["failures"]],
        "unplaced": [u for r in results for u in r["unplaced"]],
        "calls_per_s": len(latencies) / span if span > 0 else float("nan"),
        "server_cpu_ms_per_call": cpu_s * 1000 / len(latencies) if latencies else float("nan"),
    }


def bench_kubelets(loops: int, blocks: int) -> None:
    """16 kubelet-like clients in 4 processes, and 1, against qrmd with 500 pods and against an
    empty servicer that fsyncs 300 B per Allocate and RemovePod; then no pod leaked or lost."""
    print(f"building a node with {PREFILLED_PODS} pooled shared pods ...", flush=True)
    node = ServedNode(PREFILLED_PODS, pooled=True)
    prefilled = {f"pod-{i:05d}" for i in range(PREFILLED_PODS)}
    try:
        replies = {
            "Allocate": (pb.ResourceRequest, node.allocate(shared_message("reply"), timeout=30)),
            "GetTopologyHints": (pb.ResourceRequest, node.hints(DEDICATED_HINTS_REQUEST)),
            "RemovePod": (pb.RemovePodRequest, pb.RemovePodResponse()),
        }
        node.remove(pb.RemovePodRequest(pod_uid="reply"), timeout=30)
        shapes = {"16 clients": (4, 4, loops), "1 client": (1, 1, loops * 4)}
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        with baseline_server(
            replies, node.directory, durable_methods=("Allocate", "RemovePod")
        ) as channel:
            del channel
            sockets = {"qrmd": node.server.socket_path, "empty": baseline_socket(node.directory)}
            for _ in range(blocks):  # interleaved: qrmd, then the empty servicer, again
                for shape, (processes, threads, count) in shapes.items():
                    for side, socket in sockets.items():
                        outcome = run_kubelets(socket, processes, threads, count)
                        runs.setdefault((shape, side), []).append(outcome)
        listing = node.listing(pb.GetResourcesAllocationRequest(), timeout=60)
        listed = set(listing.pod_resources)
    finally:
        node.close_servers()
    # Everything answered OK must be on disk: recover the journal in a fresh store and compare.
    recovered = node.recovered_pods()
    node.remove_files()
    failures = [
        f for (_, side), outs in runs.items() if side == "qrmd" for o in outs for f in o["failures"]
    ]
    unplaced = [
        u for (_, side), outs in runs.items() if side == "qrmd" for o in outs for u in o["unplaced"]
    ]
    print("kubelet-like clients in processes of their own (Allocate -> hints -> RemovePod loops),")
    print(
        f"  {PREFILLED_PODS} pods, vs an empty servicer fsyncing 300 B per Allocate and RemovePod:"
    )
    for shape in shapes:
        ours = runs[(shape, "qrmd")]
        base = runs[(shape, "empty")]
        rates = [o["calls_per_s"] for o in ours]
        base_rates = [o["calls_per_s"] for o in base]
        lat = [t for o in ours for t in o["latencies"]]
        base_lat = [t for o in base for t in o["latencies"]]
        row(
            f"{shape}: throughput vs empty servicer (higher is better)",
            statistics.median(rates),
            statistics.median(base_rates),
            ">= 0.7x" if shape == "16 clients" else "-",
            "c/s",
        )
        row(f"{shape}: p50 vs empty servicer", p50(lat), p50(base_lat), "-")
        cpu = statistics.median(o["server_cpu_ms_per_call"] for o in ours)
        base_cpu = statistics.median(o["server_cpu_ms_per_call"] for o in base)
        row(f"{shape}: server CPU per call vs empty servicer", cpu, base_cpu, "-")
        row(
            f"{shape}: p99 vs empty servicer",
            p99(lat),
            p99(base_lat),
            "<= 1.5x" if shape == "16 clients" else "-",
        )
    leaked = sorted(uid for uid in listed | recovered if uid.startswith("k"))
    lost = sorted(prefilled - listed) + sorted(prefilled - recovered)
    verdict = "ok" if not (failures or unplaced or leaked or lost) else "FAILED"
    print(
        f"  check {verdict}: {len(failures)} failed calls, {len(unplaced)} Allocates not placed, "
        f"{len(leaked)} client pods left behind, {len(lost)} prefilled pods missing "
        f"(listing and recovered journal)"
    )
    for what, items in (
        ("failed", failures),
        ("unplaced", unplaced),
        ("leaked", leaked),
        ("lost", lost),
    ):
        if items:
            print(f"    {what}: {items[:5]}")


# --- the daemon as a process -----------------------------------------------------------------


def daemon_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench_daemon(pods: int, repeats: int) -> None:
    directory = tempfile.mkdtemp(dir="/tmp", prefix="qd")
    # Every process reads compiled bytecode, as an installed wheel does: the checkout has no
    # __pycache__ and PYTHONDONTWRITEBYTECODE may be set, and qrmd would otherwise compile its
    # ~180 modules at every start while grpc's site-packages are compiled. The cache is filled
    # by the first (untimed) runs, writing allowed there only.
    python = [PYTHON, "-X", f"pycache_prefix={directory}/pycache"]
    with_writes = dict(os.environ)
    with_writes.pop("PYTHONDONTWRITEBYTECODE", None)
    qrmd_run, socket = qrmd_run_args(directory)
    argv = [*python, "-m", "qrmd.cli", *qrmd_run]
    # The default qrmd run also serves /metrics and /healthz (here on a port the kernel picks).
    metrics_on = [*python, "-m", "qrmd.cli", *qrmd_run_args(directory, METRICS_ON)[0]]
    metrics_on += ["--durability", "always"]
    try:
        fill_journal(argv, socket, pods, with_writes)
        kill_t: list[float] = []
        term_t: list[float] = []
        kill_on_t: list[float] = []
        term_on_t: list[float] = []
        base_t: list[float] = []
        rss = float("nan")
        base_socket = f"{directory}/empty.sock"
        empty, _, _ = start([*python, "-c", EMPTY_SERVER, base_socket], base_socket, with_writes)
        # The bytecode of the metrics stack too (filling the journal ran with metrics off).
        process, _, _ = start(metrics_on, socket, with_writes)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        empty.kill()
        empty.wait()
        for _ in range(repeats):
            process, _, seconds = start([*argv, "--durability", "always"], socket)
            kill_t.append(seconds)  # measured after the previous stop (SIGTERM first time)
            rss = daemon_rss_mib(process.pid)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            process, _, seconds = start([*argv, "--durability", "always"], socket)
            kill_t[-1] = seconds  # after SIGKILL
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            process, _, seconds = start([*argv, "--durability", "always"], socket)
            term_t.append(seconds)  # after SIGTERM
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            process, _, seconds = start(metrics_on, socket)
            kill_on_t.append(seconds)  # after SIGKILL, metrics on
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            process, _, seconds = start(metrics_on, socket)
            term_on_t.append(seconds)  # after SIGTERM, metrics on
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            empty, _, seconds = start([*python, "-c", EMPTY_SERVER, base_socket], base_socket)
            base_t.append(seconds)
            empty.kill()
            empty.wait()
        base = sorted(base_t)[len(base_t) // 2]
        print(f"qrmd run as a process, {pods} pods journalled, durability always:")
        row(
            "restart to serving after SIGKILL vs empty grpc server",
            sorted(kill_t)[len(kill_t) // 2],
            base,
            "<= 2x",
            "s",
        )
        row(
            "restart to serving after SIGTERM vs empty grpc server",
            sorted(term_t)[len(term_t) // 2],
            base,
            "<= 2x",
            "s",
        )
        row(
            "restart to serving after SIGKILL, metrics on (default)",
            sorted(kill_on_t)[len(kill_on_t) // 2],
            base,
            "<= 2x",
            "s",
        )
        row(
            "restart to serving after SIGTERM, metrics on (default)",
            sorted(term_on_t)[len(term_on_t) // 2],
            base,
            "<= 2x",
            "s",
        )
        print(f"  resident memory of the daemon at {pods} pods: {rss:.1f} MiB (target <= 120 MiB)")
        bench_replay(f"{directory}/state")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def journal_payloads(journal: str) -> bytes:
    """The record payloads of every segment, in order, framing (headers and checksums) cut."""
    payloads = []
    for name in sorted(os.listdir(journal)):
        if name.endswith(".seg"):
            data = Path(journal, name).read_bytes()
            _, offset = read_segment_header(data)
            while offset < len(data):
                payload, offset = decode_frame(data, offset)
                payloads.append(payload)
    return b"".join(payloads)


def bench_replay(state_dir: str) -> None:
    journal = f"{state_dir}/journal" if os.path.isdir(f"{state_dir}/journal") else state_dir
    records = list(read_records(journal))
    raw = f"{state_dir}/raw.msgpack"
    with open(raw, "wb") as handle:
        for record in records:
            handle.write(encode_record(record))
    # A fair baseline: the very bytes of the journal's record payloads, only the frames gone.
    assert Path(raw).read_bytes() == journal_payloads(journal)
    del records
    # CPU of this thread, median of interleaved runs, with the collector off as it is while
    # `qrmd run` recovers (qrmd.cli): wall-clock sums of three runs swung 0.32-0.72x for the
    # same code on a loaded machine, and the bench process's own heap (the in-process nodes)
    # made collections during a run cost what the daemon never pays.
    runs = 7
    journal_cpu: list[float] = []
    raw_cpu: list[float] = []
    open_cpu: list[float] = []
    open_wall: list[float] = []
    count = unpacked = 0
    for _ in range(runs):  # interleaved
        copy = f"{state_dir}/copy"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(journal, copy, ignore=shutil.ignore_patterns("*.ckpt", "checkpoint*"))
        config = StoreConfig(directory=copy, node_name="bench", durability="none")
        gc.collect()
        gc.disable()
        try:
            started = time.thread_time()
            count = sum(1 for _ in read_records(journal))
            journal_cpu.append(time.thread_time() - started)
            started = time.thread_time()
            with open(raw, "rb") as handle:
                unpacker = msgpack.Unpacker(handle, raw=False, strict_map_key=False)
                unpacked = sum(1 for _ in unpacker)
            raw_cpu.append(time.thread_time() - started)
            started, wall = time.thread_time(), time.perf_counter()
            core = StateStoreCore.open(config, TOPOLOGY)
            open_cpu.append(time.thread_time() - started)
            open_wall.append(time.perf_counter() - wall)
            core.close(checkpoint=False)
            del core
        finally:
            gc.enable()
    assert count == unpacked
    raw_s = statistics.median(raw_cpu)
    print(
        f"journal replay, {count} records (higher is better; CPU, median of {runs} runs, "
        "collector off as in qrmd run):"
    )
    row(
        "read_records records/s vs raw msgpack.Unpacker",
        count / statistics.median(journal_cpu),
        count / raw_s,
        ">= 0.5x",
        "rec/s",
    )
    row(
        "StateStore recovery records/s vs raw msgpack.Unpacker",
        count / statistics.median(open_cpu),
        count / raw_s,
        ">= 0.5x",
        "rec/s",
    )
    print(
        f"    (recovery wall {statistics.median(open_wall) * 1000:.1f} ms, "
        f"CPU {statistics.median(open_cpu) * 1000:.1f} ms; raw unpacker CPU {raw_s * 1000:.1f} ms)"
    )


def bench_replay_only(pods: int) -> None:
    """The journal replay rows alone, on the journal ``qrmd run`` writes for ``pods`` pods."""
    directory = tempfile.mkdtemp(dir="/tmp", prefix="qr")
    qrmd_run, socket = qrmd_run_args(directory)
    try:
        fill_journal([PYTHON, "-m", "qrmd.cli", *qrmd_run], socket, pods)
        bench_replay(f"{directory}/state")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--skip-daemon", action="store_true", help="only the in-process rows")
    parser.add_argument(
        "--only-replay", action="store_true", help="only the journal replay rows (5,000 pods)"
    )
    parser.add_argument("--skip-balance", action="store_true", help="no balance-round rows")
    parser.add_argument(
        "--reference-version",
        choices=("v0.5.3", "v0.5.47"),
        help="the Katalyst release qrmd reproduces in every row (default: qrmd's own)",
    )
    parser.add_argument(
        "--only-kubelets",
        action="store_true",
        help="only the kubelet-like clients rows (16 clients in 4 processes, and 1)",
    )
    args = parser.parse_args()
    if args.reference_version is not None:
        # The daemons started below read it from their environment (qrmd run's
        # QRMD_REFERENCE_VERSION); the nodes served in this process from bench_grpc's context.
        os.environ["QRMD_REFERENCE_VERSION"] = args.reference_version
        bench_grpc.CTX = dataclasses.replace(
            bench_grpc.CTX, reference_version=args.reference_version
        )
    if args.only_replay:
        bench_replay_only(5000)
        return
    samples, blocks, list_samples, repeats = (10, 3, 2, 1) if args.quick else (40, 5, 6, 3)
    kubelet_loops, kubelet_blocks = (15, 1) if args.quick else (40, 3)
    if args.only_kubelets:
        bench_kubelets(kubelet_loops, kubelet_blocks)
        return
    bench_in_process(samples, blocks, list_samples)
    bench_kubelets(kubelet_loops, kubelet_blocks)
    if not args.skip_daemon:
        bench_daemon(5000, repeats)
    if not args.skip_balance:
        # The quiet and pressured balance rounds (bench/bench_balance_round.py), imported
        # only when they run: --skip-balance loads none of the balancer.
        from bench_balance_round import bench_balance_rounds  # noqa: PLC0415

        bench_balance_rounds(quick=args.quick, row=row)


if __name__ == "__main__":
    main()
