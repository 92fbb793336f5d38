"""The balancer's façade (policy.balance.decide): each step's events, reply and effects, the
round machine it fires, and its "taken" events applying as the section's own transitions
(memory-balancer §6.2, §7.11, §8, §9.1, O8, O10)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machines import balance_round as machine
from policy.balance import (
    BalanceError,
    BalancerState,
    BalanceStatus,
    MissingSample,
    NumaMetrics,
    RoundInputs,
    RoundResult,
    run_round,
    take_advice,
    take_eviction,
)
from policy.balance.decide import (
    AdviceRequest,
    EvictionRequest,
    MigrateMemory,
    balance_round,
    get_advices,
    get_evict_pods,
    round_reads_pods,
    round_without_pods,
    skip_round,
    unreadable_round,
)
from policy.balance.events import (
    BalanceAdviceTaken,
    BalanceEvictionTaken,
    BalanceRoundFailed,
    BalanceRoundRecorded,
    apply_balance_event,
)
from tests.policy.balance.examples import (
    EX2_ADVICE,
    EX2_B,
    EX2_L,
    EX2_PODS,
    NOW,
    GiB,
    R,
    make_inputs,
)

ACTIVE = tuple(p.uid for p in EX2_PODS)
EX2 = make_inputs(EX2_L, EX2_B, EX2_PODS)
QUIET = make_inputs([40, 30, 30, 20], EX2_B, EX2_PODS)
EVICT_ONLY = make_inputs(
    [90], [50], [R("r1", {0: GiB})], table={0: [(0, 10)]}, pools={"reclaim": (0,)}
)
MISSING_METRIC = replace(
    EX2,
    numa_metrics={**EX2.numa_metrics, 3: NumaMetrics(20.0, MissingSample())},
)
NOTHING_TO_MOVE = make_inputs(EX2_L, EX2_B, ())


def applied(section: BalancerState, events: tuple[object, ...]) -> BalancerState:
    for event in events:
        section = apply_balance_event(section, event)  # type: ignore[arg-type]
    return section


def emitted(inputs: RoundInputs = EX2) -> BalancerState:
    """The section after example 2's round at NOW was stored and its advice emitted."""
    section = applied(BalancerState(), balance_round(BalancerState(), inputs).events)
    return applied(section, get_advices(section, AdviceRequest(NOW, from_tick=True)).events)


@pytest.mark.parametrize(
    ("inputs", "result", "state", "event"),
    [
        pytest.param(EX2, RoundResult.STORED, machine.PREPARE_SUCCESS, BalanceRoundRecorded,
                     id="pressure with pods to move is stored as prepare success"),
        pytest.param(EVICT_ONLY, RoundResult.STORED, machine.PREPARE_SUCCESS,
                     BalanceRoundRecorded, id="a pod to evict alone is a success too"),
        pytest.param(QUIET, RoundResult.STORED, machine.NO_BALANCE, BalanceRoundRecorded,
                     id="no pressure is stored as no balance"),
        pytest.param(NOTHING_TO_MOVE, RoundResult.STORED, machine.PREPARE_FAILED,
                     BalanceRoundRecorded, id="pressure with nothing to move is stored failed"),
        pytest.param(MISSING_METRIC, RoundResult.FAILED, machine.DISCARDED, BalanceRoundFailed,
                     id="a missing metric discards the round and journals it"),
    ],
)  # fmt: skip
def test_a_round_ends_where_the_machine_says_with_one_event_holding_its_inputs(
    inputs: RoundInputs, result: RoundResult, state: str, event: type
) -> None:
    decision = balance_round(BalancerState(), inputs)
    assert decision.reply.result is result and decision.reply.state == state
    assert decision.reply.window == machine.OPEN
    (committed,) = decision.events
    assert type(committed) is event
    assert committed.inputs == inputs.to_json()  # type: ignore[attr-defined]
    assert decision.effects == () and decision.error is None


def test_a_failed_round_keeps_the_stored_record_and_names_its_reason() -> None:
    """O8: the failed record is for the log and the metric; ``current`` is kept."""
    section = emitted()
    later = replace(MISSING_METRIC, now=NOW + 30, last=section.last)
    decision = balance_round(section, later)
    assert decision.reply.error == (
        "failed to get numa metric, metric name: mem.bandwidth.numa, numa id: 3, err: no sample"
    )
    assert decision.reply.record is not None
    assert decision.reply.record.status is BalanceStatus.PREPARE_FAILED
    assert applied(section, decision.events) == section
    assert decision.reply.window == machine.PING_PONG_WINDOW


