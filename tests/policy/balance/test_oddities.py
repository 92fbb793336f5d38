"""The reference's oddities (spec memory-balancer §14): each fixed one shows the fix, and the
kept ones that examples do not already show are pinned here."""

from __future__ import annotations

import pytest

from policy.balance import (
    BalanceError,
    BalancerConfig,
    BalanceStatus,
    RoundInputs,
    RoundResult,
    UnresolvedPod,
    plan_round,
)
from policy.balance.config import VendorAware
from policy.balance.errors import RoundFailed
from policy.balance.numas import regulated_candidates
from policy.balance.record import BandwidthLevel
from tests.policy.balance.examples import (
    EX2_PODS,
    FAILED,
    NOTHING_TO_DO,
    SUCCESS,
    T4,
    GiB,
    MiB,
    N,
    R,
    S,
    distances,
    last_round,
    make_inputs,
    pod,
)

EX5_L, EX5_B = (90, 40, 30, 20), (600, 150, 1000, 300)
REAL2 = {0: [(0, 10), (1, 11)], 1: [(0, 11), (1, 10)]}
POOLS2 = {"share": (0, 1), "reclaim": (0, 1)}


def test_o1_nothing_to_do_is_stored_as_prepare_failed() -> None:
    """The reference overwrites prepareFailed with prepareSuccess and keeps the reason."""
    inputs = make_inputs(
        [65, 20, 30, 25], [500, 400, 300, 200], [S("s1", {0: 2 * GiB})], last=last_round(1, [0], 5)
    )
    outcome = plan_round(inputs)
    assert outcome.result is RoundResult.STORED, "not an error: the record is stored"
    assert outcome.record is not None
    assert outcome.record.status is FAILED
    assert outcome.record.failed_reason == NOTHING_TO_DO
    assert outcome.record.metric_tags()["status"] == "prepareFailed"
    assert outcome.advice is None


def test_o3_medium_branch_without_source_distances_fails_the_round() -> None:
    """The reference swallows this error and goes on with the max-latency node's list.

    A round reads metrics for exactly the nodes of the distance map (§4.1), so the source always
    has a list there; the step itself is shown failing on a map without the source's entry.
    """
    raw = [N(i, lat, bw) for i, (lat, bw) in enumerate(zip(EX5_L, EX5_B, strict=True))]
    table = distances({k: v for k, v in T4.items() if k != 2})
    with pytest.raises(RoundFailed) as failed:
        regulated_candidates(BandwidthLevel.MEDIUM, raw[0], raw[2], raw, table)
    assert str(failed.value) == (
        "failed to find numa id(2)in numa distance array("
        "map[0:[{NumaID:1 Distance:11} {NumaID:2 Distance:21} {NumaID:3 Distance:21}] "
        "1:[{NumaID:0 Distance:11} {NumaID:2 Distance:21} {NumaID:3 Distance:21}] "
        "3:[{NumaID:0 Distance:21} {NumaID:1 Distance:21} {NumaID:2 Distance:11}]])"
    )
    regulated = regulated_candidates(BandwidthLevel.MEDIUM, raw[0], raw[2], raw, distances(T4))
    assert [(n.numa_id, n.distance) for n in regulated] == [(1, 21)]


@pytest.mark.parametrize(
    ("pods", "status", "evicted"),
    [
        pytest.param([R("r1", {2: 2 * GiB})], SUCCESS, ["r1"], id="eviction still proceeds"),
        pytest.param([S("s1", {2: GiB})], FAILED, [], id="nothing to evict is nothing to do"),
    ],
)
def test_o4_empty_bandwidth_ordered_list_means_no_destination(
    pods: list, status: BalanceStatus, evicted: list[str]
) -> None:
    """The reference crashes slicing the empty list."""
    table = {**T4, 2: []}
    outcome = plan_round(make_inputs(EX5_L, EX5_B, pods, table=table))
    assert outcome.result is RoundResult.STORED and outcome.record is not None
    assert outcome.record.dest_numas == ()
    assert outcome.record.status is status
    assert [p.uid for p in outcome.record.evict_pods] == evicted


def test_o5_self_entry_no_longer_hides_the_latency_gap() -> None:
    """Reference: the gap is measured against the node itself (0), so no pressure is found."""
    outcome = plan_round(
        make_inputs([65, 20], [500, 400], [S("s1", {0: 2 * GiB})], table=REAL2, pools=POOLS2)
    )
    assert outcome.record is not None and outcome.record.need_balance
    assert [n.numa_id for n in outcome.record.dest_numas or ()] == [1]


def test_o5_source_is_never_its_own_destination_with_a_zero_gap_ratio() -> None:
    config = BalancerConfig(grace_balance_gap_ratio=0.0, force_balance_gap_ratio=0.0)
    outcome = plan_round(
        make_inputs(
            [85, 20], [500, 400], [S("s1", {0: 2 * GiB})], table=REAL2, pools=POOLS2, config=config
        )
    )
    assert outcome.record is not None
    assert [n.numa_id for n in outcome.record.dest_numas or ()] == [1]
    assert outcome.advice is not None and outcome.advice.dest_numa_list == (1,)


def test_o12_eviction_tie_picks_the_lowest_uid() -> None:
    pods = [R("rz", {0: GiB}), R("ra", {0: GiB}), R("rm", {0: GiB})]
    outcome = plan_round(make_inputs([85, 50, 40, 30], [800, 700, 300, 200], pods))
    assert outcome.record is not None
    assert [p.uid for p in outcome.record.evict_pods] == ["ra"]


