"""A journaled balance round is re-run from the journal alone (DESIGN.md, "Every decision has one
shape"; memory-balancer §6.2): decode the record's round inputs, call the pure façade on the
balance section replayed up to the record before it, and get the same events and reply."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from actors.balancer_messages import GetEvictPods, RoundReport, Tick
from journal import read_records
from policy.balance import BalanceError, BalancerState, RoundResult
from policy.balance.rerun import rerun_round, round_inputs_of
from policy.state.codec import decode_event
from policy.state.sections import apply_all, empty_state
from tests.actors.balancer_fakes import Balancer, FakeMetrics
from tests.actors.balancer_store import balancer_on, populate_cpu, start_store
from tests.policy.balance.examples import EX2_PODS, NOW
from tests.policy.state_fixtures import SYNTH_16_2_4

ACTIVE = tuple(p.uid for p in EX2_PODS)


def test_every_journaled_round_reruns_to_the_same_events_and_reply(tmp_path: Path) -> None:
    clock = [NOW]
    store = start_store(tmp_path)
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
