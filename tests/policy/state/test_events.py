"""Applying events: what each one changes, and the events that do not fit (spec §5, §9.6–§9.9,
§10.1, §10.6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from policy.errors import StateError
from policy.state.entries import DEDICATED_CORES, RAMPING, RECLAIMED_CORES, InPool, OwnCPUs
from policy.state.events import (
    CPU_EVENT_TYPES,
    ContainerAllocated,
    ContainerPlaced,
    ContainerRemoved,
    ContainerReRamped,
    CPUEvent,
    Event,
    PodRemoved,
    PoolRemoved,
    PoolSet,
    RampCPUsSet,
    RampUpFinished,
    RequestQuantitySet,
    TimestampReset,
    event_target,
)
from policy.state.sections import State, apply, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.policy.state_fixtures import SYNTH_16_2_4, container, cpus

BASE: list[Event] = [
    PoolSet("reserve", cpus("0,2")),
    PoolSet("share", cpus("1,3-6,9,11-14")),
    PoolSet("reclaim", cpus("7-8,10,15")),
    RampCPUsSet(cpus("1,3-15")),
    ContainerAllocated(container("pod-a", "app", InPool("share"), owner="share")),
    ContainerAllocated(container("pod-a", "side", RAMPING, ramp_up=True)),
    ContainerAllocated(
        container(
            "pod-d",
            "app",
            OwnCPUs.of(cpus("1,8-9")),
            qos=DEDICATED_CORES,
            owner="dedicated",
            ramp_up=True,
            numa_binding=True,
        )
    ),
]


def base() -> State:
    return apply_all(empty_state(SYNTH_16_2_4), BASE)


def result_of(state: State, pod: str, name: str) -> str:
    info = state.cpu.allocation_info(pod, name)
    assert info is not None
    return str(info.allocation_result)


def test_every_event_names_the_cpu_section_and_is_frozen() -> None:
    for cls in CPU_EVENT_TYPES:
        assert cls.section == "cpu"
        assert "§" in (cls.__doc__ or ""), f"{cls.__name__} docstring cites no spec section"
        assert hasattr(cls, "__slots__")


def test_resizing_a_pool_moves_every_container_in_it_with_one_event() -> None:
    state = apply(base(), PoolSet("share", cpus("1,3-5")))
    assert result_of(state, "pod-a", "app") == "1,3-5"
    info = state.cpu.allocation_info("pod-a", "app")
    assert info is not None and info.topology_aware_assignments == {
        0: cpus("1"),
        1: cpus("3"),
        2: cpus("4-5"),
    }
    assert info.original_topology_aware_assignments == info.topology_aware_assignments


def test_ramp_cpus_set_moves_ramping_containers_only() -> None:
    state = apply(base(), RampCPUsSet(cpus("3-7")))
    assert result_of(state, "pod-a", "side") == "3-7"
    assert result_of(state, "pod-a", "app") == "1,3-6,9,11-14"


def test_ramp_up_finished_freezes_the_ramp_cpus_as_own() -> None:
    state = apply(base(), RampUpFinished("pod-a", "side"))
    entry = state.cpu.entry("pod-a", "side")
    assert entry is not None and not entry.ramp_up
    assert entry.placement == OwnCPUs.of(cpus("1,3-15"))
    # Later ramp-set changes no longer move it, as the reference's copy stays put (§9.8).
    assert result_of(apply(state, RampCPUsSet(cpus("3"))), "pod-a", "side") == "1,3-15"
    assert ("pod-a", "side") not in state.cpu.ramping_containers()


def test_dedicated_ramp_up_finished_keeps_its_cpus() -> None:
    state = apply(base(), RampUpFinished("pod-d", "app"))
    assert result_of(state, "pod-d", "app") == "1,8-9"


@pytest.mark.parametrize(
    ("pooled", "placement"),
    [
        pytest.param("1,3-15", RAMPING, id="pooled equals the ramp set: follows it"),
        pytest.param("3-15", OwnCPUs.of(cpus("3-15")), id="pooled differs: own CPUs"),
    ],
)
def test_re_ramp_on_a_bad_timestamp(pooled: str, placement: object) -> None:
    stamp = "2030-01-01 00:00:00 +0000 UTC"
    state = apply(base(), ContainerReRamped("pod-a", "app", stamp, cpus(pooled)))
    entry = state.cpu.entry("pod-a", "app")
    assert entry is not None
    assert (entry.ramp_up, entry.owner_pool_name, entry.init_timestamp) == (True, "", stamp)
    assert entry.placement == placement
    assert result_of(state, "pod-a", "app") == pooled
    assert "share" not in state.cpu.owner_pool_names()


def test_place_timestamp_and_quantity() -> None:
    state = apply_all(
        base(),
        [
            ContainerPlaced("pod-a", "app", InPool("reclaim"), "reclaim"),
            TimestampReset("pod-d", "app", "now"),
            RequestQuantitySet("pod-d", "app", 3.5),
        ],
    )
    assert result_of(state, "pod-a", "app") == "7-8,10,15"
    assert set(state.cpu.containers_owned_by("reclaim")) == {("pod-a", "app")}
    entry = state.cpu.entry("pod-d", "app")
    assert entry is not None and (entry.init_timestamp, entry.request_quantity) == ("now", 3.5)


def test_removals() -> None:
    state = apply(base(), ContainerRemoved("pod-a", "side"))
    assert set(state.cpu.pod_containers("pod-a")) == {"app"}
    state = apply(state, ContainerRemoved("pod-a", "app"))
    assert "pod-a" not in state.cpu.pods  # the pod key goes with its last container (§13.1)
    state = apply(state, PodRemoved("pod-d"))
    assert len(state.cpu.pods) == 0 and state.cpu.pooled_cpus(cpus("0,2")) == cpus("1,3-15")
    assert apply(state, PoolRemoved("share")).cpu.pool_cpus("share") is None


def test_a_dedicated_allocation_replaced_by_a_smaller_one_updates_machine_indexes() -> None:
    smaller = container(
        "pod-d",
        "app",
        OwnCPUs.of(cpus("9")),
        qos=DEDICATED_CORES,
        owner="dedicated",
        numa_binding=True,
    )
    state = apply(base(), ContainerAllocated(smaller))
    assert state.cpu.allocated_cpuset(0) == cpus("9")
    assert state.cpu.pooled_cpus(cpus("0,2")) == cpus("3-7,10-15")


@dataclass(frozen=True, slots=True)
class _SensorReading(Event):
    section: ClassVar[str] = "sensors"


REFUSED = [
    pytest.param(ContainerRemoved("pod-x", "app"), "pod-x", id="remove an unknown container"),
    pytest.param(PodRemoved("pod-x"), "pod-x", id="remove an unknown pod"),
    pytest.param(RampUpFinished("pod-a", "app"), "already finished", id="finish ramp-up twice"),
    pytest.param(
        ContainerPlaced("pod-a", "app", InPool("batch"), "batch"),
        "batch, which does not exist",
        id="place into a missing pool",
    ),
    pytest.param(
        ContainerPlaced("pod-a", "app", InPool("share"), "reclaim"),
        "owned by 'reclaim'",
        id="pool and owner disagree",
    ),
    pytest.param(
        ContainerPlaced("pod-a", "app", RAMPING, ""),
        "without ramp_up",
        id="ramping placement without the flag",
    ),
    pytest.param(
        ContainerPlaced("pod-d", "app", InPool("share"), "share"),
        "must hold its own CPUs",
        id="dedicated container in a pool",
    ),
    pytest.param(
        ContainerPlaced("pod-a", "app", OwnCPUs.of(cpus("3,16")), "share"),
        "CPUs 16 that the topology does not have",
        id="CPUs the node does not have",
    ),
    pytest.param(
        ContainerReRamped("pod-d", "app", "t", cpus("1")),
        "only shared_cores",
        id="re-ramp dedicated",
    ),
    pytest.param(PoolRemoved("share"), "still has 1 containers", id="remove a pool in use"),
    pytest.param(PoolRemoved("batch"), "does not exist", id="remove a missing pool"),
    pytest.param(PoolSet("pod-a", cpus("1")), "uid of a pod", id="pool named like a pod"),
    pytest.param(PoolSet("", cpus("1")), "needs a name", id="pool without a name"),
    pytest.param(RampCPUsSet(cpus("99")), "topology does not have", id="ramp set off the node"),
    pytest.param(
        ContainerAllocated(container("share", "app", RAMPING, ramp_up=True)),
        "name of a pool",
        id="pod named like a pool",
    ),
    pytest.param(
        ContainerAllocated(container("", "app", RAMPING, ramp_up=True)),
        "needs a pod uid",
        id="empty pod uid",
    ),
    pytest.param(RequestQuantitySet("pod-a", "app", float("nan")), "not finite", id="NaN quantity"),
    pytest.param(
        _SensorReading(), "unknown state section 'sensors'", id="event of an unknown section"
    ),
]


@pytest.mark.parametrize(("event", "message"), REFUSED)
def test_events_that_do_not_fit_raise_and_change_nothing(event: Event, message: str) -> None:
    before = base()
    with pytest.raises(StateError, match=message):
        apply(before, event)
    assert before == base()


def test_ramping_placement_needs_a_ramp_set() -> None:
    with pytest.raises(StateError, match="ramp-up cpuset, which is not set"):
        apply(
            empty_state(SYNTH_16_2_4),
            ContainerAllocated(container("p", "c", RAMPING, ramp_up=True)),
        )


def test_apply_all_is_all_or_nothing_and_names_the_event() -> None:
    with pytest.raises(StateError, match=r"event 1 \(PodRemoved\)"):
        apply_all(base(), [PodRemoved("pod-a"), PodRemoved("pod-a")])


def test_reclaimed_in_reclaim_counts_for_no_shared_pool() -> None:
    reclaimed = container("pod-r", "app", InPool("reclaim"), qos=RECLAIMED_CORES, owner="reclaim")
    state = apply(base(), ContainerAllocated(reclaimed))
    assert state.cpu.shared_quantity_map() == {"share": 1}


def test_unknown_cpu_event_type_is_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Stray(CPUEvent):
        pass

    with pytest.raises(StateError, match="Stray is not an event of the CPU state"):
        apply(base(), Stray())


def test_nil_cpusets_survive_apply() -> None:
    nil = container("p", "c", OwnCPUs(CPUSet.uninitialized(), CPUSet.uninitialized()))
    state = apply(base(), ContainerAllocated(nil))
    info = state.cpu.allocation_info("p", "c")
    assert info is not None and not info.allocation_result.is_initialized


@pytest.mark.parametrize(
    ("event", "target"),
    [
        pytest.param(BASE[4], ("pod-a", "app"), id="allocation names its container"),
        pytest.param(RampUpFinished("p", "c"), ("p", "c"), id="container event"),
        pytest.param(PodRemoved("p"), ("p", ""), id="pod event"),
        pytest.param(PoolSet("share", cpus("1")), None, id="pool event"),
    ],
)
def test_event_target(event: Event, target: tuple[str, str] | None) -> None:
    assert event_target(event) == target
