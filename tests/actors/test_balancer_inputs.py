"""A round's inputs from the CPU snapshot and the ports (memory-balancer §4.2, §4.5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from actors.balancer_inputs import PodsInPools, PoolPod, metric_inputs, pods_in_pools, with_pods
from policy.balance import BalancerConfig, RoundInputs
from policy.state.entries import RAMPING, RECLAIMED_CORES, InPool
from policy.state.events import ContainerAllocated, PoolSet, RampCPUsSet
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.actors.balancer_fakes import FakeDistances, FakeMemory, FakeMetrics, container_id
from tests.policy.balance.examples import EX2_B, EX2_L, NOW, T4, GiB, pod
from tests.policy.state_fixtures import SYNTH_16_2_4, container

# SYNTH_16_2_4: NUMA 0 = CPUs 0,1,8,9; 1 = 2,3,10,11; 2 = 4,5,12,13; 3 = 6,7,14,15.
CPU = apply_all(
    empty_state(SYNTH_16_2_4),
    [
        PoolSet("share", CPUSet.parse("0-3,8-11")),
        PoolSet("reclaim", CPUSet.parse("4,14")),
        ContainerAllocated(container("s1", "app", InPool("share"), owner="share")),
        ContainerAllocated(
            container("s1", "log", InPool("share"), owner="share", container_type="SIDECAR")
        ),
        ContainerAllocated(
            container("r1", "job", InPool("reclaim"), owner="reclaim", qos=RECLAIMED_CORES)
        ),
        # A ramping pod has no owner pool yet, so it is in no pool (§4.5).
        RampCPUsSet(CPUSet.parse("0-15")),
        ContainerAllocated(container("x", "app", RAMPING, ramp_up=True)),
    ],
).cpu


def test_pods_in_pools_from_the_cpu_snapshot() -> None:
    listing = pods_in_pools(CPU)
    assert listing.pools == {"reclaim": (2, 3), "share": (0, 1)}
    assert listing.pods == (
        PoolPod("r1", "default", "name-r1", "reclaim", ("job",)),
        PoolPod("s1", "default", "name-s1", "share", ("app", "log")),
    )


def test_container_order_follows_the_pod_spec_index() -> None:
    sidecar = container("p", "alpha", InPool("share"), owner="share", container_type="SIDECAR")
    entries = [
        ContainerAllocated(container("p", "zeta", InPool("share"), owner="share")),
        ContainerAllocated(replace(sidecar, container_index=1)),
    ]
    state = apply_all(empty_state(SYNTH_16_2_4), [PoolSet("share", CPUSet.parse("0")), *entries])
    (listed,) = pods_in_pools(state.cpu).pods
    assert listed.containers == ("zeta", "alpha")


def _gather(pods: PodsInPools, memory: FakeMemory) -> tuple[RoundInputs, int]:
    inputs = metric_inputs(
        now=NOW,
        distances=FakeDistances(T4).distances(),
        metrics=FakeMetrics(EX2_L, EX2_B),
        config=BalancerConfig(),
        cpu_vendor="GenuineIntel",
        last=None,
    )
    assert inputs.pods == () and inputs.pools == {}
    return with_pods(inputs, pods, memory)


def test_with_container_ids_each_container_has_its_own_figure() -> None:
    s4 = pod("s4", "share", containers=[("a", {0: 2 * GiB}), ("b", {0: GiB})])
    listed = PoolPod("s4", "default", "s4", "share", ("a", "b"),
                     (container_id("s4", "a"), container_id("s4", "b")))  # fmt: skip
    inputs, unreadable = _gather(PodsInPools({"share": (0, 1)}, (listed,)), FakeMemory([s4]))
    assert unreadable == 0
    (got,) = inputs.pods
    assert [(c.name, dict(c.anon)) for c in got.containers] == [
        ("a", {0: 2 * GiB}),
        ("b", {0: GiB}),
    ]


def test_without_container_ids_the_pod_figure_goes_to_the_first_container() -> None:
    s4 = pod("s4", "share", containers=[("a", {0: 2 * GiB}), ("b", {0: GiB})])
    listed = PoolPod("s4", "default", "s4", "share", ("a", "b"))
    inputs, _ = _gather(PodsInPools({"share": (0, 1)}, (listed,)), FakeMemory([s4]))
    (got,) = inputs.pods
    assert [(c.name, dict(c.anon)) for c in got.containers] == [("a", {0: 3 * GiB}), ("b", {0: 0})]
    assert got.anon_on(0) == 3 * GiB, "the pod sum, all a round uses, is exact"


def test_unreadable_pods_have_no_samples_and_unused_pools_are_not_read() -> None:
    listed = (
        PoolPod("gone", "default", "gone", "share", ("app",)),
        PoolPod("d", "default", "d", "dedicated", ("app",)),
    )
    memory = FakeMemory([])
    inputs, unreadable = _gather(PodsInPools({"share": (0, 1)}, listed), memory)
    assert unreadable == 1 and memory.reads == 1, "the dedicated pod's memory is not read"
    (got,) = inputs.pods
    assert got.uid == "gone" and got.anon_on(0) is None


def test_container_ids_must_match_the_containers() -> None:
    with pytest.raises(ValueError, match="1 container IDs for 2 containers"):
        PoolPod("p", "default", "p", "share", ("a", "b"), ("containerd://x",))
