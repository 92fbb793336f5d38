"""Derived queries of the CPU state on the spec's (16,2,4) machine (spec cpu-policy §5.4–§5.6,
§7.3, §7.5.1, §9.10, §10.2)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.state.cpu_indexes import ceil_units, exact_units
from policy.state.cpu_state import CPUState
from policy.state.entries import (
    DEDICATED_CORES,
    RAMPING,
    RECLAIMED_CORES,
    InPool,
    OwnCPUs,
    requested_cores,
)
from policy.state.events import ContainerAllocated, Event, PoolSet, RampCPUsSet
from policy.state.machine_state import generate_machine_state
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.policy.state_fixtures import (
    RESERVED,
    SYNTH_16_2_4,
    container,
    cpus,
    naive_adjustable,
    naive_machine_state,
    naive_pooled,
    reference_record,
)

STARTUP = [PoolSet("reserve", cpus("0,2")), PoolSet("reclaim", cpus("1,3,9,11"))]
# §7.3: the first shared container on the fresh node ramps up on 1,3-15.
RAMPING_SHARED = ContainerAllocated(
    container("pod-s", "app", OwnCPUs.of(cpus("1,3-15")), ramp_up=True, quantity=2.0)
)
# §7.5.1: exclusive dedicated NUMA-binding with hint [0] gets 1,8-9; non-exclusive 1,9.
EXCLUSIVE = ContainerAllocated(
    container(
        "pod-d",
        "app",
        OwnCPUs.of(cpus("1,8-9")),
        qos=DEDICATED_CORES,
        owner="dedicated",
        ramp_up=True,
        quantity=2.0,
        numa_binding=True,
        numa_exclusive=True,
    )
)
NON_EXCLUSIVE = ContainerAllocated(
    container(
        "pod-n",
        "app",
        OwnCPUs.of(cpus("1,9")),
        qos=DEDICATED_CORES,
        owner="dedicated",
        quantity=2.0,
        numa_binding=True,
    )
)
# A dedicated container without NUMA binding (fallback machinery, §15.15) on 4-5.
ISOLATED = ContainerAllocated(
    container("pod-i", "app", OwnCPUs.of(cpus("4-5")), qos=DEDICATED_CORES, owner="dedicated")
)


def state_after(events: list[Event]) -> CPUState:
    return apply_all(empty_state(SYNTH_16_2_4), events).cpu


@pytest.mark.parametrize(
    ("events", "pooled", "adjustable", "available", "allocated_numa0"),
    [
        pytest.param(STARTUP, "1,3-15", "1,3-15", "1,3-15", "", id="fresh node pools everything"),
        pytest.param(
            [*STARTUP, RAMPING_SHARED],
            "1,3-15",
            "1,3-15",
            "1,3-15",
            "",
            id="a ramping shared container changes nothing",
        ),
        pytest.param(
            [*STARTUP, RAMPING_SHARED, EXCLUSIVE],
            "3-7,10-15",
            "3-7,10-15",
            "3-7,10-15",
            "1,8-9",
            id="exclusive NUMA-binding container takes NUMA 0 out of the pools",
        ),
        pytest.param(
            [*STARTUP, NON_EXCLUSIVE],
            "3-7,10-15",
            "3-7,10-15",
            "3-8,10-15",
            "1,9",
            id="non-exclusive NUMA-binding drops its whole NUMA from pools but not from available",
        ),
        pytest.param(
            [*STARTUP, ISOLATED],
            "1,3,6-15",
            "1,3-15",
            "1,3-15",
            "",
            id="dedicated without NUMA binding is subtracted from pooled only",
        ),
    ],
)
def test_derived_cpu_sets(
    events: list[Event], pooled: str, adjustable: str, available: str, allocated_numa0: str
) -> None:
    state = state_after(events)
    assert state.pooled_cpus(RESERVED) == cpus(pooled)
    assert state.adjustable_cpus(RESERVED) == cpus(adjustable)
    assert state.available(RESERVED) == cpus(available)
    assert state.allocated_cpuset(0) == cpus(allocated_numa0)
    assert state.default_cpuset(0) == cpus("0-1,8-9") - cpus(allocated_numa0)
    machine = naive_machine_state(SYNTH_16_2_4, state.allocation_infos())
    assert state.pooled_cpus(RESERVED) == naive_pooled(machine, RESERVED)
    assert state.adjustable_cpus(RESERVED) == naive_adjustable(machine, RESERVED)


def test_numa_available_is_the_hint_nodes_default_minus_reserved() -> None:
    state = state_after([*STARTUP, EXCLUSIVE])
    assert [str(state.numa_available(n, RESERVED)) for n in range(4)] == [
        "",
        "3,10-11",
        "4-5,12-13",
        "6-7,14-15",
    ]
    assert [state.numa_available_count(n, RESERVED) for n in range(4)] == [0, 3, 4, 4]
    assert state.numas_with_dedicated_numa_binding() == {0}


def test_container_touching_a_numa_only_through_its_original_still_drops_it() -> None:
    # Result on NUMA 1 only, original on NUMA 0: §5.4 lists the copy in both NUMA states.
    moved = container(
        "pod-m",
        "app",
        OwnCPUs(cpus("3"), cpus("1")),
        qos=DEDICATED_CORES,
        owner="dedicated",
        numa_binding=True,
    )
    state = state_after([*STARTUP, ContainerAllocated(moved)])
    assert state.numas_with_dedicated_numa_binding() == {0, 1}
    assert state.pooled_cpus(RESERVED) == cpus("4-7,12-15")
    assert state.allocated_cpuset(0) == cpus("1") and state.allocated_cpuset(1) == cpus("")


# §9.10: after ramp-up ends, share = 1,3-6,9,11-14, reclaim = 7-8,10,15, reserve = 0,2.
FINAL_POOLS = [
    PoolSet("reserve", cpus("0,2")),
    PoolSet("share", cpus("1,3-6,9,11-14")),
    PoolSet("reclaim", cpus("7-8,10,15")),
]
IN_SHARE = container("pod-s", "app", InPool("share"), owner="share", quantity=2.0)
IN_RECLAIM = container(
    "pod-r", "app", InPool("reclaim"), qos=RECLAIMED_CORES, owner="reclaim", quantity=1.5
)


def test_worked_example_9_10_container_reports_ten_cpus_split_2_2_4_2() -> None:
    state = state_after([*FINAL_POOLS, ContainerAllocated(IN_SHARE)])
    info = state.allocation_info("pod-s", "app")
    assert info is not None
    assert info.allocation_result == cpus("1,3-6,9,11-14") and info.allocation_result.size() == 10
    assert {n: c.size() for n, c in (info.topology_aware_assignments or {}).items()} == {
        0: 2,
        1: 2,
        2: 4,
        3: 2,
    }


def test_reclaimed_container_mirrors_the_reclaim_pool() -> None:
    state = state_after([*FINAL_POOLS, ContainerAllocated(IN_RECLAIM)])
    info = state.allocation_info("pod-r", "app")
    assert info is not None and info.allocation_result == cpus("7-8,10,15")


@pytest.mark.parametrize(
    ("entry", "result", "original"),
    [
        pytest.param(IN_SHARE, "1,3-6,9,11-14", "1,3-6,9,11-14", id="in a pool"),
        pytest.param(IN_RECLAIM, "7-8,10,15", "7-8,10,15", id="reclaimed in reclaim"),
        pytest.param(
            container("pod-x", "app", RAMPING, ramp_up=True), "1,3-15", "1,3-15", id="ramping"
        ),
        pytest.param(
            container("pod-y", "app", OwnCPUs(CPUSet.uninitialized(), cpus("4-5"))),
            "nil",
            "4-5",
            id="own CPUs keep a nil result",
        ),
    ],
)
def test_allocation_info_equals_the_reference_copy(entry, result, original) -> None:  # type: ignore[no-untyped-def]
    state = state_after([*FINAL_POOLS, RampCPUsSet(cpus("1,3-15")), ContainerAllocated(entry)])
    want = reference_record(
        entry, CPUSet.from_json(result), CPUSet.from_json(original), SYNTH_16_2_4
    )
    assert state.allocation_info(entry.pod_uid, entry.container_name) == want
    assert list(state.allocation_infos()) == [want]


def test_pool_entry_is_the_reference_pool_record() -> None:
    state = state_after(FINAL_POOLS)
    pool = state.pool_entry("share")
    assert pool is not None
    assert (pool.pod_uid, pool.container_name, pool.owner_pool_name) == ("share", "", "share")
    assert pool.allocation_result == pool.original_allocation_result == cpus("1,3-6,9,11-14")
    assert pool.topology_aware_assignments == {
        0: cpus("1,9"),
        1: cpus("3,11"),
        2: cpus("4-5,12-13"),
        3: cpus("6,14"),
    }
    assert (pool.qos_level, pool.labels, pool.annotations, pool.init_timestamp) == (
        "",
        None,
        None,
        "",
    )
    assert state.pool_entry("nope") is None
    assert [p.pod_uid for p in state.pool_entries()] == ["reclaim", "reserve", "share"]
    assert state.filtered_pools_cpuset(ignore={"reserve", "reclaim"}) == cpus("1,3-6,9,11-14")
    assert state.check_pool_empty("nope") and not state.check_pool_empty("share")


def test_machine_state_export_matches_the_reference_derivation() -> None:
    state = state_after([*STARTUP, RAMPING_SHARED, EXCLUSIVE])
    machine = generate_machine_state(state)
    naive = naive_machine_state(SYNTH_16_2_4, state.allocation_infos())
    assert list(machine) == [0, 1, 2, 3]
    for n, ns in machine.items():
        assert ns.default_cpuset == naive[n].default_cpuset
        assert ns.allocated_cpuset == naive[n].allocated_cpuset
        flat = [ai for pod in (ns.pod_entries or {}).values() for ai in pod.values()]
        assert flat == naive[n].entries
    assert machine[0].allocated_cpuset == cpus("1,8-9")
    assert machine[0].default_cpuset == cpus("0")
    assert (machine[0].pod_entries or {})["pod-s"]["app"].allocation_result == cpus("1,8-9")
    assert generate_machine_state(state_after([]))[2].pod_entries is None


@pytest.mark.parametrize(
    ("placements", "want"),
    [
        pytest.param([], {0, 1, 2, 3}, id="no NUMA-binding container"),
        pytest.param([OwnCPUs.of(cpus("4"))], {0, 1, 3}, id="own CPUs on NUMA 2"),
        pytest.param([InPool("reclaim")], {2, 3}, id="in a pool on NUMAs 0-1"),
        pytest.param([RAMPING], {0}, id="ramping on NUMAs 1-3"),
    ],
)
def test_numas_without_numa_binding(placements, want) -> None:  # type: ignore[no-untyped-def]
    events: list[Event] = [*STARTUP, RampCPUsSet(cpus("3-7"))]
    for i, placement in enumerate(placements):
        owner = placement.pool_name if isinstance(placement, InPool) else ""
        entry = container(f"p{i}", "app", placement, ramp_up=True, owner=owner, numa_binding=True)
        events.append(ContainerAllocated(entry))
    assert state_after(events).numas_without_numa_binding() == want


def test_shared_quantity_map_sums_exactly_and_ignores() -> None:
    events: list[Event] = list(FINAL_POOLS)
    for i, q in enumerate([0.1, 0.2, 0.7]):
        events.append(
            ContainerAllocated(
                container(f"p{i}", "app", InPool("share"), owner="share", quantity=q)
            )
        )
    events.append(
        ContainerAllocated(container("pz", "app", InPool("share"), owner="share", quantity=0.0))
    )
    events.append(ContainerAllocated(container("pr", "app", RAMPING, ramp_up=True, quantity=5.0)))
    state = apply_all(empty_state(SYNTH_16_2_4), [RampCPUsSet(cpus("1")), *events]).cpu
    # 0.1 + 0.2 + 0.7 is 1.0000000000000002 in floats, but the exact sum is 1.
    assert state.shared_quantity_map() == {"share": 1}
    assert state.shared_quantity_map(ignore={("p2", "app")}) == {"share": 1}
    assert state.shared_quantity_map(lookup=lambda pod, c: 1500.0 if pod == "pz" else None) == {
        "share": 3
    }
    everyone = {("p0", "app"), ("p1", "app"), ("p2", "app"), ("pz", "app")}
    assert state.shared_quantity_map(ignore=everyone) == {}


def test_isolated_quantity_map() -> None:
    owned = container("pi", "app", OwnCPUs.of(cpus("4-6")), qos=DEDICATED_CORES, owner="dedicated")
    fallback = container(
        "pf", "app", OwnCPUs.of(cpus("7")), qos=DEDICATED_CORES, owner="fallback", quantity=1.2
    )
    zero = container("p0", "app", OwnCPUs.of(cpus("")), qos=DEDICATED_CORES, quantity=0.0)
    state = state_after([ContainerAllocated(e) for e in (owned, fallback, zero)])
    assert state.isolated_quantity_map() == {"pi": {"app": 3}, "pf": {"app": 2}}
    assert state.isolated_quantity_map(ignore={("pi", "app")}) == {"pf": {"app": 2}}


@pytest.mark.parametrize(
    ("quantity", "millicores", "want"),
    [
        pytest.param(1.5, None, 1.5, id="stored quantity wins"),
        pytest.param(0.0, 2500.0, 2.5, id="zero quantity asks the pod source"),
        pytest.param(0.0, -100.0, 0.0, id="negative request counts as zero"),
        pytest.param(0.0, None, 0.0, id="unknown to the pod source"),
    ],
)
def test_requested_cores(quantity: float, millicores: float | None, want: float) -> None:
    entry = container("p", "app", RAMPING, quantity=quantity)
    assert requested_cores(entry, lambda pod, c: millicores) == want
    assert requested_cores(entry) == quantity


def test_predicates_of_section_5_1() -> None:
    d = container(
        "p",
        "app",
        OwnCPUs.of(cpus("1")),
        qos=DEDICATED_CORES,
        numa_binding=True,
        numa_exclusive=True,
    )
    assert d.is_dedicated() and d.is_numa_binding() and d.is_dedicated_numa_binding()
    assert d.is_numa_exclusive() and d.is_main() and not d.is_sidecar()
    assert d.specified_pool_name() == "dedicated" and d.pool_name() == "dedicated"
    s = container("p", "app", RAMPING, cpuset_pool="batch", numa_exclusive=True)
    assert s.is_shared() and not s.is_numa_exclusive() and s.pool_name() == "batch"
    assert container("p", "app", RAMPING, owner="flink").pool_name() == "flink"
    r = container("p", "app", RAMPING, qos=RECLAIMED_CORES, container_type="SIDECAR")
    assert r.is_reclaimed() and r.is_sidecar() and r.specified_pool_name() == "reclaim"


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)))
def test_exact_units_sum_like_fractions(quantities: list[float]) -> None:
    total = sum(exact_units(q) for q in quantities)
    assert ceil_units(total) == math.ceil(sum(Fraction(q) for q in quantities))
