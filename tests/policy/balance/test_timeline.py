"""The balancer over time with injected times (spec memory-balancer §6, example 9): the 30 s
cool-down, advice and eviction taken at most once, a failed round not replacing the stored one,
eviction-only rounds not starting the cool-down (O9), and the ping-pong window."""

from __future__ import annotations

from dataclasses import replace

import pytest

from machines import balance_round as machine
from policy.balance import (
    BalanceError,
    BalancerState,
    MissingSample,
    NumaMetrics,
    RoundInputs,
    RoundResult,
    in_cool_down,
    run_round,
    take_advice,
    take_eviction,
)
from policy.balance.decide import balance_round, skip_round
from tests.policy.balance.examples import (
    EX2_ADVICE,
    EX2_B,
    EX2_L,
    EX2_PODS,
    NOW,
    GiB,
    R,
    last_round,
    make_inputs,
)

ACTIVE = [p.uid for p in EX2_PODS]
REASON_0 = "the memory node 0 is under bandwidth pressure"


def at(state: BalancerState, t: float, pods: tuple = EX2_PODS) -> RoundInputs:
    """Example 2's inputs at NOW + t seconds, with the state's last emitted round."""
    return make_inputs(EX2_L, EX2_B, pods, now=NOW + t, last=state.last)


def run(state: BalancerState, inputs: RoundInputs) -> tuple[BalancerState, RoundResult]:
    state, outcome = run_round(state, inputs)
    return state, outcome.result


def emitted_at_zero() -> BalancerState:
    state, result = run(BalancerState(), at(BalancerState(), 0))
    assert result is RoundResult.STORED
    state, advice = take_advice(state)
    assert advice is not None and advice.to_json_text() == EX2_ADVICE
    return state


def test_example_9_first_round_emits_advice_once_and_offers_eviction_once() -> None:
    state = emitted_at_zero()
    assert state.current is not None and state.current.balance_executed
    assert state.last == state.current

    # t = 2 s: the eviction manager polls; r1 is offered, force-evict, once.
    state, offers = take_eviction(state, ACTIVE)
    assert [(o.pod_uid, o.reason, o.force_evict) for o in offers] == [("r1", REASON_0, True)]
    assert state.current is not None and state.current.evict_executed
    assert state.last == state.current, "the flag shows through last, as in the reference"

    # t = 5..25 s: rounds are skipped; the advice and the eviction were taken.
    for t in (5, 10, 15, 20, 25):
        before = state
        state, result = run(state, at(state, t))
        assert result is RoundResult.SKIPPED and state == before
        state, advice = take_advice(state)
        assert advice is None and state == before
    state, offers = take_eviction(state, ACTIVE)
    assert offers == ()


@pytest.mark.parametrize(
    ("elapsed_s", "skipped"),
    [
        pytest.param(0, True, id="same instant is within the cool-down"),
        pytest.param(29.999999, True, id="just under 30 s is within the cool-down"),
        pytest.param(30, False, id="30 s is not less than 30 s: a new round"),
        pytest.param(-10, True, id="a clock that stepped back keeps skipping"),
    ],
)
def test_cool_down_boundary(elapsed_s: float, skipped: bool) -> None:
    state = emitted_at_zero()
    assert in_cool_down(state.last, NOW + elapsed_s) is skipped
    _, result = run(state, at(state, elapsed_s))
    assert (result is RoundResult.SKIPPED) is skipped
    # The façade answers by the same rule, before reading anything and after.
    before = skip_round(state, NOW + elapsed_s)
    full = balance_round(state, at(state, elapsed_s))
    assert (full.reply.result is RoundResult.SKIPPED) is skipped
    if skipped:
        assert before is not None and before == full and full.events == ()
        assert full.reply.state == machine.SKIPPED and full.reply.window == machine.COOLING_DOWN
    else:
        assert before is None and full.reply.state == machine.PREPARE_SUCCESS


def test_example_9a_unchanged_inputs_emit_the_same_advice_again_at_30s() -> None:
    state = emitted_at_zero()
    state, _ = take_eviction(state, ACTIVE)
    r0 = state.current
    state, result = run(state, at(state, 30))
    assert result is RoundResult.STORED
    assert state.current is not None and r0 is not None
    assert replace(state.current, detect_time=r0.detect_time) == replace(
        r0, balance_executed=False, evict_executed=False
    )
    assert state.last == r0, "last changes only when the new advice is emitted"
    state, advice = take_advice(state)
    assert advice is not None and advice.to_json_text() == EX2_ADVICE
    assert state.last == state.current and state.current.detect_time == NOW + 30
    state, offers = take_eviction(state, ACTIVE)
    assert [o.pod_uid for o in offers] == ["r1"]


def test_example_9b_evicted_pod_gone_at_30s() -> None:
    state = emitted_at_zero()
    without_r1 = tuple(p for p in EX2_PODS if p.uid != "r1")
    state, result = run(state, at(state, 30, without_r1))
    assert result is RoundResult.STORED
    state, advice = take_advice(state)
    assert advice is not None
    assert advice.to_json_text() == (
        '{"destNumaList":[1],"sourceNuma":0,"migrateContainers":['
        '{"podUID":"r2","containerName":"r2","destNumaList":[0,1,2,3]},'
        '{"podUID":"s4","containerName":"a","destNumaList":[0,1]},'
        '{"podUID":"s4","containerName":"b","destNumaList":[0,1]},'
        '{"podUID":"s1","containerName":"s1","destNumaList":[0,1]}],'
        '"totalRSS":8053063680,"threshold":0.7}'
    )
    state, offers = take_eviction(state, [p.uid for p in without_r1])
    assert [o.pod_uid for o in offers] == ["r2"]


