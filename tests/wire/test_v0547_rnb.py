"""Reclaimed cores with NUMA binding (RNB) at ``--reference-version v0.5.47
--enable-reclaim-numa-binding true``, through real gRPC with the kubelet fork's protos
(docs/reference-levels.md "Reclaimed cores bound to a NUMA node (RNB)").

Provenance: katalyst-core v0.5.47 ``pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_test.go``;
each case names the test and case it reproduces. The harness is
``GenerateDummyCPUTopology(16, 2, 4)`` with the reserve ``0,2``. TestGetTopologyHints sets its
pod entries and the per-NUMA headroom ``{0: 2, 1: 1, 2: 2.5, 3: 3}`` directly
(``SetNUMAHeadroom``); the same entries and headroom are built here from state events (the
headroom is the advisor section's ``NUMAHeadroomSet``) and served without a start-up
decision. TestAllocate starts the plugin (reclaim ``1,3-4,6``) and allocates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest

from policy.cpu.context import PolicyContext
from policy.cpu.reference import V0_5_47, ReferenceOptions
from policy.cpu.rnb import headroom_event
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, Event, PoolSet
from policy.state.sections import State, empty_state
from tests.actors.fakes import ApplyingCommitter
from tests.policy.decision_fixtures import CTX
from tests.policy.pool_fixtures import with_events
from tests.policy.state_fixtures import container, cpus
from tests.wire.plugin_node import WireNode, resource_request
from wire.gen import resourceplugin_pb2 as pb

AT_47_RNB = replace(
    CTX,
    reference_version=V0_5_47,
    reference=ReferenceOptions(enable_reclaim_numa_binding=True),
)
RNB = {"katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"})}
#: TestGetTopologyHints' ``numaHeadroom`` for the three reclaimed NUMA-binding cases.
HEADROOM = {0: 2.0, 1: 1.0, 2: 2.5, 3: 3.0}


def served(ctx: PolicyContext = AT_47_RNB, state: State | None = None) -> WireNode:
    committer = ApplyingCommitter(state or empty_state(ctx.topology))
    return WireNode(committer=committer, ctx=ctx, start=state is None).start()


@pytest.fixture
def nodes() -> Iterator[list[WireNode]]:
    made: list[WireNode] = []
    yield made
    for node in made:
        node.close()


def hints_of(node: WireNode, request: pb.ResourceRequest) -> list[tuple[tuple[int, ...], bool]]:
    response = node.client.plugin.GetTopologyHints(request, timeout=10)
    if "cpu" not in response.resource_hints:
        return []
    return [(tuple(h.nodes), h.preferred) for h in response.resource_hints["cpu"].hints]


def _hints_state(actual_on_numa0: bool, headroom: dict[int, float] | None = HEADROOM) -> State:
    """TestGetTopologyHints' entries for the reclaimed cases: reclaim ``9,11,13,15`` with one
    reclaimed container requesting 2 (plain on the whole pool, or RNB with ``numa_hint: 0``
    on ``9``), and SNB pools share-NUMA1 ``3,10`` (a pod requesting 2), share-NUMA2
    ``4-5,12`` and share-NUMA3 ``6-7,14`` (3 each)."""
    if actual_on_numa0:
        reclaimed = container("rec", "test", InPool("reclaim", frozenset({0})),
                              qos="reclaimed_cores", owner="reclaim", quantity=2,
                              numa_binding=True)  # fmt: skip
        reclaimed = replace(
            reclaimed, annotations={**(reclaimed.annotations or {}), "numa_hint": "0"}
        )
    else:
        reclaimed = container("rec", "test", InPool("reclaim"), qos="reclaimed_cores",
                              owner="reclaim", quantity=2)  # fmt: skip
    events: list[Event] = [
        PoolSet("reserve", cpus("0,2")),
        PoolSet("reclaim", cpus("9,11,13,15")),
        ContainerAllocated(reclaimed),
    ]
    for pool, cpuset, request in (
        ("share-NUMA1", "3,10", 2),
        ("share-NUMA2", "4-5,12", 3),
        ("share-NUMA3", "6-7,14", 3),
    ):
        events.append(PoolSet(pool, cpus(cpuset)))
        events.append(
            ContainerAllocated(container(f"snb-{pool}", "test", InPool(pool), owner=pool,
                                         quantity=request, numa_binding=True))
        )  # fmt: skip
    if headroom is not None:
        events.append(headroom_event(headroom))
    return with_events(empty_state(CTX.topology), *events)


# -- TestGetTopologyHints ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "cpu", "want"),
    [
        pytest.param(_hints_state(actual_on_numa0=False), 1,
                     [((3,), True), ((2,), True), ((0,), True), ((1,), True)],
                     id="TestGetTopologyHints: req for reclaimed_cores with actual numa_binding "
                        "main container is hinted every NUMA by headroom left"),
        pytest.param(_hints_state(actual_on_numa0=False), 4,
                     [((3,), False), ((2,), False), ((0,), False), ((1,), False)],
                     id="TestGetTopologyHints: req for reclaimed_cores with non-actual "
                        "numa_binding main container larger than any headroom prefers none"),
        pytest.param(_hints_state(actual_on_numa0=True), 1,
                     [((3,), True), ((2,), True), ((1,), True), ((0,), False)],
                     id="TestGetTopologyHints: req for reclaimed_cores with actual numa_binding "
                        "main container and an actual numa_binding container existed"),
    ],
)  # fmt: skip
def test_rnb_hints_follow_the_per_numa_headroom(
    nodes: list[WireNode], state: State, cpu: float, want: list[tuple[tuple[int, ...], bool]]
) -> None:
    node = served(state=state)
    nodes.append(node)
    request = resource_request("pod-r", cpu=cpu, qos="reclaimed_cores", annotations=RNB)
    assert hints_of(node, request) == want


def test_without_a_headroom_an_rnb_pod_is_refused(nodes: list[WireNode]) -> None:
    # policy_hint_handlers.go:596-599: no candidate on a multi-NUMA node
    node = served(state=_hints_state(actual_on_numa0=False, headroom=None))
    nodes.append(node)
    request = resource_request("pod-r", cpu=1, qos="reclaimed_cores", annotations=RNB)
    with pytest.raises(grpc.RpcError) as err:
        node.client.plugin.GetTopologyHints(request, timeout=10)
    assert "no available cpu hints" in str(err.value.details())


def test_without_the_flag_an_rnb_pod_has_no_preference(nodes: list[WireNode]) -> None:
    # policy_hint_handlers.go:86-94: the flag off, reclaimed hints stay "no NUMA preference"
    ctx = replace(AT_47_RNB, reference=ReferenceOptions())
    node = served(ctx, state=_hints_state(actual_on_numa0=False))
    nodes.append(node)
    request = resource_request("pod-r", cpu=1, qos="reclaimed_cores", annotations=RNB)
    response = node.client.plugin.GetTopologyHints(request, timeout=10)
    assert "cpu" not in response.resource_hints or not response.resource_hints["cpu"].hints


# -- TestAllocate -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "want", "numa_hint"),
    [
        pytest.param((0,), ("1", 1.0), "0",
                     id="TestAllocate: req for reclaim actual numa_binding main container with "
                        "enableReclaim true takes the reclaim pool's CPUs of its NUMA"),
        pytest.param((0, 1), ("1,3-4,6", 4.0), None,
                     id="TestAllocate: req for reclaim non-actual numa_binding main container "
                        "with enableReclaim true takes the whole reclaim pool"),
    ],
)  # fmt: skip
def test_an_rnb_container_is_answered_its_part_of_the_reclaim_pool(
    nodes: list[WireNode],
    hint: tuple[int, ...],
    want: tuple[str, float],
    numa_hint: str | None,
) -> None:
    node = served(replace(AT_47_RNB, enable_reclaim=True))
    nodes.append(node)
    request = resource_request("pod-r", cpu=0.3, qos="reclaimed_cores", annotations=RNB, hint=hint)
    response = node.client.plugin.Allocate(request, timeout=10)
    info = response.allocation_result.resource_allocation["cpu"]
    assert (info.allocation_result, info.allocated_quantity) == want
    assert [tuple(h.nodes) for h in info.resource_hints.hints] == [hint]
    # the reply echoes the flattened numa_binding, not the stored numa_hint
    assert dict(response.annotations) == {
        "katalyst.kubewharf.io/qos_level": "reclaimed_cores",
        "numa_binding": "true",
    }
    stored = node.core.snapshot.state.cpu.require_entry("pod-r", "app")
    assert (stored.annotations or {}).get("numa_hint") == numa_hint


def test_a_reclaimed_sidecar_is_answered_its_main_containers_cpus(nodes: list[WireNode]) -> None:
    # allocationSidecarHandler (policy_allocation_handlers.go:511-559): the sidecar copies its
    # main container, numa_hint included (tests/policy/cpu/test_rnb_sidecars.py for the rest)
    node = served(replace(AT_47_RNB, enable_reclaim=True))
    nodes.append(node)
    side = resource_request("pod-r", "side", cpu=0.3, qos="reclaimed_cores", annotations=RNB,
                            hint=(0,), container_type=pb.SIDECAR)  # fmt: skip
    empty = node.client.plugin.Allocate(side, timeout=10)
    assert not empty.HasField("allocation_result")  # no main container yet
    main = resource_request("pod-r", cpu=0.3, qos="reclaimed_cores", annotations=RNB, hint=(0,))
    node.client.plugin.Allocate(main, timeout=10)
    response = node.client.plugin.Allocate(side, timeout=10)
    assert response.allocation_result.resource_allocation["cpu"].allocation_result == "1"
    stored = node.core.snapshot.state.cpu.require_entry("pod-r", "side")
    assert (stored.annotations or {}).get("numa_hint") == "0"
