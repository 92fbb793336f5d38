"""Both plugins over time, with an injected clock: the load ring filling, SOFT then HARD, the
cool-down, the minimum suppression duration and a pod leaving with its timer cleared.

Each step calls the decision at ``clock.time()``, applies its events to the section (as the
StateStore does) and checks the answer and what the section remembers. No test sleeps.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.cpu.pressure import (
    ActivePod,
    ContainerPool,
    LoadInputs,
    PoolMap,
    PressureSettings,
    SuppressionError,
    SuppressionInputs,
    TopInputs,
    collect_load,
    evict_pods,
    threshold_met,
    top_eviction_pods,
)
from policy.decision import Decision
from policy.state.pressure import PressureHistory, apply_pressure_event
from policy.state.pressure.events import LoadHistoryCleared
from tests.actors.fakes import FakeClock

SHARED = {"katalyst.kubewharf.io/qos_level": "shared_cores"}
RECLAIMED = {"katalyst.kubewharf.io/qos_level": "reclaimed_cores"}
POOLS = PoolMap(
    {"share": 10, "reclaim": 4},
    (ContainerPool("web", "main", "share"), ContainerPool("batch", "main", "share")),
)
WEB = ActivePod("web", "default", "web", SHARED, containers=(("main", {}),))
BATCH = ActivePod("batch", "default", "batch", SHARED, containers=(("main", {}),))


class Node:
    """The section and a clock; each call applies its decision's events."""

    def __init__(self, settings: PressureSettings, start: float = 1_000.0) -> None:
        self.clock = FakeClock(start)
        self.history = PressureHistory()
        self.settings = settings

    def apply(self, decision: Decision[Any]) -> Any:
        for event in decision.events:
            self.history = apply_pressure_event(self.history, event)
        return decision.reply

    def collect(self, web: float | None, batch: float | None = 1.0) -> Decision[Any]:
        loads = {
            k: v
            for k, v in {("web", "main"): web, ("batch", "main"): batch}.items()
            if v is not None
        }
        decision = collect_load(
            self.history, LoadInputs(POOLS, loads), self.settings, self.clock.time()
        )
        self.apply(decision)
        return decision

    def met(self) -> str:
        return str(
            self.apply(threshold_met(self.history, self.settings, self.clock.time())).met_type
        )

    def top(self) -> tuple[str, ...]:
        inputs = TopInputs(POOLS, (WEB, BATCH), top_n=1)
        answer = self.apply(
            top_eviction_pods(self.history, inputs, self.settings, self.clock.time())
        )
        return tuple(answer.pod_uids)


LOAD = PressureSettings(
    enable_load_eviction=True,
    load_metric_ring_size=4,
    load_threshold_met_percentage=0.5,
    load_eviction_cool_down_s=300,
)


def test_the_ring_must_fill_to_the_percentage_of_its_size_before_the_threshold_is_met() -> None:
    node = Node(PressureSettings(enable_load_eviction=True, load_metric_ring_size=3))
    answers = []
    for _ in range(3):
        node.collect(web=30)  # 31 > 18 = 10 × 1.8: hard over every time
        answers.append(node.met())
        node.clock.advance(30)
    # 1/3 and 2/3 of the ring are under 0.8; 3/3 is not.
    assert answers == ["NOT_MET", "NOT_MET", "HARD_MET"]
    assert node.history.eviction_pool == "share"


def test_soft_then_hard_then_one_offer_per_cool_down() -> None:
    node = Node(LOAD)
    steps = []
    for web in (12, 12, 20, 20):  # share sums 13, 13 (soft: > 10), 21, 21 (hard: > 18)
        node.collect(web=web)
        steps.append(node.met())
        node.clock.advance(30)
    assert steps == ["NOT_MET", "SOFT_MET", "SOFT_MET", "HARD_MET"]
    # The heaviest pod by its ring's sum is offered; the pool is then cleared.
    assert node.top() == ("web",)
    assert node.history.eviction_pool == ""
    assert node.history.last_eviction_time == node.clock.time()
    offered_at = node.clock.time()
    # Still HARD a minute later, but in the cool-down: nothing is offered, the pool stays set.
    node.clock.advance(60)
    node.collect(web=20)
    assert node.met() == "HARD_MET"
    assert node.top() == ()
    assert node.history.eviction_pool == "share"
    # Once the cool-down has passed (>= 300 s), the next HARD answer offers again.
    node.clock.advance(offered_at + 300 - node.clock.time())
    node.collect(web=20)
    assert node.met() == "HARD_MET"
    assert node.top() == ("web",)


def test_a_soft_answer_clears_the_eviction_pool_so_no_pod_is_offered() -> None:
    node = Node(LOAD)
    for web in (20, 20):
        node.collect(web=web)
        node.clock.advance(30)
    assert node.met() == "HARD_MET"
    for web in (9.5, 9.5):  # 10.5 > 10: soft only; the ring is now 2 hard, 2 soft
        node.collect(web=web)
        node.clock.advance(30)
    node.collect(web=9.5)  # 3 soft, 1 hard of 4: SOFT
    assert node.met() == "SOFT_MET"
    assert node.history.eviction_pool == ""
    assert node.top() == ()


