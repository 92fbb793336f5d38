"""Container ramp-up (cpu-policy §9.6): legal paths, illegal triggers, many models, one machine."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machines import ramp_up
from machines.lifecycle import InvalidTransition
from tests.machines.checks import Model, assert_every_illegal_trigger_raises, walk

LC = ramp_up.lifecycle()
PENDING = {"pod_pending_or_unknown": True, "target_pool_missing": False, "numa_bound": False}
RUNNING = {"pod_pending_or_unknown": False, "target_pool_missing": False, "numa_bound": False}
NO_POOL = {"pod_pending_or_unknown": False, "target_pool_missing": True}
PERIOD_OVER = {"transition_period_passed": True}


@pytest.mark.parametrize(
    ("guards", "triggers", "final", "events"),
    [
        pytest.param(
            PENDING | PERIOD_OVER, ["allocate_shared", "finish_ramp_up"], "pooled",
            ["ContainerAllocated", "RampUpFinished"],
            id="a shared container of a pending pod ramps up, then joins its pool",
        ),
        pytest.param(
            NO_POOL, ["allocate_shared"], "ramping", ["ContainerAllocated"],
            id="a running pod whose pool does not exist yet ramps up too",
        ),
        pytest.param(
            RUNNING, ["allocate_shared"], "pooled", ["ContainerAllocated"],
            id="a shared container of a running pod goes straight to its pool",
        ),
        pytest.param(
            PENDING, ["allocate_shared", "allocate_shared"], "ramping",
            ["ContainerAllocated", "ContainerAllocated"],
            id="re-allocating a ramping container keeps it ramping",
        ),
        pytest.param(
            RUNNING, ["allocate_shared", "repair_timestamp"], "ramping",
            ["ContainerAllocated", "ContainerReRamped"],
            id="an unreadable timestamp re-ramps a pooled container",
        ),
        pytest.param(
            RUNNING | {"numa_bound": True}, ["allocate_shared", "repair_timestamp"], "pooled",
            ["ContainerAllocated", "TimestampReset"],
            id="at v0.5.47 an unreadable timestamp of a NUMA-bound shared container is only reset",
        ),
        pytest.param(
            PENDING | PERIOD_OVER,
            ["allocate_shared", "repair_timestamp", "finish_ramp_up", "remove_pod"], "removed",
            ["ContainerAllocated", "ContainerReRamped", "RampUpFinished", "PodRemoved"],
            id="a re-ramped container finishes ramp-up again and is removed with its pod",
        ),
        pytest.param(
            {}, ["allocate_dedicated", "apply_advisor_result"], "dedicated",
            ["ContainerAllocated", "RampUpFinished"],
            id="the first advisor result ends a dedicated container's ramp-up",
        ),
        pytest.param(
            PERIOD_OVER, ["allocate_dedicated", "finish_ramp_up"],
            "dedicated", ["ContainerAllocated", "RampUpFinished"],
            id="the end of the period ends a dedicated container's ramp-up",
        ),
        pytest.param(
            {}, ["allocate_dedicated", "apply_advisor_result", "allocate_dedicated"],
            "dedicated_ramping", ["ContainerAllocated", "RampUpFinished", "ContainerAllocated"],
            id="a dedicated container re-allocated with a larger request ramps again",
        ),
        pytest.param(
            {}, ["allocate_dedicated_sidecar", "allocate_dedicated_sidecar", "remove_pod"],
            "removed", ["ContainerAllocated", "ContainerAllocated", "PodRemoved"],
            id="a dedicated sidecar mirrors its main container without ramp-up",
        ),
        pytest.param(
            {}, ["allocate_dedicated", "repair_timestamp"], "dedicated_ramping",
            ["ContainerAllocated", "TimestampReset"],
            id="a dedicated container's bad timestamp is reset, it keeps ramping",
        ),
        pytest.param(
            {}, ["allocate_reclaimed", "allocate_reclaimed", "remove_container"], "removed",
            ["ContainerAllocated", "ContainerAllocated", "ContainerRemoved"],
            id="a reclaimed container is placed directly and removed alone",
        ),
    ],
)  # fmt: skip
def test_legal_paths(
    guards: dict[str, bool], triggers: list[str], final: str, events: list[str]
) -> None:
    assert walk(LC, triggers, guards) == (final, events)


@pytest.mark.parametrize("state", ramp_up.LIVE)
@pytest.mark.parametrize(
    ("trigger", "event"), [("remove_pod", "PodRemoved"), ("remove_container", "ContainerRemoved")]
)
def test_removal_ends_every_state(state: str, trigger: str, event: str) -> None:
    assert walk(LC, [trigger], {}, start=state) == ("removed", [event])


@pytest.mark.parametrize("state", ["ramping", "dedicated_ramping"])
def test_ramp_up_does_not_end_before_the_transition_period(state: str) -> None:
    model = Model(state, {"transition_period_passed": False})
    assert LC.fire(model, "finish_ramp_up") is None
    assert model.state == state


@pytest.mark.parametrize(
    ("state", "trigger"),
    [
        pytest.param("pooled", "finish_ramp_up", id="a pooled container has no ramp-up to end"),
        pytest.param("dedicated", "apply_advisor_result", id="only the first result counts"),
        pytest.param("ramping", "apply_advisor_result", id="results do not end shared ramp-up"),
        pytest.param("pooled", "allocate_dedicated", id="a shared container cannot turn dedicated"),
        pytest.param("dedicated_ramping", "allocate_dedicated_sidecar", id="a sidecar never ramps"),
        pytest.param("removed", "allocate_shared", id="a removed container stays removed"),
        pytest.param("new", "remove_pod", id="nothing to remove before allocation"),
        pytest.param("reclaimed", "repair_timestamps", id="an unknown trigger"),
    ],
)  # fmt: skip
def test_illegal_trigger_raises_and_changes_nothing(state: str, trigger: str) -> None:
    model = Model(state, {"transition_period_passed": True})
    with pytest.raises(InvalidTransition, match=f"cannot '{trigger}' in state '{state}'"):
        LC.fire(model, trigger)
    assert model.state == state


def test_every_unlisted_trigger_is_illegal() -> None:
    assert assert_every_illegal_trigger_raises(LC) > 20


def test_the_lifecycle_is_built_once_and_shared() -> None:
    assert ramp_up.lifecycle() is ramp_up.lifecycle()


def test_many_containers_share_one_definition() -> None:
    """5,000 containers, each on its own path, one Machine; none sees another's state."""
    rng = random.Random(7)
    containers = [
        Model("new", {"pod_pending_or_unknown": rng.random() < 0.5,
                      "target_pool_missing": False, "transition_period_passed": True})
        for _ in range(5000)
    ]  # fmt: skip
    for c in containers:
        LC.fire(c, "allocate_shared")
    for c in containers[::2]:
        if c.state == "ramping":
            LC.fire(c, "finish_ramp_up")
    for c in containers[::3]:
        LC.fire(c, "remove_pod")
    for i, c in enumerate(containers):
        want = (
            "removed" if i % 3 == 0
            else "pooled" if (i % 2 == 0 or not c.answers["pod_pending_or_unknown"])
            else "ramping"
        )  # fmt: skip
        assert c.state == want, i
    # fire() never registers a model: the shared Machine holds none of them.
    assert LC.machine.models == []


