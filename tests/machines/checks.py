"""Shared checks for the machine tests: walk trigger paths, prove illegal ones change nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from machines.lifecycle import InvalidTransition, Lifecycle


@dataclass
class Model:
    """A plain model: a state and guard answers the test sets as attributes."""

    state: str
    answers: dict[str, bool] = field(default_factory=dict)

    def __getattr__(self, name: str) -> bool:
        answers = self.__dict__.get("answers", {})
        if name in answers:
            return answers[name]
        raise AttributeError(name)


def walk(
    lifecycle: Lifecycle,
    triggers: Sequence[str],
    guards: Mapping[str, bool],
    start: str | None = None,
) -> tuple[str, list[str]]:
    """Fire ``triggers`` in order on one model; return the final state and the events named.

    Every trigger must be taken (a refusal by the guards fails the test), and the pure
    :meth:`Lifecycle.step` must agree with :meth:`Lifecycle.fire` at every step.
    """
    model = Model(start or lifecycle.table.initial, dict(guards))
    events: list[str] = []
    for trigger in triggers:
        source = model.state
        pure = lifecycle.step(
            source, trigger, {g: guards.get(g, False) for g in _needed(lifecycle, trigger, source)}
        )
        step = lifecycle.fire(model, trigger)
        assert step is not None, f"{trigger!r} refused in {source!r} with {dict(guards)}"
        assert step == pure
        assert model.state == step.dest
        events.extend(step.events)
    return model.state, events


def _needed(lifecycle: Lifecycle, trigger: str, state: str) -> list[str]:
    return [g for r in lifecycle.table.candidates(trigger, state) for g in r.guards]


def assert_every_illegal_trigger_raises(lifecycle: Lifecycle) -> int:
    """Every (state, trigger) pair the table does not list raises and leaves the state alone.

    Returns:
        How many illegal pairs were checked (so a test can insist there were some).
    """
    table = lifecycle.table
    checked = 0
    for state in table.states:
        for trigger in table.triggers:
            if table.candidates(trigger, state):
                continue
            model = Model(state, {g: True for g in table.guards})
            with pytest.raises(InvalidTransition) as caught:
                lifecycle.fire(model, trigger)
            assert caught.value.state == state and caught.value.trigger == trigger
            assert model.state == state
            with pytest.raises(InvalidTransition):
                lifecycle.step(state, trigger, {g: True for g in table.guards})
            checked += 1
    return checked
