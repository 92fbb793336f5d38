"""The simulator's /pods (qrmd.sim.kubelet.pods_endpoint) over real HTTP, read by qrmd's own
kubelet adapter: admitted pods are listed with phases and container IDs, a forgotten pod is
gone without a RemovePod, and a failing kubelet can be simulated."""

from __future__ import annotations

import pytest

from qrmd.host.kubelet_pods import KubeletEndpoint, KubeletPodFetcher, PodListError
from qrmd.sim.kubelet import Container, Kubelet, Pod
from qrmd.sim.kubelet.pods_endpoint import PodsEndpoint, container_id


def _pod(uid: str) -> Pod:
    # Containers that request nothing the plugin manages: admitted without any plugin.
    return Pod(uid, f"name-{uid}", "shop", (Container("app"), Container("log")),
               init_containers=(Container("setup"),))  # fmt: skip


def _fetch(endpoint: PodsEndpoint) -> KubeletPodFetcher:
    return KubeletPodFetcher(KubeletEndpoint(endpoint.url, timeout_s=5), empty_is_error=False)


def test_admitted_pods_are_listed_running_with_stable_container_ids() -> None:
    kubelet = Kubelet([0, 1])
    kubelet.admit(_pod("uid-1"))
    with PodsEndpoint(kubelet) as endpoint:
        first = _fetch(endpoint).fetch()
        second = _fetch(endpoint).fetch()
    listed = first.pods["uid-1"]
    assert (listed.namespace, listed.name, listed.phase) == ("shop", "name-uid-1", "Running")
    assert dict(listed.container_ids) == {
        name: container_id("uid-1", name) for name in ("setup", "app", "log")
    }
    assert listed.container_ids["app"].startswith("containerd://")
    assert second.pods["uid-1"].container_ids == listed.container_ids


def test_a_forgotten_pod_leaves_the_list_and_the_checkpoint_without_remove_pod() -> None:
    kubelet = Kubelet([0, 1])
    kubelet.admit(_pod("uid-1"))
    kubelet.admit(_pod("uid-2"))
    assert kubelet.forget_pod("uid-2") is True
    assert kubelet.forget_pod("uid-9") is False
    with PodsEndpoint(kubelet) as endpoint:
        assert sorted(_fetch(endpoint).fetch().pods) == ["uid-1"]
    assert "uid-2" not in kubelet.checkpointed_pods()
    assert kubelet.collect_garbage() == []  # nothing left to RemovePod


def test_a_deleted_pod_leaves_the_list_at_once() -> None:
    kubelet = Kubelet([0])
    kubelet.admit(_pod("uid-1"))
    kubelet.delete_pod("uid-1")
    with PodsEndpoint(kubelet) as endpoint:
        assert dict(_fetch(endpoint).fetch().pods) == {}


def test_a_failing_kubelet_answers_its_status_until_it_recovers() -> None:
    kubelet = Kubelet([0])
    kubelet.admit(_pod("uid-1"))
    with PodsEndpoint(kubelet) as endpoint:
        endpoint.fail_with(503)
        with pytest.raises(PodListError, match="HTTP 503"):
            _fetch(endpoint).fetch()
        endpoint.fail_with(None)
        assert list(_fetch(endpoint).fetch().pods) == ["uid-1"]
        assert endpoint.requests == 2


def test_other_paths_are_not_found() -> None:
    with PodsEndpoint(Kubelet([0])) as endpoint:
        url = endpoint.url.replace("/pods", "/spec")
        with pytest.raises(PodListError, match="HTTP 404"):
            KubeletPodFetcher(KubeletEndpoint(url), empty_is_error=False).fetch()
