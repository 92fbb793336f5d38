"""Reconcile and pod removal against a fake plugin on a real socket (wire.md §9.2, §9.3)."""

from __future__ import annotations

import time

from qrmd.sim.kubelet import (
    KubeletSimulator,
    RemovePodSent,
    dedicated_pod,
    reclaimed_pod,
    shared_pod,
)
from qrmd.sim.kubelet.pods import Container, Pod
from tests.qrmd.sim.kubelet.fake_qrm_plugin import (
    NUMA_NODES,
    FakeQRMPlugin,
    ServedPlugin,
    has_deadline,
    registered_kubelet,
    short_socket_dir,
)


def cpusets(kubelet: object) -> dict[tuple[str, str], str]:
    return {
        key: props["CpusetCpus"]
        for key, props in kubelet.runtime_properties().items()  # type: ignore[attr-defined]
    }


def test_reconcile_writes_every_containers_current_cpuset_to_the_runtime() -> None:
    with registered_kubelet() as (plugin, kubelet):
        kubelet.admit(shared_pod("s1", "web", 1))
        assert cpusets(kubelet) == {("s1", "app"): "0-15"}
        kubelet.admit(dedicated_pod("d1", "db", 2, numa_exclusive=True))
        kubelet.admit(reclaimed_pod("r1", "batch", 500))
        # The shared pool shrank when db took NUMA 0; the runtime learns it on reconcile.
        assert cpusets(kubelet)[("s1", "app")] == "0-15"
        report = kubelet.reconcile_once()
    assert cpusets(kubelet) == {
        ("s1", "app"): "4-15",
        ("d1", "main"): "0-3",
        ("r1", "worker"): "14-15",
    }
    assert report.errors == [] and report.reallocated == []
    assert set(report.answers["cpu"]) == {"s1", "d1", "r1"}
    (call,) = plugin.calls_of("GetResourcesAllocation")
    assert has_deadline(call, 10.0)


def test_container_missing_from_the_answer_is_allocated_again_with_its_affinity() -> None:
    pod = Pod(
        uid="s2",
        name="web",
        namespace="default",
        init_containers=(Container("migrate", ("cpu", 1)),),
        containers=(Container("app", ("cpu", 1)), Container("envoy", ("cpu", 1))),
    )
    with registered_kubelet() as (plugin, kubelet):
        kubelet.admit(pod)
        plugin.hidden = {("s2", "envoy")}
        plugin.calls.clear()
        report = kubelet.reconcile_once()
        assert report.reallocated == [("s2", "envoy")]
        (again,) = plugin.calls_of("Allocate")
        assert again.request.container_name == "envoy"  # type: ignore[attr-defined]
        assert list(again.request.hint.nodes) == list(NUMA_NODES)  # type: ignore[attr-defined]
        assert has_deadline(again, 10.0)
        plugin.hidden = set()
        plugin.calls.clear()
        assert kubelet.reconcile_once().reallocated == []
        # Init containers are never reconciled, so never allocated again.
        assert plugin.methods() == ["GetResourcesAllocation"]


def test_remove_pod_is_retried_until_it_succeeds() -> None:
    with registered_kubelet(remove_pod_failures=2) as (plugin, kubelet):
        kubelet.admit(shared_pod("s3", "web", 1))
        kubelet.admit(shared_pod("s4", "api", 1))
        assert kubelet.delete_pod("s3")
        assert kubelet.reconcile_once().removed_pods == []
        assert kubelet.checkpointed_pods() == {"s3", "s4"}
        assert kubelet.reconcile_once().removed_pods == []
        report = kubelet.reconcile_once()
        assert report.removed_pods == ["s3"]
        assert kubelet.checkpointed_pods() == {"s4"}
        assert set(report.answers["cpu"]) == {"s4"}
        removes = plugin.calls_of("RemovePod")
        assert [c.request.pod_uid for c in removes] == ["s3"] * 3  # type: ignore[attr-defined]
        assert all(has_deadline(c, 10.0) for c in removes)
        assert kubelet.reconcile_once().removed_pods == []  # gone: not asked again
        assert len(plugin.calls_of("RemovePod")) == 3


def test_every_remove_pod_sent_is_recorded_with_how_it_ended() -> None:
    with registered_kubelet(remove_pod_failures=1) as (_, kubelet):
        kubelet.admit(shared_pod("s3", "web", 1))
        kubelet.delete_pod("s3")
        kubelet.reconcile_once()
        kubelet.reconcile_once()
        first, second = kubelet.removals_sent()
    assert (first.pod_uid, first.plugin, second) == ("s3", "cpu", RemovePodSent("s3", "cpu", None))
    assert first.error is not None


def test_a_stopped_pod_stays_listed_until_its_remove_pod_then_delete_lets_it_go() -> None:
    with registered_kubelet() as (plugin, kubelet):
        kubelet.admit(shared_pod("s3", "web", 1))
        assert kubelet.stop_pod("s3") and not kubelet.stop_pod("s3")
        assert [(p.uid, phase) for p, phase in kubelet.listed_pods()] == [("s3", "Succeeded")]
        assert kubelet.reconcile_once().removed_pods == ["s3"]
        assert [c.request.pod_uid for c in plugin.calls_of("RemovePod")] == ["s3"]  # type: ignore[attr-defined]
        assert kubelet.delete_pod("s3") is False  # no longer active: only the listing goes
        assert kubelet.listed_pods() == []


def test_a_pod_without_allocations_is_never_sent_to_remove_pod() -> None:
    only_init = Pod(
        uid="i1",
        name="job",
        namespace="default",
        init_containers=(Container("setup", ("cpu", 1)),),
        containers=(Container("app"),),
    )
    with registered_kubelet() as (plugin, kubelet):
        kubelet.admit(only_init)
        kubelet.delete_pod("i1")
        kubelet.reconcile_once()
    assert plugin.calls_of("RemovePod") == []


def test_reconcile_survives_a_plugin_that_is_down() -> None:
    with short_socket_dir() as directory:
        served = ServedPlugin(FakeQRMPlugin(), directory)
        served.start()
        sim = KubeletSimulator([directory], NUMA_NODES, reconcile_period_s=0.05)
        try:
            sim.poll_watchers()
            sim.kubelet.admit(shared_pod("s5", "web", 1))
            served.stop()
            report = sim.reconcile()
            assert report.answers == {} and "GetResourcesAllocation failed" in report.errors[0]
        finally:
            served.stop()


def test_background_loops_register_and_reconcile() -> None:
    with short_socket_dir() as directory:
        served = ServedPlugin(FakeQRMPlugin(), directory)
        sim = KubeletSimulator(
            [directory], NUMA_NODES, watch_period_s=0.02, reconcile_period_s=0.05
        )
        with sim:
            served.start()
            try:
                endpoint = sim.kubelet.endpoints.wait_registered("cpu", timeout_s=5)
                sim.kubelet.admit(dedicated_pod("d2", "db", 2, numa_exclusive=False))
                report = sim.wait_for_pass(sim.passes, timeout_s=5)
                assert "d2" in report.answers["cpu"]
                served.restart()  # the plugin came back: the socket is new
                again = sim.kubelet.endpoints.wait_registered(
                    "cpu", newer_than=endpoint.generation, timeout_s=5
                )
                assert again.generation == endpoint.generation + 1
            finally:
                served.stop()
        start = time.monotonic()
        sim.stop()
        assert time.monotonic() - start < 1.0
