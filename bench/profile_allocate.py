"""Where one Allocate's time goes, stage by stage, through the real in-process daemon.

Run: ``PYTHONPATH=. python bench/profile_allocate.py [--pods N] [--calls N]``.

The node is bench_wire's: a 256-CPU synthetic node, ``--pods`` shared pods in pool ``share``,
served with durability ``always`` over a real unix socket. One client allocates a new shared pod
and removes it again, ``--calls`` times; only the Allocate calls are counted. Each stage is timed
by wrapping the function that does it (``time.perf_counter`` on entry and exit, the same thread),
so a stage's figure includes what it calls; the table subtracts the nested stages, and the hops
(an ask's time minus its actor's ``on_receive``) are what a message between threads costs: queue,
wake-up, future. Beside each stage's wall time is its CPU time (``time.thread_time`` of the
thread that ran it); the hop's CPU is the asking thread's while it waits plus the Allocator
thread's outside its turn, and the first row's is the process's CPU no stage accounts for.
The empty servicer of bench_wire, answering the same reply after a 300 B append+fsync, is
measured in the same run as the floor.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import functools
import gc
import os
import pstats
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_wire import RAW_WRITE, ServedNode, baseline_server, shared_message, stub

import actors.allocator as allocator_module
import actors.ports.commit as commit_module
import actors.state_store as store_module
import journal.writer as writer_module
import wire.call_groups as groups_module
import wire.resource_plugin as plugin_module
import wire.rpc as rpc_module
from wire.gen import resourceplugin_pb2 as pb

PROFILED: dict[str, cProfile.Profile] = {}
TOTALS: dict[str, float] = defaultdict(float)
#: CPU seconds of the thread that ran each stage (``time.thread_time``): a stage runs on one
#: thread, but for the asks, whose CPU is the asking thread's while it waits.
CPU: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
#: Set while a counted Allocate is in flight (the client is serial, so every stage timed
#: meanwhile belongs to it).
COUNTING = threading.Event()


#: Cyclic collections during counted Allocates, by generation, and their seconds in all: they
#: run inside whatever stage allocated, so they are part of those stages' figures.
GC_RUNS: dict[int, int] = defaultdict(int)
GC_SECONDS = [0.0]
_gc_started = [0.0]


def on_collection(phase: str, info: dict[str, int]) -> None:
    if not COUNTING.is_set():
        return
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        GC_SECONDS[0] += time.perf_counter() - _gc_started[0]
        GC_RUNS[info["generation"]] += 1


def timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not COUNTING.is_set():
            return function(*args, **kwargs)
        if label in PROFILED:
            return PROFILED[label].runcall(function, *args, **kwargs)
        started = time.perf_counter()
        cpu_started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            CPU[label] += time.thread_time() - cpu_started
            TOTALS[label] += time.perf_counter() - started
            CALLS[label] += 1

    return wrapper


def instrument() -> None:
    """Wrap each stage where its caller looks it up (before the server is built)."""
    parser = rpc_module.tolerant_parser

    def tolerant_parser(message_type: Any) -> Any:
        return timed("wire decode", parser(message_type))

    rpc_module.tolerant_parser = tolerant_parser  # type: ignore[assignment]
    rpc_module._serialize = timed("reply serialise", rpc_module._serialize)  # type: ignore[assignment]
    handler = plugin_module.unary_handler

    def unary_handler(rpc: str, request_type: Any, work: Any, *rest: Any, **kw: Any) -> Any:
        return handler(rpc, request_type, timed("servicer work", work), *rest, **kw)

    plugin_module.unary_handler = unary_handler  # type: ignore[assignment]
    # The rows hold the conversions themselves (bound when the module was imported).
    plugin_module.RESOURCE_PLUGIN_RPCS = tuple(
        dataclasses.replace(
            row,
            command=timed("to domain call", row.command),
            response=timed("reply message", row.response),
        )
        if row.name == "Allocate"
        else row
        for row in plugin_module.RESOURCE_PLUGIN_RPCS
    )
    for owner, name, label in WRAPPED:
        setattr(owner, name, timed(label, getattr(owner, name)))


#: (where the caller looks it up, the name it looks up, the stage's label).
WRAPPED: tuple[tuple[Any, str, str], ...] = (
    (plugin_module, "ask_allocator", "ask allocator"),
    # Allocate, RemovePod and hints are asked through the call grouper (alone: as themselves).
    (groups_module.CallGrouper, "ask", "ask allocator"),
    (allocator_module.AllocatorActor, "on_receive", "allocator turn"),
    (allocator_module, "decide", "decision"),
    (allocator_module, "cause_of", "cause"),
    (commit_module.StateStoreCommitter, "commit", "ask store"),
    *(
        ((store_module.InTurnCommitter, "commit", "ask store"),)
        if hasattr(store_module, "InTurnCommitter")  # an older tree commits through the mailbox
        else ()
    ),
    (commit_module.AdoptedSnapshot, "commit", "commit and adopt"),
    (store_module.StateStoreCore, "commit", "store turn"),
    (store_module, "apply_all", "apply events"),
    (store_module, "encode_event", "encode events"),
    (writer_module.Journal, "append", "journal append"),
    (os, "fsync", "fsync"),
)


# (stage, the stages nested in it): each stage is printed as its time less theirs.
NESTING = [
    ("client round trip", ["servicer work", "wire decode", "reply serialise"]),
    ("servicer work", ["to domain call", "ask allocator", "reply message"]),
    ("ask allocator", ["allocator turn"]),
    ("allocator turn", ["decision", "cause", "commit and adopt"]),
    ("commit and adopt", ["ask store"]),
    ("ask store", ["store turn"]),
    ("store turn", ["apply events", "encode events", "journal append"]),
    ("journal append", ["fsync"]),
]
NAMES = {
    "client round trip": "gRPC client+server, outside the servicer",
    "ask allocator": "hop to the Allocator and back (queue, wake-up, future)",
    "ask store": "to the StateStore and back (a hop; none when committed in turn)",
    "commit and adopt": "adopt the snapshot",
    "store turn": "store: the rest of its commit (checks, publish)",
    "allocator turn": "allocator: the rest of its turn (inputs, phase)",
    "journal append": "journal: frame and write",
    "servicer work": "servicer: the rest",
}


def self_times(per_call: dict[str, float]) -> dict[str, float]:
    """Each stage's figure less the stages nested in it (``NESTING``)."""
    selfs: dict[str, float] = {}
    nested = {stage for _, inner in NESTING for stage in inner}
    for stage, inner in NESTING:
        selfs[stage] = per_call.get(stage, 0.0) - sum(per_call.get(s, 0.0) for s in inner)
    for stage, value in per_call.items():
        if stage in nested and stage not in selfs:
            selfs[stage] = value
    return selfs


