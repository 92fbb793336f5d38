"""The MemoryBalancer core over time with an injected clock (memory-balancer §6, §8, §9,
example 9): what each tick and RPC answers, and what it commits to the journal."""

from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest

from actors.balancer_messages import (
    BalancerUnavailable,
    GetAdvices,
    GetBalancerState,
    GetEvictPods,
    GetToken,
    GetTopEvictionPods,
    ThresholdMet,
    Tick,
)
from actors.ports.migration import MigrationMode
from machines import balance_round as machine
from policy.balance import (
    BalanceStatus,
    EvictOffer,
    RoundInputs,
    RoundResult,
    ThresholdMetAnswer,
    plan_round,
)
from policy.balance.constants import ADVICE_KEY
from policy.balance.events import BalanceRoundFailed, BalanceRoundRecorded
from policy.balance.lifecycle import balancer_window, record_machine_state
from tests.actors.balancer_fakes import Balancer
from tests.policy.balance.examples import EX2_ADVICE, EX2_L, EX2_PODS, NOW, GiB, R, S

ACTIVE = tuple(p.uid for p in EX2_PODS)
REASON_0 = "the memory node 0 is under bandwidth pressure"
EX2_B_ADVICE = (
    '{"destNumaList":[1],"sourceNuma":0,"migrateContainers":['
    '{"podUID":"r2","containerName":"r2","destNumaList":[0,1,2,3]},'
    '{"podUID":"s4","containerName":"a","destNumaList":[0,1]},'
    '{"podUID":"s4","containerName":"b","destNumaList":[0,1]},'
    '{"podUID":"s1","containerName":"s1","destNumaList":[0,1]}],'
    '"totalRSS":8053063680,"threshold":0.7}'
)


def test_example_9_timeline_cool_down_taken_once_and_a_failed_round() -> None:
    b = Balancer()
    core = b.core

    # t = 0: no last round: computed, stored, and its advice emitted by the same tick.
    report = core.handle(Tick(b.at(0)))
    assert report.result is RoundResult.STORED and report.error == ""
    assert report.advice is not None and report.advice.to_json_text() == EX2_ADVICE
    assert b.store.kinds() == ["BalanceRoundRecorded", "BalanceAdviceTaken"]
    r0 = core.state.current
    assert r0 is not None and r0.balance_executed and core.state.last == r0
    assert b.store.causes[-1]["advice"] == EX2_ADVICE
    assert b.store.causes[-1]["execution"]["mode"] == "dry_run"
    assert [p.mode for p in b.executor.started] == [MigrationMode.DRY_RUN]

    # t = 2: the eviction manager polls; r1 is offered once, and that is committed.
    offers = core.handle(GetEvictPods(ACTIVE))
    assert offers == (EvictOffer("r1", 0, REASON_0),)
    assert b.store.kinds()[-1] == "BalanceEvictionTaken"
    assert core.state.current is not None and core.state.current.evict_executed
    assert core.state.last == core.state.current, "the flag shows through last (§6.1)"

    # t = 5..25: skipped, nothing committed; the advice and the offer were taken.
    committed = len(b.store.events)
    for t in (5, 10, 15, 20, 25):
        report = core.handle(Tick(b.at(t)))
        assert report.result is RoundResult.SKIPPED and report.record is None
        assert report.advice is None
        assert core.handle(GetAdvices()) == ()
    assert core.handle(GetEvictPods(ACTIVE)) == ()
    assert len(b.store.events) == committed, "skipped rounds and empty answers commit nothing"
    assert core.metrics.rounds_skipped_total == 5

    # t = 30: not < 30 s, a new round with unchanged inputs: the same advice again (9A).
    report = core.handle(Tick(b.at(30)))
    assert report.result is RoundResult.STORED
    assert report.advice is not None and report.advice.to_json_text() == EX2_ADVICE
    r1 = core.state.current
    assert r1 is not None and r1.detect_time == NOW + 30 and core.state.last == r1
    assert core.handle(GetEvictPods(ACTIVE)) == (EvictOffer("r1", 0, REASON_0),)

    # t = 60: a missing metric fails the round (9C): journaled with its inputs, not stored.
    b.metrics.missing.add(3)
    report = core.handle(Tick(b.at(60)))
    assert report.result is RoundResult.FAILED and report.advice is None
    assert report.error == (
        "failed to get numa metric, metric name: mem.bandwidth.numa, numa id: 3, err: no sample"
    )
    assert report.record is not None and report.record.status is BalanceStatus.PREPARE_FAILED
    failed = b.store.events[-1]
    assert isinstance(failed, BalanceRoundFailed) and failed.error == report.error
    assert RoundInputs.from_json(failed.inputs).now == NOW + 60
    assert core.state.current == replace(r1, evict_executed=True)
    assert core.handle(GetAdvices()) == (), "the stored record was already executed"

    # t = 65: last is still R1 (30 s), so this round is computed, not skipped.
    b.metrics.missing.clear()
    assert core.handle(Tick(b.at(65))).result is RoundResult.STORED
    assert core.metrics.rounds_failed_total == 1
    assert core.metrics.rounds_stored_total == 3
    assert core.metrics.advices_emitted_total == 3


