"""The sys-advisor invariants (qrmd.sim.dst.advisor_invariants) and the advisor's lagging and
garbage modes that feed them: each invariant passes what the spec allows and names what it
does not."""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from actors.advisor_messages import StreamEnded, StreamReceived
from journal.records import Record
from policy.cpu.advisor.checkpoint import checkpoint_entries
from policy.cpu.advisor.decision import AdvisorSettings, apply_advice, response_cause
from policy.cpu.advisor.response import AdvisorResponse
from policy.state.advisor_section import AdvisorResponseRefused, AdvisorSizingResumed
from policy.state.codec import encode_event
from policy.state.events import PoolSet
from policy.state.sections import State, apply_all
from qrmd.sim.advisor.model import LoadModel, plan_response
from qrmd.sim.advisor.model import SimNode as AdvisorView
from qrmd.sim.dst.advisor import SimAdvisor, _numbered
from qrmd.sim.dst.advisor_invariants import (
    _as_said,
    _stream_of,
    advice_in_stream_order,
    refused_advice_changes_nothing,
)
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.invariants import World, recovered_view
from qrmd.sim.dst.simulation import Simulation, run

VIEW = AdvisorView({0: 4, 1: 4, 2: 4, 3: 4})


@pytest.fixture(scope="module")
def booted() -> tuple[Simulation, State]:
    """A short fault-free run with sys-advisor: pools made, a few pods pushed."""
    sim = Simulation(1, faults=(), cpu_advisor=True)
    assert not sim.run(80).failures
    _, state, _ = recovered_view(sim.disk, sim.node)
    return sim, state


def plan(sim: Simulation, state: State, stream: int = 1) -> AdvisorResponse:
    raw = plan_response(VIEW, checkpoint_entries(state.cpu), sim.advisor.containers, LoadModel())
    return _numbered(raw, stream)


def record(seq: int, response: AdvisorResponse, *events: Any) -> Record:
    cause = response_cause(response, 0.0)
    return Record(seq, 0.0, float(seq), cause, [encode_event(e) for e in events])


def world_with(base: State, records: list[Record], advisor: SimAdvisor | None) -> World:
    # The advisor invariants read the journal and the advisor only.
    world = World(None, None, None, None, advisor=advisor)  # type: ignore[arg-type]
    world.journal = (base, records)
    return world


def test_a_plan_names_its_stream_and_keeps_its_fingerprint_across_streams(
    booted: tuple[Simulation, State],
) -> None:
    sim, state = booted
    first, third = plan(sim, state, 1), plan(sim, state, 3)
    assert first.fingerprint() == third.fingerprint()
    assert _stream_of(response_cause(first, 0.0)) == 1
    assert _stream_of(response_cause(third, 0.0)) == 3
    assert _stream_of(response_cause(AdvisorResponse({}), 0.0)) is None


def test_a_lagging_reader_tells_its_own_link_after_the_next_stream_spoke(
    booted: tuple[Simulation, State],
) -> None:
    _, state = booted
    advisor = SimAdvisor(Random(0), VirtualClock(), {0: 4, 1: 4, 2: 4, 3: 4}, lambda: state)
    advisor.mode = "lagging"
    old: list[Any] = []
    new: list[Any] = []
    advisor.list_and_watch()
    advisor.speak(1, old.append)
    assert [type(m) for m in old] == [StreamEnded] and advisor.stream is None
    advisor.list_and_watch()
    advisor.speak(2, new.append)
    assert [(type(m), m.attempt) for m in new] == [(StreamReceived, 2)]
    # The late response goes to the link that opened the first stream, under its attempt.
    assert [(type(m), m.attempt) for m in old] == [(StreamEnded, 1), (StreamReceived, 1)]


def test_garbage_is_recorded_as_invalid(booted: tuple[Simulation, State]) -> None:
    _, state = booted
    advisor = SimAdvisor(Random(0), VirtualClock(), {0: 4, 1: 4, 2: 4, 3: 4}, lambda: state)
    advisor.mode = "garbage"
    advisor.list_and_watch()
    for attempt in range(20):
        advisor.speak(attempt, lambda message: None)
        if advisor.stream is None:
            advisor.list_and_watch()
    assert any(sent.invalid for sent in advisor.sent.values())


def test_a_refusal_record_with_other_events_is_named(booted: tuple[Simulation, State]) -> None:
    sim, state = booted
    response = plan(sim, state)
    refused = AdvisorResponseRefused(response.fingerprint(), "apply", "no")
    clean = world_with(state, [record(1, response, refused)], sim.advisor)
    assert refused_advice_changes_nothing(clean) == []
    dirty = world_with(state, [record(1, response, AdvisorSizingResumed(), refused)], sim.advisor)
    assert refused_advice_changes_nothing(dirty) == [
        f"record 1 refuses response {response.fingerprint()[:12]} but also commits "
        "AdvisorSizingResumed"
    ]


def test_a_response_of_an_older_stream_decided_later_is_named(
    booted: tuple[Simulation, State],
) -> None:
    sim, state = booted
    newer, older = plan(sim, state, 4), plan(sim, state, 2)
    events = [AdvisorResponseRefused(newer.fingerprint(), "validate", "no")]
    world = world_with(state, [record(1, newer, *events), record(2, older, *events)], sim.advisor)
    assert advice_in_stream_order(world) == [
        "record 2 refuses a response of stream 2 after one of stream 4 was decided"
    ]


def applied(sim: Simulation, state: State) -> tuple[AdvisorResponse, State]:
    response = plan(sim, state)
    decision = apply_advice(state, response, AdvisorSettings(sim.ctx), 0.0)
    assert decision.error is None
    return response, apply_all(state, decision.events)


def test_an_applied_response_holds_as_said(booted: tuple[Simulation, State]) -> None:
    sim, state = booted
    response, after = applied(sim, state)
    assert _as_said(response, state, after) == []


@pytest.mark.parametrize(
    ("pool", "found"),
    [
        pytest.param("share", "share no block but share CPUs", id="two pools on one CPU"),
        pytest.param("reserve", "the reserve moved", id="a reserve that moved"),
        pytest.param("stray", "stays although the response leaves it out", id="a pool left in"),
    ],
)
def test_an_applied_response_that_does_not_hold_as_said_is_named(
    booted: tuple[Simulation, State], pool: str, found: str
) -> None:
    sim, state = booted
    response, after = applied(sim, state)
    reclaim = after.cpu.pool_cpus("reclaim")
    assert reclaim is not None
    broken = apply_all(after, [PoolSet(pool, reclaim)])  # the pool set onto reclaim's CPUs
    assert any(found in message for message in _as_said(response, state, broken))


def test_a_corruption_that_finds_nothing_to_corrupt_is_no_garbage() -> None:
    # Seed 183 once sent, in garbage mode, a "drop a dedicated container" corruption on a
    # node with none: the plan went out unchanged, was applied, and was taken for garbage.
    assert not run(183, 150).failures
