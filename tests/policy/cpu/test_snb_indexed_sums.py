"""v0.5.47's pool demands, non-binding shared total and NUMA anti-affinity, answered from the
state's indexes, equal the reference's walk over every container in key order, float sums
and all (spec cpu-policy-v0.5.47 (a), (c) 5; katalyst-core v0.5.47
``GetSharedQuantityMapFromPodEntries``, ``GetNonBindingSharedRequestedQuantityFromPodEntries``,
``CheckNUMABindingAntiAffinity``)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from policy.cpu.context import PolicyContext
from policy.cpu.snb import (
    _anti_affine_numas_walk,
    _non_binding_shared_requested_walk,
    _pool_demands_walk,
    _Sum,
    anti_affine_numas,
    non_binding_shared_requested,
    numa_available_quantities,
    numa_available_quantity,
    pool_demands,
    precise_ceil,
)
from policy.state.cpu_apply import apply_cpu_event
from policy.state.cpu_indexes import CPUIndexes
from policy.state.cpu_state import CPUState
from policy.state.entries import (
    DEDICATED_CORES,
    RAMPING,
    RECLAIMED_CORES,
    SHARED_CORES,
    ContainerEntry,
    InPool,
    OwnCPUs,
)
from policy.state.events import (
    ContainerAllocated,
    ContainerRemoved,
    PodRemoved,
    PoolSet,
    RampCPUsSet,
)
from policy.topology.cpuset import CPUSet
from tests.policy.state_fixtures import SYNTH_16_2_4, cpus

TOPO = SYNTH_16_2_4
POOLS = {
    "share": "1,3-4",
    "batch": "5-6",
    "share-NUMA0": "0,2",
    "batch-NUMA1": "7",
    "share-NUMA3": "13-14",
    "reclaim": "8-9",
}
PODS = [f"p{i}" for i in range(10)]

#: Quantities whose float sums round: tenths and thirds, milli-CPUs either side of a ceil
#: boundary (``precise_ceil`` jumps at m + 0.001), the smallest doubles, and one ulp off
#: whole numbers.
ADVERSARIAL = [
    0.0,
    0.1,
    0.2,
    0.3,
    0.7,
    1 / 3,
    2 / 3,
    0.001,
    0.0005,
    0.999,
    1.001,
    2.0005,
    1e-17,
    5e-324,
    math.nextafter(1.0, 0.0),
    math.nextafter(1.0, 2.0),
    math.nextafter(0.001, 0.0),
    math.nextafter(0.001, 1.0),
    1.0,
    2.5,
]

quantities = st.one_of(
    st.sampled_from(ADVERSARIAL),
    st.integers(0, 4000).map(lambda milli: milli / 1000),
    st.floats(0, 64, allow_nan=False, allow_infinity=False),
)


@st.composite
def entry_list(draw: st.DrawFn) -> list[ContainerEntry]:
    keys = draw(
        st.lists(st.tuples(st.sampled_from(PODS), st.sampled_from("abc")), unique=True, max_size=24)
    )
    out = []
    for pod, name in keys:
        qos = draw(st.sampled_from([SHARED_CORES, SHARED_CORES, RECLAIMED_CORES, DEDICATED_CORES]))
        annotations = {"katalyst.kubewharf.io/qos_level": qos}
        for key, values in (
            ("numa_binding", ["true", "false"]),
            ("numa_share", ["false", "true"]),
            ("cpuset_pool", ["batch", ""]),
            ("numa_hint", ["0", "1", "x"]),
        ):
            value = draw(st.sampled_from([None, *values]))
            if value is not None:
                annotations[key] = value
        kind = draw(st.sampled_from(["pool", "ramp", "own"]))
        if qos == DEDICATED_CORES or kind == "own":
            placement: InPool | OwnCPUs = OwnCPUs(
                CPUSet.from_mask(draw(st.integers(0, 2**16 - 1))),
                CPUSet.from_mask(draw(st.integers(0, 2**16 - 1))),
            )
            owner = draw(st.sampled_from(["", "dedicated", *POOLS]))
        elif kind == "pool":
            owner = draw(st.sampled_from(sorted(POOLS)))
            placement = InPool(owner)
        else:
            placement, owner = RAMPING, draw(st.sampled_from(["", *POOLS]))
        out.append(
            ContainerEntry(
                pod_uid=pod,
                pod_namespace="default",
                pod_name=f"name-{pod}",
                container_name=name,
                container_type=draw(st.sampled_from(["MAIN", "MAIN", "SIDECAR"])),
                ramp_up=placement is RAMPING or draw(st.booleans()),
                owner_pool_name=owner,
                placement=placement,
                annotations=annotations if draw(st.integers(0, 9)) else None,
                qos_level=qos,
                request_quantity=draw(quantities),
            )
        )
    return out


def built(added: list[ContainerEntry], removed: list[tuple[str, str]], pods: list[str]) -> CPUState:
    """The state after the pools, the ramp-up cpuset, ``added``, then some removals."""
    state = CPUState.empty(TOPO)
    for name, text in POOLS.items():
        state = apply_cpu_event(state, PoolSet(name, cpus(text)))
    state = apply_cpu_event(state, RampCPUsSet(cpus("10-15")))
    for entry in added:
        state = apply_cpu_event(state, ContainerAllocated(entry))
    for key in removed:
        if state.entry(*key) is not None:
            state = apply_cpu_event(state, ContainerRemoved(*key))
    for pod in pods:
        if state.pod_containers(pod):
            state = apply_cpu_event(state, PodRemoved(pod))
    return state


def context(lookup: dict[tuple[str, str], float]) -> PolicyContext:
    return PolicyContext(
        topology=TOPO,
        reserved=cpus("0"),
        reference_version="v0.5.47",
        requested_millicpu=lambda pod, name: lookup.get((pod, name)),
    )


states = st.builds(
    built,
    entry_list(),
    st.lists(st.tuples(st.sampled_from(PODS), st.sampled_from("abc")), max_size=4),
    st.lists(st.sampled_from(PODS), max_size=2),
)
lookups = st.dictionaries(
    st.tuples(st.sampled_from(PODS), st.sampled_from("abc")),
    st.one_of(st.sampled_from([0.0, 1.0, 100.0, 300.0, 1001.0]), st.floats(0, 64000)),
    max_size=8,
)
ignores = st.frozensets(st.tuples(st.sampled_from(PODS), st.sampled_from("abcz")), max_size=4)


@settings(max_examples=400, deadline=None)
@given(states, lookups, ignores)
def test_pool_demands_from_the_indexes_equal_the_walk_in_key_order(
    state: CPUState, lookup: dict[tuple[str, str], float], ignore: frozenset[tuple[str, str]]
) -> None:
    ctx = context(lookup)
    assert pool_demands(state, ctx, ignore) == _pool_demands_walk(state, ctx, ignore)


@settings(max_examples=400, deadline=None)
@given(states, lookups, st.none() | st.tuples(st.sampled_from([*PODS, "new"]), quantities))
def test_non_binding_shared_total_from_the_indexes_equals_the_walk_in_key_order(
    state: CPUState, lookup: dict[tuple[str, str], float], new_pod: tuple[str, float] | None
) -> None:
    ctx = context(lookup)
    assert non_binding_shared_requested(state, ctx, new_pod) == (
        _non_binding_shared_requested_walk(state, ctx, new_pod)
    )


@settings(max_examples=400, deadline=None)
@given(
    states,
    st.sampled_from([SHARED_CORES, DEDICATED_CORES, RECLAIMED_CORES]),
    st.dictionaries(
        st.sampled_from(["numa_share", "cpuset_pool", "numa_binding"]),
        st.sampled_from(["false", "true", "batch", ""]),
    ),
)
def test_anti_affine_numas_from_the_indexes_equal_the_walk(
    state: CPUState, qos_level: str, annotations: dict[str, str]
) -> None:
    ctx = context({})
    assert anti_affine_numas(state, ctx, qos_level, annotations) == (
        _anti_affine_numas_walk(state, ctx, qos_level, annotations)
    )


@settings(max_examples=200, deadline=None)
@given(states)
def test_indexes_kept_through_events_equal_those_built_from_the_entries(state: CPUState) -> None:
    rebuilt = CPUIndexes().with_entries(state.entries(), TOPO.numa_masks())
    assert state.indexes == rebuilt


#: Terms whose float sums drift a few ulps from the exact sum, and a milli-CPU to land near
#: a ceil boundary.
DRIFTING = [0.1, 0.2, 0.3, 0.7, 0.9, 1.1, 1 / 3, 0.001]
DRIFTED = [0.001, 0.2, 0.2, 0.2, 0.3, 0.3, 0.9, 0.9, 0.3, 1.1, 0.3]
DRIFTED += [0.2, 0.9, 1.1, 0.9, 0.1, 0.1, 1.1, 0.9, 1.1, 0.2, 0.7]


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(quantities, min_size=1, max_size=60)
    | st.lists(st.sampled_from(DRIFTING), min_size=1, max_size=60),
    st.randoms(use_true_random=False),
)
@example([1.0, 0.001], random.Random(0))  # 1.001 exactly: right on a ceil boundary
@example(  # in this order the float sum is 12.000999..., some ulps under the exact one
    DRIFTED,
    random.Random(0),
)
@example([0.1] * 10 + [0.001], random.Random(0))  # 1.001 - 2**-52·k: just under one
@example([0.3, 0.7, 0.001], random.Random(1))
def test_a_settled_ceil_is_the_ceil_of_the_float_sum_in_any_order(
    terms: list[float], order: random.Random
) -> None:
    total = _Sum()
    for term in terms:
        total.add(term)
    settled = total.settled_ceil()
    shuffled = list(terms)
    order.shuffle(shuffled)
    for in_order in (terms, shuffled):
        in_floats = 0.0
        for term in in_order:
            in_floats += term
        assert settled is None or settled == precise_ceil(in_floats)


@pytest.mark.parametrize(
    ("terms", "settled"),
    [
        pytest.param([0.04] * 5000, 200, id="five thousand 0.04s settle at 200"),
        pytest.param([0.1, 0.2], 1, id="0.1 + 0.2 settles at 1"),
        pytest.param([2.0, 2.0, 0.5], 5, id="whole and half CPUs settle exactly"),
        pytest.param([1.0, 0.001], None, id="a sum at 1.001 is left to the walk"),
    ],
)
def test_settled_ceils_of_known_sums(terms: list[float], settled: int | None) -> None:
    total = _Sum()
    for term in terms:
        total.add(term)
    assert total.settled_ceil() == settled


def test_a_container_whose_quantity_changes_moves_its_demand() -> None:
    state = built([], [], [])
    entry = ContainerEntry(
        pod_uid="p1",
        pod_namespace="default",
        pod_name="p1",
        container_name="a",
        container_type="MAIN",
        owner_pool_name="share",
        placement=InPool("share"),
        annotations={},
        qos_level=SHARED_CORES,
        request_quantity=0.3,
    )
    state = apply_cpu_event(state, ContainerAllocated(entry))
    state = apply_cpu_event(state, ContainerRemoved("p1", "a"))
    state = apply_cpu_event(state, ContainerAllocated(replace(entry, request_quantity=2.2)))
    assert pool_demands(state, context({})) == {"share": 3}


@settings(max_examples=200, deadline=None)
@given(states, lookups, ignores)
def test_every_numas_available_quantity_at_once_equals_each_asked_alone(
    state: CPUState, lookup: dict[tuple[str, str], float], ignore: frozenset[tuple[str, str]]
) -> None:
    ctx = context(lookup)
    alone = {n: numa_available_quantity(state, ctx, n, ignore) for n in TOPO.numa_masks()}
    assert numa_available_quantities(state, ctx, ignore) == alone
