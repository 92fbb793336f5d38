"""In-process decision time of Allocate and GetTopologyHints as the pod count grows (DESIGN.md:
the cost per request does not grow with the number of pods).

Run: ``PYTHONPATH=. python bench/bench_policy.py [--reference-version v0.5.47]``. For 50, 500
and 5,000 existing shared pods on the 256-CPU, 8-NUMA synthetic node (reserve 4 CPUs, a
dedicated NUMA-binding pod on NUMA 7, every shared pod settled in pool ``share``), it builds the
state through the façade, as the Allocator would, then times one decision (µs per call, best of
5 rounds):

* Allocate of a new shared container whose pod is unknown (ramps up: one event);
* Allocate of a new shared container of a running pod (joins ``share``: the pool engine runs);
* Allocate of a dedicated exclusive container on NUMA 6 (the pool engine re-places the pools);
* Allocate of a reclaimed container (one event);
* RemovePod of a shared pod (the pool engine re-sizes ``share``);
* GetTopologyHints of a shared container (at v0.5.47: the non-binding shared total);
* GetTopologyHints of a dedicated exclusive container (full enumeration, 255 NUMA sets);

next to the baseline of applying one ``ContainerAllocated`` event, with each figure's ratio to
it, the 5,000/50 ratio, and how many events the Allocate commits. Then GetTopologyHints on 16,
32 and 64 NUMA nodes (the reduced answer of ``policy.cpu.hint_masks``).

How it scales, and why (measured on the shared 2-core dev box, load ~3): every figure is flat
from 50 to 5,000 pods (5,000/50 between 0.9 and 1.1; noise is ±20 %). Allocate reads the
pooled CPUs, ``allocated_cpuset`` and per-NUMA availability from the state's indexes (O(NUMA
nodes + dedicated containers)), sizes pools from the per-pool request sums (O(pools)), and moves
only containers whose placement changes: pooled containers refer to their pool, so a resize is
one ``PoolSet`` whatever the number of members. It commits 1 event (ramping shared, reclaimed:
``ContainerAllocated``) to 4 (a pool join: the entry, two ``PoolSet``, ``ContainerPlaced``; a
dedicated allocation: the entry, two ``PoolSet``, ``RampCPUsSet``); applying each is a HAMT
update, O(log32 pods). Hints never look at pods: the 255 NUMA
sets of the full 8-node answer cost the same at any pod count. Reduced hints on 16-64 NUMA
nodes stay under a millisecond, bounded by ``max_hints`` × set size × nodes, not by 2**N.
"""

from __future__ import annotations

import argparse
import dataclasses
import timeit
from collections.abc import Callable
from functools import partial

from policy.cpu import facade as cpu_policy
from policy.cpu.commands import (
    UNKNOWN_PHASE,
    Allocate,
    AllocateInputs,
    GetResourcesAllocation,
    GetTopologyHints,
    PodPhase,
    RemovePod,
)
from policy.cpu.context import PolicyContext
from policy.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_LEVEL_KEY
from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from policy.cpu.reserve import reserved_cpus
from policy.state.entries import SHARED_CORES, ContainerEntry, InPool
from policy.state.events import ContainerAllocated
from policy.state.sections import State, apply, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology

T0 = 1_715_180_645.0
TOPOLOGY = generate_dummy_cpu_topology(256, 2, 8)
CTX = PolicyContext(
    topology=TOPOLOGY,
    reserved=reserved_cpus(TOPOLOGY, use_kubelet_reserved_config=False, reserved_cpu_cores=4),
)
BINDING = '{"numa_binding": "true", "numa_exclusive": "true"}'


def request(
    pod: str, cpu: float, qos: str = SHARED_CORES, hint: tuple[int, ...] | None = None
) -> ResourceRequest:
    annotations = {QOS_LEVEL_KEY: qos}
    if qos == "dedicated_cores":
        annotations[MEMORY_ENHANCEMENT_KEY] = BINDING
    return ResourceRequest(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=pod,
        container_name="app",
        container_type=ContainerType.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": cpu},
        annotations=annotations,
        hint=None if hint is None else TopologyHint(hint, True),
    )


def allocation(req: ResourceRequest, phase: str = UNKNOWN_PHASE) -> AllocateInputs:
    """Allocate's inputs: the call and the pod source's answer (unknown by default)."""
    return AllocateInputs(Allocate(req), PodPhase(phase))


def commit(state: State, decision: cpu_policy.Decision[object]) -> State:
    return apply_all(state, decision.events)


def build(pods: int) -> State:
    """Start-up, a dedicated pod on NUMA 7, ``pods`` shared pods settled in ``share``."""
    state = empty_state(TOPOLOGY)
    state = commit(state, cpu_policy.start(state, CTX))
    ded = cpu_policy.allocate(
        state, allocation(request("ded-7", 16, "dedicated_cores", (7,))), CTX, T0
    )
    state = commit(state, ded)
    for i in range(pods):
        # 0.02 CPU each: 5,000 pods still fit the node's shared CPUs
        state = commit(
            state, cpu_policy.allocate(state, allocation(request(f"pod-{i:05d}", 0.02)), CTX, T0)
        )
    return commit(
        state, cpu_policy.get_resources_allocation(state, GetResourcesAllocation(), CTX, T0 + 31)
    )


