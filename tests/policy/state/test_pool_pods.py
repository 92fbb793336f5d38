"""The pods in the pools, from the CPU section (policy.state.pool_pods; memory-balancer §4.5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.state.entries import RAMPING, RECLAIMED_CORES, InPool
from policy.state.events import ContainerAllocated, PoolSet, RampCPUsSet
from policy.state.pool_pods import PoolPod, pods_in_pools
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
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


def test_container_ids_must_match_the_containers() -> None:
    with pytest.raises(ValueError, match="1 container IDs for 2 containers"):
        PoolPod("p", "default", "p", "share", ("a", "b"), ("containerd://x",))
