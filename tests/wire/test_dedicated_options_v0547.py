"""The dedicated allocation options over the wire at ``--reference-version v0.5.47``.

Every case is one of the reference's own, run against the real Allocator behind a real
PluginServer on a unix socket, with the kubelet fork's protos (``wire.gen``). Provenance:
kubewharf/katalyst-core, tag v0.5.47, ``pkg/agent/qrm-plugins/cpu/dynamicpolicy/
policy_test.go``; the test function and case name are in each table. The reference's harness
machine is ``GenerateDummyCPUTopology(16, 2, 4)`` with reserve ``TakeHTByNUMABalance(2)`` =
``0,2``, as the spec's example node here. Cases whose harness holds other pods first start
from a state holding the same dedicated containers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest

from policy.cpu.qos import CPU_ENHANCEMENT_KEY, MEMORY_ENHANCEMENT_KEY, QOS_LEVEL_KEY
from policy.cpu.reference import V0_5_47, ReferenceOptions
from policy.state.entries import DEDICATED_OWNER, ContainerEntry, OwnCPUs
from policy.state.events import ContainerAllocated
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.actors.fakes import ApplyingCommitter
from tests.policy.decision_fixtures import CTX, SYNTH_16_2_4
from tests.wire.plugin_node import WireNode, resource_request

CTX_V0547 = replace(CTX, reference_version=V0_5_47)

Hints = list[tuple[list[int], bool]]


def _annotations(enhancement: dict[str, str], *, exclusive: bool) -> dict[str, str]:
    memory = {"numa_binding": "true"}
    if exclusive:
        memory["numa_exclusive"] = "true"
    return {
        QOS_LEVEL_KEY: "dedicated_cores",
        MEMORY_ENHANCEMENT_KEY: json.dumps(memory),
        CPU_ENHANCEMENT_KEY: json.dumps(enhancement),
    }


@pytest.fixture
def node47() -> Iterator[WireNode]:
    served = WireNode(ctx=CTX_V0547).start()
    try:
        yield served
    finally:
        served.close()


def _hints(node: WireNode, cpu: float, annotations: dict[str, str]) -> Hints:
    reply = node.client.plugin.GetTopologyHints(
        resource_request(cpu=cpu, annotations=annotations), timeout=10
    )
    return [(list(h.nodes), h.preferred) for h in reply.resource_hints["cpu"].hints]


# TestGetTopologyHints (policy_test.go, v0.5.47): the cases on an empty machine.
HINT_CASES = [
    pytest.param(
        7, {"align_by_socket": "true"}, True, [([2, 3], True)],
        id="req for dedicated numa binding container with align by socket enabled for empty "
        "machine",
    ),
    pytest.param(
        9, {"align_by_socket": "true"}, True,
        [([0, 1, 2], True), ([0, 1, 3], True), ([0, 2, 3], True), ([1, 2, 3], True),
         ([0, 1, 2, 3], False)],
        id="req for dedicated numa binding container with align by socket enabled for across 2 "
        "sockets",
    ),
    pytest.param(
        12, {"distribute_evenly_across_numa": "true", "katalyst.kubewharf.io/numa_number": "4"},
        False, [([0, 1, 2, 3], True)],
        id="distribute evenly across numa with numa binding without numa exclusive can split "
        "across NUMAs when numa number is more than 1",
    ),
    pytest.param(
        8, {"distribute_evenly_across_numa": "true", "full_pcpus_pairing": "true",
            "katalyst.kubewharf.io/numa_number": "2"},
        False, [([2, 3], True)],
        id="distribute evenly across numa with full pcpus pairing makes sure that physical cores "
        "can evenly spread across NUMAs",
    ),
    pytest.param(
        3, {"full_pcpus_pairing": "true"}, False,
        [([0], True), ([1], True), ([2], True), ([3], True)],
        id="req with full pcpus pairing with odd number of cpu request can still allocate full "
        "physical cores in single NUMA node",
    ),
    pytest.param(
        2, {"katalyst.kubewharf.io/numa_number": "2"}, True, [([0, 1], True), ([2, 3], True)],
        id="req with numa number makes sure that the hints only belong to those numa nodes",
    ),
    pytest.param(
        1, {"katalyst.kubewharf.io/numa_ids": "1"}, True, [([1], True)],
        id="req with numa ID for one numa node only",
    ),
    pytest.param(
        4, {"katalyst.kubewharf.io/numa_ids": "1-3"}, True, [([1, 2, 3], True)],
        id="req with numa ID for multiple numa nodes",
    ),
    pytest.param(
        4, {"katalyst.kubewharf.io/numa_number": "2", "katalyst.kubewharf.io/numa_ids": "0-2"},
        True, [([0, 1, 2], True)],
        id="numa IDs will override numa number",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("cpu", "enhancement", "exclusive", "want"), HINT_CASES)
def test_reference_hint_cases(
    node47: WireNode, cpu: float, enhancement: dict[str, str], exclusive: bool, want: Hints
) -> None:
    assert _hints(node47, cpu, _annotations(enhancement, exclusive=exclusive)) == want


def test_custom_numa_number_and_numa_ids_annotation_keys_are_supported() -> None:
    # TestGetTopologyHints, "custom numa number and numa ids annotation are supported".
    reference = ReferenceOptions(
        numa_number_annotation_key="custom_numa_number_annotation",
        numa_ids_annotation_key="custom_numa_ids_annotation",
    )
    node = WireNode(ctx=replace(CTX_V0547, reference=reference)).start()
    try:
        enhancement = {"custom_numa_number_annotation": "2", "custom_numa_ids_annotation": "0-2"}
        got = _hints(node, 4, _annotations(enhancement, exclusive=True))
    finally:
        node.close()
    assert got == [([0, 1, 2], True)]


# TestGetTopologyHints (policy_test.go, v0.5.47): the refusals, with the reference's reason.
REFUSED_CASES = [
    pytest.param(
        6, {"full_pcpus_pairing": "true"}, True,
        "NUMA exclusive and full_pcpus_pairing is not supported at the same time",
        id="full pcpus pairing for dedicated numa binding with numa exclusive container returns "
        "error",
    ),
    pytest.param(
        13, {"full_pcpus_pairing": "true"}, True,
        "NUMA exclusive and full_pcpus_pairing is not supported at the same time",
        id="Not enough physical CPUs when full PCPUs pairing is enabled returns error",
    ),
    pytest.param(
        12, {"distribute_evenly_across_numa": "true"}, False,
        "NUMA not exclusive binding container with no distribute_evenly_across_numa has request "
        "larger than 1 NUMA",
        id="distribute evenly across numa with numa binding without numa exclusive cannot be "
        "distributed when numa number is less than 2",
    ),
    pytest.param(
        6, {"distribute_evenly_across_numa": "true"}, True,
        "NUMA exclusive and distribute_evenly_across_numa is not supported at the same time",
        id="distribute evenly across numa with numa exclusive returns error",
    ),
    # qrmd's own: the option parsing errors as the reference words them.
    pytest.param(
        2, {"katalyst.kubewharf.io/numa_number": "two"}, False,
        'failed to parse numa number: strconv.Atoi: parsing "two": invalid syntax',
        id="a numa number that is not an integer is refused",
    ),
    pytest.param(
        2, {"katalyst.kubewharf.io/numa_ids": "0-4"}, True,
        "invalid numa ids: 0-4 as they are not a subset of machine numa nodes: 0-3",
        id="numa ids outside the machine are refused",
    ),
    pytest.param(
        4, {"katalyst.kubewharf.io/numa_ids": "0"}, True, "no available cpu hints",
        id="the named NUMA node is too small: no available cpu hints (v0.5.3 answered none)",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("cpu", "enhancement", "exclusive", "reason"), REFUSED_CASES)
def test_reference_hint_refusals(
    node47: WireNode, cpu: float, enhancement: dict[str, str], exclusive: bool, reason: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _hints(node47, cpu, _annotations(enhancement, exclusive=exclusive))
    assert caught.value.code() is not grpc.StatusCode.OK  # type: ignore[attr-defined]
    assert reason in caught.value.details()  # type: ignore[attr-defined]


# TestAllocate (policy_test.go, v0.5.47): dedicated NUMA-binding main containers.
ALLOCATE_CASES = [
    pytest.param(
        4, {"distribute_evenly_across_numa": "true", "katalyst.kubewharf.io/numa_number": "2"},
        (2, 3), "4,6,12,14",
        id="req for dedicated cores numa binding with distribute evenly across numa enabled and "
        "numa number more than 1",
    ),
    pytest.param(
        2, {"full_pcpus_pairing": "true"}, (2,), "4,12",
        id="req for dedicated cores numa binding with full pcpus pairing enabled",
    ),
    pytest.param(
        6, {"distribute_evenly_across_numa": "true", "full_pcpus_pairing": "true",
            "katalyst.kubewharf.io/numa_number": "2"},
        (2, 3), "4-7,12,14",
        id="req for dedicated cores numa binding with full pcpus pairing enabled can allocate HT "
        "after physical cores are allocated",
    ),
    pytest.param(
        6, {"katalyst.kubewharf.io/numa_number": "2"}, (2, 3), "4-6,12-14",
        id="req for dedicated cores numa binding with numa number more than 1 can cross numa",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("cpu", "enhancement", "hint", "want"), ALLOCATE_CASES)
def test_reference_allocate_cases(
    node47: WireNode, cpu: float, enhancement: dict[str, str], hint: tuple[int, ...], want: str
) -> None:
    request = resource_request(
        cpu=cpu, annotations=_annotations(enhancement, exclusive=False), hint=hint
    )
    reply = node47.client.plugin.Allocate(request, timeout=10)
    info = reply.allocation_result.resource_allocation["cpu"]
    assert info.allocation_result == want
    assert info.allocated_quantity == cpu
    assert [(list(h.nodes), h.preferred) for h in info.resource_hints.hints] == [(list(hint), True)]


def test_full_pcpus_pairing_cannot_allocate_past_the_reserved_cpu(node47: WireNode) -> None:
    # TestAllocate, "req for dedicated cores numa binding with full pcpus pairing enabled
    # returns error if there are not enough physical cores": NUMA 0 keeps 3 CPUs beside the
    # reserve, so 4 do not fit. (The reference's best fit words its part "insufficient CPUs:
    # requested 4, available 3"; qrmd's selection keeps its own wording.)
    request = resource_request(
        cpu=4, annotations=_annotations({"full_pcpus_pairing": "true"}, exclusive=False), hint=(0,)
    )
    with pytest.raises(grpc.RpcError) as caught:
        node47.client.plugin.Allocate(request, timeout=10)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
    assert "take cpu for NUMA not exclusive binding container failed with err" in (
        caught.value.details()  # type: ignore[attr-defined]
    )


def test_numa_ids_without_numa_number_are_refused_a_multi_numa_allocation(
    node47: WireNode,
) -> None:
    # The reference's allocation reads the NUMA number annotation only (not the ids), so a
    # non-exclusive pod naming two NUMA ids gets the hint [2, 3], and Allocate refuses it.
    annotations = _annotations({"katalyst.kubewharf.io/numa_ids": "2-3"}, exclusive=False)
    assert _hints(node47, 4, annotations) == [([2, 3], True)]
    with pytest.raises(grpc.RpcError) as caught:
        node47.client.plugin.Allocate(
            resource_request(cpu=4, annotations=annotations, hint=(2, 3)), timeout=10
        )
    assert "NUMA not exclusive binding container has request larger than 1 NUMA" in (
        caught.value.details()  # type: ignore[attr-defined]
    )


def test_the_same_options_are_ignored_at_v053(node: WireNode) -> None:
    # At the default level the options mean nothing: v0.5.3's single-NUMA hints.
    annotations = _annotations({"katalyst.kubewharf.io/numa_number": "2"}, exclusive=False)
    assert _hints(node, 2, annotations) == [([0], True), ([1], True), ([2], True), ([3], True)]


def _seeded(*held: tuple[str, str, bool]) -> WireNode:
    """A v0.5.47 node whose state already holds dedicated containers (pod, CPUs, exclusive),
    as the reference's test harness sets its ``podEntries`` before the call."""
    entries = []
    for pod, held_cpus, exclusive in held:
        memory = {"numa_binding": "true", **({"numa_exclusive": "true"} if exclusive else {})}
        entries.append(
            ContainerAllocated(
                ContainerEntry(
                    pod_uid=pod,
                    pod_namespace="test",
                    pod_name=pod,
                    container_name="test",
                    container_type="MAIN",
                    owner_pool_name=DEDICATED_OWNER,
                    placement=OwnCPUs.of(CPUSet.parse(held_cpus)),
                    annotations={QOS_LEVEL_KEY: "dedicated_cores"} | memory,
                    qos_level="dedicated_cores",
                    request_quantity=float(CPUSet.parse(held_cpus).size()),
                )
            )
        )
    state = apply_all(empty_state(SYNTH_16_2_4), entries)
    return WireNode(committer=ApplyingCommitter(state), ctx=CTX_V0547).start()


