"""The in-place resize of a shared container *without* NUMA binding at
``--reference-version v0.5.47``, through real gRPC with the kubelet fork's protos.

Provenance: katalyst-core v0.5.47 ``sharedCoresWithoutNUMABindingAllocationHandler``
(``policy_allocation_handlers.go:143-170``: a ramping container is refused, a pooled one is
stored with its new request and annotations, then ``doAndCheckPutAllocationInfoPodResizingAware``)
and ``putAllocationsAndAdjustAllocationEntriesResizeAware`` (:819-870: without sys-advisor the
pool counts the new request; with it the pools keep their current sizes and the resized pool
grows by ``calcPoolResizeRequest``, :885-970, the growth of the pod's aggregated request rounded
up, 0 when it shrinks). ``resize_test.go`` asserts the flows without the advisor
(TestNonBindingShareCoresInplaceUpdateResize, :626-765, on the (16,2,4) harness, and
TestNonBindingShareCoresInplaceUpdateResizeWithSidecar, :767-1048, on (48,2,4)); the
reference's tests never resize with the advisor on, so those figures follow the source.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from policy.cpu.context import PolicyContext
from policy.cpu.reference import (
    AGGREGATED_REQUESTS_KEY,
    INPLACE_UPDATE_RESIZING_KEY,
    ReferenceOptions,
)
from policy.cpu.reserve import reserved_cpus
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.sections import State, empty_state
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.decision_fixtures import CTX
from tests.policy.pool_fixtures import with_events
from tests.policy.state_fixtures import container, cpus
from tests.wire.plugin_node import WireNode, resource_request
from tests.wire.test_v0547_snb import AT_47, allocate, hints_of, listed, refused, served
from wire.gen import resourceplugin_pb2 as pb

KEPT = ReferenceOptions(
    pod_annotation_kept_keys=(INPLACE_UPDATE_RESIZING_KEY, AGGREGATED_REQUESTS_KEY)
)
RESIZING = {INPLACE_UPDATE_RESIZING_KEY: "true"}
#: The reference's (48,2,4) harness, reserve by TakeHTByNUMABalance as its start-up does.
SYNTH_48_2_4 = generate_dummy_cpu_topology(48, 2, 4)
AT_47_48 = replace(
    AT_47,
    topology=SYNTH_48_2_4,
    reserved=reserved_cpus(SYNTH_48_2_4, use_kubelet_reserved_config=False, reserved_cpu_cores=2),
    reference=KEPT,
)


def aggregated(cpu: str) -> dict[str, str]:
    return {AGGREGATED_REQUESTS_KEY: json.dumps({"cpu": cpu})}


@pytest.fixture
def nodes() -> Iterator[list[WireNode]]:
    made: list[WireNode] = []
    yield made
    for node in made:
        node.close()


def request_of(node: WireNode, pod: str, name: str = "app") -> float:
    return node.core.snapshot.state.cpu.require_entry(pod, name).request_quantity


def share_pool(node: WireNode) -> str:
    return str(node.core.snapshot.state.cpu.pools["share"])


def pooled_cpus(node: WireNode, ctx: PolicyContext) -> str:
    """Every CPU but the reserve and reclaim: the reference's expected share pool."""
    reclaim = node.core.snapshot.state.cpu.pools["reclaim"]
    return str(ctx.topology.cpus().difference(ctx.reserved).difference(reclaim))


# -- resize_test.go, without sys-advisor -------------------------------------------------------


def test_non_binding_shared_inplace_update_resize(nodes: list[WireNode]) -> None:
    # TestNonBindingShareCoresInplaceUpdateResize (resize_test.go:626-765)
    ctx = replace(AT_47, reference=KEPT)
    node = served(ctx)
    nodes.append(node)
    assert hints_of(node, resource_request("pod-a", cpu=2)) == []  # no NUMA preference
    allocate(node, resource_request("pod-a", cpu=2))
    node.clock.advance(31)
    assert listed(node, "pod-a") == pooled_cpus(node, ctx) == "1,3-11"  # :681-687, 10 CPUs
    # :708-709: 16 CPUs are more than the pooled CPUs
    too_big = resource_request("pod-a", cpu=16, annotations=RESIZING)
    assert "no available cpu hints" in refused(node.client.plugin.GetTopologyHints, too_big)
    fits = resource_request("pod-a", cpu=3, annotations=RESIZING)
    assert hints_of(node, fits) == []  # :731-733
    allocate(node, fits)
    assert listed(node, "pod-a") == pooled_cpus(node, ctx) == "1,3-11"  # :752-758
    assert request_of(node, "pod-a") == 3  # :762-764


