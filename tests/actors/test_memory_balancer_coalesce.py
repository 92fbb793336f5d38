"""The MemoryBalancer coalesces quiet rounds in the journal (policy.balance.coalesce), and loses no
round that changed something: every journaled round re-runs, every round left out repeats the
outcome journaled before it, and replay still equals the live state (memory-balancer §6.2)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.balancer_messages import (
    BalancerUnavailable,
    GetAdvices,
    GetEvictPods,
    RoundReport,
    Tick,
)
from actors.memory_balancer import MemoryBalancerCore
from journal import read_records
from policy.balance import BalancerState, RoundResult
from policy.balance.coalesce import round_outcome
from policy.balance.events import (
    BalanceRoundFailed,
    BalanceRoundRecorded,
    BalanceRoundsCoalesced,
)
from policy.balance.lifecycle import has_pods_to_move
from policy.balance.rerun import journaled_round, rerun_record
from policy.state.codec import decode_event
from policy.state.sections import apply_all, empty_state
from tests.actors.balancer_fakes import Balancer, FakeMetrics
from tests.actors.balancer_store import balancer_on, populate_cpu, start_store
from tests.policy.balance.examples import EX2_B, EX2_L, EX2_PODS, NOW
from tests.policy.state_fixtures import SYNTH_16_2_4

HOUR = 3600.0
QUIET_L = (20, 21, 22, 23)
QUIET_B = (100, 100, 100, 100)
ACTIVE = tuple(p.uid for p in EX2_PODS)


def quiet_balancer(**kwargs: object) -> Balancer:
    return Balancer(latency=QUIET_L, bandwidth=QUIET_B, summary_every_s=HOUR, **kwargs)  # type: ignore[arg-type]


def round_kinds(b: Balancer) -> list[list[str]]:
    return [[type(e).__name__ for e in events] for _, events in b.store.records]


def test_an_idle_node_journals_one_round_per_summary_period() -> None:
    b = quiet_balancer()
    reports = [b.core.handle(Tick(b.at(5 * i))) for i in range(2 * 720 + 1)]  # two hours
    assert all(r.result is RoundResult.STORED for r in reports)
    assert round_kinds(b) == [
        ["BalanceRoundRecorded"],
        ["BalanceRoundsCoalesced", "BalanceRoundRecorded"],
        ["BalanceRoundsCoalesced", "BalanceRoundRecorded"],
    ]
    summaries = [e for e in b.store.events if isinstance(e, BalanceRoundsCoalesced)]
    assert [s.rounds for s in summaries] == [719, 719]
    assert sum(r.coalesced for r in reports) == 2 * 719
    assert b.core.metrics.rounds_coalesced_total == 2 * 719
    assert b.core.metrics.rounds_stored_total == len(reports), "every round is counted (§12)"
    # ``current`` is exactly the last journaled round: the summary's.
    last_recorded = [e for e in b.store.events if isinstance(e, BalanceRoundRecorded)][-1]
    assert b.core.state.current == last_recorded.record == reports[-1].record
    assert b.replayed() == b.store.latest().state


def test_a_stretch_ends_with_the_first_round_that_changes_the_outcome() -> None:
    b = quiet_balancer()
    for i in range(10):
        b.core.handle(Tick(b.at(5 * i)))
    b.metrics.latency, b.metrics.bandwidth = list(EX2_L), list(EX2_B)
    pressure = b.core.handle(Tick(b.at(50)))
    assert pressure.result is RoundResult.STORED and not pressure.coalesced
    assert round_kinds(b) == [
        ["BalanceRoundRecorded"],
        ["BalanceRoundsCoalesced", "BalanceRoundRecorded"],
        ["BalanceAdviceTaken"],
    ]
    summary = b.store.events[1]
    assert isinstance(summary, BalanceRoundsCoalesced)
    assert (summary.rounds, summary.first_time, summary.last_time) == (9, b.at(5), b.at(45))
    assert summary.metrics["0"] == {
        "readLatency": [20.0, 20.0],
        "readWriteBandwidth": [100.0, 100.0],
    }


def test_an_eviction_poll_takes_a_quiet_record_once_not_once_per_round() -> None:
    b = quiet_balancer()
    for i in range(20):
        b.core.handle(Tick(b.at(5 * i)))
        b.core.handle(GetEvictPods(ACTIVE))
    assert round_kinds(b) == [["BalanceRoundRecorded"], ["BalanceEvictionTaken"]]


def test_repeated_failures_are_coalesced_logged_once_and_turn_health_unready(
    caplog: pytest.LogCaptureFixture,
) -> None:
    told: list[str | None] = []
    b = quiet_balancer()
    b.ports = replace(b.ports, health=told.append)
    b.restart()
    b.metrics.missing = {3}
    with caplog.at_level(logging.INFO, logger="actors.memory_balancer"):
        for i in range(30):
            b.core.handle(Tick(b.at(5 * i)))
    assert round_kinds(b) == [["BalanceRoundFailed"]]
    assert b.core.metrics.rounds_failed_total == 30
    assert all(t is not None and "numa id: 3" in t for t in told) and len(told) == 30
    failures = [r for r in caplog.records if "balance rounds fail" in r.getMessage()]
    assert len(failures) == 1, "the same failure is logged once per interval"
    records = [r for r in caplog.records if "numa memory balance round" in r.getMessage()]
    assert len(records) == 1, "a coalesced round's record is not logged at INFO"
    b.metrics.missing = set()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="actors.memory_balancer"):
        b.core.handle(Tick(b.at(150)))
    assert told[-1] is None
    assert any("succeed again (after 29 more)" in r.getMessage() for r in caplog.records)
    assert round_kinds(b)[-1] == ["BalanceRoundsCoalesced", "BalanceRoundRecorded"]


def test_free_text_in_a_failed_reason_is_one_label_value() -> None:
    b = quiet_balancer()
    b.metrics.missing = {3}
    b.core.handle(Tick(b.at(0)))
    b.metrics.missing = {2}
    b.core.handle(Tick(b.at(5)))
    labels = {dict(tags)["failed_reason"] for tags in b.core.metrics.round_metric}
    assert labels == {"round failed (the reason is in the log)"}
    assert [e.error for e in b.store.events if isinstance(e, BalanceRoundFailed)] == [
        "failed to get numa metric, metric name: mem.bandwidth.numa, numa id: 3, err: no sample",
        "failed to get numa metric, metric name: mem.bandwidth.numa, numa id: 2, err: no sample",
    ], "the journal keeps the full reason"


def test_on_the_real_journal_every_round_that_changed_something_reruns(tmp_path: Path) -> None:
    """Two quiet hours, pressure (a round with an advice), a failing hour, quiet again: every
    balancer record read back from the StateStore's journal re-runs to its own events, and the
    rounds not journaled are exactly those that repeated the outcome journaled before them."""
    clock = [NOW]
    store = start_store(tmp_path)
    reports: list[RoundReport] = []
    try:
        populate_cpu(store)
        actor, core = balancer_on(store, clock, summary_every_s=HOUR)
        metrics = core._ports.metrics
        assert isinstance(metrics, FakeMetrics) and isinstance(core, MemoryBalancerCore)
        phases = [(QUIET_L, QUIET_B, set(), 2 * 720), (EX2_L, EX2_B, set(), 1),
                  (QUIET_L, QUIET_B, {3}, 720), (QUIET_L, QUIET_B, set(), 100)]  # fmt: skip
        try:
            for latency, bandwidth, missing, ticks in phases:
                metrics.latency, metrics.bandwidth = list(latency), list(bandwidth)
                metrics.missing = missing
                for _ in range(ticks):
                    clock[0] += 5
                    reports.append(actor.ask(Tick(clock[0]), timeout=10))
        finally:
            actor.stop()
    finally:
        store.stop()
    computed = [r for r in reports if r.result is not RoundResult.SKIPPED]
    state = empty_state(SYNTH_16_2_4)
    journaled_rounds = coalesced = 0
    for record in read_records(str(tmp_path)):
        events = tuple(decode_event(raw) for raw in record.events)
        again = rerun_record(state.balance, record.cause, events, f"record {record.seq}")
        if all(e.section == "balance" for e in events):
            assert again is not None and again.events == events, f"record {record.seq}"
            journaled_rounds += journaled_round(events) is not None
            coalesced += sum(e.rounds for e in events if isinstance(e, BalanceRoundsCoalesced))
        state = apply_all(state, events)
    not_journaled = sum(r.coalesced for r in computed)
    assert journaled_rounds + not_journaled == len(computed)
    # The last stretch (quiet, 100 rounds) is still open: not summarised yet.
    assert coalesced + 99 == not_journaled
    assert journaled_rounds < 12, f"{journaled_rounds} records for {len(computed)} rounds"


# -- any sequence ------------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.sampled_from([5, 5, 5, 30, 600, 1800])),
        st.tuples(st.just("metrics"), st.sampled_from(["quiet", "pressure", "missing"])),
        st.tuples(st.just("advices"), st.just(0)),
        st.tuples(st.just("evict"), st.just(0)),
        st.tuples(st.just("refuse_next"), st.just(0)),
        st.tuples(st.just("restart"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_coalescing_loses_no_recomputable_round_and_replay_equals_live(
    ops: list[tuple[str, object]],
) -> None:
    b = quiet_balancer()
    t = 0.0
    journaled_outcome: object = None  # the outcome of the last journaled round
    pending = 0  # rounds coalesced since it
    for op, arg in ops:
        if op == "tick":
            t += float(arg)  # type: ignore[arg-type]
            before = len(b.store.records)
            report = b.core.handle(Tick(b.at(t)))
            new = b.store.records[before:]
            rounds = [journaled_round(events) for _, events in new]
            journaled = [r for r in rounds if r is not None]
            if report.coalesced:
                assert not journaled
                assert report.record is not None and not has_pods_to_move(report.record)
                pending += 1
            elif journaled:
                (event,) = journaled
                summaries = [
                    e for _, ev in new for e in ev if isinstance(e, BalanceRoundsCoalesced)
                ]
                assert [s.rounds for s in summaries] == ([pending] if pending else [])
                journaled_outcome, pending = round_outcome(event), 0
            if report.coalesced:
                # What a re-run of this round would give repeats what the journal holds.
                assert journaled_outcome is not None
        elif op == "metrics":
            b.metrics.missing = {3} if arg == "missing" else set()
            lat, bw = (EX2_L, EX2_B) if arg == "pressure" else (QUIET_L, QUIET_B)
            b.metrics.latency, b.metrics.bandwidth = list(lat), list(bw)
        elif op == "advices":
            with contextlib.suppress(BalancerUnavailable):
                b.core.handle(GetAdvices())
        elif op == "evict":
            with contextlib.suppress(BalancerUnavailable):
                b.core.handle(GetEvictPods(ACTIVE))
        elif op == "refuse_next":
            b.store.refuse_next()
        else:
            b.restart()
            journaled_outcome, pending = None, 0

    # Every journaled balancer record re-runs, on the section before it, to its own events.
    state = empty_state(SYNTH_16_2_4)
    section = BalancerState()
    for i, (cause, events) in enumerate(b.store.records):
        again = rerun_record(section, cause, events, f"record {i}")
        assert again is not None and again.events == events, f"record {i}"
        state = apply_all(state, events)
        section = state.balance
    # The durable ``current`` is what the last record says; replay equals live.
    assert b.replayed() == b.store.latest().state
    assert b.core.state == b.store.latest().state.balance