# TestGetTopologyHints (policy_test.go, v0.5.47): the cases whose harness holds other pods.
SEEDED_CASES = [
    pytest.param(
        [("pod-held", "8-9", False)], 3, {"full_pcpus_pairing": "true"}, False,
        [([1], True), ([2], True), ([3], True)],
        id="req for full pcpus pairing enabled for dedicated numa binding container with "
        "existing allocations",
    ),
    pytest.param(
        [("pod-held", "9", False)], 6,
        {"distribute_evenly_across_numa": "true", "full_pcpus_pairing": "true",
         "katalyst.kubewharf.io/numa_number": "3"},
        False, [([1, 2, 3], True)],
        id="req with full pcpus pairing with odd number of cores request can still allocate full "
        "physical cores across multiple NUMA nodes",
    ),
    # The harness holds CPU 2 on NUMA 1, this node's reserve: CPU 3 stands in for it.
    pytest.param(
        [("pod-0", "9", False), ("pod-1", "3", False), ("pod-2", "4", False),
         ("pod-3", "6", False)],
        8, {"katalyst.kubewharf.io/numa_number": "4"}, False, [([0, 1, 2, 3], True)],
        id="req with numa number gives valid hints when each numa has 1 CPU allocated",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("held", "cpu", "enhancement", "exclusive", "want"), SEEDED_CASES)
def test_reference_hint_cases_on_a_node_with_pods(
    held: list[tuple[str, str, bool]],
    cpu: float,
    enhancement: dict[str, str],
    exclusive: bool,
    want: Hints,
) -> None:
    node = _seeded(*held)
    try:
        got = _hints(node, cpu, _annotations(enhancement, exclusive=exclusive))
    finally:
        node.close()
    assert got == want


def test_align_by_socket_on_a_node_with_an_exclusive_pod_has_no_hint() -> None:
    # TestGetTopologyHints, "req for dedicated numa binding container with align by socket
    # enabled for machine with existing allocations": socket 0 holds 6 CPUs beside the
    # reserve, socket 1 has NUMA 2 taken exclusively: 7 CPUs fit on no single socket.
    node = _seeded(("pod-held", "4-5", True))
    try:
        with pytest.raises(grpc.RpcError) as caught:
            _hints(node, 7, _annotations({"align_by_socket": "true"}, exclusive=True))
    finally:
        node.close()
    assert "no available cpu hints" in caught.value.details()  # type: ignore[attr-defined]