def test_example_9b_the_evicted_pod_is_gone_at_30_s() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    without_r1 = tuple(p for p in EX2_PODS if p.uid != "r1")
    b.pods.set_pods(without_r1)
    report = b.core.handle(Tick(b.at(30)))
    assert report.advice is not None and report.advice.to_json_text() == EX2_B_ADVICE
    offers = b.core.handle(GetEvictPods(tuple(p.uid for p in without_r1)))
    assert [o.pod_uid for o in offers] == ["r2"]


def test_without_an_executor_a_tick_still_emits_and_journals_the_advice() -> None:
    """§6.1: an emitted advice counts whether or not anything carries it out."""
    b = Balancer()
    b.ports = replace(b.ports, executor=None)
    core = b.restart()
    report = core.handle(Tick(b.at(0)))
    assert report.advice is not None and report.execution is None
    assert b.store.kinds() == ["BalanceRoundRecorded", "BalanceAdviceTaken"]
    assert "execution" not in b.store.causes[-1]
    assert core.handle(GetAdvices()) == ()


def test_a_refused_advice_commit_takes_nothing_and_get_advices_retries() -> None:
    b = Balancer()
    core = b.core
    original_commit = b.store.commit
    calls = []

    def commit_round_refuse_advice(events, cause):  # type: ignore[no-untyped-def]
        calls.append(type(events[0]).__name__)
        if type(events[0]).__name__ == "BalanceAdviceTaken" and len(calls) == 2:
            b.store.refuse_next("disk full")
        return original_commit(events, cause)

    b.store.commit = commit_round_refuse_advice  # type: ignore[method-assign]
    report = core.handle(Tick(b.at(0)))
    assert report.result is RoundResult.STORED
    assert report.advice is None and "the advice was not taken: " in report.error
    assert b.executor.started == [], "nothing is executed that the journal does not hold"
    assert core.state.current is not None and not core.state.current.balance_executed
    assert core.state.last is None

    entries = core.handle(GetAdvices())
    assert len(entries) == 1 and entries[0].cgroup_path == ""
    assert entries[0].values[ADVICE_KEY] == EX2_ADVICE
    assert b.store.kinds() == ["BalanceRoundRecorded", "BalanceAdviceTaken"]
    assert b.store.causes[-1]["command"] == "GetAdvices"
    assert core.handle(GetAdvices()) == ()


def test_a_refused_eviction_commit_raises_and_the_offer_stays() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    b.store.refuse_next("disk full")
    with pytest.raises(BalancerUnavailable, match="disk full"):
        b.core.handle(GetEvictPods(ACTIVE))
    assert b.core.state.current is not None and not b.core.state.current.evict_executed
    assert [o.pod_uid for o in b.core.handle(GetEvictPods(ACTIVE))] == ["r1"]


def test_an_unanswered_commit_is_resolved_from_the_durable_state() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    b.store.apply_next_silently()
    with pytest.raises(BalancerUnavailable, match="unconfirmed"):
        b.core.handle(GetEvictPods(ACTIVE))
    # The store did apply it: the next command re-reads and finds the offer taken.
    assert b.core.handle(GetEvictPods(ACTIVE)) == ()
    assert b.core.state == b.store.latest().state.balance


def test_eviction_is_consumed_even_when_no_active_pod_matches() -> None:
    """O10."""
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    assert b.core.handle(GetEvictPods(("someone-else",))) == ()
    assert b.store.kinds()[-1] == "BalanceEvictionTaken"
    assert b.store.causes[-1]["offered"] == []
    assert b.core.handle(GetEvictPods(ACTIVE)) == ()


def test_eviction_only_rounds_repeat_every_period() -> None:
    """O9: no advice, so no cool-down: each tick stores a round that offers its pod again."""
    b = Balancer(
        latency=[90],
        bandwidth=[50],
        pods=[R("r1", {0: GiB})],
        table={0: [(0, 10)]},
        pools={"reclaim": (0,)},
    )
    for t in (0, 5, 10):
        report = b.core.handle(Tick(b.at(t)))
        assert report.result is RoundResult.STORED and report.advice is None
        assert [o.pod_uid for o in b.core.handle(GetEvictPods(("r1",)))] == ["r1"]
    assert b.store.kinds() == ["BalanceRoundRecorded", "BalanceEvictionTaken"] * 3
    assert b.executor.planned == []


