"""§11.3 push list and §7.2's AddContainer metadata."""

from __future__ import annotations

from dataclasses import replace

from policy.cpu.advisor.push import (
    ContainerMetadata,
    PushRefusal,
    allocated_metadata,
    push_list,
)
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, PoolSet
from tests.policy.pool_fixtures import cpus, entry_of, fresh_state, shared, with_events

STATE = with_events(
    fresh_state(),
    PoolSet("share", cpus("4-7")),
    shared("pod-b", InPool("share"), quantity=2.7),
    shared("pod-a", InPool("share"), quantity=1.0),
)


def test_every_stored_container_is_pushed_with_its_request_truncated():
    items = push_list(STATE.cpu)
    assert [(i.pod_uid, i.request_quantity) for i in items] == [("pod-a", 1), ("pod-b", 2)]
    first = items[0]
    assert isinstance(first, ContainerMetadata)
    assert first.container_type == "MAIN" and first.qos_level == "shared_cores"
    assert first.annotations["katalyst.kubewharf.io/qos_level"] == "shared_cores"


def test_a_container_with_an_unknown_type_is_listed_as_refused():
    bad = replace(entry_of(STATE, "pod-a"), container_type="WEIRD")
    state = with_events(STATE, ContainerAllocated(bad))
    items = push_list(state.cpu)
    assert items[0] == PushRefusal(
        "pod-a",
        "c",
        "sync pod: default/name-pod-a, container: c to cpu advisor failed with error: "
        "containerType: WEIRD not found",
    )
    assert isinstance(items[1], ContainerMetadata)


def test_allocate_sends_the_request_rounded_up():
    assert allocated_metadata(entry_of(STATE, "pod-b"), 2.1).request_quantity == 3