def test_example_9c_failed_round_keeps_the_stored_record_and_no_cool_down() -> None:
    state = emitted_at_zero()
    r0 = state.current
    good = at(state, 30)
    metrics = dict(good.numa_metrics)
    metrics[3] = NumaMetrics(20.0, MissingSample())
    failing = replace(good, numa_metrics=metrics)

    after, outcome = run_round(state, failing)
    assert outcome.result is RoundResult.FAILED
    assert outcome.error == (
        "failed to get numa metric, metric name: mem.bandwidth.numa, numa id: 3, err: no sample"
    )
    assert outcome.record is not None
    assert outcome.record.metric_tags()["status"] == "prepareFailed"
    assert outcome.record.metric_tags()["failed_reason"] == outcome.error
    assert outcome.advice is None
    assert after == state and after.current == r0, "a failed round is not stored (O8)"
    assert take_advice(after) == (after, None), "the stored record was already executed"

    # last is still R0, so the round at 35 s is computed, not skipped.
    after, outcome = run_round(after, at(after, 35))
    assert outcome.result is RoundResult.STORED


def test_eviction_only_rounds_do_not_start_the_cool_down() -> None:
    """O9: a round with an eviction but no balance emits no advice, so the next period runs."""
    inputs = make_inputs(
        [90], [50], [R("r1", {0: GiB})], table={0: [(0, 10)]}, pools={"reclaim": (0,)}
    )
    state, outcome = run_round(BalancerState(), inputs)
    assert outcome.result is RoundResult.STORED
    state, advice = take_advice(state)
    assert advice is None and state.last is None
    state, offers = take_eviction(state, ["r1"])
    assert [o.pod_uid for o in offers] == ["r1"]
    state, outcome = run_round(state, replace(inputs, now=NOW + 5))
    assert outcome.result is RoundResult.STORED
    state, offers = take_eviction(state, ["r1"])
    assert [o.pod_uid for o in offers] == ["r1"], "each new record offers its eviction again"


def test_eviction_is_consumed_even_when_no_active_pod_matches() -> None:
    """O10: the offer is taken by the first poll whatever the active pods are."""
    state = emitted_at_zero()
    state, offers = take_eviction(state, ["someone-else"])
    assert offers == () and state.current is not None and state.current.evict_executed
    state, offers = take_eviction(state, ACTIVE)
    assert offers == ()


def test_eviction_matches_every_active_pod_with_the_uid_in_request_order() -> None:
    state = emitted_at_zero()
    _, offers = take_eviction(state, ["x", "r1", "y", "r1"])
    assert [(o.pod_uid, o.active_index) for o in offers] == [("r1", 1), ("r1", 3)]


def test_nothing_is_taken_before_the_first_round() -> None:
    assert take_advice(BalancerState()) == (BalancerState(), None)
    assert take_eviction(BalancerState(), ACTIVE) == (BalancerState(), ())


def test_eviction_after_a_newer_round_leaves_last_alone() -> None:
    state = emitted_at_zero()
    state, _ = run_round(state, at(state, 30))
    last = state.last
    state, _ = take_eviction(state, ACTIVE)
    assert state.last == last and last is not None and not last.evict_executed


@pytest.mark.parametrize(
    ("minutes_ago", "reverse_dropped"),
    [
        pytest.param(1, True, id="one minute after the last balance the reverse is dropped"),
        pytest.param(15, True, id="exactly 15 minutes is still inside the window"),
        pytest.param(15 + 1e-6 / 60, False, id="a microsecond past 15 minutes it is allowed"),
    ],
)
def test_ping_pong_window(minutes_ago: float, reverse_dropped: bool) -> None:
    """Example 3's setup: the last balance moved NUMA 1 -> 0; now 0 -> 1 is the reverse."""
    last = last_round(1, [0], minutes_ago)
    inputs = make_inputs(
        [65, 20, 30, 25], [500, 400, 300, 200], [R("x", {}), *EX2_PODS[3:4]], last=last
    )
    state = BalancerState(current=last, last=last)
    _, outcome = run_round(state, inputs)
    assert outcome.record is not None and outcome.record.dest_numas is not None
    assert (outcome.record.dest_numas == ()) is reverse_dropped


def test_ping_pong_spares_other_directions() -> None:
    """Only the exact reverse of the last balance is filtered (O19)."""
    last = last_round(2, [0], 1)  # last moved 2 -> 0; now 0 -> 1 is not its reverse
    inputs = make_inputs([65, 20, 30, 25], [500, 400, 300, 200], EX2_PODS[3:4], last=last)
    _, outcome = run_round(BalancerState(last=last), inputs)
    assert outcome.record is not None
    assert [n.numa_id for n in outcome.record.dest_numas or ()] == [1]


def test_reconcile_refuses_inputs_with_another_last_round() -> None:
    state = emitted_at_zero()
    with pytest.raises(BalanceError, match="last emitted round"):
        run_round(state, make_inputs(EX2_L, EX2_B, EX2_PODS, now=NOW + 30))


def test_state_json_round_trip() -> None:
    state = emitted_at_zero()
    state, _ = take_eviction(state, ACTIVE)
    assert BalancerState.from_json(state.to_json()) == state
    assert BalancerState.from_json({"current": None, "last": None}) == BalancerState()