def test_non_binding_shared_inplace_update_resize_with_a_sidecar(nodes: list[WireNode]) -> None:
    # TestNonBindingShareCoresInplaceUpdateResizeWithSidecar (resize_test.go:767-1048)
    node = served(AT_47_48)
    nodes.append(node)

    def request(name: str, cpu: float, notes: dict[str, str]) -> pb.ResourceRequest:
        side = name == "sidecar"
        return resource_request("pod-w", name, cpu=cpu, annotations=notes,
                                container_type=pb.SIDECAR if side else pb.MAIN)  # fmt: skip

    allocate(node, request("sidecar", 1, aggregated("3")))
    node.clock.advance(31)
    sidecar_cpus = listed(node, "pod-w", "sidecar")  # the listing ends its ramp-up
    share = pooled_cpus(node, AT_47_48)
    assert sidecar_cpus == share
    assert len(cpus(share)) == 42  # reserve 2, reclaim 4, share 42 (:846-853)
    allocate(node, request("main", 2, aggregated("3")))
    node.clock.advance(31)
    assert listed(node, "pod-w", "main") == share  # :903-910
    assert (request_of(node, "pod-w", "main"), request_of(node, "pod-w", "sidecar")) == (2, 1)
    # the main container grows to 3, the pod to 4 (:921-972)
    main_resize = {**RESIZING, **aggregated("4")}
    assert hints_of(node, request("main", 3, main_resize)) == []
    allocate(node, request("main", 3, main_resize))
    assert listed(node, "pod-w", "main") == listed(node, "pod-w", "sidecar") == share
    assert (request_of(node, "pod-w", "main"), request_of(node, "pod-w", "sidecar")) == (3, 1)
    # the sidecar grows to 2, then the main container only takes the pod's new total (:979-1047)
    allocate(node, request("sidecar", 2, {**RESIZING, **aggregated("5")}))
    allocate(node, request("main", 3, {**RESIZING, **aggregated("5")}))
    assert listed(node, "pod-w", "main") == listed(node, "pod-w", "sidecar") == share
    assert (request_of(node, "pod-w", "main"), request_of(node, "pod-w", "sidecar")) == (3, 2)
    stored = node.core.snapshot.state.cpu.require_entry("pod-w", "main")
    assert json.loads((stored.annotations or {})[AGGREGATED_REQUESTS_KEY]) == {"cpu": "5"}


def test_a_ramping_shared_container_cannot_be_resized(nodes: list[WireNode]) -> None:
    # policy_allocation_handlers.go:143-147
    node = served(replace(AT_47, reference=KEPT))
    nodes.append(node)
    allocate(node, resource_request("pod-a", cpu=2))
    details = refused(
        node.client.plugin.Allocate, resource_request("pod-a", cpu=3, annotations=RESIZING)
    )
    assert "pod is still ramp up, not allow to inplace update resize" in details
    assert request_of(node, "pod-a") == 2


# -- with sys-advisor: the pool grows by what the pod grew by ------------------------------------


def _one_shared_pod(request: float, notes: dict[str, str]) -> State:
    """Pod ``pod-v`` (``request`` cores) alone in a 4-CPU ``share`` pool, reclaim on the rest."""
    entry = container("pod-v", "app", InPool("share"), owner="share", quantity=request)
    entry = replace(entry, annotations={**(entry.annotations or {}), **notes})
    return with_events(
        empty_state(AT_47.topology),
        PoolSet("reserve", cpus("0,2")),
        PoolSet("reclaim", cpus("5-7,12-15")),
        PoolSet("share", cpus("1,3-4,8-11")),
        ContainerAllocated(entry),
    )


@pytest.mark.parametrize(
    ("advisor", "before", "after", "notes_before", "notes_after", "share_size"),
    [
        pytest.param(True, 2, 3, {}, {}, 7 + 1,
                     id="with the advisor a growing pod adds what it grew by to its pool"),
        pytest.param(True, 2, 1, {}, {}, 7,
                     id="with the advisor a shrinking pod leaves its pool for the advisor"),
        pytest.param(True, 1, 2, aggregated("2"), aggregated("3500m"), 7 + 2,
                     id="with the advisor the aggregated growth is rounded up"),
        pytest.param(False, 2, 3, {}, {}, 3,
                     id="without the advisor the pool holds the new request"),
    ],
)  # fmt: skip
def test_a_non_binding_shared_resize_with_the_advisor(
    nodes: list[WireNode],
    advisor: bool,
    before: float,
    after: float,
    notes_before: dict[str, str],
    notes_after: dict[str, str],
    share_size: int,
) -> None:
    ctx = replace(AT_47, reference=KEPT, advisor_enabled=advisor, enable_reclaim=True)
    node = served(ctx, _one_shared_pod(before, notes_before))
    nodes.append(node)
    response = allocate(
        node, resource_request("pod-v", cpu=after, annotations={**RESIZING, **notes_after})
    )
    # the reply is the container's CPUs from before its pool was resized (§15.2)
    assert response.allocation_result.resource_allocation["cpu"].allocation_result == "1,3-4,8-11"
    assert len(cpus(share_pool(node))) == share_size
    assert listed(node, "pod-v") == share_pool(node)
    assert request_of(node, "pod-v") == after


def test_the_resize_annotation_changes_nothing_at_v0_5_3(nodes: list[WireNode]) -> None:
    node = served(CTX)
    nodes.append(node)
    allocate(node, resource_request("pod-a", cpu=2))
    node.clock.advance(31)
    allocate(node, resource_request("pod-a", cpu=3, annotations=RESIZING))
    assert request_of(node, "pod-a") == 2  # v0.5.3 stores the pooled entry unchanged (§15.2)
