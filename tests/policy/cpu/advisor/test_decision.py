"""Advisor decisions: journaled refusals, coalescing, the request-based fallback, replay."""

from __future__ import annotations

from dataclasses import replace

from policy.cpu.advisor.decision import (
    SilenceCheck,
    apply_advice,
    fall_back_when_silent,
    response_cause,
    sizing_context,
)
from policy.cpu.advisor.response import AdvisorResponse
from policy.state.advisor_section import (
    AdvisorResponseApplied,
    AdvisorSizingResumed,
    AdvisorSizingSuspended,
)
from policy.state.codec import decode_event, decode_state, encode_event, encode_state
from policy.state.entries import InPool
from policy.state.events import PoolSet
from policy.state.sections import State, apply_all
from tests.policy.cpu.advisor.fixtures import SETTINGS, info, pool, response
from tests.policy.pool_fixtures import (
    CTX,
    cpus,
    entry_of,
    fresh_state,
    pools_of,
    reclaimed,
    shared,
    with_events,
)

BASE = fresh_state()
EXAMPLE = with_events(
    BASE,
    PoolSet("share", cpus("4-7")),
    shared("p1", InPool("share")),
    shared("p2", InPool("share")),
    reclaimed("p3"),
)
GOOD = response(pool("share", 6), pool("reserve", 2))
BAD = response(pool("share", 6))


def commit(state: State, events) -> State:
    """What the StateStore does, through the journal's encoding."""
    decoded = tuple(decode_event(encode_event(e)) for e in events)
    assert decoded == tuple(events)
    return apply_all(state, decoded)


def test_an_identical_applied_response_commits_nothing():
    first = apply_advice(EXAMPLE, GOOD, SETTINGS, 1.0)
    state = commit(EXAMPLE, first.events)
    assert first.events[-1] == AdvisorResponseApplied(GOOD.fingerprint())
    again = apply_advice(state, GOOD, SETTINGS, 2.0)
    assert again.events == () and again.reply.coalesced and again.reply.applied


def test_an_identical_refused_response_commits_nothing_but_still_fails():
    first = apply_advice(EXAMPLE, BAD, SETTINGS, 1.0)
    state = commit(EXAMPLE, first.events)
    again = apply_advice(state, BAD, SETTINGS, 2.0)
    assert again.events == () and again.reply.coalesced
    assert str(again.error) == str(first.error)


def test_the_same_response_is_journaled_again_once_the_state_changed():
    state = commit(EXAMPLE, apply_advice(EXAMPLE, GOOD, SETTINGS, 1.0).events)
    state = with_events(state, PoolSet("other", cpus("13")), shared("p4", InPool("other")))
    decision = apply_advice(state, GOOD, SETTINGS, 2.0)
    # p4's pool "other" is not in the response: refused now, so a new record.
    assert decision.events and not decision.reply.coalesced


def test_alternating_responses_are_each_journaled():
    state = EXAMPLE
    for resp in (GOOD, BAD, GOOD, BAD):
        decision = apply_advice(state, resp, SETTINGS, 0.0)
        assert decision.events, resp
        state = commit(state, decision.events)


def test_the_fallback_waits_for_the_silence_to_last():
    early = fall_back_when_silent(EXAMPLE, SilenceCheck(100.0), SETTINGS, 100.0 + 299.0)
    assert early.events == () and early.reply is False