def thread_cpu_clock(prefix: str) -> int:
    """The CPU-time clock of the one live thread whose name starts with ``prefix``."""
    (thread,) = (t for t in threading.enumerate() if t.name.startswith(prefix))
    assert thread.ident is not None
    return time.pthread_getcpuclockid(thread.ident)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument(
        "--cprofile",
        action="append",
        default=[],
        metavar="STAGE",
        help="profile this stage's calls with cProfile instead of timing it (e.g. decision)",
    )
    parser.add_argument("--sort", default="tottime", help="pstats order (tottime, cumulative)")
    args = parser.parse_args()
    for stage in args.cprofile:
        PROFILED[stage] = cProfile.Profile()
    instrument()
    gc.callbacks.append(on_collection)
    node = ServedNode(args.pods, pooled=True)
    try:
        reply = node.allocate(shared_message("probe"), timeout=30)
        node.remove(pb.RemovePodRequest(pod_uid="probe"), timeout=30)
        for _ in range(20):  # warm
            node.allocate_remove()
        client = 0.0
        process_cpu = 0.0
        allocator_cpu = 0.0
        allocator_clock = thread_cpu_clock("AllocatorActor")
        for _ in range(args.calls):
            pod = node.new_pod()
            COUNTING.set()
            started = time.perf_counter()
            cpu_started = time.process_time()
            allocator_started = time.clock_gettime(allocator_clock)
            node.allocate(shared_message(pod), timeout=30)
            allocator_cpu += time.clock_gettime(allocator_clock) - allocator_started
            process_cpu += time.process_time() - cpu_started
            client += time.perf_counter() - started
            COUNTING.clear()
            node.remove(pb.RemovePodRequest(pod_uid=pod), timeout=30)
        TOTALS["client round trip"] = client
        CPU["client round trip"] = process_cpu
        with (
            tempfile.TemporaryDirectory(dir="/tmp") as floor_dir,
            baseline_server({"Allocate": (pb.ResourceRequest, reply)}, floor_dir) as channel,
        ):
            floor_allocate = stub(channel, "Allocate", pb.ResourceAllocationResponse)
            floor = 0.0
            for _ in range(20):
                floor_allocate(shared_message("x"), timeout=30)
            for i in range(args.calls):
                started = time.perf_counter()
                floor_allocate(shared_message(f"x{i}"), timeout=30)
                floor += time.perf_counter() - started
    finally:
        node.close()
    selfs = self_times({k: v / args.calls * 1e6 for k, v in TOTALS.items()})
    cpu_selfs = self_times({k: v / args.calls * 1e6 for k, v in CPU.items()})
    # The ask's CPU is the asking thread's (it waits while the Allocator works on its own):
    # the hop's CPU is that plus what the Allocator's thread spent outside its turn (its
    # mailbox, the envelope, setting the future); the turn's CPU is not the ask's.
    cpu_selfs["ask allocator"] = (
        (CPU["ask allocator"] + allocator_cpu - CPU["allocator turn"]) / args.calls * 1e6
    )
    # The process's CPU not in a timed stage: gRPC's client and server, the client's code.
    cpu_selfs["client round trip"] = CPU["client round trip"] / args.calls * 1e6 - sum(
        value for stage, value in cpu_selfs.items() if stage != "client round trip"
    )
    total = TOTALS["client round trip"] / args.calls * 1e6
    cpu_total = CPU["client round trip"] / args.calls * 1e6
    floor_us = floor / args.calls * 1e6
    print(f"Allocate of a shared pod, {args.pods} pods in share, durability always, "
          f"{args.calls} calls (µs per call, self time; CPU of its thread):")  # fmt: skip
    print(f"  {'stage':<58} {'wall':>8}  {'share':>6}  {'CPU':>8}")
    for stage, value in sorted(selfs.items(), key=lambda item: -item[1]):
        cpu = cpu_selfs.get(stage, 0.0)
        print(f"  {NAMES.get(stage, stage):<58} {value:8.1f}  {value / total:6.1%}  {cpu:8.1f}")
    print(f"  {'total (client round trip; CPU of the whole process)':<58} {total:8.1f}"
          f"          {cpu_total:8.1f}")  # fmt: skip
    print(f"  {'floor: empty servicer + 300 B append+fsync':<58} {floor_us:8.1f}"
          f"  ratio {total / floor_us:.2f}x")  # fmt: skip
    print(f"  (raw write size of the floor: {len(RAW_WRITE)} B)")
    runs = ", ".join(f"generation {g}: {n}" for g, n in sorted(GC_RUNS.items()))
    print(f"  cyclic collector, inside the stages above: {GC_SECONDS[0] / args.calls * 1e6:.1f} "
          f"µs per call ({runs or 'no collection'})")  # fmt: skip
    for stage, profile in PROFILED.items():
        print(f"cProfile of {stage!r}, {args.calls} calls:")
        pstats.Stats(profile).sort_stats(args.sort).print_stats(30)
    calls = ", ".join(f"{k} {v / args.calls:.2f}" for k, v in sorted(CALLS.items()))
    print(f"  calls per Allocate: {calls}")


if __name__ == "__main__":
    main()
