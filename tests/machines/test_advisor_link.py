"""Advisor link (cpu-policy §11.2): dial, sync, watch, back off with the reset rule."""

from __future__ import annotations

import pytest

from machines import advisor_link
from machines.lifecycle import InvalidTransition, Step
from tests.machines.checks import Model, assert_every_illegal_trigger_raises, walk

LC = advisor_link.lifecycle()
ON = {"advisor_enabled": True, "backoff_reset_due": False}


@pytest.mark.parametrize(
    ("guards", "triggers", "final"),
    [
        pytest.param(
            ON, ["start", "connected", "synced", "receive_result", "receive_result"], "watching",
            id="dial, push every container, then watch results",
        ),
        pytest.param(
            ON, ["start", "connected", "synced", "stream_failed", "retry", "connected"], "syncing",
            id="a broken stream backs off, then dials and pushes state again",
        ),
        pytest.param(
            ON, ["start", "dial_failed", "retry", "dial_failed"], "backing_off",
            id="a failed dial backs off again",
        ),
        pytest.param(
            ON, ["start", "connected", "push_failed", "stop"], "disabled",
            id="a failed push backs off; stop ends the loop",
        ),
        pytest.param(
            ON, ["start", "connected", "synced", "stop", "start"], "dialing",
            id="a stopped link can be started again",
        ),
    ],
)  # fmt: skip
def test_legal_paths(guards: dict[str, bool], triggers: list[str], final: str) -> None:
    state, events = walk(LC, triggers, guards)
    assert state == final
    assert events == [], "the link holds no persistent state"


def test_a_disabled_advisor_keeps_the_link_disabled() -> None:
    model = Model("disabled", {"advisor_enabled": False})
    assert LC.fire(model, "start") is None
    assert model.state == "disabled"


@pytest.mark.parametrize(
    ("reset_due", "action"),
    [
        pytest.param(
            True, "reset_backoff", id="more than 2 min since the last back-off: 0.8 s again"
        ),
        pytest.param(False, "double_backoff", id="otherwise the wait doubles, up to 30 s"),
    ],
)
@pytest.mark.parametrize(
    ("state", "trigger"),
    [
        ("dialing", "dial_failed"),
        ("syncing", "push_failed"),
        ("watching", "stream_failed"),
        ("watching", "advisor_sick"),
    ],
)
def test_every_failure_applies_the_backoff_reset_rule(
    state: str, trigger: str, reset_due: bool, action: str
) -> None:
    step = LC.step(state, trigger, {"backoff_reset_due": reset_due})
    assert step == Step(trigger, state, "backing_off", (), (action,))


@pytest.mark.parametrize(
    ("state", "trigger"),
    [
        pytest.param("dialing", "receive_result", id="no result before the stream is open"),
        pytest.param("syncing", "synced_twice", id="an unknown trigger"),
        pytest.param("backing_off", "connected", id="no dial while backing off"),
        pytest.param("watching", "start", id="start twice"),
        pytest.param("disabled", "stop", id="stop when not started"),
        pytest.param("dialing", "synced", id="watch before the containers are pushed"),
    ],
)
def test_illegal_trigger_raises_and_changes_nothing(state: str, trigger: str) -> None:
    model = Model(state, {"advisor_enabled": True, "backoff_reset_due": True})
    with pytest.raises(InvalidTransition):
        LC.fire(model, trigger)
    assert model.state == state


def test_every_unlisted_trigger_is_illegal() -> None:
    assert assert_every_illegal_trigger_raises(LC) > 20


def test_a_long_lived_link_can_be_registered() -> None:
    link = Model("disabled", dict(ON))
    LC.add(link)
    try:
        link.start()  # type: ignore[operator]
        assert link.may_connected()  # type: ignore[operator]
        assert not link.may_synced()  # type: ignore[operator]
        with pytest.raises(InvalidTransition):
            LC.fire(link, "synced")
        assert link.state == "dialing"
    finally:
        LC.remove(link)
