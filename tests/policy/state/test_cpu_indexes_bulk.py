"""Entries added in bulk (a checkpoint's) give what adding them one event at a time gives:
the same indexes, the same state, the same refusal (spec cpu-policy §5.4–§5.6; DESIGN.md,
Journal: replay is deterministic and equals the live state)."""

from __future__ import annotations

import math
from dataclasses import replace

import immutables
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.errors import StateError
from policy.state.cpu_apply import allocate_all, apply_cpu_event
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
    Placement,
)
from policy.state.events import ContainerAllocated, PoolSet, RampCPUsSet
from policy.topology.cpuset import CPUSet
from tests.policy.state_fixtures import SYNTH_16_2_4, container, cpus

TOPO = SYNTH_16_2_4
MASKS = TOPO.numa_masks()
POOLS = ["share", "reclaim", "batch"]

placements = st.one_of(
    st.sampled_from([*POOLS, "gone"]).map(InPool),
    st.just(RAMPING),
    st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**17 - 1)).map(
        lambda masks: OwnCPUs(CPUSet.from_mask(masks[0]), CPUSet.from_mask(masks[1]))
    ),
)


@st.composite
def entries(draw: st.DrawFn, fit: bool = False) -> list[ContainerEntry]:
    """Entries for distinct containers, of every level and placement, fitting ``base_state``
    (``fit``) or not."""
    keys = draw(
        st.lists(
            st.tuples(st.sampled_from(["p1", "p2", "p3", "p4", "share"]), st.sampled_from("ab")),
            unique=True,
            max_size=8,
        )
    )
    out = []
    for drawn_pod, name in keys:
        pod = drawn_pod
        placement = draw(placements)
        qos = draw(st.sampled_from([SHARED_CORES, RECLAIMED_CORES, DEDICATED_CORES]))
        owner = draw(st.sampled_from(["", "dedicated", *POOLS]))
        ramp_up = draw(st.booleans())
        if isinstance(placement, InPool) and (fit or draw(st.booleans())):
            owner = placement.pool_name  # the owner §9.8 step 6 asks for
        if fit:  # the rules of policy.state.cpu_apply, module docstring
            pod = "p5" if pod == "share" else pod  # a pod uid is never a pool name
            if isinstance(placement, InPool) and placement.pool_name not in POOLS:
                placement, owner = InPool("batch"), "batch"
            if isinstance(placement, OwnCPUs) or qos == DEDICATED_CORES:
                placement = OwnCPUs(
                    CPUSet.from_mask(draw(st.integers(0, 2**16 - 1))),
                    CPUSet.from_mask(draw(st.integers(0, 2**16 - 1))),
                )
            ramp_up = ramp_up or placement is RAMPING
        out.append(
            container(
                pod,
                name,
                placement,
                qos=qos,
                ramp_up=ramp_up,
                owner=owner,
                quantity=draw(st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.7])),
                numa_binding=draw(st.booleans()),
            )
        )
    return out


def one_at_a_time(indexes: CPUIndexes, added: list[ContainerEntry]) -> CPUIndexes:
    for entry in added:
        indexes = indexes.replaced(entry.key, None, entry, MASKS)
    return indexes


@settings(max_examples=300, deadline=None)
@given(st.one_of(entries(), entries(fit=True)), st.integers(0, 8))
def test_indexes_built_in_bulk_equal_those_built_entry_by_entry(
    added: list[ContainerEntry], split: int
) -> None:
    before = one_at_a_time(CPUIndexes(), added[:split])  # bulk on top of existing indexes too
    assert before.with_entries(added[split:], MASKS) == one_at_a_time(before, added[split:])


SHARED_ANNOTATIONS = [
    None,
    immutables.Map(),
    immutables.Map({"numa_binding": "true"}),
    immutables.Map({"numa_binding": "true", "cpuset_pool": "batch", "numa_share": "false"}),
]


