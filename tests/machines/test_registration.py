"""Plugin registration through kubelet's plugin watcher (wire.md §8.1, §8.3)."""

from __future__ import annotations

import pytest

from machines import registration
from machines.lifecycle import InvalidTransition, Step
from tests.machines.checks import Model, assert_every_illegal_trigger_raises, walk

LC = registration.lifecycle()
READY = {"actors_ready": True}


@pytest.mark.parametrize(
    ("triggers", "final"),
    [
        pytest.param(
            ["serve", "registration_accepted", "stop"], "deregistered",
            id="serve, registered by kubelet, deregistered on stop",
        ),
        pytest.param(
            ["serve", "registration_rejected", "socket_recreated", "registration_accepted"],
            "registered",
            id="plugin_registered=false: the socket is re-created so kubelet retries",
        ),
        pytest.param(
            ["serve", "registration_accepted", "registration_accepted"], "registered",
            id="a restarted kubelet registers the socket again",
        ),
        pytest.param(
            ["serve", "registration_accepted", "serving_failed", "socket_recreated"], "serving",
            id="a server that failed is restarted on a new socket",
        ),
        pytest.param(["stop"], "deregistered", id="stop before serving"),
    ],
)  # fmt: skip
def test_legal_paths(triggers: list[str], final: str) -> None:
    assert walk(LC, triggers, READY) == (final, [])


def test_the_socket_waits_for_the_actors() -> None:
    model = Model("not_serving", {"actors_ready": False})
    assert LC.fire(model, "serve") is None
    assert model.state == "not_serving"


def test_a_rejection_names_the_socket_actions() -> None:
    step = LC.step("registered", "registration_rejected")
    assert step == Step(
        "registration_rejected", "registered", "recreating_socket", (),
        ("remove_socket", "create_socket"),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("state", "trigger"),
    [
        pytest.param("not_serving", "registration_accepted", id="no registration without a socket"),
        pytest.param("recreating_socket", "registration_accepted", id="nor while re-creating it"),
        pytest.param("deregistered", "serve", id="a stopped plugin does not serve again"),
        pytest.param("serving", "serve", id="serve twice"),
    ],
)
def test_illegal_trigger_raises_and_changes_nothing(state: str, trigger: str) -> None:
    model = Model(state, dict(READY))
    with pytest.raises(InvalidTransition):
        LC.fire(model, trigger)
    assert model.state == state


def test_every_unlisted_trigger_is_illegal() -> None:
    assert assert_every_illegal_trigger_raises(LC) > 10
