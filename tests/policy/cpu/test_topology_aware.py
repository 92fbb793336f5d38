"""The read-only RPCs (spec cpu-policy §10.2–§10.5; §16 items 21, 22, 23)."""

from __future__ import annotations

import pytest

from policy.cpu.errors import UnknownContainerError
from policy.cpu.replies import PluginOptions, TopologyAwareQuantity
from policy.cpu.topology_aware import (
    allocatable_resources,
    plugin_options,
    pre_start_container,
    topology_aware_resources,
)
from policy.state.entries import RAMPING, ContainerEntry, InPool, OwnCPUs, Placement
from policy.state.events import ContainerAllocated, RampCPUsSet
from policy.state.sections import apply_all
from tests.policy.decision_fixtures import CTX, FRESH, cpus


def entry(
    placement: Placement, *, qos: str, owner: str = "", ramp_up: bool = False, kind: str = "MAIN"
) -> ContainerEntry:
    return ContainerEntry(
        pod_uid="pod-a",
        pod_namespace="default",
        pod_name="web",
        container_name="app",
        container_type=kind,
        ramp_up=ramp_up,
        owner_pool_name=owner,
        placement=placement,
        qos_level=qos,
        request_quantity=2,
    )


def per_numa(quantities: object) -> list[tuple[int, int]] | None:
    if quantities is None:
        return None
    return [(q.node, int(q.resource_value)) for q in quantities]  # type: ignore[attr-defined]


RAMPING_SHARED = apply_all(
    FRESH,
    [
        RampCPUsSet(cpus("1,3-15")),
        ContainerAllocated(entry(RAMPING, qos="shared_cores", ramp_up=True)),
    ],
)
RECLAIMED = apply_all(
    FRESH, [ContainerAllocated(entry(InPool("reclaim"), qos="reclaimed_cores", owner="reclaim"))]
)
AFTER_RAMP_UP = apply_all(
    FRESH,
    [
        ContainerAllocated(entry(OwnCPUs.of(cpus("1,3-6,9,11-14")), qos="shared_cores")),
    ],
)
SIDECAR = apply_all(
    FRESH,
    [ContainerAllocated(entry(OwnCPUs.of(cpus("1,8-9")), qos="dedicated_cores", kind="SIDECAR"))],
)


@pytest.mark.parametrize(
    ("state", "total", "original", "split"),
    [
        pytest.param(
            RAMPING_SHARED, 14, 14, [(0, 3), (1, 3), (2, 4), (3, 4)], id="ramping shared 14/14"
        ),
        pytest.param(RECLAIMED, 4, 4, [(0, 2), (1, 2)], id="reclaimed mirrors 1,3,9,11"),
        pytest.param(
            AFTER_RAMP_UP, 10, 10, [(0, 2), (1, 2), (2, 4), (3, 2)], id="after ramp-up (9.10)"
        ),
        pytest.param(SIDECAR, 0, 0, None, id="a sidecar reports zeros and no lists"),
    ],
)
def test_topology_aware_resources(state: object, total: int, original: int, split: object) -> None:
    reply = topology_aware_resources(state.cpu, "pod-a", "app")  # type: ignore[attr-defined]
    assert (reply.pod_uid, reply.pod_name, reply.pod_namespace) == ("pod-a", "web", "default")
    assert reply.container_name == "app"
    resource = reply.resource
    assert not resource.is_node_resource and resource.is_scalar_resource
    assert (resource.aggregated_quantity, resource.original_aggregated_quantity) == (
        total,
        original,
    )
    assert per_numa(resource.topology_aware_quantity_list) == split
    assert per_numa(resource.original_topology_aware_quantity_list) == split


def test_an_unknown_container_is_not_found() -> None:
    with pytest.raises(
        UnknownContainerError,
        match="pod: pod-a, container: sidecar is not show up in cpu plugin state",
    ) as caught:
        topology_aware_resources(RECLAIMED.cpu, "pod-a", "sidecar")
    assert (caught.value.pod_uid, caught.value.container_name) == ("pod-a", "sidecar")


def test_allocatable_resources_spec_example() -> None:
    resource = allocatable_resources(CTX).resource
    assert resource.topology_aware_allocatable_quantity_list == tuple(
        TopologyAwareQuantity(v, n) for n, v in enumerate([3.0, 3.0, 4.0, 4.0])
    )
    assert resource.topology_aware_capacity_quantity_list == tuple(
        TopologyAwareQuantity(4.0, n) for n in range(4)
    )
    assert resource.aggregated_allocatable_quantity == 14
    assert resource.aggregated_capacity_quantity == 16
    assert not resource.is_node_resource and resource.is_scalar_resource


def test_plugin_options_and_pre_start() -> None:
    assert plugin_options() == PluginOptions(
        pre_start_required=False, with_topology_alignment=True, need_reconcile=True
    )
    assert pre_start_container() is None