def best_us(call: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6


def cases(state: State) -> dict[str, tuple[Callable[[], object], int]]:
    """Each decision to time on ``state``, with calls per timing round."""
    extra = ContainerEntry(
        pod_uid="extra",
        container_name="app",
        container_type="MAIN",
        owner_pool_name="share",
        placement=InPool("share"),
        qos_level=SHARED_CORES,
        request_quantity=1.0,
    )
    ded = request("new", 8, "dedicated_cores", (6,))
    return {
        "apply one event (baseline)": (partial(apply, state, ContainerAllocated(extra)), 2000),
        "allocate shared, ramping": (
            partial(cpu_policy.allocate, state, allocation(request("new", 2)), CTX, T0 + 40),
            300,
        ),
        "allocate shared, joins pool": (
            partial(
                cpu_policy.allocate, state, allocation(request("new", 2), "Running"), CTX, T0 + 40
            ),
            100,
        ),
        "allocate dedicated NUMA 6": (
            partial(cpu_policy.allocate, state, allocation(ded), CTX, T0 + 40),
            100,
        ),
        "allocate reclaimed": (
            partial(
                cpu_policy.allocate,
                state,
                allocation(request("new", 1, "reclaimed_cores")),
                CTX,
                T0 + 40,
            ),
            300,
        ),
        "remove a shared pod": (
            partial(cpu_policy.remove_pod, state, RemovePod("pod-00000"), CTX, T0 + 40),
            100,
        ),
        "hints shared": (
            partial(
                cpu_policy.get_topology_hints, state, GetTopologyHints(request("new", 2)), CTX, T0
            ),
            100,
        ),
        "hints dedicated (8 NUMA, full)": (
            partial(
                cpu_policy.get_topology_hints,
                state,
                GetTopologyHints(request("new", 8, "dedicated_cores")),
                CTX,
                T0,
            ),
            100,
        ),
    }


def measure(states: dict[int, State], rounds: int = 5) -> dict[int, dict[str, tuple[float, int]]]:
    """µs per call (best round) and events committed, per pod count and decision.

    Sizes alternate within each round, so a burst of load from other processes on the machine
    hits every size alike rather than one of them.
    """
    per_size = {pods: cases(state) for pods, state in states.items()}
    best: dict[int, dict[str, float]] = {pods: {} for pods in states}
    for _ in range(rounds):
        for pods, table in per_size.items():
            for name, (call, number) in table.items():
                us = timeit.timeit(call, number=number) / number * 1e6
                best[pods][name] = min(best[pods].get(name, us), us)
    out: dict[int, dict[str, tuple[float, int]]] = {}
    for pods, table in per_size.items():
        out[pods] = {}
        for name, (call, _number) in table.items():
            result = call()
            events = len(result.events) if isinstance(result, cpu_policy.Decision) else 1
            out[pods][name] = (best[pods][name], events)
    return out


def large_machine_hints() -> None:
    print("\nGetTopologyHints on large machines (reduced mode: smallest size, <= 64 hints)")
    print(f"{'NUMA nodes':>10} {'request':>8} {'hints':>6} {'us/call':>10}")
    for numas in (16, 32, 64):
        topology = generate_dummy_cpu_topology(numas * 16, 2, numas)
        ctx = PolicyContext(topology=topology, reserved=CPUSet())
        state = empty_state(topology)
        for cpus in (8, 24, numas * 8):
            req = request("big", cpus, "dedicated_cores")
            reply = cpu_policy.get_topology_hints(state, GetTopologyHints(req), ctx, T0).reply
            us = best_us(
                partial(cpu_policy.get_topology_hints, state, GetTopologyHints(req), ctx, T0), 20
            )
            print(f"{numas:>10} {cpus:>8} {len(reply.hints or ()):>6} {us:>10.1f}")


def main() -> None:
    global CTX  # noqa: PLW0603 - the one context every decision above is timed with
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--reference-version",
        default=CTX.reference_version,
        help="the Katalyst release the policy reproduces (v0.5.3 or v0.5.47)",
    )
    args = parser.parse_args()
    CTX = dataclasses.replace(CTX, reference_version=args.reference_version)
    print(f"reference version {CTX.reference_version}")
    sizes = (50, 500, 5000)
    states = {pods: build(pods) for pods in sizes}
    for pods, state in states.items():
        assert len(state.cpu.pods) == pods + 1
    results = measure(states)
    names = list(results[sizes[0]])
    print("Decision time on 256 CPUs / 8 NUMA nodes, µs per call (events committed)")
    header = "".join(f"{p:>16}" for p in sizes)
    print(f"{'decision':34}{header}{'x baseline@5000':>17}{'5000/50':>9}")
    base = results[sizes[-1]][names[0]][0]
    for name in names:
        cells = "".join(f"{results[p][name][0]:>11.1f} ({results[p][name][1]:>2})" for p in sizes)
        ratio = results[sizes[-1]][name][0] / base
        growth = results[sizes[-1]][name][0] / results[sizes[0]][name][0]
        print(f"{name:34}{cells}{ratio:>17.1f}{growth:>9.2f}")
    large_machine_hints()


if __name__ == "__main__":
    main()