def test_registered_models_get_trigger_methods_on_the_shared_machine() -> None:
    lc = ramp_up.lifecycle()
    a, b = Model("new", RUNNING), Model("new", PENDING)
    lc.add(a)
    lc.add(b, state="new")
    try:
        a.allocate_shared()  # type: ignore[operator]
        b.allocate_shared()  # type: ignore[operator]
        assert (a.state, b.state) == ("pooled", "ramping")
        with pytest.raises(InvalidTransition):
            lc.fire(a, "apply_advisor_result")
        assert a.state == "pooled"
    finally:
        lc.remove(a)
        lc.remove(b)
    assert lc.machine.models == []


def test_a_restored_model_starts_where_it_was() -> None:
    lc = ramp_up.lifecycle()
    m = Model("new")
    lc.add(m, state="dedicated_ramping")
    try:
        assert m.state == "dedicated_ramping"
    finally:
        lc.remove(m)
    with pytest.raises(ValueError, match="'bogus' is not a state"):
        lc.add(Model("new"), state="bogus")


@settings(max_examples=60, deadline=None)
@given(
    start=st.sampled_from(ramp_up.TABLE.states),
    triggers=st.lists(st.sampled_from(ramp_up.TABLE.triggers), max_size=12),
    answers=st.fixed_dictionaries({g: st.booleans() for g in ramp_up.TABLE.guards}),
)
def test_the_transitions_machine_agrees_with_the_table(
    start: str, triggers: list[str], answers: dict[str, bool]
) -> None:
    """An oracle that reads the table directly predicts every step the built machine takes."""
    model = Model(start, answers)
    for trigger in triggers:
        candidates = ramp_up.TABLE.candidates(trigger, model.state)
        before = model.state
        if not candidates:
            with pytest.raises(InvalidTransition):
                LC.fire(model, trigger)
            assert model.state == before
            continue
        first = next(
            (r for r in candidates
             if all(answers[g] for g in r.conditions) and not any(answers[g] for g in r.unless)),
            None,
        )  # fmt: skip
        step = LC.fire(model, trigger)
        assert LC.can_fire(Model(before, answers), trigger) == (first is not None)
        if first is None:
            assert step is None and model.state == before
        else:
            assert step is not None
            assert (step.dest, step.events) == (first.dest, first.events)
            assert model.state == first.dest


def test_many_registered_models_share_one_machine() -> None:
    """The transitions way (add_model) also shares one Machine; each model keeps its own state."""

    @dataclasses.dataclass(eq=False)  # transitions finds registered models by ==
    class Container:
        state: str
        pod_pending_or_unknown: bool
        target_pool_missing: bool = False
        transition_period_passed: bool = True

    lc = ramp_up.lifecycle()
    containers = [Container("new", pod_pending_or_unknown=i % 2 == 0) for i in range(500)]
    for c in containers:
        lc.add(c)
    try:
        assert len(lc.machine.models) == 500
        for c in containers:
            c.allocate_shared()  # type: ignore[attr-defined]
        assert [c.state for c in containers[:4]] == ["ramping", "pooled", "ramping", "pooled"]
        for c in containers[::2]:
            assert c.may_finish_ramp_up()  # type: ignore[attr-defined]
            c.finish_ramp_up()  # type: ignore[attr-defined]
        assert all(c.state == "pooled" for c in containers)
    finally:
        for c in containers:
            lc.remove(c)
    assert lc.machine.models == []