def test_no_round_is_skipped_before_any_advice_was_emitted() -> None:
    assert skip_round(BalancerState(), NOW) is None
    # An eviction-only record has no advice, so it starts no cool-down (O9).
    section = applied(BalancerState(), balance_round(BalancerState(), EVICT_ONLY).events)
    assert skip_round(section, NOW + 1) is None


def test_a_round_on_another_last_emitted_round_is_refused() -> None:
    section = emitted()
    with pytest.raises(BalanceError, match="last emitted round"):
        balance_round(section, replace(EX2, now=NOW + 30))


@pytest.mark.parametrize(
    ("inputs", "reads"),
    [
        pytest.param(replace(EX2, pods=(), pools={}), True, id="pressure needs the pods"),
        pytest.param(replace(QUIET, pods=(), pools={}), False, id="no pressure needs none"),
        pytest.param(replace(MISSING_METRIC, pods=(), pools={}), False,
                     id="a round failed on its metrics needs none"),
    ],
)  # fmt: skip
def test_pods_are_read_only_when_they_can_change_the_round(
    inputs: RoundInputs, reads: bool
) -> None:
    assert round_reads_pods(BalancerState(), inputs) is reads
    if not reads:
        with_pods = replace(inputs, pods=EX2.pods, pools=EX2.pools)
        assert balance_round(BalancerState(), inputs).reply.record == (
            balance_round(BalancerState(), with_pods).reply.record
        ), "the pods could not have changed it"


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param(replace(EX2, pods=(), pools={}), id="pressure: read the pods"),
        pytest.param(replace(QUIET, pods=(), pools={}), id="no pressure"),
        pytest.param(replace(MISSING_METRIC, pods=(), pools={}), id="a missing metric"),
    ],
)
def test_a_round_decided_without_pods_is_the_balance_round_on_the_same_inputs(
    inputs: RoundInputs,
) -> None:
    """The one plan that says the pods are not needed is the round's decision, the same one
    a re-run of its journaled inputs makes."""
    decision = round_without_pods(BalancerState(), inputs)
    assert (decision is None) is round_reads_pods(BalancerState(), inputs)
    if decision is not None:
        assert decision == balance_round(BalancerState(), inputs)


def test_a_round_whose_inputs_cannot_be_read_fails_with_its_time_only() -> None:
    decision = unreadable_round(BalancerState(), NOW, "the state store is gone")
    reason = "cannot read the round's inputs: the state store is gone"
    assert decision.events == (BalanceRoundFailed({"now": NOW}, reason),)
    assert decision.reply.result is RoundResult.FAILED and decision.reply.error == reason
    assert decision.reply.state == machine.DISCARDED
    assert decision.reply.record is not None and decision.reply.record.detect_time == NOW


def test_the_tick_takes_the_advice_once_with_the_migration_as_its_effect() -> None:
    section = applied(BalancerState(), balance_round(BalancerState(), EX2).events)
    assert section.current is not None
    decision = get_advices(section, AdviceRequest(NOW, from_tick=True))
    assert decision.reply is not None and decision.reply.to_json_text() == EX2_ADVICE
    assert decision.events == (BalanceAdviceTaken(section.current.detect_time),)
    assert decision.effects == (MigrateMemory(decision.reply),)
    after = applied(section, decision.events)
    assert after == take_advice(section)[0], "the event applies as the section's transition"
    again = get_advices(after, AdviceRequest(NOW + 1, from_tick=True))
    assert again.events == () and again.reply is None and again.effects == ()


def test_an_external_get_advices_is_handed_the_advice_with_nothing_to_carry_out() -> None:
    section = applied(BalancerState(), balance_round(BalancerState(), EX2).events)
    decision = get_advices(section, AdviceRequest(NOW, from_tick=False))
    assert decision.reply is not None and decision.effects == ()
    assert [type(e) for e in decision.events] == [BalanceAdviceTaken]


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param(EVICT_ONLY, id="an eviction-only record has no advice"),
        pytest.param(QUIET, id="a record without balance has no advice"),
        pytest.param(NOTHING_TO_MOVE, id="a prepare-failed record has no advice"),
    ],
)
def test_records_without_an_advice_take_nothing(inputs: RoundInputs) -> None:
    section = applied(BalancerState(), balance_round(BalancerState(), inputs).events)
    decision = get_advices(section, AdviceRequest(NOW, from_tick=True))
    assert decision.events == () and decision.reply is None and decision.effects == ()


