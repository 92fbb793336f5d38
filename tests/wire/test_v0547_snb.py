"""Shared cores with NUMA binding (SNB) at ``--reference-version v0.5.47``, through real gRPC
with the kubelet fork's protos (spec cpu-policy-v0.5.47 (a)).

Provenance: katalyst-core v0.5.47 ``pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_test.go``
and ``resize_test.go``; each case names the test and case it reproduces. Their harness is
``GenerateDummyCPUTopology(16, 2, 4)`` (or ``(12, 1, 1)``) with the reserve taken by
TakeHTByNUMABalance (``0,2``; ``0-1``), reclaim disabled unless the case enables it, and
the canonical optimizer alone (qrmd's default chain ``metric_based,canonical`` decides the
same: ``metric_based`` skips itself). TestGetTopologyHints sets its pod entries directly;
the same entries are built here from state events and served without a start-up decision.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace

import grpc
import pytest

from policy.cpu.context import PolicyContext
from policy.cpu.reference import (
    DYNAMIC_PACKING,
    INPLACE_UPDATE_RESIZING_KEY,
    PACKING,
    SPREADING,
    V0_5_47,
    ReferenceOptions,
)
from policy.state.entries import InPool, OwnCPUs
from policy.state.events import ContainerAllocated, Event, PoolSet
from policy.state.sections import State, empty_state
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.actors.fakes import ApplyingCommitter
from tests.policy.decision_fixtures import CTX
from tests.policy.pool_fixtures import with_events
from tests.policy.state_fixtures import container, cpus
from tests.wire.plugin_node import WireNode, resource_request
from wire.gen import resourceplugin_pb2 as pb

AT_47 = replace(CTX, reference_version=V0_5_47)
#: The reference's (12,1,1) harness: one NUMA of 12 CPUs, reserve 0-1.
ONE_NUMA_12 = generate_dummy_cpu_topology(12, 1, 1)
AT_47_ONE_NUMA = replace(AT_47, topology=ONE_NUMA_12, reserved=cpus("0-1"))
SNB = {"katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"})}
SNB_NOT_EXCLUSIVE = {
    "katalyst.kubewharf.io/memory_enhancement": json.dumps(
        {"numa_binding": "true", "numa_exclusive": "false"}
    )
}
AGGREGATED = "pod.kubernetes.io/pod-aggregated-requests"


def served(ctx: PolicyContext = AT_47, state: State | None = None) -> WireNode:
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


def allocate(node: WireNode, request: pb.ResourceRequest) -> pb.ResourceAllocationResponse:
    response: pb.ResourceAllocationResponse = node.client.plugin.Allocate(request, timeout=10)
    return response


def cpu_of(response: pb.ResourceAllocationResponse) -> tuple[str, float]:
    info = response.allocation_result.resource_allocation["cpu"]
    return info.allocation_result, info.allocated_quantity


def listed(node: WireNode, pod: str, container_name: str = "app") -> str:
    response = node.client.plugin.GetResourcesAllocation(
        pb.GetResourcesAllocationRequest(), timeout=10
    )
    resources = response.pod_resources[pod].container_resources[container_name]
    return str(resources.resource_allocation["cpu"].allocation_result)


def refused(call: Callable[..., object], request: pb.ResourceRequest) -> str:
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=10)
    return str(err.value.details())


# -- TestAllocate -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enable_reclaim", "cpu", "hint", "want"),
    [
        pytest.param(False, 2, (0,), ("1,8-9", 3.0),
                     id="TestAllocate: snb main container with reclaim disabled takes its NUMA"),
        pytest.param(True, 0.3, (0,), ("1", 1.0),
                     id="TestAllocate: snb main container with reclaim enabled gets ceil(2x0.3)"),
    ],
)  # fmt: skip
def test_an_snb_container_is_answered_its_numa_pool(
    nodes: list[WireNode],
    enable_reclaim: bool,
    cpu: float,
    hint: tuple[int, ...],
    want: tuple[str, float],
) -> None:
    node = served(replace(AT_47, enable_reclaim=enable_reclaim))
    nodes.append(node)
    response = allocate(
        node, resource_request("pod-s", cpu=cpu, qos="shared_cores", annotations=SNB, hint=hint)
    )
    assert cpu_of(response) == want
    # the reply echoes the hint and the flattened numa_binding, not the stored numa_hint
    info = response.allocation_result.resource_allocation["cpu"]
    assert [tuple(h.nodes) for h in info.resource_hints.hints] == [hint]
    assert dict(response.annotations) == {
        "katalyst.kubewharf.io/qos_level": "shared_cores",
        "numa_binding": "true",
    }
    stored = node.core.snapshot.state.cpu.require_entry("pod-s", "app")
    assert stored.owner_pool_name == "share-NUMA0"
    assert (stored.annotations or {})["numa_hint"] == "0"
    assert listed(node, "pod-s") == want[0]


def test_an_snb_hint_over_two_numas_is_refused(nodes: list[WireNode]) -> None:
    # TestAllocate "req for shared_cores numa_binding main container with invalid hint"
    node = served()
    nodes.append(node)
    request = resource_request("pod-s", cpu=0.3, qos="shared_cores", annotations=SNB, hint=(0, 1))
    details = refused(node.client.plugin.Allocate, request)
    assert "shared_cores with numa_binding container has request larger than 1 NUMA" in details
    assert node.core.snapshot.state.cpu.entry("pod-s", "app") is None


# -- TestGetTopologyHints ---------------------------------------------------------------------


def _hints_state(snb_pools: dict[str, tuple[str, float]], with_share_pods: bool) -> State:
    """TestGetTopologyHints' pod entries: a dedicated NUMA-binding pod on 1,8-9 asking
    numa_share=false, two shared pods in share 4-7,12,14 (when ``with_share_pods``), a
    reclaimed pod in reclaim 9,11,13,15, and one SNB pod per SNB pool."""
    dedicated = container("kkk", "test", OwnCPUs.of(cpus("1,8-9")), qos="dedicated_cores",
                          owner="dedicated", quantity=2, numa_binding=True)  # fmt: skip
    dedicated = replace(
        dedicated, annotations={**(dedicated.annotations or {}), "numa_share": "false"}
    )
    events: list[Event] = [
        PoolSet("reserve", cpus("0,2")),
        PoolSet("reclaim", cpus("9,11,13,15")),
        ContainerAllocated(dedicated),
        ContainerAllocated(container("rec", "test", InPool("reclaim"), qos="reclaimed_cores",
                                     owner="reclaim", quantity=2)),
    ]  # fmt: skip
    if with_share_pods:
        events.append(PoolSet("share", cpus("4-7,12,14")))
        for pod in ("bf", "a3"):
            events.append(
                ContainerAllocated(container(pod, "test", InPool("share"), owner="share",
                                             quantity=2))
            )  # fmt: skip
    for pool, (cpuset, request) in snb_pools.items():
        events.append(PoolSet(pool, cpus(cpuset)))
        events.append(
            ContainerAllocated(container(f"snb-{pool}", "test", InPool(pool), owner=pool,
                                         quantity=request, numa_binding=True))
        )  # fmt: skip
    return with_events(empty_state(CTX.topology), *events)


@pytest.mark.parametrize(
    ("policy", "state", "want"),
    [
        pytest.param(SPREADING, _hints_state({"share-NUMA1": ("3,10", 1)}, True),
                     [((1,), False), ((2,), True), ((3,), True)],
                     id="TestGetTopologyHints: default spreading prefers the most CPUs left"),
        pytest.param(PACKING, _hints_state({"share-NUMA1": ("3,10", 1)}, True),
                     [((1,), True), ((2,), False), ((3,), False)],
                     id="TestGetTopologyHints: packing prefers the fewest CPUs left"),
        pytest.param(DYNAMIC_PACKING, _hints_state({"share-NUMA1": ("3,10", 2)}, True),
                     [((2,), True), ((3,), True), ((1,), False)],
                     id="TestGetTopologyHints: dynamic_packing packs above the threshold first"),
        pytest.param(DYNAMIC_PACKING,
                     _hints_state({"share-NUMA1": ("3,10", 2), "share-NUMA2": ("4-5,12", 3),
                                   "share-NUMA3": ("6-7,14", 3)}, False),
                     [((1,), True), ((2,), True), ((3,), True)],
                     id="TestGetTopologyHints: dynamic_packing spreads when no NUMA is above"),
    ],
)  # fmt: skip
def test_snb_hints_avoid_anti_affine_numas_and_follow_the_prefer_policy(
    nodes: list[WireNode], policy: str, state: State, want: list[tuple[tuple[int, ...], bool]]
) -> None:
    # NUMA 0 is never hinted: its dedicated pod asks numa_share=false (another QoS level)
    options = ReferenceOptions(
        cpu_numa_hint_prefer_policy=policy,
        cpu_numa_hint_prefer_low_threshold=0.5 if policy == DYNAMIC_PACKING else 0.0,
    )
    node = served(replace(AT_47, reference=options), state)
    nodes.append(node)
    request = resource_request("pod-new", cpu=1, qos="shared_cores", annotations=SNB)
    assert hints_of(node, request) == want


@pytest.mark.parametrize(
    ("options", "want"),
    [
        pytest.param(ReferenceOptions(), [((0,), False), ((1,), False), ((2,), True), ((3,), True)],
                     id="an empty node spreads onto the NUMAs without reserved CPUs"),
        pytest.param(ReferenceOptions(enable_snb_high_numa_preference=True),
                     [((3,), True), ((2,), True), ((1,), False), ((0,), False)],
                     id="high NUMA preference lists the highest NUMA first"),
        pytest.param(ReferenceOptions(shared_cores_hint_optimizer_policies=("metric_based",)),
                     [((0,), True), ((1,), True), ((2,), True), ((3,), True)],
                     id="a chain whose optimizers all skip leaves every candidate preferred"),
        pytest.param(ReferenceOptions(prefer_use_exist_numa_hint_result=True,
                                      pod_annotation_kept_keys=("x/numa-result",),
                                      numa_binding_result_annotation_key="x/numa-result"),
                     [((0,), False), ((1,), True), ((2,), False), ((3,), False)],
                     id="an existing binding result is the only preferred hint"),
    ],
)  # fmt: skip
def test_snb_hint_options(
    nodes: list[WireNode], options: ReferenceOptions, want: list[tuple[tuple[int, ...], bool]]
) -> None:
    node = served(replace(AT_47, reference=options))
    nodes.append(node)
    annotations = {**SNB, "x/numa-result": "1"}
    request = resource_request("pod-new", cpu=1, qos="shared_cores", annotations=annotations)
    assert hints_of(node, request) == want


def test_an_snb_request_larger_than_a_numa_is_refused(nodes: list[WireNode]) -> None:
    node = served()
    nodes.append(node)
    request = resource_request("pod-big", cpu=5, qos="shared_cores", annotations=SNB)
    details = refused(node.client.plugin.GetTopologyHints, request)
    assert "numa_binding shared_cores container has request larger than 1 NUMA" in details


# -- TestSNBAdmitWithSidecarReallocate, TestSNBCpuRequestWithFloat ----------------------------

KEEP_ONE_NUMA = replace(
    AT_47_ONE_NUMA,
    reference=ReferenceOptions(
        pod_annotation_kept_keys=("numa_binding", INPLACE_UPDATE_RESIZING_KEY, AGGREGATED)
    ),
)


def _pod_request(name: str, cpu: float, aggregated: float, **kw: object) -> pb.ResourceRequest:
    annotations = {**SNB_NOT_EXCLUSIVE, AGGREGATED: json.dumps({"cpu": aggregated})}
    return resource_request("pod-p", name, cpu=cpu, qos="shared_cores", annotations=annotations,
                            **kw)  # type: ignore[arg-type]  # fmt: skip


def test_a_sidecar_before_its_main_container_is_stored_once_the_main_one_is(
    nodes: list[WireNode],
) -> None:
    # TestSNBAdmitWithSidecarReallocate
    node = served(KEEP_ONE_NUMA)
    nodes.append(node)
    sidecar = _pod_request("sidecar", 2, 8, container_type=pb.SIDECAR)
    assert hints_of(node, sidecar) == []  # no preference
    empty = allocate(node, sidecar)
    assert not empty.HasField("allocation_result") and empty.pod_uid == ""
    main = _pod_request("test", 6, 8)
    hints = hints_of(node, main)
    assert hints
    allocate(node, _pod_request("test", 6, 8, hint=hints[0][0]))
    state = node.core.snapshot.state.cpu
    assert state.entry("pod-p", "sidecar") is None
    # the pod's aggregated 8 CPUs leave 2 of the NUMA's 10: another 4-CPU container is refused
    details = refused(node.client.plugin.GetTopologyHints, _pod_request("test1", 4, 4))
    assert "no available cpu hints" in details
    # the sidecar again: it follows its main container's pool
    cpuset, _ = cpu_of(allocate(node, sidecar))
    stored = node.core.snapshot.state.cpu.require_entry("pod-p", "sidecar")
    assert stored.owner_pool_name == "share-NUMA0" and cpuset == listed(node, "pod-p", "test")


def test_fractional_snb_requests_fill_a_numa_exactly(nodes: list[WireNode]) -> None:
    # TestSNBCpuRequestWithFloat: 9.5 then 0.5 CPUs on a NUMA of 10 allocatable CPUs
    node = served(KEEP_ONE_NUMA)
    nodes.append(node)
    for name, cpu in (("test1", 9.5), ("test2", 0.5)):
        request = _pod_request(name, cpu, cpu)
        hints = hints_of(node, request)
        assert hints == [((0,), True)]
        cpuset, _ = cpu_of(allocate(node, _pod_request(name, cpu, cpu, hint=(0,))))
        assert cpuset == "2-11"  # the pool takes the whole NUMA (demand 2x > 10 CPUs)


# -- resize_test.go TestSNBVPA ----------------------------------------------------------------


def test_an_snb_resize_must_fit_its_numa(nodes: list[WireNode]) -> None:
    options = ReferenceOptions(pod_annotation_kept_keys=(INPLACE_UPDATE_RESIZING_KEY,))
    node = served(replace(AT_47, reference=options))
    nodes.append(node)
    request = resource_request("pod-v", cpu=2, qos="shared_cores", annotations=SNB_NOT_EXCLUSIVE)
    hints = hints_of(node, request)
    first = hints[0][0]
    assert first == (0,)
    allocate(node, resource_request("pod-v", cpu=2, qos="shared_cores",
                                    annotations=SNB_NOT_EXCLUSIVE, hint=first))  # fmt: skip
    assert listed(node, "pod-v") == "1,8-9"  # NUMA 0 without the reserved CPU 0
    resizing = {**SNB_NOT_EXCLUSIVE, INPLACE_UPDATE_RESIZING_KEY: "true"}
    # 4 CPUs exceed NUMA 0's 3: refused
    too_big = resource_request("pod-v", cpu=4, qos="shared_cores", annotations=resizing)
    assert "no available cpu hints" in refused(node.client.plugin.GetTopologyHints, too_big)
    # 3 fit: re-hinted to NUMA 0 and re-allocated there
    fits = resource_request("pod-v", cpu=3, qos="shared_cores", annotations=resizing)
    assert hints_of(node, fits) == [((0,), True)]
    allocate(node, resource_request("pod-v", cpu=3, qos="shared_cores", annotations=resizing,
                                    hint=(0,)))  # fmt: skip
    assert listed(node, "pod-v") == "1,8-9"
    assert node.core.snapshot.state.cpu.require_entry("pod-v", "app").request_quantity == 3


def test_a_resize_cannot_turn_a_shared_container_into_snb(nodes: list[WireNode]) -> None:
    # policy_allocation_handlers.go:754-758
    node = served()
    nodes.append(node)
    allocate(node, resource_request("pod-n", cpu=2, qos="shared_cores"))
    resizing = {**SNB, INPLACE_UPDATE_RESIZING_KEY: "true"}
    request = resource_request("pod-n", cpu=3, qos="shared_cores", annotations=resizing, hint=(0,))
    details = refused(node.client.plugin.Allocate, request)
    assert "cannot change from non-snb to snb during inplace update" in details


# -- (c) 5: non-binding shared pods that cannot fit -----------------------------------------


def test_a_non_binding_shared_pod_beyond_the_pooled_cpus_gets_no_hints(
    nodes: list[WireNode],
) -> None:
    node = served()
    nodes.append(node)
    allocate(node, resource_request("pod-s", cpu=2, qos="shared_cores", annotations=SNB,
                                    hint=(3,)))  # fmt: skip
    # NUMA 3 is the SNB pod's: 14 - 4 = 10 pooled CPUs remain for non-binding pods
    assert hints_of(node, resource_request("pod-a", cpu=10, qos="shared_cores")) == []
    details = refused(
        node.client.plugin.GetTopologyHints,
        resource_request("pod-b", cpu=10.5, qos="shared_cores"),
    )
    assert details.endswith("no available cpu hints")


def test_a_failed_resize_keeps_the_container(nodes: list[WireNode]) -> None:
    # policy.go:937-940: v0.5.47 removes a container after a failed Allocate, but not after a
    # failed in-place resize
    node = served()
    nodes.append(node)
    allocate(node, resource_request("pod-n", cpu=2, qos="shared_cores"))
    resizing = {**SNB, INPLACE_UPDATE_RESIZING_KEY: "true"}
    request = resource_request("pod-n", cpu=3, qos="shared_cores", annotations=resizing, hint=(0,))
    refused(node.client.plugin.Allocate, request)
    kept = node.core.snapshot.state.cpu.entry("pod-n", "app")
    assert kept is not None and kept.request_quantity == 2
