"""Kubelet-like clients in one process, for ``bench_wire``'s concurrent-clients row.

Run by ``bench_wire`` as ``python bench/kubelet_clients.py SOCKET THREADS LOOPS PREFIX START``:
``THREADS`` threads, each with its own channel to ``SOCKET``, start together at wall time
``START`` and run ``LOOPS`` times Allocate of a new shared pod → GetTopologyHints → RemovePod of
that pod, each call timed. The process prints one JSON object: the latencies in seconds, when
its first call started and its last ended (wall time, so that several processes can be
combined), the calls that failed, and the Allocates whose reply did not place the pod.

A separate process per group of clients, as kubelets are: the clients' own Python work does not
take the server's GIL, so the server's CPU per call is what the throughput measures.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_grpc import DEDICATED_HINTS_REQUEST, shared_message, stub

from wire.gen import resourceplugin_pb2 as pb


def run_client(
    socket: str, pod_prefix: str, loops: int, start_at: float, out: dict[str, list[Any]]
) -> None:
    """One kubelet: ``loops`` × (Allocate, hints, RemovePod), from ``start_at`` on."""
    channel = grpc.insecure_channel(f"unix:{socket}")
    allocate = stub(channel, "Allocate", pb.ResourceAllocationResponse)
    hints = stub(channel, "GetTopologyHints", pb.ResourceHintsResponse)
    remove = stub(channel, "RemovePod", pb.RemovePodResponse)
    # One untimed call connects the channel, so the timed calls do not include the dial.
    remove(pb.RemovePodRequest(pod_uid=f"{pod_prefix}-warm"), timeout=60)
    latencies: list[float] = []
    failures: list[str] = []
    unplaced: list[str] = []
    time.sleep(max(0.0, start_at - time.time()))
    first = time.time()
    for i in range(loops):
        pod = f"{pod_prefix}-{i}"
        calls = (
            (allocate, shared_message(pod)),
            (hints, DEDICATED_HINTS_REQUEST),
            (remove, pb.RemovePodRequest(pod_uid=pod)),
        )
        for method, message in calls:
            started = time.perf_counter()
            try:
                reply = method(message, timeout=60)
            except grpc.RpcError as err:
                failures.append(f"{pod}: {err.code()}")
                continue
            latencies.append(time.perf_counter() - started)
            if method is allocate and not reply.allocation_result.resource_allocation:
                unplaced.append(pod)
    last = time.time()
    channel.close()
    out["latencies"].extend(latencies)
    out["failures"].extend(failures)
    out["unplaced"].extend(unplaced)
    out["first"].append(first)
    out["last"].append(last)


def main() -> None:
    socket, threads, loops, prefix, start_at = sys.argv[1:6]
    out: dict[str, list[Any]] = {
        "latencies": [],
        "failures": [],
        "unplaced": [],
        "first": [],
        "last": [],
    }
    workers = [
        threading.Thread(
            target=run_client, args=(socket, f"{prefix}-{t}", int(loops), float(start_at), out)
        )
        for t in range(int(threads))
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(
        json.dumps(
            {
                "latencies": out["latencies"],
                "failures": out["failures"],
                "unplaced": out["unplaced"],
                "first": min(out["first"], default=0.0),
                "last": max(out["last"], default=0.0),
            }
        )
    )


if __name__ == "__main__":
    main()