def test_o12_balance_ties_are_in_uid_order_and_pools_in_configured_order() -> None:
    pods = [
        pod("b2", "batch", {0: GiB}),
        S("s2", {0: GiB}),
        pod("b1", "batch", {0: GiB}),
        S("s1", {0: GiB}),
    ]
    config = BalancerConfig(supported_pools=("share", "batch"))
    outcome = plan_round(
        make_inputs(
            [85, 50, 40, 30],
            [800, 700, 300, 200],
            pods,
            pools={"share": (0, 1), "batch": (0, 1), "reclaim": (0, 1, 2, 3)},
            config=config,
        )
    )
    assert outcome.record is not None
    assert [p.uid for p in outcome.record.balance_pods] == ["s1", "s2", "b1", "b2"]


def test_o12_candidate_ties_keep_distance_list_order() -> None:
    # NUMAs 2 and 3 are both at distance 21 with latency 30 from NUMA 0; the list names 3 first.
    table = {**T4, 0: [(1, 11), (3, 21), (2, 21)]}
    outcome = plan_round(make_inputs([100, 95, 30, 30], [500, 450, 100, 100], table=table))
    assert outcome.record is not None
    assert [n.numa_id for n in outcome.record.dest_numas or ()] == [3, 2]


def test_o22_reclaim_is_not_a_supported_pool() -> None:
    with pytest.raises(BalanceError, match="'reclaim' may not be listed"):
        BalancerConfig(supported_pools=("share", "reclaim"))
    with pytest.raises(BalanceError, match="listed twice"):
        BalancerConfig(supported_pools=("share", "share"))


def test_o22_a_pod_is_listed_once() -> None:
    with pytest.raises(BalanceError, match="pod 's1' is listed twice"):
        make_inputs([85, 50, 40, 30], [800, 700, 300, 200], [S("s1", {0: GiB}), S("s1", {0: GiB})])


# --- kept oddities --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("anon", "balanced"),
    [
        pytest.param(128 * MiB, False, id="exactly the minimum is excluded"),
        pytest.param(128 * MiB + 1, True, id="one byte over the minimum is included"),
        pytest.param(10 * GiB, False, id="exactly the maximum is excluded"),
        pytest.param(10 * GiB - 1, True, id="one byte under the maximum is included"),
    ],
)
def test_o13_rss_bounds_are_strict(anon: int, balanced: bool) -> None:
    outcome = plan_round(make_inputs([85, 50, 40, 30], [800, 700, 300, 200], [S("s1", {0: anon})]))
    assert outcome.record is not None
    assert bool(outcome.record.balance_pods) is balanced


def test_o14_shared_cap_counts_the_reclaimed_total() -> None:
    # 2 GiB reclaimed (< 3 GiB threshold), then shared: 2 + 9 = 11 <= 12, 11 + 2 = 13 > 12.
    pods = [R("r1", {0: 2 * GiB}), S("s1", {0: 9 * GiB}), S("s2", {0: 9 * GiB + 1})]
    outcome = plan_round(make_inputs([85, 50, 40, 30], [800, 700, 300, 200], pods))
    assert outcome.record is not None
    assert [p.uid for p in outcome.record.balance_pods] == ["r1", "s1"]


def test_o11_a_tiny_reclaimed_pod_is_still_evicted() -> None:
    outcome = plan_round(make_inputs([85, 50, 40, 30], [800, 700, 300, 200], [R("r", {0: 4096})]))
    assert outcome.record is not None
    assert [p.uid for p in outcome.record.evict_pods] == ["r"]


def test_o2_the_evicted_pod_may_also_be_migrated() -> None:
    outcome = plan_round(make_inputs((75, 50, 30, 20), (900, 300, 200, 100), EX2_PODS))
    assert outcome.record is not None
    assert "r1" in {p.uid for p in outcome.record.evict_pods}
    assert "r1" in {p.uid for p in outcome.record.balance_pods}


def test_o17_failed_pod_lookup_fails_the_round_even_for_a_skipped_pool() -> None:
    base = make_inputs(
        [100, 88, 80, 70], [500, 450, 100, 90], [R("rs", {0: 2 * GiB})]
    )  # example 4: the share pool has no overlap with destinations {3, 2}
    inputs = RoundInputs(
        now=base.now,
        numa_metrics=base.numa_metrics,
        distances=base.distances,
        pools=base.pools,
        pods=base.pods,
        unresolved_pods=(
            UnresolvedPod("gone", "share", "pod gone not found"),
            UnresolvedPod("lost", "share", "pod lost not found"),
        ),
    )
    outcome = plan_round(inputs)
    assert outcome.result is RoundResult.FAILED
    assert outcome.error == "[pod gone not found, pod lost not found]"


def test_vendor_aware_thresholds_follow_the_cpu_vendor() -> None:
    """§3.1: AMD's latency thresholds are 500/600, so latency 550 is grace on AMD only."""
    amd = plan_round(
        make_inputs([550, 50, 40, 30], [800, 700, 300, 200], cpu_vendor="AuthenticAMD")
    )
    intel = plan_round(make_inputs([550, 50, 40, 30], [800, 700, 300, 200]))
    assert amd.record is not None and intel.record is not None
    assert str(amd.record.balance_level) == "graceBalance"
    assert str(intel.record.balance_level) == "forceBalance"
    custom = BalancerConfig(force_balance_read_latency_threshold=VendorAware.of({"default": 600}))
    assert custom.resolve("AuthenticAMD").force_balance_read_latency_threshold == 600.0
