"""The state of ``tests/fixtures/checkpoint-entry-maps``: one container of each kind a
checkpoint holds (pooled, v0.5.47 reclaimed NUMA binding, ramping, dedicated, a sidecar with
an empty label map and null annotations, v0.5.47's pod role and type) and a non-empty
advisor section. Only names that existed when the fixture was written are used here."""

from __future__ import annotations

from dataclasses import replace

from policy.state.advisor_section import (
    AdvisorOverlapAllowed,
    AdvisorResponseApplied,
    NUMAHeadroomSet,
)
from policy.state.entries import RAMPING, InPool, OwnCPUs
from policy.state.events import ContainerAllocated, Event, PoolSet, RampCPUsSet
from policy.state.sections import State, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.policy.state_fixtures import container
from tests.topologies import SYNTH_16_2_4


def fixture_state() -> State:
    return apply_all(empty_state(SYNTH_16_2_4), fixture_events())


def fixture_events() -> list[Event]:
    """The events that make ``fixture_state`` from the empty state, in order."""

    def cpus(text: str) -> CPUSet:
        return CPUSet.parse(text)

    sidecar = replace(
        container("pod-d", "side", OwnCPUs(cpus("8-9"), cpus("8-9")), container_type="SIDECAR"),
        labels={},
        annotations=None,
        container_index=1,
    )
    return [
        PoolSet("share", cpus("1,3-6")),
        PoolSet("reclaim", cpus("7,10-11")),
        RampCPUsSet(cpus("1,3-7")),
        ContainerAllocated(container("pod-a", "app", InPool("share"), owner="share")),
        ContainerAllocated(
            replace(
                container("pod-b", "app", InPool("share"), owner="share", quantity=2.5),
                pod_role="role-x",
                pod_type="type-y",
            )
        ),
        ContainerAllocated(
            container(
                "pod-r",
                "app",
                InPool("reclaim", frozenset({1})),
                qos="reclaimed_cores",
                owner="reclaim",
                numa_binding=True,
            )
        ),
        ContainerAllocated(container("pod-c", "app", RAMPING, ramp_up=True)),
        ContainerAllocated(
            container(
                "pod-d",
                "app",
                OwnCPUs(cpus("8-9"), cpus("8-9")),
                qos="dedicated_cores",
                owner="dedicated",
                numa_binding=True,
                numa_exclusive=True,
            )
        ),
        ContainerAllocated(sidecar),
        AdvisorResponseApplied("fingerprint-1"),
        AdvisorOverlapAllowed(True),
        NUMAHeadroomSet(((0, 1.5), (1, 0.0))),
    ]