def test_a_missing_load_is_an_error_for_its_pool_never_a_zero() -> None:
    node = Node(LOAD)
    node.collect(web=30)
    node.clock.advance(30)
    decision = node.collect(web=None, batch=1.0)
    assert decision.reply.unsampled_pools == ("share",)
    assert decision.warnings == (
        "pool share: no cpu.load.1min.container sample for web/main; "
        "the pool is not sampled this time",
    )
    # The pool's ring kept only the full sample; batch's own ring still got its sample.
    assert [s.value for s in node.history.pool_rings["share"].samples] == [31.0]
    assert len(node.history.container_rings[("batch", "main")].samples) == 2


def test_a_container_gone_from_the_state_loses_its_ring() -> None:
    node = Node(LOAD)
    node.collect(web=5)
    assert ("web", "main") in node.history.container_rings
    node.clock.advance(30)
    only_batch = PoolMap({"share": 10}, (ContainerPool("batch", "main", "share"),))
    decision = collect_load(
        node.history,
        LoadInputs(only_batch, {("batch", "main"): 1.0}),
        node.settings,
        node.clock.time(),
    )
    node.apply(decision)
    assert set(node.history.container_rings) == {("batch", "main")}


def test_two_collections_at_the_same_time_push_once() -> None:
    node = Node(LOAD)
    node.collect(web=5)
    node.collect(web=7)
    assert [s.value for s in node.history.pool_rings["share"].samples] == [6.0]


def test_disabling_load_eviction_forgets_every_sample() -> None:
    node = Node(LOAD)
    node.collect(web=30)
    node.settings = PressureSettings()
    decision = node.collect(web=30)
    assert decision.events == (LoadHistoryCleared("disabled"),)
    assert not node.history.pool_rings and not node.history.container_rings
    assert node.met() == "NOT_MET"
    # Already empty: nothing more to journal.
    assert node.collect(web=30).events == ()


# -- suppression ------------------------------------------------------------------------------

SUPPRESSION = PressureSettings(
    enable_suppression_eviction=True, min_suppression_tolerance_duration_s=300
)


def reclaimed(
    name: str, cpus: str, rate: str | None = "1.0", priority: int | None = None
) -> ActivePod:
    annotations = dict(RECLAIMED)
    if rate is not None:
        annotations["katalyst.kubewharf.io/cpu_enhancement"] = (
            f'{{"suppression_tolerance_rate": "{rate}"}}'
        )
    return ActivePod(name, "batch", name, annotations, priority, (("main", {"cpu": cpus}),))


def suppress(node: Node, pods: tuple[ActivePod, ...], pool: int | None = 4) -> Any:
    decision = evict_pods(
        node.history, SuppressionInputs(pool, pods), node.settings, node.clock.time()
    )
    return node.apply(decision)


def test_a_pod_is_offered_only_once_over_its_tolerance_for_longer_than_the_minimum() -> None:
    node = Node(SUPPRESSION)
    pods = (reclaimed("a", "6"),)  # 6 CPUs on 4: rate 1.5 > 1.0
    start = node.clock.time()
    assert suppress(node, pods).offers == ()
    assert dict(node.history.tolerance_since) == {"batch/a": start}
    node.clock.advance(300)  # exactly the minimum: not longer than it
    assert suppress(node, pods).offers == ()
    node.clock.advance(0.5)
    (offer,) = suppress(node, pods).offers
    assert (offer.pod_uid, offer.active_index) == ("a", 0)
    assert offer.reason == (
        "current pool suppression rate 1.50 is over than the pod suppression tolerance rate 1.00"
    )
    # Offering does not stop the timer: the reference keeps it until the pod is under or gone.
    assert dict(node.history.tolerance_since) == {"batch/a": start}


def test_a_pod_that_leaves_has_its_timer_cleared_and_starts_again_when_back() -> None:
    node = Node(SUPPRESSION)
    pods = (reclaimed("a", "6"), reclaimed("b", "1", rate="9"))
    suppress(node, pods)
    assert set(node.history.tolerance_since) == {"batch/a"}
    node.clock.advance(200)
    suppress(node, pods[1:])  # a is gone (evicted or deleted)
    assert dict(node.history.tolerance_since) == {}
    node.clock.advance(200)
    back = node.clock.time()
    assert suppress(node, pods).offers == ()  # 400 s after the first sighting, but a new timer
    assert dict(node.history.tolerance_since) == {"batch/a": back}


