"""The CPU pressure actor's core: it reads the CPU state only through the store's snapshot,
commits each decision's events with its inputs, answers from the durable section, clears load
rings from before a restart, and refuses (nothing answered) when a commit fails."""

from __future__ import annotations

import json

import pykka
import pytest

from actors.cpu_pressure import CPUPressureActor, CPUPressureCore, PressurePorts
from actors.cpu_pressure_messages import (
    CollectLoad,
    GetPressureState,
    LoadThresholdMet,
    LoadTopEvictionPods,
    PressureUnavailable,
    SuppressionEvictPods,
)
from actors.store_messages import Snapshot
from policy.cpu.pressure import ActivePod, PressureSettings
from policy.cpu.pressure.rerun import rerun_cause
from policy.cpu.qos import RECLAIMED_CORES
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.pressure import apply_pressure_event
from policy.state.pressure.events import (
    LoadEvictionOffered,
    LoadEvictionPoolSet,
    LoadHistoryCleared,
    LoadSamplesCollected,
    SuppressionTimersSet,
)
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from qrmd.sim.host.cpu_load import SimulatedContainerLoads
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.policy.state_fixtures import SYNTH_16_2_4, container, cpus

SETTINGS = PressureSettings(
    enable_load_eviction=True,
    load_metric_ring_size=2,
    enable_suppression_eviction=True,
    min_suppression_tolerance_duration_s=60,
)
RECLAIMED = {"katalyst.kubewharf.io/qos_level": RECLAIMED_CORES}
WEB = ActivePod("web", "shop", "web", {}, containers=(("main", {"cpu": "2"}),))
ETL = ActivePod(
    "etl",
    "batch",
    "etl",
    {**RECLAIMED, "katalyst.kubewharf.io/cpu_enhancement": '{"suppression_tolerance_rate": "1"}'},
    containers=(("main", {"cpu": "8"}),),
)


def node_state():  # type: ignore[no-untyped-def]
    return apply_all(
        empty_state(SYNTH_16_2_4),
        [
            PoolSet("share", cpus("0-7")),
            PoolSet("reclaim", cpus("8-11")),
            ContainerAllocated(container("web", "main", InPool("share"), owner="share")),
            ContainerAllocated(
                container("etl", "main", InPool("reclaim"), owner="reclaim", qos=RECLAIMED_CORES)
            ),
        ],
    )


def make_core(
    committer: ApplyingCommitter | None = None, loads: SimulatedContainerLoads | None = None
) -> tuple[CPUPressureCore, ApplyingCommitter, SimulatedContainerLoads, FakeClock]:
    committer = committer or ApplyingCommitter(node_state())
    loads = loads or SimulatedContainerLoads()
    clock = FakeClock(1_000.0)
    core = CPUPressureCore(
        committer.snapshot,
        committer,
        PressurePorts(loads),
        SETTINGS,
        reserved=CPUSet.parse(""),
        now_fn=clock.time,
    )
    return core, committer, loads, clock


def test_a_hard_pool_is_offered_with_every_step_journaled_with_its_inputs() -> None:
    core, committer, loads, clock = make_core()
    loads.set_load("web", "main", 20.0)  # > 14.4 = 8 × 1.8
    for _ in range(2):
        core.handle(CollectLoad(clock.time()))
        clock.advance(30)
    assert core.handle(LoadThresholdMet()).met_type == "HARD_MET"
    answer = core.handle(LoadTopEvictionPods((WEB,), 1))
    assert answer.pod_uids == ("web",)
    kinds = [type(e) for e in committer.events]
    assert kinds == [
        LoadSamplesCollected,
        LoadSamplesCollected,
        LoadEvictionPoolSet,
        LoadEvictionOffered,
    ]
    collected = committer.causes[0]
    assert collected["command"] == "CollectLoad"
    # The reclaim container is in a skipped pool: not asked for, not sampled.
    assert collected["inputs"]["loads"] == [["web", "main", 20.0]]
    offered = committer.causes[-1]
    assert offered["command"] == "GetTopEvictionPods"
    assert offered["answer"] == {"pod_uids": ["web"], "deletion_options": None}  # as sent
    assert offered["pool"] == "share"  # not on the wire: beside the answer
    met = committer.causes[-2]
    assert (met["command"], met["answer"]["met_type"], met["pool"]) == (
        "ThresholdMet",
        "HARD_MET",
        "share",
    )
    assert [p["uid"] for p in offered["inputs"]["active_pods"]] == ["web"]
    # What the actor answers from is the durable section.
    assert core.history == committer.snapshot.state.cpu_pressure