def test_the_fallback_re_plans_by_requests_and_drops_the_advisors_pools():
    resp = response(
        pool("reserve", 2), pool("share", 4), pool("isolation0", 2),
        {"p1": {"c": info("isolation0", {})}},
    )  # fmt: skip
    state = commit(EXAMPLE, apply_advice(EXAMPLE, resp, SETTINGS, 0.0).events)
    assert entry_of(state, "p1").owner_pool_name == "isolation0"
    decision = fall_back_when_silent(state, SilenceCheck(0.0), SETTINGS, 300.0)
    assert decision.reply is True
    assert decision.events[-1] == AdvisorSizingSuspended(0.0, 300.0)
    after = commit(state, decision.events)
    assert after.advisor.is_sized_by_requests()
    assert "isolation0" not in pools_of(after)
    assert entry_of(after, "p1").placement == InPool("share")
    # By requests, with enable_reclaim off the surplus goes to share and reclaim keeps 4
    # (the values of checklist item 18).
    assert pools_of(after) == {"reclaim": "7-8,10,15", "reserve": "0,2", "share": "1,3-6,9,11-14"}
    # Once in force, the fallback does nothing more.
    assert fall_back_when_silent(after, SilenceCheck(0.0), SETTINGS, 900.0).events == ()
    # Pool-sizing decisions now run with the advisor off.
    advised = replace(CTX, advisor_enabled=True)
    assert sizing_context(after, advised).advisor_enabled is False
    assert sizing_context(state, advised).advisor_enabled is True


def test_the_first_applied_response_after_a_fallback_takes_over():
    state = commit(EXAMPLE, fall_back_when_silent(EXAMPLE, SilenceCheck(0.0), SETTINGS, 400).events)
    decision = apply_advice(state, GOOD, SETTINGS, 500.0)
    assert decision.reply.resumed
    assert decision.events[0] == AdvisorSizingResumed()
    after = commit(state, decision.events)
    assert not after.advisor.is_sized_by_requests()
    # A refused response does not take over.
    state2 = commit(state, apply_advice(state, BAD, SETTINGS, 500.0).events)
    assert state2.advisor.is_sized_by_requests()


def test_an_applied_response_recomputes_from_its_journaled_cause():
    decision = apply_advice(EXAMPLE, GOOD, SETTINGS, 7.0)
    cause = response_cause(GOOD, 7.0)
    rerun = apply_advice(EXAMPLE, AdvisorResponse.from_json(cause["response"]), SETTINGS, 7.0)
    assert rerun.events == decision.events


def test_the_advisor_section_survives_a_checkpoint():
    state = commit(EXAMPLE, apply_advice(EXAMPLE, BAD, SETTINGS, 0.0).events)
    assert decode_state(encode_state(state), CTX.topology) == state


def test_a_checkpoint_written_before_the_advisor_section_decodes_with_it_empty():
    data = encode_state(EXAMPLE)
    del data["sections"]["advisor"]
    assert decode_state(data, CTX.topology) == EXAMPLE


def test_replay_of_a_coalesced_sequence_equals_live():
    state, records = EXAMPLE, []
    for resp in (GOOD, GOOD, GOOD, BAD, BAD, GOOD, GOOD):
        decision = apply_advice(state, resp, SETTINGS, 0.0)
        if decision.events:
            records.append(decision.events)
        state = commit(state, decision.events)
    # GOOD once, BAD once, GOOD once: the repeats wrote nothing.
    assert len(records) == 3
    replayed = EXAMPLE
    for events in records:
        replayed = commit(replayed, events)
    assert replayed == state


def test_responses_that_differ_only_in_fresh_block_ids_coalesce():
    # sys-advisor names every block with a new UUID in every result.
    renamed = response(pool("share", 6, "uuid-2"), pool("reserve", 2, "uuid-1"))
    assert renamed.fingerprint() == GOOD.fingerprint()
    assert response(pool("share", 5), pool("reserve", 2)).fingerprint() != GOOD.fingerprint()
    shared_block = response(
        pool("share", 6, "x"), pool("reserve", 2), {"other": {"": info("other", {-1: [(6, "x")]})}}
    )
    apart = response(
        pool("share", 6, "x"), pool("reserve", 2), {"other": {"": info("other", {-1: [(6, "y")]})}}
    )
    assert shared_block.fingerprint() != apart.fingerprint()  # sharing is content
    state = commit(EXAMPLE, apply_advice(EXAMPLE, GOOD, SETTINGS, 0.0).events)
    assert apply_advice(state, renamed, SETTINGS, 1.0).events == ()