@pytest.mark.parametrize(
    ("minutes_later", "dests"),
    [
        pytest.param(1, [], id="one minute after 1->0 the reverse 0->1 is dropped"),
        pytest.param(15, [], id="exactly 15 minutes is still inside the window"),
        pytest.param(16, [1], id="after 15 minutes the reverse is allowed"),
    ],
)
def test_ping_pong_window_through_the_journal(minutes_later: float, dests: list[int]) -> None:
    """Example 3's setup: a balance 1 -> 0 is emitted, then NUMA 0 is hot; the reverse
    direction is filtered while the emitted round is at most 15 minutes old, also across a
    restart, since ``last`` is rebuilt from the journal."""
    b = Balancer(latency=[20, 65, 25, 30], bandwidth=[400, 500, 200, 300], pods=EX2_PODS)
    b.pods.set_pods([*EX2_PODS, S("z", {1: 2 * GiB})])
    b.memory.set_pods([*EX2_PODS, S("z", {1: 2 * GiB})])
    first = b.core.handle(Tick(b.at(0)))
    assert first.advice is not None
    assert (first.advice.source_numa, first.advice.dest_numa_list) == (1, (0,))

    b.restart()
    b.metrics.latency, b.metrics.bandwidth = [65, 20, 30, 25], [500, 400, 300, 200]
    report = b.core.handle(Tick(b.at(minutes_later * 60)))
    assert report.record is not None and report.record.dest_numas is not None
    assert [n.numa_id for n in report.record.dest_numas] == dests


def test_restart_resumes_the_cool_down_from_the_journal() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    core = b.restart()
    assert core.state == b.replayed().balance
    assert core.handle(Tick(b.at(10))).result is RoundResult.SKIPPED
    assert core.handle(GetAdvices()) == ()
    assert core.handle(Tick(b.at(30))).result is RoundResult.STORED


def test_replaying_the_journal_rebuilds_the_live_state_and_recomputes_each_round() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    b.core.handle(GetEvictPods(ACTIVE))
    b.metrics.missing.add(2)
    b.core.handle(Tick(b.at(30)))
    b.metrics.missing.clear()
    b.core.handle(Tick(b.at(35)))
    assert b.replayed() == b.store.latest().state
    assert b.replayed().balance == b.core.state
    # Every journaled round is recomputed, offline, from its inputs alone.
    for event in b.store.events:
        if isinstance(event, BalanceRoundRecorded):
            again = plan_round(RoundInputs.from_json(event.inputs))
            assert again.record == event.record
        if isinstance(event, BalanceRoundFailed):
            assert plan_round(RoundInputs.from_json(event.inputs)).error == event.error


def test_the_round_metric_is_counted_for_computed_rounds_only() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    b.core.handle(Tick(b.at(5)))
    b.metrics.missing.add(3)
    b.core.handle(Tick(b.at(30)))
    tags = {dict(k)["status"]: v for k, v in b.core.metrics.round_metric.items()}
    assert tags == {"prepareSuccess": 1, "prepareFailed": 1}
    view = b.core.handle(GetBalancerState())
    assert view.seq == b.store.latest().seq and view.state == b.core.state
    assert view.metrics["ticks_total"] == 3 and view.metrics["rounds_skipped_total"] == 1


def test_unreadable_pod_memory_skips_the_pod_not_the_round() -> None:
    b = Balancer()
    del b.memory.pods["r1"]
    report = b.core.handle(Tick(b.at(0)))
    assert report.result is RoundResult.STORED
    assert report.record is not None and [p.uid for p in report.record.evict_pods] == ["r2"]
    assert b.core.metrics.pods_unreadable_total == 1


def test_a_failing_pod_source_fails_the_round_and_journals_it() -> None:
    b = Balancer()

    def broken() -> object:
        raise OSError("the state store is gone")

    b.ports = replace(b.ports, pods=broken)
    core = b.restart()
    report = core.handle(Tick(b.at(0)))
    assert report.result is RoundResult.FAILED
    assert report.error == "cannot read the round's inputs: the state store is gone"
    assert report.record is not None and report.record.failed_reason == report.error
    assert b.store.kinds() == ["BalanceRoundFailed"]
    (tags,) = core.metrics.round_metric
    assert dict(tags)["status"] == "prepareFailed", "measured like any failed round (§12)"
    msgpack.packb(b.store.causes[0])