def test_a_pod_back_under_its_tolerance_stops_its_timer() -> None:
    node = Node(SUPPRESSION)
    suppress(node, (reclaimed("a", "6"),))
    node.clock.advance(100)
    suppress(node, (reclaimed("a", "3"),))  # 3 on 4: 0.75 <= 1.0
    assert dict(node.history.tolerance_since) == {}


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param(
            (reclaimed("small", "2"), reclaimed("large", "4")),
            ["large", "small"],
            id="the larger request goes first",
        ),
        pytest.param(
            (reclaimed("high", "2", priority=100), reclaimed("low", "2", priority=-5)),
            ["low", "high"],
            id="equal requests: the lower priority goes first",
        ),
        pytest.param(
            (reclaimed("aaa", "2"), reclaimed("zzz", "2")),
            ["zzz", "aaa"],
            id="equal requests and priorities: namespace/name descending, as CmpString sorts",
        ),
    ],
)
def test_suppression_eviction_order(pods: tuple[ActivePod, ...], want: list[str]) -> None:
    node = Node(
        PressureSettings(enable_suppression_eviction=True, min_suppression_tolerance_duration_s=0)
    )
    suppress(node, pods, pool=1)
    node.clock.advance(1)
    # On a pool of 1 CPU the rate stays over 1.0 until the last pod is offered: the offers
    # come in eviction order.
    assert [o.pod_uid for o in suppress(node, pods, pool=1).offers] == want


def test_the_pool_rate_counts_whole_cpus_rounded_up_as_quantity_value() -> None:
    node = Node(
        PressureSettings(enable_suppression_eviction=True, min_suppression_tolerance_duration_s=0)
    )
    # 1.5 + 1.5 = 3 CPUs on 10 is 0.3, 1.5 alone is 2 (rounded up) on 10: 0.2.
    pods = (reclaimed("a", "1500m", rate="0.25"), reclaimed("b", "1500m", rate="0.25"))
    suppress(node, pods, pool=10)
    node.clock.advance(1)
    offers = suppress(node, pods, pool=10).offers
    assert [o.pod_uid for o in offers] == ["b"]  # then 2/10 = 0.2 < 0.25 keeps a
    assert offers[0].reason.startswith("current pool suppression rate 0.30 ")


def test_a_tolerance_rate_is_capped_at_the_maximum_and_a_bad_one_is_the_maximum() -> None:
    node = Node(
        PressureSettings(
            enable_suppression_eviction=True,
            max_suppression_tolerance_rate=2.0,
            min_suppression_tolerance_duration_s=0,
        )
    )
    pods = (reclaimed("big", "12", rate="50"), reclaimed("bad", "1", rate="fast"))
    suppress(node, pods, pool=4)
    node.clock.advance(1)
    decision = evict_pods(
        node.history, SuppressionInputs(4, pods), node.settings, node.clock.time()
    )
    reasons = [o.reason for o in decision.reply.offers]
    # 13 on 4 = 3.25 > 2 (50 capped): big goes; then 1 on 4 = 0.25 < 2 keeps bad.
    assert reasons == [
        "current pool suppression rate 3.25 is over than the pod suppression tolerance rate 2.00"
    ]
    assert any("'fast' is not a number" in w for w in decision.warnings)


def test_only_reclaimed_pods_are_candidates_and_no_reclaim_pool_is_an_error() -> None:
    node = Node(
        PressureSettings(enable_suppression_eviction=True, min_suppression_tolerance_duration_s=0)
    )
    shared = ActivePod("web", "default", "web", SHARED, containers=(("main", {"cpu": "40"}),))
    suppress(node, (shared,))
    node.clock.advance(1)
    assert suppress(node, (shared,)).offers == ()
    with pytest.raises(SuppressionError, match="get reclaim pool failed"):
        suppress(node, (shared,), pool=None)
    assert suppress(node, (reclaimed("a", "9"),), pool=0).offers == ()


def test_an_idle_node_journals_no_collection() -> None:
    node = Node(LOAD)
    decision = collect_load(node.history, LoadInputs(PoolMap({"share": 10})), LOAD, 1.0)
    assert decision.events == ()
    node.collect(web=5)
    # The pods left: their rings and the pool's expire; that is a change, and journaled.
    gone = collect_load(node.history, LoadInputs(PoolMap({})), LOAD, 2.0)
    (event,) = gone.events
    assert event.expired == (("batch", "main"), ("share", ""), ("web", "main"))


@pytest.mark.parametrize(
    ("containers", "candidate"),
    [
        pytest.param(("main",), True, id="its container is in the eviction pool"),
        pytest.param(("side", "main"), True, id="a known container in another pool is skipped"),
        pytest.param(
            ("ghost", "main"),
            False,
            id="an unknown first container ends the scan, as the reference",
        ),
    ],
)
def test_which_pods_are_candidates(containers: tuple[str, ...], candidate: bool) -> None:
    pools = PoolMap(
        {"share": 10, "reclaim": 4},
        (ContainerPool("web", "main", "share"), ContainerPool("web", "side", "reclaim")),
    )
    node = Node(LOAD)
    node.history = node.history.with_eviction_pool("share")
    pod = ActivePod("web", "default", "web", SHARED, containers=tuple((c, {}) for c in containers))
    answer = top_eviction_pods(node.history, TopInputs(pools, (pod,), 1), LOAD, 1.0).reply
    assert answer.pod_uids == (("web",) if candidate else ())
