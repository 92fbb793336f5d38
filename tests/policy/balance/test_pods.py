"""Listing pods in pools, the eviction pick and the migration candidates (§4.5, §7.8, §7.10)."""

from __future__ import annotations

import pytest

from policy.balance import UnresolvedPod
from policy.balance.errors import RoundFailed
from policy.balance.pods import PoolListing, collect_candidates, pod_to_evict
from tests.policy.balance.examples import GiB, MiB, R, S, pod

BOUNDS = (128 * MiB, 10 * GiB)


def test_pods_without_a_sample_on_the_source_are_skipped() -> None:
    two = pod("two", "reclaim", containers=[("a", {0: GiB}), ("b", {1: GiB})])
    listing = PoolListing([R("one", {0: 512 * MiB}), two], [])
    evict = pod_to_evict(listing, 0)
    assert evict is not None and evict.uid == "one", "pod 'two' has no sample of 'b' on NUMA 0"
    assert pod_to_evict(listing, 2) is None


def test_pod_level_anon_sums_its_containers() -> None:
    two = pod("two", "share", containers=[("a", {0: GiB}), ("b", {0: GiB})])
    found = collect_candidates(
        PoolListing([two], []),
        {"share": (0, 1)},
        "share",
        source_numa=0,
        dest_ids=frozenset({1}),
        bounds=BOUNDS,
    )
    assert [(c.pod.uid, c.anon, c.pool_numas) for c in found] == [("two", 2.0 * GiB, (0, 1))]


def test_a_pool_without_pool_info_has_no_candidates_and_no_lookup_error() -> None:
    listing = PoolListing([S("s1", {0: GiB})], [UnresolvedPod("u", "share", "pod u not found")])
    found = collect_candidates(
        listing, {}, "share", source_numa=0, dest_ids=frozenset({1}), bounds=BOUNDS
    )
    assert found == []


def test_lookup_error_comes_before_the_overlap_check() -> None:
    listing = PoolListing([S("s1", {0: GiB})], [UnresolvedPod("u", "share", "pod u not found")])
    with pytest.raises(RoundFailed, match="pod u not found"):
        collect_candidates(
            listing,
            {"share": (0,)},
            "share",
            source_numa=0,
            dest_ids=frozenset({3}),
            bounds=BOUNDS,
        )


def test_eviction_listing_fails_on_a_reclaimed_lookup_error() -> None:
    listing = PoolListing(
        [], [UnresolvedPod("u", "reclaim", "x"), UnresolvedPod("v", "reclaim", "x")]
    )
    with pytest.raises(RoundFailed, match=r"^x$"):
        pod_to_evict(listing, 0)
