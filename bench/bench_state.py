"""Cost of applying one event with 50 vs 5,000 pods in the state (flat:
DESIGN.md, the cost per request does not grow with the number of pods).

Run: ``PYTHONPATH=. python bench/bench_state.py``. For each pod count it builds a state on a
256-CPU, 8-NUMA synthetic node with that many shared pods in pool ``share`` (plus a few
dedicated NUMA-binding ones), then times, in µs per apply:

* a pool resize (``PoolSet``), which every pooled container follows;
* a new container (``ContainerAllocated``) and a dedicated one (indexes of machine state);
* a ramp-up completion (``RampUpFinished``) and a pod removal (``PodRemoved``);

next to the cost of copying a plain ``dict`` of the same size — what a mutable state would
pay to stay a value — and prints each apply's ratio to that copy, and the 5,000/50 ratio.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from policy.state.entries import DEDICATED_CORES, SHARED_CORES, ContainerEntry, InPool, OwnCPUs
from policy.state.events import (
    ContainerAllocated,
    Event,
    PodRemoved,
    PoolSet,
    RampCPUsSet,
    RampUpFinished,
)
from policy.state.sections import State, apply, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology

TOPOLOGY = generate_dummy_cpu_topology(256, 2, 8)
SHARE_A = CPUSet.parse("8-63,136-191")
SHARE_B = CPUSet.parse("8-71,136-199")


def shared(pod: str, name: str = "app", *, ramp_up: bool = False) -> ContainerEntry:
    return ContainerEntry(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=pod,
        container_name=name,
        container_type="MAIN",
        owner_pool_name="" if ramp_up else "share",
        ramp_up=ramp_up,
        placement=OwnCPUs.of(SHARE_A) if ramp_up else InPool("share"),
        init_timestamp="2024-05-08 15:04:05 +0000 UTC",
        labels={"katalyst.kubewharf.io/qos_level": SHARED_CORES},
        annotations={"katalyst.kubewharf.io/qos_level": SHARED_CORES},
        qos_level=SHARED_CORES,
        request_quantity=1.5,
    )


def dedicated(pod: str, cpus: str) -> ContainerEntry:
    annotations = {"katalyst.kubewharf.io/qos_level": DEDICATED_CORES, "numa_binding": "true"}
    return ContainerEntry(
        pod_uid=pod,
        container_name="app",
        container_type="MAIN",
        owner_pool_name="dedicated",
        placement=OwnCPUs.of(CPUSet.parse(cpus)),
        annotations=annotations,
        qos_level=DEDICATED_CORES,
        request_quantity=16.0,
    )


def build(pods: int) -> State:
    events: list[Event] = [
        PoolSet("reserve", CPUSet.parse("0,128")),
        PoolSet("reclaim", CPUSet.parse("1-7,129-135")),
        PoolSet("share", SHARE_A),
        RampCPUsSet(SHARE_A),
        ContainerAllocated(dedicated("ded-0", "96-103,224-231")),
        ContainerAllocated(dedicated("ded-1", "104-111,232-239")),
        ContainerAllocated(shared("ramping", ramp_up=True)),
    ]
    events += [ContainerAllocated(shared(f"pod-{i:05d}")) for i in range(pods)]
    return apply_all(empty_state(TOPOLOGY), events)


def cases(state: State, plain: dict[str, dict[str, int]]) -> dict[str, Callable[[], object]]:
    return {
        "dict copy (baseline)": lambda: dict(plain),
        "PoolSet resize": lambda: apply(state, PoolSet("share", SHARE_B)),
        "ContainerAllocated shared": lambda: apply(state, ContainerAllocated(shared("new-pod"))),
        "ContainerAllocated dedicated": lambda: apply(
            state, ContainerAllocated(dedicated("new-ded", "112-119,240-247"))
        ),
        "RampUpFinished": lambda: apply(state, RampUpFinished("ramping", "app")),
        "PodRemoved": lambda: apply(state, PodRemoved("pod-00007")),
        "pooled_cpus query": lambda: state.cpu.pooled_cpus(CPUSet.parse("0,128")),
    }


def measure(
    sizes: tuple[int, ...], rounds: int = 7, number: int = 1000
) -> dict[int, dict[str, float]]:
    """Best µs per call for each size; sizes alternate within each round so that load from
    other processes on the machine hits them alike."""
    by_size = {n: cases(build(n), {f"pod-{i:05d}": {"app": i} for i in range(n)}) for n in sizes}
    best: dict[int, dict[str, float]] = {n: {} for n in sizes}
    for _ in range(rounds):
        for name in by_size[sizes[0]]:
            for n in sizes:
                us = timeit.timeit(by_size[n][name], number=number) / number * 1e6
                best[n][name] = min(best[n].get(name, us), us)
    return best


def main() -> None:
    results = measure((50, 5000))
    small, large = results[50], results[5000]
    base_small, base_large = small["dict copy (baseline)"], large["dict copy (baseline)"]
    print(
        f"{'operation':32} {'50 pods µs':>11} {'5000 pods µs':>13} {'5000/50':>8} "
        f"{'vs dict copy @5000':>19}"
    )
    for name in small:
        ratio = large[name] / small[name]
        vs_copy = large[name] / base_large
        print(f"{name:32} {small[name]:11.2f} {large[name]:13.2f} {ratio:8.2f} {vs_copy:18.3f}x")
    print(f"(dict copy @50 = {base_small:.2f} µs: the baseline grows with pods, applies do not)")
    start = timeit.default_timer()
    build(5000)
    elapsed = timeit.default_timer() - start
    print(
        f"replay of 5,007 events from empty: {elapsed * 1e3:.0f} ms "
        f"({5007 / elapsed:,.0f} events/s)"
    )


if __name__ == "__main__":
    main()