@settings(max_examples=300, deadline=None)
@given(entries(), placements, st.sampled_from(SHARED_ANNOTATIONS), st.integers(0, 8))
def test_entries_sharing_one_placement_and_annotation_map_index_as_entry_by_entry(
    drawn: list[ContainerEntry], placement: Placement, annotations: object, split: int
) -> None:
    # The decoders share equal placements and maps between entries, and the bulk pass works
    # out each shared combination's facts once: entries that share them but differ in level,
    # owner, ramp-up or quantity must still each count as they are.
    added = [replace(e, placement=placement, annotations=annotations) for e in drawn]
    before = one_at_a_time(CPUIndexes(), added[:split])
    assert before.with_entries(added[split:], MASKS) == one_at_a_time(before, added[split:])


def base_state() -> CPUState:
    state = CPUState.empty(TOPO)
    for event in (
        PoolSet("share", cpus("1,3-6")),
        PoolSet("reclaim", cpus("7-8")),
        PoolSet("batch", cpus("9-11")),
        RampCPUsSet(cpus("1,3-15")),
    ):
        state = apply_cpu_event(state, event)
    return state


@settings(max_examples=300, deadline=None)
@given(st.one_of(entries(), entries(fit=True)))
def test_allocating_in_bulk_equals_one_event_per_entry_or_refuses_alike(
    added: list[ContainerEntry],
) -> None:
    assert_bulk_allocation_as_one_by_one(added)


@settings(max_examples=300, deadline=None)
@given(st.one_of(entries(), entries(fit=True)), placements)
def test_entries_sharing_one_placement_object_allocate_in_bulk_as_one_by_one(
    drawn: list[ContainerEntry], placement: Placement
) -> None:
    # allocate_all checks a placement object it has seen fit once; entries that share it
    # (as the decoders make them) but differ in pod, level or quantity are each still
    # checked, and a placement that does not fit refuses at the first entry holding it.
    assert_bulk_allocation_as_one_by_one([replace(e, placement=placement) for e in drawn])


def assert_bulk_allocation_as_one_by_one(added: list[ContainerEntry]) -> None:
    state = base_state()
    refusal = None
    try:
        for entry in added:
            state = apply_cpu_event(state, ContainerAllocated(entry))
    except StateError as err:
        refusal = str(err)
    if refusal is None:
        bulk = allocate_all(base_state(), added)
        assert bulk == state
        assert bulk.indexes == state.indexes
    else:
        try:
            allocate_all(base_state(), added)
        except StateError as err:
            assert str(err) == refusal
        else:
            raise AssertionError(f"allocate_all took entries one event refuses: {refusal}")


def test_allocating_in_bulk_refuses_a_container_already_in_state() -> None:
    entry = container("p1", "a", InPool("share"), owner="share")
    state = apply_cpu_event(base_state(), ContainerAllocated(entry))
    try:
        allocate_all(state, [entry])
    except StateError as err:
        assert "pod: p1, container: a: the container already has an entry" in str(err)
    else:
        raise AssertionError("a second entry for the same container was taken")


_SHARED_OWN = OwnCPUs(cpus("3-4"), cpus("3-4"))


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(replace(container("p2", "a", _SHARED_OWN), pod_uid=""), id="no pod uid"),
        pytest.param(container("p2", "", _SHARED_OWN), id="no container name"),
        pytest.param(container("share", "a", _SHARED_OWN), id="a pod uid naming a pool"),
        pytest.param(
            replace(container("p2", "a", _SHARED_OWN), request_quantity=math.inf),
            id="an infinite quantity",
        ),
        pytest.param(
            replace(container("p2", "a", _SHARED_OWN), request_quantity=math.nan),
            id="a quantity that is not a number",
        ),
        pytest.param(container("p2", "a", _SHARED_OWN), id="a fitting entry"),
    ],
)
def test_an_entry_sharing_a_placement_already_checked_is_still_checked_itself(
    second: ContainerEntry,
) -> None:
    # The placement's checks run once per placement object; the entry's own run for each.
    assert_bulk_allocation_as_one_by_one([container("p1", "a", _SHARED_OWN), second])
