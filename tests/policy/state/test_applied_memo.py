"""A decision's working state is given back to the StateStore's apply only for the very state
and events it came from; anything else is applied (policy.state.sections)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from policy.cpu.txn import Txn
from policy.errors import StateError
from policy.state.codec import encode_state
from policy.state.entries import RAMPING
from policy.state.events import ContainerAllocated, Event, PodRemoved, PoolSet
from policy.state.sections import State, apply, apply_all
from tests.policy.state.test_events import base
from tests.policy.state_fixtures import container, cpus

NEW = ContainerAllocated(container("pod-n", "app", RAMPING, ramp_up=True))
GONE = PodRemoved("pod-a")


def applied_one_by_one(state: State, events: tuple[Event, ...]) -> State:
    for event in events:
        state = apply(state, event)
    return state


def decided(state: State, events: tuple[Event, ...]) -> tuple[State, tuple[Event, ...]]:
    txn = Txn(state)
    for event in events:
        txn.emit(event)
    return txn.state, txn.events


CASES: list[tuple[str, Callable[[State, tuple[Event, ...]], tuple[State, tuple[Event, ...]]]]] = [
    ("the decision's own state and events", lambda s, e: (s, e)),
    ("equal but distinct events", lambda s, e: (s, tuple(copy.copy(ev) for ev in e))),
    ("the events but the last", lambda s, e: (s, e[:-1])),
    ("the events in another order", lambda s, e: (s, e[::-1])),
    ("an equal but distinct state", lambda s, e: (base(), e)),
]


@pytest.mark.parametrize(("ask", "how"), CASES, ids=[c[0] for c in CASES])
def test_apply_all_answers_what_applying_gives(
    ask: str, how: Callable[[State, tuple[Event, ...]], tuple[State, tuple[Event, ...]]]
) -> None:
    del ask
    start = base()
    working, events = decided(start, (NEW, GONE))
    state, asked = how(start, events)
    got = apply_all(state, asked)
    assert encode_state(got) == encode_state(applied_one_by_one(state, asked))
    if asked is events and state is start:
        assert got is working  # not worked out again


def test_events_that_do_not_fit_are_refused_after_a_decision_was_remembered() -> None:
    start = base()
    decided(start, (NEW,))
    with pytest.raises(StateError, match=r"event 1 \(PoolSet\)"):
        apply_all(start, (NEW, PoolSet("share", cpus("99"))))