def test_a_missing_load_leaves_the_pool_unsampled_and_says_why() -> None:
    core, committer, loads, clock = make_core()
    loads.make_unreadable("web", "main", "collector down")
    report = core.handle(CollectLoad(clock.time()))
    assert report.unsampled_pools == ("share",)
    assert committer.causes[0]["inputs"]["missing"] == [["web", "main", "collector down"]]
    assert "share" not in core.history.pool_rings


def test_the_suppression_timer_is_journaled_and_the_pod_offered_after_the_minimum() -> None:
    core, committer, _, clock = make_core()
    assert core.handle(SuppressionEvictPods((WEB, ETL))).offers == ()  # 8 on 4: 2.0 > 1
    assert committer.events == [SuppressionTimersSet((("batch/etl", 1000.0),))]
    clock.advance(61)
    (offer,) = core.handle(SuppressionEvictPods((WEB, ETL))).offers
    assert (offer.pod_uid, offer.active_index) == ("etl", 1)
    assert committer.causes[-1]["answer"]["evict_pods"][0]["reason"] == (
        "current pool suppression rate 2.00 is over than the pod suppression tolerance rate 1.00"
    )


def test_a_refused_commit_answers_nothing_and_keeps_the_section() -> None:
    core, committer, loads, clock = make_core()
    loads.set_load("web", "main", 20.0)
    core.handle(CollectLoad(clock.time()))
    clock.advance(30)
    core.handle(CollectLoad(clock.time()))
    committer.refuse_next()
    with pytest.raises(
        PressureUnavailable, match="ThresholdMet: the decision was not made durable"
    ):
        core.handle(LoadThresholdMet())
    assert core.history.eviction_pool == ""
    assert core.handle(LoadThresholdMet()).met_type == "HARD_MET"  # the next poll goes through


def test_a_collection_that_cannot_commit_is_counted_not_raised() -> None:
    core, committer, _, clock = make_core()
    committer.refuse_next()
    assert core.handle(CollectLoad(clock.time())).pools == {}
    assert core.handle(GetPressureState()).counters["collection_failures_total"] == 1


def test_a_restart_clears_the_load_rings_but_keeps_the_timers() -> None:
    core, committer, loads, clock = make_core()
    loads.set_load("web", "main", 3.0)
    core.handle(CollectLoad(clock.time()))
    core.handle(SuppressionEvictPods((ETL,)))
    restarted, _, _, _ = make_core(committer)
    restarted.start()
    assert committer.events[-1] == LoadHistoryCleared("restart")
    assert not restarted.history.pool_rings
    assert dict(restarted.history.tolerance_since) == {"batch/etl": 1000.0}
    restarted.start()  # nothing left to clear: nothing journaled
    assert committer.events[-1] == LoadHistoryCleared("restart")
    assert len([e for e in committer.events if isinstance(e, LoadHistoryCleared)]) == 1


def test_the_shell_serves_the_core_on_one_mailbox() -> None:
    core, committer, _, _ = make_core()
    ref = CPUPressureActor.start(core)
    try:
        view = ref.ask(GetPressureState(), timeout=5)
        assert view.seq == committer.snapshot.seq
        with pytest.raises(TypeError, match="no command"):
            ref.ask(object(), timeout=5)
    finally:
        ref.stop()
    assert not pykka.ActorRegistry.get_all()


def test_replaying_the_journal_rebuilds_the_section() -> None:
    core, committer, loads, clock = make_core()
    loads.set_load("web", "main", 20.0)
    for _ in range(2):
        core.handle(CollectLoad(clock.time()))
        clock.advance(30)
    core.handle(LoadThresholdMet())
    core.handle(LoadTopEvictionPods((WEB,), 1))
    assert committer.replayed() == committer.snapshot.state
    assert isinstance(committer.snapshot, Snapshot)


def test_every_journaled_decision_re_runs_from_its_cause_to_the_same_events() -> None:
    core, committer, loads, clock = make_core()
    loads.set_load("web", "main", 20.0)
    for _ in range(2):
        core.handle(CollectLoad(clock.time()))
        clock.advance(30)
    core.handle(LoadThresholdMet())
    core.handle(LoadTopEvictionPods((WEB,), 1))
    core.handle(SuppressionEvictPods((WEB, ETL)))
    clock.advance(61)
    core.handle(SuppressionEvictPods((WEB, ETL)))
    restarted, _, _, _ = make_core(committer)
    restarted.start()
    # Replay record by record: each cause, re-run on the section before it, gives its events.
    history = committer.initial.cpu_pressure
    position = 0
    records = 0
    for cause in committer.causes:
        decision = rerun_cause(history, json.loads(json.dumps(cause)))
        recorded = committer.events[position : position + len(decision.events)]
        assert list(decision.events) == recorded, cause["command"]
        for event in recorded:
            history = apply_pressure_event(history, event)
        position += len(recorded)
        records += 1
    assert position == len(committer.events) and records == 7
    assert history == committer.snapshot.state.cpu_pressure
