"""The dedicated handlers' other v0.5.47 rules (cpu-policy-v0.5.47 (b); katalyst-core v0.5.47
``policy_hint_handlers.go:97-186``, ``policy_allocation_handlers.go:463-474``): the ``numa_hint``
a single-node container records, an existing allocation re-hinted whatever its size, the extra
state file's wider choice, and the refusal of a dedicated pod resized in place."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from policy.cpu.hints import NO_INPLACE_RESIZE, HintError, topology_hints
from policy.cpu.prepare import prepare_request
from policy.cpu.qos import CPU_ENHANCEMENT_KEY
from policy.cpu.reference import INPLACE_UPDATE_RESIZING_KEY, V0_5_47
from policy.cpu.request import ResourceRequest, TopologyHint
from policy.state.entries import ANNOTATION_NUMA_HINT
from tests.policy.decision_fixtures import CTX, Node, dedicated, request

CTX_V0547 = replace(CTX, reference_version=V0_5_47)


def _with_options(req: ResourceRequest, options: dict[str, str]) -> ResourceRequest:
    return replace(req, annotations={**req.annotations, CPU_ENHANCEMENT_KEY: json.dumps(options)})


@pytest.mark.parametrize(
    ("exclusive", "options", "hint", "want"),
    [
        pytest.param(False, {}, (2,), "2", id="one node, not exclusive: its NUMA is recorded"),
        pytest.param(True, {}, (2,), None, id="exclusive: nothing recorded"),
        pytest.param(
            False,
            {"katalyst.kubewharf.io/numa_number": "2"},
            (2, 3),
            None,
            id="a numa number above 1: nothing recorded",
        ),
    ],
)
def test_numa_hint_of_a_dedicated_container_at_v0547(
    exclusive: bool, options: dict[str, str], hint: tuple[int, ...], want: str | None
) -> None:
    node = Node(CTX_V0547)
    node.allocate(_with_options(dedicated("pod-d", 2, exclusive=exclusive, hint=hint), options))
    entry = node.state.cpu.require_entry("pod-d", "app")
    assert (entry.annotations or {}).get(ANNOTATION_NUMA_HINT) == want


def test_no_numa_hint_at_v053() -> None:
    node = Node(CTX)
    node.allocate(dedicated("pod-d", 2, exclusive=False, hint=(2,)))
    assert ANNOTATION_NUMA_HINT not in (
        node.state.cpu.require_entry("pod-d", "app").annotations or {}
    )


def test_an_existing_allocation_is_rehinted_whatever_its_size_at_v0547() -> None:
    node = Node(CTX_V0547)
    node.allocate(dedicated("pod-d", 2, exclusive=False, hint=(2,)))
    bigger = dedicated("pod-d", 3, exclusive=False)
    assert node.hints(bigger) == (TopologyHint((2,), True),)


def test_an_existing_allocation_too_small_is_recomputed_at_v053() -> None:
    node = Node(CTX)
    node.allocate(dedicated("pod-d", 2, exclusive=False, hint=(2,)))
    hints = node.hints(dedicated("pod-d", 3, exclusive=False))
    assert hints is not None and len(hints) == 4


def test_a_dedicated_pod_resized_in_place_is_refused_at_v0547() -> None:
    prepared = prepare_request(CTX_V0547.qos, dedicated("pod-d", 2))
    # The annotation reaches the handler when --pod-annotation-kept-keys keeps it (the
    # default at v0.5.47).
    kept = replace(
        prepared, annotations={**prepared.annotations, INPLACE_UPDATE_RESIZING_KEY: "true"}
    )
    with pytest.raises(HintError, match=NO_INPLACE_RESIZE):
        topology_hints(Node(CTX_V0547).state.cpu, CTX_V0547, kept)
    assert topology_hints(Node(CTX).state.cpu, CTX, kept).hints is not None


def test_the_extra_state_file_may_name_nodes_of_non_exclusive_dedicated_pods_at_v0547() -> None:
    extra = {"name-pod-e-0": "2"}
    for ctx, want in (
        (CTX_V0547, (TopologyHint((2,), True),)),
        (CTX, None),  # v0.5.3: NUMA 2 holds a NUMA-binding container, the file is not used
    ):
        node = Node(ctx)
        node.allocate(dedicated("pod-d", 1, exclusive=False, hint=(2,)))
        prepared = prepare_request(ctx.qos, dedicated("pod-e", 1, exclusive=False))
        got = topology_hints(node.state.cpu, ctx, prepared, extra).hints
        if want is None:
            assert got != (TopologyHint((2,), True),)
        else:
            assert got == want


@pytest.mark.parametrize(
    ("shared_cpus", "want"),
    [
        pytest.param(9, [(0,), (1,), (2,), (3,)], id="shared pods that fit anyway: every node"),
        # 11 shared CPUs on 14 pooled ones: taking NUMA 0 or 1 (3 available) leaves 11, taking
        # NUMA 2 or 3 (4 available) leaves 10, too few.
        pytest.param(11, [(0,), (1,)], id="nodes whose loss would starve shared pods dropped"),
    ],
)
def test_dedicated_hints_keep_non_binding_shared_pods_fed_at_v0547(
    shared_cpus: int, want: list[tuple[int, ...]]
) -> None:
    # cpu-policy-v0.5.47 (c) 9: filterNUMANodesByNonBinding in calculateHints.
    node = Node(CTX_V0547)
    node.allocate(request("pod-s", cpu=shared_cpus, qos="shared_cores"))
    hints = node.hints(dedicated("pod-d", 2, exclusive=False))
    assert hints is not None
    assert [h.nodes for h in hints] == want


def test_a_binding_node_stays_a_candidate_for_more_than_one_numa() -> None:
    # NUMA 2 holds a dedicated pod with 3 of its 4 CPUs: a 4-CPU request no longer fits it,
    # but with numa_number 2 it stays a candidate (policy_hint_handlers.go:755), so 5 CPUs
    # fit NUMA 2 and 3 together (1 + 4; dropped, NUMA 2 would count 0).
    node = Node(CTX_V0547)
    node.allocate(dedicated("pod-d", 3, exclusive=False, hint=(2,)))
    single = node.hints(dedicated("pod-e", 4, exclusive=False))
    assert single is not None and (2,) not in [h.nodes for h in single]
    two = node.hints(
        _with_options(
            dedicated("pod-e", 5, exclusive=False), {"katalyst.kubewharf.io/numa_number": "2"}
        )
    )
    assert two is not None and (2, 3) in [h.nodes for h in two]


def test_a_dedicated_pod_takes_its_aggregated_request_at_v0547() -> None:
    # policy_allocation_handlers.go (v0.5.47): allocateNumaBindingCPUs(podAggregatedRequest,
    # ...); the annotation is kept by --pod-annotation-kept-keys' default.
    aggregated = {"pod.kubernetes.io/pod-aggregated-requests": json.dumps({"cpu": "2500m"})}
    req = dedicated("pod-d", 2, exclusive=False, hint=(2,))
    req = replace(req, annotations={**req.annotations, **aggregated})
    node = Node(CTX_V0547)
    node.allocate(req)
    assert node.cpus_of("pod-d").size() == 3
    assert node.state.cpu.require_entry("pod-d", "app").request_quantity == 2


@pytest.mark.parametrize(
    ("max_hints", "want"),
    [
        pytest.param(64, [((0, 1), True), ((2, 3), True)], id="the smallest size only"),
        pytest.param(1, [((0, 1), True)], id="at most max_hints of them"),
    ],
)
def test_reduced_answer_beyond_max_full_hint_numa_nodes_at_v0547(
    max_hints: int, want: list[tuple[tuple[int, ...], bool]]
) -> None:
    ctx = replace(CTX_V0547, max_full_hint_numa_nodes=2, max_hints=max_hints)
    hints = Node(ctx).hints(dedicated("pod-d", 5, exclusive=True))
    assert hints is not None
    assert [(h.nodes, h.preferred) for h in hints] == want
    # The full answer goes on to 3 and 4 nodes.
    full = Node(CTX_V0547).hints(dedicated("pod-d", 5, exclusive=True))
    assert full is not None and len(full) == 7