def test_the_constant_rpcs() -> None:
    core = Balancer().core
    assert core.handle(ThresholdMet()) == ThresholdMetAnswer()
    assert core.handle(GetToken()) == ""
    assert core.handle(GetTopEvictionPods(ACTIVE, 3)) == ()
    with pytest.raises(TypeError, match="no command"):
        core.handle("GetAdvices")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("flags", "status", "want"),
    [
        pytest.param((False, False), BalanceStatus.PREPARE_SUCCESS, machine.PREPARE_SUCCESS,
                     id="fresh success"),
        pytest.param((True, False), BalanceStatus.PREPARE_SUCCESS, machine.ADVICE_TAKEN,
                     id="advice taken"),
        pytest.param((False, True), BalanceStatus.PREPARE_SUCCESS, machine.EVICTION_TAKEN,
                     id="eviction taken"),
        pytest.param((True, True), BalanceStatus.PREPARE_SUCCESS,
                     machine.ADVICE_AND_EVICTION_TAKEN, id="both taken"),
    ],
)  # fmt: skip
def test_record_machine_state_resumes_from_flags(
    flags: tuple[bool, bool], status: BalanceStatus, want: str
) -> None:
    record = Balancer().core.handle(Tick(NOW)).record
    assert record is not None and record.status is status
    flagged = replace(record, balance_executed=flags[0], evict_executed=flags[1])
    assert record_machine_state(flagged) == want
    assert record_machine_state(None) is None


def test_an_executor_that_raises_costs_the_tick_not_the_advice() -> None:
    b = Balancer()

    def broken_plan(advice, container_ids):  # type: ignore[no-untyped-def]
        raise RuntimeError("cgroup tree unreadable")

    b.executor.plan = broken_plan  # type: ignore[method-assign]
    report = b.core.handle(Tick(b.at(0)))
    assert report.result is RoundResult.STORED and report.advice is None
    assert "internal error: RuntimeError('cgroup tree unreadable')" in report.error
    assert b.store.kinds() == ["BalanceRoundRecorded"], "the advice was not taken"
    assert len(b.core.handle(GetAdvices())) == 1


def test_the_view_carries_the_round_metric_by_tags() -> None:
    b = Balancer()
    b.core.handle(Tick(b.at(0)))
    view = b.core.handle(GetBalancerState())
    assert view.round_metric == {
        (
            ("need_balance", "true"),
            ("balance_level", "graceBalance"),
            ("bandwidth_pressure", "false"),
            ("status", "prepareSuccess"),
            ("bandwidth_level", "high"),
            ("failed_reason", ""),
        ): 1
    }


@pytest.mark.parametrize(
    ("elapsed_s", "window"),
    [
        pytest.param(None, machine.OPEN, id="no advice emitted yet: open"),
        pytest.param(0, machine.COOLING_DOWN, id="at the emitted round's detect time"),
        pytest.param(29.999999, machine.COOLING_DOWN, id="just under 30 s"),
        pytest.param(30, machine.PING_PONG_WINDOW, id="30 s ends the cool-down"),
        pytest.param(15 * 60, machine.PING_PONG_WINDOW, id="exactly 15 minutes"),
        pytest.param(15 * 60 + 1e-6, machine.OPEN, id="a microsecond past 15 minutes"),
        pytest.param(-10, machine.COOLING_DOWN, id="a clock that stepped back"),
    ],
)
def test_the_windows_machine_follows_last(elapsed_s: float | None, window: str) -> None:
    b = Balancer()
    if elapsed_s is not None:
        b.core.handle(Tick(b.at(0)))
    last = b.core.state.last
    now = NOW + (elapsed_s or 0)
    assert balancer_window(last, now) == window
    assert b.core.handle(Tick(now)).window == window


def test_a_round_without_pressure_reads_no_pod_and_journals_none() -> None:
    """The pods cannot change a round without pressure (§7.4), so their cgroups are not read
    and the journaled inputs, which leave them out, recompute to the same record."""
    b = Balancer(latency=[40, 30, 30, 20])
    report = b.core.handle(Tick(b.at(0)))
    assert report.record is not None and not report.record.need_balance
    assert b.memory.reads == 0
    (event,) = b.store.events
    assert isinstance(event, BalanceRoundRecorded) and event.inputs["pods"] == []
    assert plan_round(RoundInputs.from_json(event.inputs)).record == event.record
    b.metrics.latency = list(EX2_L)
    assert b.core.handle(Tick(b.at(5))).advice is not None
    assert b.memory.reads == len(EX2_PODS)


def test_distance_lists_the_check_refuses_fail_every_round_with_the_reason() -> None:
    """The lists are checked once at start (``checked_distances``); lists it refuses do not
    stop the balancer: each round fails with the reason, journaled, as a bad input does."""
    b = Balancer(table={0: [(1, 11), (1, 21)], 1: [(0, 11)], 2: [(0, 21)], 3: [(0, 21)]})
    for t in (0, 5):
        report = b.core.handle(Tick(b.at(t)))
        assert report.result is RoundResult.FAILED
        assert "distances[0]: a NUMA id appears twice" in report.error
    assert b.store.kinds() == ["BalanceRoundFailed", "BalanceRoundFailed"]