def test_nothing_is_taken_before_any_round_was_stored() -> None:
    assert get_advices(BalancerState(), AdviceRequest(NOW, from_tick=True)).events == ()
    decision = get_evict_pods(BalancerState(), EvictionRequest(ACTIVE, NOW))
    assert decision.events == () and decision.reply == ()


def test_the_eviction_is_offered_once_and_consumed_even_without_a_match() -> None:
    """§9.1 step 3, O10."""
    section = emitted()
    assert section.current is not None
    nobody = get_evict_pods(section, EvictionRequest(("someone-else",), NOW))
    assert nobody.reply == () and nobody.events == (BalanceEvictionTaken(NOW),)
    after = applied(section, nobody.events)
    assert after == take_eviction(section, ("someone-else",))[0]
    assert after.last == after.current, "the flag shows through last (§6.1)"
    assert get_evict_pods(after, EvictionRequest(ACTIVE, NOW)).events == ()

    offered = get_evict_pods(section, EvictionRequest(ACTIVE, NOW))
    assert [o.pod_uid for o in offered.reply] == ["r1"]


@pytest.mark.parametrize(
    ("request_", "cause"),
    [
        pytest.param(AdviceRequest(NOW, from_tick=True), {"command": "Tick", "now": NOW},
                     id="the tick's advice step is journaled as the tick"),
        pytest.param(AdviceRequest(NOW, from_tick=False), {"command": "GetAdvices", "now": NOW},
                     id="an external GetAdvices is journaled as itself"),
        pytest.param(EvictionRequest(("a", "b"), NOW),
                     {"command": "GetEvictPods", "now": NOW, "active_pod_uids": ["a", "b"]},
                     id="a GetEvictPods poll journals its active pods"),
    ],
)  # fmt: skip
def test_each_request_is_its_journal_cause(
    request_: AdviceRequest | EvictionRequest, cause: dict[str, object]
) -> None:
    assert request_.to_cause() == cause


steps = st.lists(
    st.one_of(
        st.tuples(st.just("round"), st.sampled_from(["ex2", "quiet", "evict", "missing"]),
                  st.integers(0, 40)),
        st.tuples(st.just("advice"), st.booleans(), st.just(0)),
        st.tuples(st.just("evict"), st.booleans(), st.just(0)),
    ),
    max_size=20,
)  # fmt: skip
BY_NAME = {"ex2": EX2, "quiet": QUIET, "evict": EVICT_ONLY, "missing": MISSING_METRIC}


@settings(max_examples=60, deadline=None)
@given(steps)
def test_applying_every_decision_equals_the_sections_own_transitions(
    ops: list[tuple[str, object, int]],
) -> None:
    """One source of truth: what each decision commits, applied, is what the planner's
    transitions (``run_round``, ``take_advice``, ``take_eviction``) give, and each answer is
    theirs."""
    section = BalancerState()
    t = 0.0
    for op, arg, dt in ops:
        events: tuple[object, ...]
        if op == "round":
            t += dt
            inputs = replace(BY_NAME[str(arg)], now=NOW + t, last=section.last)
            decision = balance_round(section, inputs)
            expected, outcome = run_round(section, inputs)
            assert decision.reply.result is outcome.result
            assert decision.reply.record == outcome.record
            events = decision.events
        elif op == "advice":
            advice_decision = get_advices(section, AdviceRequest(NOW + t, from_tick=bool(arg)))
            expected, advice = take_advice(section)
            assert advice_decision.reply == advice
            events = advice_decision.events
        else:
            active = ACTIVE if arg else ("nobody",)
            evict_decision = get_evict_pods(section, EvictionRequest(active, NOW + t))
            expected, offers = take_eviction(section, active)
            assert evict_decision.reply == offers
            events = evict_decision.events
        section = applied(section, events)
        assert section == expected
