"""StateStore benchmark: the cost of one commit with 50 vs 5,000 pods in the state
(flat: DESIGN.md, the cost per request does not grow with the number of pods).

Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_store.py            # ~30 s
    PYTHONPATH=. .venv/bin/python bench/bench_store.py --quick    # fewer commits

A commit is one Allocate's record (one ``ContainerAllocated`` of a shared pod into the share
pool, with its cause) through ``StateStoreCore.commit``: apply to a candidate state, encode,
journal (+ fsync with durability ``always``), publish. The baseline writes the same record's
bytes — ``msgpack.packb`` of the record map — with ``os.write`` (+ ``os.fsync``) in a loop.
Applying an event is O(size of the change), so the cost must be flat in the pod count: the
5,000/50 ratio is printed and should be close to 1. Checkpoints (O(state), every N records)
are kept out of the commit loop and timed on their own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.state_store import StateStoreCore, StoreConfig
from policy.state.codec import encode_event
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.state_fixtures import container

TOPO = generate_dummy_cpu_topology(96, 2, 4)
NODE = "bench-node"


def allocate(pod: str) -> tuple[list[Any], dict[str, Any]]:
    entry = container(pod, "app", InPool("share"), owner="share", quantity=1.5)
    cause = {"rpc": "Allocate", "request": {"pod_uid": pod, "container_name": "app"}}
    return [ContainerAllocated(entry)], cause


def open_store(directory: str, durability: str) -> StateStoreCore:
    config = StoreConfig(
        directory,
        NODE,
        durability=durability,  # type: ignore[arg-type]
        checkpoint_every_records=10**9,
        checkpoint_every_s=10**9,
    )
    return StateStoreCore.open(config, TOPO)


def filled_store(directory: str, pods: int, durability: str) -> StateStoreCore:
    """A store whose state holds ``pods`` shared pods (built with durability none, then
    reopened from a checkpoint with the durability under test)."""
    store = open_store(directory, "none")
    store.commit([PoolSet("share", CPUSet.parse("8-95"))], {"rpc": "Start"})
    for n in range(pods):
        store.commit(*allocate(f"pod-{n}"))
    store.close(checkpoint=True)
    return open_store(directory, durability)


def time_commits(store: StateStoreCore, count: int, tag: str) -> float:
    """Median µs per commit over batches of ``count // 5``."""
    batch = max(count // 5, 1)
    samples = []
    for b in range(5):
        commits = [allocate(f"{tag}-{b}-{i}") for i in range(batch)]
        started = time.perf_counter()
        for events, cause in commits:
            store.commit(events, cause)
        samples.append((time.perf_counter() - started) / batch * 1e6)
    return statistics.median(samples)


def time_raw(directory: str, count: int, fsync: bool) -> float:
    """µs per raw msgpack record write of the same bytes (+ fsync)."""
    events, cause = allocate("raw-pod")
    record = {
        "schema": 1,
        "seq": 1,
        "wall_time": time.time(),
        "monotonic_time": time.monotonic(),
        "cause": cause,
        "events": [encode_event(e) for e in events],
    }
    fd = os.open(os.path.join(directory, "raw.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        started = time.perf_counter()
        for seq in range(count):
            record["seq"] = seq
            os.write(fd, msgpack.packb(record))
            if fsync:
                os.fsync(fd)
        return (time.perf_counter() - started) / count * 1e6
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    counts = {"none": 1000 if args.quick else 5000, "always": 200 if args.quick else 1000}
    root = tempfile.mkdtemp(prefix="bench-store-")
    try:
        print(f"commit cost, {TOPO.num_cpus} CPUs, µs per commit (median of 5 batches)")
        print(f"{'durability':<11}{'pods':>6}{'commit µs':>12}{'raw µs':>10}{'ratio':>8}")
        for durability, count in counts.items():
            raw = time_raw(root, count, fsync=durability == "always")
            costs = {}
            for pods in (50, 5000):
                directory = os.path.join(root, f"{durability}-{pods}")
                store = filled_store(directory, pods, durability)
                costs[pods] = time_commits(store, count, "bench")
                print(
                    f"{durability:<11}{pods:>6}{costs[pods]:>12.1f}{raw:>10.1f}"
                    f"{costs[pods] / raw:>8.1f}"
                )
                if pods == 5000 and durability == "none":
                    started = time.perf_counter()
                    store.checkpoint()
                    checkpoint_ms = (time.perf_counter() - started) * 1e3
                store.close(checkpoint=False)
            print(f"{'':<11}5,000/50 pods: x{costs[5000] / costs[50]:.2f} (flat is ~1)")
        print(
            f"one checkpoint of 5,000 pods (every N records, not per commit): "
            f"{checkpoint_ms:.0f} ms"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
