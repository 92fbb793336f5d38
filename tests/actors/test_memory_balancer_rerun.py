"""The balancer's decisions are re-run from the journal alone (DESIGN.md, "Every decision has one
shape"; memory-balancer §6.2, §8, §9.1): decode a round record's inputs (or a "taken" record's
request from its cause), call the pure façade on the balance section replayed up to the record
before it, and get the same events and reply."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from actors.balancer_messages import GetEvictPods, RoundReport, Tick
from journal import read_records
from policy.balance import BalanceError, BalancerState, RoundResult
from policy.balance.decide import AdviceRequest, EvictionRequest
from policy.balance.events import BALANCE_SECTION, BalanceAdviceTaken, BalanceEvictionTaken
from policy.balance.rerun import request_of, rerun_record, rerun_round, round_inputs_of
from policy.state.codec import decode_event
from policy.state.sections import apply_all, empty_state
from tests.actors.balancer_fakes import Balancer, FakeMetrics
from tests.actors.balancer_store import balancer_on, populate_cpu, start_store
from tests.policy.balance.examples import EX2_PODS, NOW
from tests.policy.state_fixtures import SYNTH_16_2_4

ACTIVE = tuple(p.uid for p in EX2_PODS)


def journal_some_ticks(directory: Path) -> list[RoundReport]:
    """Ticks at 0 (stored, advice taken), 30 (a missing metric), 35 (stored, advice taken) and
    40 s (cool-down), each followed by an eviction poll, journaled by the real StateStore."""
    clock = [NOW]
    store = start_store(directory)
    reports: list[RoundReport] = []
    try:
        populate_cpu(store)
        actor, core = balancer_on(store, clock)
        metrics = core._ports.metrics
        assert isinstance(metrics, FakeMetrics)
        try:
            for t, metric_missing in ((0, False), (30, True), (35, False), (40, False)):
                metrics.missing = {3} if metric_missing else set()
                clock[0] = NOW + t
                reports.append(actor.ask(Tick(NOW + t), timeout=10))
                actor.ask(GetEvictPods(ACTIVE), timeout=10)
        finally:
            actor.stop()
    finally:
        store.stop()
    return reports


def test_every_journaled_round_reruns_to_the_same_events_and_reply(tmp_path: Path) -> None:
    reports = journal_some_ticks(tmp_path)
    # The last tick fell in the cool-down of the 35 s round's advice: nothing journaled.
    assert [r.result for r in reports] == [
        RoundResult.STORED,
        RoundResult.FAILED,
        RoundResult.STORED,
        RoundResult.SKIPPED,
    ]
    computed = iter(r for r in reports if r.result is not RoundResult.SKIPPED)

    state = empty_state(SYNTH_16_2_4)
    rerun = 0
    for record in read_records(str(tmp_path)):
        events = tuple(decode_event(raw) for raw in record.events)
        again = rerun_round(state.balance, events, f"record {record.seq}")
        if again is not None:
            rerun += 1
            assert again.events == events, f"record {record.seq}"
            live = next(computed)
            assert (again.reply.result, again.reply.record, again.reply.window) == (
                live.result,
                live.record,
                live.window,
            )
            assert record.cause == {"command": "Tick", "now": live.now}
        state = apply_all(state, events)
    assert rerun == 3


def test_every_balancer_record_reruns_from_its_cause_and_events(tmp_path: Path) -> None:
    journal_some_ticks(tmp_path)
    state = empty_state(SYNTH_16_2_4)
    kinds: list[str] = []
    for record in read_records(str(tmp_path)):
        events = tuple(decode_event(raw) for raw in record.events)
        again = rerun_record(state.balance, record.cause, events, f"record {record.seq}")
        if all(e.section == BALANCE_SECTION for e in events):
            assert again is not None and again.events == events, f"record {record.seq}"
            kinds.extend(type(e).__name__ for e in events)
        else:
            assert again is None, "the CPU section's records are not the balancer's"
        state = apply_all(state, events)
    assert kinds == [
        "BalanceRoundRecorded",
        "BalanceAdviceTaken",
        "BalanceEvictionTaken",
        "BalanceRoundFailed",
        "BalanceRoundRecorded",
        "BalanceAdviceTaken",
        "BalanceEvictionTaken",
    ]


@pytest.mark.parametrize(
    ("request_", "extra", "event"),
    [
        pytest.param(AdviceRequest(NOW, from_tick=True), {"advice": "{}"}, BalanceAdviceTaken(NOW),
                     id="the tick's advice step"),
        pytest.param(AdviceRequest(NOW, from_tick=False), {"advice": "{}"},
                     BalanceAdviceTaken(NOW), id="an external GetAdvices"),
        pytest.param(EvictionRequest(("a", "b"), NOW), {"offered": ["a"]},
                     BalanceEvictionTaken(NOW), id="a GetEvictPods poll"),
    ],
)  # fmt: skip
def test_a_taken_records_request_is_read_back_from_its_cause(
    request_: AdviceRequest | EvictionRequest, extra: dict[str, object], event: object
) -> None:
    cause = {**request_.to_cause(), **extra}
    assert request_of(cause, [event]) == request_  # type: ignore[list-item]


def test_a_taken_record_with_a_bad_cause_is_named() -> None:
    with pytest.raises(BalanceError, match=r"record 3\.cause\.command: .*'Allocate'"):
        request_of({"command": "Allocate", "now": NOW}, [BalanceAdviceTaken(NOW)], "record 3")
    with pytest.raises(BalanceError, match=r"record 3\.cause"):
        request_of({"command": "GetEvictPods"}, [BalanceEvictionTaken(NOW)], "record 3")


def test_a_record_that_is_not_a_round_has_no_inputs_to_rerun() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    recorded, advice_taken = b.store.events
    assert round_inputs_of([advice_taken]) is None
    assert rerun_round(BalancerState(), [advice_taken]) is None
    inputs = round_inputs_of([recorded])
    assert inputs is not None and inputs.now == NOW and inputs.pods


def test_a_round_whose_inputs_could_not_be_read_says_there_is_nothing_to_rerun() -> None:
    b = Balancer()

    def broken() -> object:
        raise OSError("the state store is gone")

    b.ports = replace(b.ports, pods=broken)
    core = b.restart()
    core.handle(Tick(b.at(0)))
    (failed,) = b.store.events
    with pytest.raises(BalanceError, match=r"record 7: .* failed before its inputs were read"):
        round_inputs_of([failed], "record 7")


def test_a_rerun_on_another_section_than_the_one_before_is_refused() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    b.core.handle(Tick(b.at(30)))
    second_round = [e for e in b.store.events if type(e).__name__ == "BalanceRoundRecorded"][1]
    with pytest.raises(BalanceError, match="last emitted round"):
        rerun_round(BalancerState(), [second_round])
