"""Driving the ramp-up machine from the policy (cpu-policy §9.6; machines/ramp_up.py).

The decisions commit exactly the events the machine's steps name; these tests check the
driver, that the table's event names are real event classes, and that each decision's
container events are those the machine names for its trigger.
"""

from __future__ import annotations

import dataclasses

import pytest

from machines import ramp_up as machine
from policy.cpu.allocation_listing import resources_allocation
from policy.cpu.ramp_steps import RampUpError, container_phase, emit_step, fire
from policy.cpu.remove import remove_container, remove_pod
from policy.cpu.txn import Txn
from policy.state import events as event_module
from policy.state.entries import RAMPING, InPool, OwnCPUs
from policy.state.events import CPU_EVENT_TYPES, PodRemoved, RampUpFinished, TimestampReset
from tests.policy.pool_fixtures import (
    CTX,
    T0,
    decide,
    dedicated,
    entry_of,
    fresh_state,
    reclaimed,
    shared,
    with_events,
)
from tests.topologies import cpus


def test_every_event_the_table_names_is_an_event_class() -> None:
    named = {name for record in machine.TABLE.transitions for name in record.events}
    classes = {cls.__name__ for cls in CPU_EVENT_TYPES}
    assert named <= classes, sorted(named - classes)
    assert all(isinstance(getattr(event_module, name), type) for name in named)


@pytest.mark.parametrize(
    ("event", "phase"),
    [
        pytest.param(shared("p", RAMPING, ramp_up=True), "ramping", id="flagged shared ramps"),
        pytest.param(shared("p", InPool("share")), "pooled", id="shared in its pool"),
        pytest.param(shared("p", OwnCPUs.of(cpus("4"))), "pooled", id="shared, ramp-up over"),
        pytest.param(
            dedicated("p", "1,8-9", ramp_up=True), "dedicated_ramping", id="new dedicated"
        ),
        pytest.param(dedicated("p", "1,8-9"), "dedicated", id="settled dedicated"),
        pytest.param(reclaimed("p"), "reclaimed", id="reclaimed"),
    ],
)
def test_container_phase(event: object, phase: str) -> None:
    assert container_phase(event.entry) == phase  # type: ignore[attr-defined]


def test_a_level_without_lifecycle_has_no_phase() -> None:
    odd = dataclasses.replace(reclaimed("p").entry, qos_level="system_cores")
    with pytest.raises(RampUpError, match="no ramp-up lifecycle"):
        container_phase(odd)


def test_fire_returns_the_step_or_none_when_guards_refuse() -> None:
    step = fire("ramping", "finish_ramp_up", {"transition_period_passed": True})
    assert step is not None and (step.dest, step.events) == ("pooled", ("RampUpFinished",))
    assert fire("ramping", "finish_ramp_up", {"transition_period_passed": False}) is None


@pytest.mark.parametrize(
    ("phase", "trigger", "guards", "message"),
    [
        pytest.param("reclaimed", "finish_ramp_up", {}, "cannot 'finish_ramp_up'", id="illegal"),
        pytest.param("ramping", "finish_ramp_up", {}, "needs guard answers", id="missing guard"),
        pytest.param("removed", "remove_pod", {}, "it is final", id="after removal"),
    ],
)
def test_fire_refuses(phase: str, trigger: str, guards: dict[str, bool], message: str) -> None:
    with pytest.raises(RampUpError, match=message):
        fire(phase, trigger, guards)


def test_emit_step_refuses_events_the_step_does_not_name() -> None:
    txn = Txn(with_events(fresh_state(), dedicated("pod-d", "1,8-9", ramp_up=True)))
    step = fire("dedicated_ramping", "repair_timestamp")
    assert step is not None
    refused = r"commits \['TimestampReset'\], not \['RampUpFinished'\]"
    with pytest.raises(RampUpError, match=refused):
        emit_step(txn, step, RampUpFinished("pod-d", "c"))
    assert txn.events == ()
    emit_step(txn, step, TimestampReset("pod-d", "c", "now"))
    assert len(txn) == 1


def _container_events(events: tuple[object, ...]) -> list[str]:
    names = {name for record in machine.TABLE.transitions for name in record.events}
    return [type(e).__name__ for e in events if type(e).__name__ in names]


@pytest.mark.parametrize(
    ("decision", "args", "phase", "trigger", "guards"),
    [
        pytest.param(
            resources_allocation, (T0 + 31,), "ramping", "finish_ramp_up",
            {"transition_period_passed": True}, id="GetResourcesAllocation ends ramp-up",
        ),
        pytest.param(remove_pod, ("pod-1",), "ramping", "remove_pod", {}, id="RemovePod"),
        pytest.param(
            remove_container, ("pod-1", "c"), "ramping", "remove_container", {},
            id="remove_container",
        ),
    ],
)  # fmt: skip
def test_decisions_commit_what_the_machine_names(
    decision: object, args: tuple[object, ...], phase: str, trigger: str, guards: dict[str, bool]
) -> None:
    state = fresh_state()
    pooled = state.cpu.pooled_cpus(CTX.reserved)
    state = with_events(state, shared("pod-1", state.cpu.ramp_placement(pooled), ramp_up=True))
    assert container_phase(entry_of(state, "pod-1")) == phase
    txn, _ = decide(state, decision, CTX, *args)  # type: ignore[arg-type]
    step = fire(phase, trigger, guards)
    assert step is not None
    assert _container_events(txn.events) == list(step.events)


def test_removing_a_pod_commits_one_pod_removed_for_all_its_containers() -> None:
    state = with_events(
        fresh_state(),
        dedicated("pod-d", "1,8-9"),
        dedicated("pod-d", "1,8-9", name="side", owner="", container_type="SIDECAR"),
    )
    txn, _ = decide(state, remove_pod, CTX, "pod-d")
    assert txn.events[0] == PodRemoved("pod-d")
    assert _container_events(txn.events) == ["PodRemoved"]
