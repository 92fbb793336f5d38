"""The pod source port: snapshots are frozen values, the default source lists nothing."""

from __future__ import annotations

import pytest

from actors.ports.pod_source import NoPodSource, PodListing, PodListSnapshot, PodSource

T0 = 1715180645.0


def test_the_default_source_has_no_listing() -> None:
    source: PodSource = NoPodSource()
    assert source.latest() is None


def test_a_snapshot_keys_pods_by_uid_and_answers_their_phase() -> None:
    web = PodListing("uid-web", "default", "web", "Running", {"app": "containerd://abc"})
    job = PodListing("uid-job", "batch", "job", "Pending")
    snapshot = PodListSnapshot.of([web, job], fetched_at=T0)
    assert snapshot.pods["uid-web"] is web
    assert (snapshot.phase_of("uid-web"), snapshot.phase_of("uid-job")) == ("Running", "Pending")
    assert snapshot.phase_of("uid-ghost") is None
    assert snapshot.fetched_at == T0


def test_a_snapshot_does_not_change_when_the_lists_it_was_built_from_do() -> None:
    ids = {"app": "containerd://abc"}
    pods = {"uid-web": PodListing("uid-web", "default", "web", "Running", ids)}
    snapshot = PodListSnapshot(pods, T0)
    ids["app"] = "containerd://other"
    pods.clear()
    assert snapshot.pods["uid-web"].container_ids == {"app": "containerd://abc"}
    with pytest.raises(TypeError):
        snapshot.pods["uid-new"] = PodListing("uid-new", "", "", "")  # type: ignore[index]
    with pytest.raises(TypeError):
        snapshot.pods["uid-web"].container_ids["app"] = "x"  # type: ignore[index]
