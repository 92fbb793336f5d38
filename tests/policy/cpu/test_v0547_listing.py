"""GetResourcesAllocation at the v0.5.47 reference level: an SNB container whose timestamp
does not parse keeps its NUMA pool (only the timestamp is reset), where a non-binding shared
one ramps again (spec cpu-policy-v0.5.47 (c) 10; katalyst-core v0.5.47 ``policy.go:555-575``)."""

from __future__ import annotations

import dataclasses

import pytest

from policy.cpu.reference import V0_5_47
from policy.state.entries import InPool, Ramping
from policy.state.events import ContainerAllocated, ContainerReRamped, TimestampReset
from policy.state.sections import apply_all
from tests.policy.decision_fixtures import CTX, T0, Node, request

AT_47 = dataclasses.replace(CTX, reference_version=V0_5_47)


@pytest.mark.parametrize(
    ("numa_binding", "event", "placement"),
    [
        pytest.param(True, TimestampReset, InPool("share-NUMA2"),
                     id="an SNB container keeps its NUMA pool, its timestamp reset"),
        pytest.param(False, ContainerReRamped, Ramping(),
                     id="a non-binding shared container ramps up again"),
    ],
)  # fmt: skip
def test_an_unreadable_timestamp(numa_binding: bool, event: type, placement: object) -> None:
    node = Node(AT_47)
    node.phases["pod-s"] = "Running"
    node.allocate(request("pod-s", cpu=1, qos="shared_cores", numa_binding=numa_binding,
                          hint=(2,) if numa_binding else None))  # fmt: skip
    node.reconcile(T0 + 31)
    entry = node.state.cpu.require_entry("pod-s", "app")
    broken = ContainerAllocated(dataclasses.replace(entry, init_timestamp="not a time"))
    node.state = apply_all(node.state, (broken,))
    node.events.append(broken)
    decision_events = _listing_events(node)
    assert any(isinstance(e, event) for e in decision_events)
    assert node.state.cpu.require_entry("pod-s", "app").placement == placement
    assert node.replayed() == node.state


def _listing_events(node: Node) -> tuple[object, ...]:
    before = len(node.events)
    node.reconcile(T0 + 32)
    return tuple(node.events[before:])
