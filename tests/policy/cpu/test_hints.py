"""GetTopologyHints (spec cpu-policy §8; §16 items 9, 10, 16, 17) and qrmd's reduced answer
beyond ``max_full_hint_numa_nodes`` (``policy.cpu.hint_masks``)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.context import PolicyContext
from policy.cpu.hint_masks import NUMAFacts, full_hints, smallest_size_hints
from policy.cpu.hints import HintError, calculate_hints, topology_hints
from policy.cpu.prepare import prepare_request
from policy.cpu.qos import QoSError
from policy.cpu.request import ContainerType, TopologyHint
from policy.state.cpu_state import CPUState
from policy.state.entries import DEDICATED_OWNER, ContainerEntry, OwnCPUs
from policy.state.events import ContainerAllocated
from policy.state.sections import State, apply_all
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.decision_fixtures import CTX, DEBUG_KEY, FRESH, cpus, dedicated, request, started


def hints_of(
    state: State, req: object, ctx: PolicyContext = CTX, **kw: object
) -> tuple[TopologyHint, ...] | None:
    prepared = prepare_request(ctx.qos, req)  # type: ignore[arg-type]
    return topology_hints(state.cpu, ctx, prepared, **kw).hints  # type: ignore[arg-type]


def listed(hints: tuple[TopologyHint, ...] | None) -> list[tuple[list[int], bool]] | None:
    return None if hints is None else [(list(h.nodes), h.preferred) for h in hints]


def with_dedicated(
    state: State, pod: str, cpuset: str, *, exclusive: bool = True, quantity: float = 2
) -> State:
    annotations = {"katalyst.kubewharf.io/qos_level": "dedicated_cores", "numa_binding": "true"}
    if exclusive:
        annotations["numa_exclusive"] = "true"
    entry = ContainerEntry(
        pod_uid=pod,
        pod_name=f"name-{pod}",
        container_name="app",
        container_type="MAIN",
        ramp_up=True,
        owner_pool_name=DEDICATED_OWNER,
        placement=OwnCPUs.of(cpus(cpuset)),
        annotations=annotations,
        qos_level="dedicated_cores",
        request_quantity=quantity,
    )
    return apply_all(state, [ContainerAllocated(entry)])


EXCLUSIVE_2_ON_FRESH = [
    ([0], True), ([1], True), ([2], True), ([3], True),
    ([0, 1], False), ([2, 3], False),
    ([0, 1, 2], False), ([0, 1, 3], False), ([0, 2, 3], False), ([1, 2, 3], False),
    ([0, 1, 2, 3], False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("req", "want"),
    [
        pytest.param(
            dedicated(cpu=2), EXCLUSIVE_2_ON_FRESH, id="spec 8.3 exclusive request 2 (verbatim)"
        ),
        pytest.param(
            dedicated(cpu=2, exclusive=False),
            [([0], True), ([1], True), ([2], True), ([3], True)],
            id="spec 8.3 non-exclusive request 2: single NUMA nodes only",
        ),
        pytest.param(
            dedicated(cpu=4),
            [
                ([2], True),
                ([3], True),
                ([0, 1], False),
                ([2, 3], False),
                ([0, 1, 2], False),
                ([0, 1, 3], False),
                ([0, 2, 3], False),
                ([1, 2, 3], False),
                ([0, 1, 2, 3], False),
            ],
            id="request 4 skips NUMA 0 and 1 alone: 3 CPUs each after the reserve",
        ),
        pytest.param(
            dedicated(cpu=5),
            [
                ([0, 1], True),
                ([2, 3], True),
                ([0, 1, 2], False),
                ([0, 1, 3], False),
                ([0, 2, 3], False),
                ([1, 2, 3], False),
                ([0, 1, 2, 3], False),
            ],
            id="request 5 needs two NUMA nodes: pairs across sockets are pruned",
        ),
        pytest.param(dedicated(cpu=16), [], id="request 16 fits nowhere: empty list, not None"),
        pytest.param(request(cpu=2), None, id="shared_cores: no preference"),
        pytest.param(
            request(cpu=2, qos="reclaimed_cores"), None, id="reclaimed_cores: no preference"
        ),
        pytest.param(
            dedicated(cpu=2, container_type=ContainerType.SIDECAR),
            None,
            id="dedicated sidecar: no preference",
        ),
        pytest.param(
            dedicated(cpu=2, container_type=ContainerType.INIT),
            None,
            id="INIT container: no preference (16.9)",
        ),
        pytest.param(
            dedicated(
                cpu=2,
                annotations={DEBUG_KEY: "x", "katalyst.kubewharf.io/qos_level": "dedicated_cores"},
            ),
            None,
            id="debug pod: no preference (16.10)",
        ),
    ],
)
def test_hints_on_the_fresh_node(req: object, want: object) -> None:
    assert listed(hints_of(FRESH, req)) == want


def test_exclusive_hints_skip_numa_nodes_with_allocated_cpus() -> None:
    state = with_dedicated(FRESH, "pod-x", "1,8-9")  # NUMA 0 taken
    assert listed(hints_of(state, dedicated(cpu=2))) == [
        ([1], True), ([2], True), ([3], True), ([2, 3], False), ([1, 2, 3], False)
    ]  # fmt: skip


def test_non_exclusive_hints_count_only_available_cpus() -> None:
    state = with_dedicated(FRESH, "pod-x", "1,9", exclusive=False)  # NUMA 0 keeps CPU 8
    assert listed(hints_of(state, dedicated(cpu=2, exclusive=False))) == [
        ([1], True), ([2], True), ([3], True)
    ]  # fmt: skip
    assert listed(hints_of(state, dedicated(cpu=1, exclusive=False)))[0] == ([0], True)  # type: ignore[index]


def test_an_existing_allocation_is_the_single_preferred_hint() -> None:
    state = with_dedicated(FRESH, "pod-d", "1,8-9")
    assert listed(hints_of(state, dedicated("pod-d", cpu=2))) == [([0], True)]
    assert listed(hints_of(state, dedicated("pod-d", cpu=3))) == [([0], True)]


def test_an_existing_allocation_too_small_is_left_out_of_the_state_read() -> None:
    state = with_dedicated(FRESH, "pod-d", "1,8-9")
    # 4 > 3 held: the entry is ignored, so NUMA 0 counts as free again
    assert listed(hints_of(state, dedicated("pod-d", cpu=4)))[:2] == [([2], True), ([3], True)]  # type: ignore[index]
    assert ([0, 1], False) in listed(hints_of(state, dedicated("pod-d", cpu=4)))  # type: ignore[operator]
    assert state.cpu.entry("pod-d", "app") is not None  # nothing stored


@pytest.mark.parametrize(
    ("extra", "want"),
    [
        pytest.param(
            {"name-pod-d-0": "2-3"}, [([2, 3], True)], id="the extra file's NUMA set wins"
        ),
        pytest.param(
            {"name-pod-d-0": "0"},
            [([1], True)],
            id="a NUMA node with a binding container is refused",
        ),
        pytest.param({"name-pod-d-0": "x"}, None, id="a malformed entry falls through"),
        pytest.param({"other-0": "1"}, None, id="another pod's entry is ignored"),
    ],
)
def test_extra_state_file(extra: dict[str, str], want: object) -> None:
    state = with_dedicated(FRESH, "pod-x", "1,8-9")
    got = listed(hints_of(state, dedicated("pod-d", cpu=2), extra_numa_sets=extra))
    if want is None:
        assert got == listed(hints_of(state, dedicated("pod-d", cpu=2)))
    else:
        assert got[: len(want)] == want  # type: ignore[index, arg-type]


@pytest.mark.parametrize(
    ("req", "error", "message"),
    [
        pytest.param(
            request(qos="dedicated_cores"),
            HintError,
            "pod default/name-pod-a (uid pod-a), container app: "
            "not support dedicated_cores without NUMA binding",
            id="dedicated without NUMA binding (16.16)",
        ),
        pytest.param(
            request(qos="system_cores"),
            QoSError,
            "container app: katalyst QoS level: system_cores is not supported yet",
            id="system_cores has no handler",
        ),
        pytest.param(
            dedicated(cpu=5, exclusive=False),
            HintError,
            "calculateHints failed with error: "
            "NUMA not exclusive binding container has request larger than 1 NUMA",
            id="non-exclusive request larger than a NUMA node",
        ),
        pytest.param(
            dedicated(cpu=0),
            HintError,
            "calculateHints failed with error: "
            "GetNUMANodesCountToFitCPUReq failed with error: zero numaCountNeeded",
            id="zero request",
        ),
        pytest.param(
            dedicated(cpu=17),
            HintError,
            "GetNUMANodesCountToFitCPUReq failed with error: "
            "invalid cpu req: 17 in topology with NUMAs count: 4 and CPUs count: 16",
            id="request larger than the machine",
        ),
    ],
)
def test_hint_errors_name_the_container_and_the_reason(
    req: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        hints_of(FRESH, req)


# -- the reduced answer (policy.cpu.hint_masks) ---------------------------------------------


def test_reduced_mode_on_the_fresh_node_is_the_preferred_part() -> None:
    reduced = dataclasses.replace(CTX, max_full_hint_numa_nodes=0)
    assert listed(hints_of(FRESH, dedicated(cpu=2), reduced)) == EXCLUSIVE_2_ON_FRESH[:4]
    assert listed(hints_of(FRESH, dedicated(cpu=5), reduced)) == [([0, 1], True), ([2, 3], True)]
    assert listed(hints_of(FRESH, dedicated(cpu=16), reduced)) == []
    limited = dataclasses.replace(reduced, max_hints=3)
    assert listed(hints_of(FRESH, dedicated(cpu=2), limited)) == EXCLUSIVE_2_ON_FRESH[:3]


def test_reduced_mode_falls_to_a_larger_size_with_non_preferred_hints() -> None:
    # NUMA 2 and 3 taken: request 4 cannot fit NUMA 0 or 1 alone (3 CPUs), nor the pair across
    # sockets; the smallest size with a hint is 2 ([0, 1]), not preferred (min_needed is 1).
    state = with_dedicated(with_dedicated(FRESH, "p2", "4-5,12-13"), "p3", "6-7,14-15")
    full = hints_of(state, dedicated(cpu=4))
    reduced = hints_of(
        state, dedicated(cpu=4), dataclasses.replace(CTX, max_full_hint_numa_nodes=0)
    )
    assert listed(full) == [([0, 1], False)]
    assert reduced == full


@st.composite
def hint_cases(draw: st.DrawFn) -> tuple[NUMAFacts, int]:
    sockets = draw(st.sampled_from([1, 2, 4]))
    numas = sockets * draw(st.integers(1, 8 // sockets))
    per_numa = 2 * draw(st.integers(1, 4))
    topology = generate_dummy_cpu_topology(numas * per_numa, sockets, numas)
    cpus_all = topology.cpus().ids()
    reserved = CPUSet(draw(st.lists(st.sampled_from(cpus_all), max_size=3)))
    numa_masks = topology.numa_masks()
    allocated = frozenset(n for n in numa_masks if draw(st.booleans()) and draw(st.booleans()))
    taken = {n: draw(st.integers(0, per_numa)) for n in numa_masks}
    facts_available = {
        n: max(0, (CPUSet.from_mask(numa_masks[n]) - reserved).size() - taken[n])
        for n in numa_masks
    }
    request = draw(st.integers(1, numas * per_numa))
    exclusive = draw(st.booleans())
    min_needed = -(-request // per_numa)
    if not exclusive and min_needed > 1:
        exclusive = True
    sockets_of = {n: frozenset({topology.socket_of_numa(n)}) for n in numa_masks}
    facts = NUMAFacts(
        numas=sorted(numa_masks),
        available=facts_available,
        allocated=allocated,
        sockets=sockets_of,
        numas_per_socket=topology.numas_per_socket(),
        request=request,
        min_needed=min_needed,
        exclusive=exclusive,
    )
    return facts, draw(st.integers(1, 80))


@settings(max_examples=300, deadline=None)
@given(hint_cases())
def test_reduced_answer_is_the_smallest_size_part_of_the_full_answer(
    case: tuple[NUMAFacts, int],
) -> None:
    facts, limit = case
    full = full_hints(facts)
    want: tuple[TopologyHint, ...] = ()
    if full:
        smallest = min(len(h.nodes) for h in full)
        want = tuple(h for h in full if len(h.nodes) == smallest)[:limit]
    assert smallest_size_hints(facts, limit) == want


def reference_enumeration(facts: NUMAFacts) -> tuple[TopologyHint, ...]:
    """The reference's loop as the spec words it (§8.3 step 4e): every k-combination of every
    size k = 1..N, in order, each skip rule checked on it."""
    out = []
    for size in range(1, len(facts.numas) + 1):
        for nodes in itertools.combinations(facts.numas, size):
            sockets = set().union(*(facts.sockets[n] for n in nodes))
            if (
                size < facts.min_needed
                or (not facts.exclusive and size > 1)
                or (facts.exclusive and any(n in facts.allocated for n in nodes))
                or sum(facts.available[n] for n in nodes) < facts.request
                or (size <= facts.numas_per_socket and size > 1 and len(sockets) > 1)
            ):
                continue
            out.append(TopologyHint(nodes, size == facts.min_needed))
    return tuple(out)


@settings(max_examples=300, deadline=None)
@given(hint_cases())
def test_full_answer_is_the_reference_enumeration_of_every_node_set(
    case: tuple[NUMAFacts, int],
) -> None:
    facts, _ = case
    assert full_hints(facts) == reference_enumeration(facts)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_reduced_mode_through_the_rpc_matches_the_full_answer(data: st.DataObject) -> None:
    # Random dedicated allocations on an 8-NUMA node, then a random request: forcing reduced
    # mode yields exactly the smallest-size part of the full answer.
    topology = generate_dummy_cpu_topology(64, 2, 8)
    state = started(topology, reserve="0,4", reclaim="1,5,9,13")
    for i, numa in enumerate(data.draw(st.lists(st.integers(0, 7), max_size=4, unique=True))):
        numa_cpus = topology.cpus_in_numa(numa) - cpus("0,4")
        size = data.draw(st.integers(1, numa_cpus.size()))
        state = with_dedicated(
            state, f"p{i}", str(CPUSet(numa_cpus.ids()[:size])), exclusive=data.draw(st.booleans())
        )
    request = data.draw(st.integers(1, 40))
    exclusive = data.draw(st.booleans()) or request > 8
    ctx = dataclasses.replace(CTX, topology=topology, reserved=cpus("0,4"))
    full = calculate_hints(state.cpu, ctx, request, exclusive)
    reduced_ctx = dataclasses.replace(ctx, max_full_hint_numa_nodes=4)
    reduced = calculate_hints(state.cpu, reduced_ctx, request, exclusive)
    smallest = min((len(h.nodes) for h in full), default=0)
    assert reduced == tuple(h for h in full if len(h.nodes) == smallest)[: ctx.max_hints]


@pytest.mark.parametrize("numas", [16, 32, 64])
def test_reduced_mode_answers_large_machines(numas: int) -> None:
    topology = generate_dummy_cpu_topology(numas * 8, 2, numas)
    ctx = PolicyContext(topology=topology, reserved=CPUSet())
    state = CPUState.empty(topology)
    one = calculate_hints(state, ctx, 8, True)
    assert [h.nodes for h in one] == [(n,) for n in range(numas)]
    two = calculate_hints(state, ctx, 9, True)
    # pairs must stay on one socket (numas_per_socket = numas / 2)
    assert (
        len(two) == min(64, 2 * math.comb(numas // 2, 2))
        and two[0] == TopologyHint((0, 1), True)
        and all(h.preferred for h in two)
    )
    whole = calculate_hints(state, ctx, numas * 8, True)
    assert whole == (TopologyHint(tuple(range(numas)), True),)


def test_remembered_hints_follow_the_allocated_cpus_back_and_forth() -> None:
    """Hints are remembered by the allocated CPUs they read: asking on one state, another
    and the first again gives each state's own answer; a refusal is never remembered."""
    fresh = [([0], True), ([1], True), ([2], True), ([3], True), ([0, 1], False), ([2, 3], False)]
    numa_0_taken = [([1], True), ([2], True), ([3], True), ([2, 3], False), ([1, 2, 3], False)]
    taken = with_dedicated(FRESH, "pod-x", "1,8-9")
    for state, want in [
        (FRESH, fresh),
        (taken, numa_0_taken),
        (FRESH, fresh),
        (taken, numa_0_taken),
    ]:
        assert listed(hints_of(state, dedicated(cpu=2)))[: len(want)] == want  # type: ignore[index]
    for _ in range(2):
        with pytest.raises(HintError, match="request larger than 1 NUMA"):
            hints_of(FRESH, dedicated(cpu=12, exclusive=False))
