"""Admission in kubelet order against a fake plugin on a real socket (wire.md §9.1, §9.6)."""

from __future__ import annotations

import pytest

from qrmd.sim.kubelet import (
    AdmissionError,
    Hint,
    TopologyPolicy,
    choose_affinity,
    dedicated_pod,
    reclaimed_pod,
    shared_pod,
)
from qrmd.sim.kubelet.pods import RECLAIMED_MILLICPU, Container, Pod, resource_request
from tests.qrmd.sim.kubelet.fake_qrm_plugin import has_deadline, registered_kubelet
from wire.gen import resourceplugin_pb2 as rp_pb

ALL = (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("policy", "hints", "want"),
    [
        pytest.param(
            TopologyPolicy.BEST_EFFORT,
            None,
            Hint(ALL, True),
            id="no preference gives every NUMA node, preferred",
        ),
        pytest.param(
            TopologyPolicy.BEST_EFFORT,
            (),
            Hint(ALL, False),
            id="no feasible placement under best-effort gives every node, not preferred",
        ),
        pytest.param(
            TopologyPolicy.BEST_EFFORT,
            (Hint((0, 1), False), Hint((3,), True), Hint((1,), True), Hint((2, 3), True)),
            Hint((1,), True),
            id="the narrowest preferred hint wins, lower NUMA id on a tie",
        ),
        pytest.param(
            TopologyPolicy.BEST_EFFORT,
            (Hint((0, 1, 2), False), Hint((2, 3), False)),
            Hint((2, 3), False),
            id="without a preferred hint the narrowest is chosen",
        ),
        pytest.param(
            TopologyPolicy.RESTRICTED,
            (Hint((1, 0), True),),
            Hint((0, 1), True),
            id="restricted admits a preferred hint, nodes sorted",
        ),
        pytest.param(
            TopologyPolicy.NONE,
            (Hint((1,), True),),
            Hint((), False),
            id="policy none gives no affinity",
        ),
    ],
)
def test_choose_affinity(
    policy: TopologyPolicy, hints: tuple[Hint, ...] | None, want: Hint
) -> None:
    assert choose_affinity(policy, hints, [3, 2, 1, 0]) == want


@pytest.mark.parametrize(
    "hints",
    [
        pytest.param((), id="no feasible placement"),
        pytest.param((Hint((0, 1), False),), id="only a hint that is not preferred"),
    ],
)
def test_restricted_rejects_without_a_preferred_hint(hints: tuple[Hint, ...]) -> None:
    with pytest.raises(Exception, match="restricted topology policy"):
        choose_affinity(TopologyPolicy.RESTRICTED, hints, ALL)


def request_log(plugin: object) -> list[tuple[str, str, int]]:
    return [
        (c.method, c.request.container_name, c.request.container_type)  # type: ignore[attr-defined]
        for c in plugin.calls  # type: ignore[attr-defined]
        if c.method in ("GetTopologyHints", "Allocate")
    ]


def test_init_containers_first_then_app_containers_one_at_a_time() -> None:
    pod = Pod(
        uid="u1",
        name="web",
        namespace="shop",
        init_containers=(Container("migrate", ("cpu", 1)), Container("warm", ("cpu", 1))),
        containers=(
            Container("envoy", ("cpu", 0.5)),
            Container("app", ("cpu", 2)),
            Container("idle"),
        ),
        annotations={"kubernetes.io/main-container-name": "app"},
    )
    with registered_kubelet() as (plugin, kubelet):
        granted = kubelet.admit(pod)
    init, main, sidecar = rp_pb.INIT, rp_pb.MAIN, rp_pb.SIDECAR
    assert request_log(plugin) == [
        ("GetTopologyHints", "migrate", init),
        ("Allocate", "migrate", init),
        ("GetTopologyHints", "warm", init),
        ("Allocate", "warm", init),
        ("GetTopologyHints", "envoy", sidecar),
        ("Allocate", "envoy", sidecar),
        ("GetTopologyHints", "app", main),
        ("Allocate", "app", main),
    ]  # "idle" requests nothing, so the plugin never hears of it
    indexes = [c.request.container_index for c in plugin.calls_of("Allocate")]  # type: ignore[attr-defined]
    assert indexes == [0, 1, 0, 1]
    assert sorted(granted) == ["app", "envoy"]  # INIT answers carry no allocation_result
    assert all(has_deadline(c, 10.0) for c in plugin.calls)


def test_request_carries_the_pod_and_the_chosen_hint() -> None:
    pod = shared_pod("u2", "api", 1.5)
    with registered_kubelet() as (plugin, kubelet):
        kubelet.admit(pod)
    (hints_call,) = plugin.calls_of("GetTopologyHints")
    (allocate_call,) = plugin.calls_of("Allocate")
    assert not hints_call.request.HasField("hint")  # type: ignore[attr-defined]
    request = allocate_call.request
    assert request.pod_uid == "u2" and request.pod_name == "api"  # type: ignore[attr-defined]
    assert request.pod_namespace == "default"  # type: ignore[attr-defined]
    assert request.resource_name == "cpu"  # type: ignore[attr-defined]
    assert dict(request.resource_requests) == {"cpu": 1.5}  # type: ignore[attr-defined]
    assert request.annotations["katalyst.kubewharf.io/qos_level"] == "shared_cores"  # type: ignore[attr-defined]
    assert request.native_qos_class == "Burstable"  # type: ignore[attr-defined]
    # Shared cores: no preference, so the default affinity (every NUMA node), preferred.
    assert list(request.hint.nodes) == [0, 1, 2, 3] and request.hint.preferred  # type: ignore[attr-defined]


def test_reclaimed_millicpu_goes_to_the_cpu_plugin_under_its_own_name() -> None:
    with registered_kubelet() as (plugin, kubelet):
        granted = kubelet.admit(reclaimed_pod("u3", "batch", 1500))
    (allocate_call,) = plugin.calls_of("Allocate")
    assert allocate_call.request.resource_name == "cpu"  # type: ignore[attr-defined]
    assert dict(allocate_call.request.resource_requests) == {RECLAIMED_MILLICPU: 1500}  # type: ignore[attr-defined]
    assert granted["worker"]["cpu"].allocation_result == "14-15"


@pytest.mark.parametrize(
    ("cpus", "exclusive", "want_hint", "want_cpus"),
    [
        pytest.param(2, True, [0], "0-3", id="exclusive pod takes its whole narrowest NUMA node"),
        pytest.param(2, False, [0], "0-1", id="non-exclusive pod takes what it asks on one node"),
        pytest.param(6, True, [0, 1], "0-7", id="exclusive pod larger than a node spans two"),
    ],
)
def test_dedicated_pod_gets_the_preferred_narrowest_hint(
    cpus: int, exclusive: bool, want_hint: list[int], want_cpus: str
) -> None:
    with registered_kubelet() as (plugin, kubelet):
        granted = kubelet.admit(dedicated_pod("u4", "db", cpus, numa_exclusive=exclusive))
    (allocate_call,) = plugin.calls_of("Allocate")
    assert list(allocate_call.request.hint.nodes) == want_hint  # type: ignore[attr-defined]
    assert allocate_call.request.hint.preferred  # type: ignore[attr-defined]
    assert granted["main"]["cpu"].allocation_result == want_cpus
    assert kubelet.runtime_properties()[("u4", "main")] == {"CpusetCpus": want_cpus}


def test_dedicated_sidecar_mirrors_its_main_container() -> None:
    pod = dedicated_pod("u5", "db", 2, numa_exclusive=False, sidecars={"exporter": 0.5})
    with registered_kubelet() as (_, kubelet):
        granted = kubelet.admit(pod)
    assert granted["exporter"]["cpu"].allocation_result == granted["main"]["cpu"].allocation_result


def test_restricted_policy_rejects_a_pod_with_no_feasible_placement() -> None:
    with registered_kubelet(TopologyPolicy.RESTRICTED) as (plugin, kubelet):
        for n in range(4):
            kubelet.admit(dedicated_pod(f"d{n}", f"db{n}", 2, numa_exclusive=True))
        with pytest.raises(AdmissionError, match="pod default/late container main: restricted"):
            kubelet.admit(dedicated_pod("d9", "late", 2, numa_exclusive=True))
        assert [c.request.pod_uid for c in plugin.calls_of("Allocate")] == ["d0", "d1", "d2", "d3"]  # type: ignore[attr-defined]
        assert "d9" not in {p.uid for p in kubelet.active_pods()}


def test_best_effort_admits_without_a_feasible_placement_on_every_node_not_preferred() -> None:
    with registered_kubelet() as (plugin, kubelet):
        for n in range(4):
            kubelet.admit(dedicated_pod(f"d{n}", f"db{n}", 2, numa_exclusive=True))
        plugin.calls.clear()
        kubelet.admit(dedicated_pod("d9", "late", 2, numa_exclusive=True))
    assert len(plugin.calls_of("GetTopologyHints")) == 1  # answered with an empty list
    (allocate_call,) = plugin.calls_of("Allocate")
    assert list(allocate_call.request.hint.nodes) == [0, 1, 2, 3]  # type: ignore[attr-defined]
    assert not allocate_call.request.hint.preferred  # type: ignore[attr-defined]


def test_hints_answer_tells_no_preference_from_no_feasible_placement() -> None:
    with registered_kubelet() as (_, kubelet):
        endpoint = kubelet.endpoints.running("cpu")
        assert endpoint is not None
        shared = shared_pod("h1", "web", 1)
        (slot,) = shared.admission_order()
        assert (
            endpoint.connection.get_topology_hints(resource_request(shared, slot, "cpu", None))
            is None
        )
        for n in range(4):
            kubelet.admit(dedicated_pod(f"d{n}", f"db{n}", 2, numa_exclusive=True))
        late = dedicated_pod("h2", "late", 2, numa_exclusive=True)
        (slot,) = late.admission_order()
        assert (
            endpoint.connection.get_topology_hints(resource_request(late, slot, "cpu", None)) == ()
        )


def test_allocate_error_rejects_the_pod_and_removal_cleans_up_earlier_containers() -> None:
    pod = shared_pod("u6", "api", 1, sidecars={"envoy": 1})
    with registered_kubelet(allocate_error="envoy") as (plugin, kubelet):
        with pytest.raises(
            AdmissionError, match="container envoy: Allocate failed: RESOURCE_EXHAUSTED"
        ):
            kubelet.admit(pod)
        assert kubelet.active_pods() == []
        assert kubelet.checkpointed_pods() == {"u6"}  # "app" was allocated before "envoy" failed
        assert kubelet.collect_garbage() == ["u6"]
        assert [c.request.pod_uid for c in plugin.calls_of("RemovePod")] == ["u6"]  # type: ignore[attr-defined]


def test_without_topology_alignment_no_hints_are_asked_and_allocate_has_none() -> None:
    options = rp_pb.ResourcePluginOptions(with_topology_alignment=False, need_reconcile=True)
    with registered_kubelet(options=options) as (plugin, kubelet):
        kubelet.admit(shared_pod("u7", "api", 1))
    assert plugin.methods() == ["Allocate"]
    assert not plugin.calls_of("Allocate")[0].request.HasField("hint")  # type: ignore[attr-defined]


def test_pre_start_container_follows_allocate_for_allocated_containers_when_asked() -> None:
    options = rp_pb.ResourcePluginOptions(
        pre_start_required=True, with_topology_alignment=True, need_reconcile=True
    )
    pod = shared_pod("u9", "web", 1, init={"migrate": 1})
    with registered_kubelet(options=options) as (plugin, kubelet):
        kubelet.admit(pod)
    assert plugin.methods() == [
        "GetTopologyHints",
        "Allocate",  # migrate: no allocation, so no PreStartContainer
        "GetTopologyHints",
        "Allocate",
        "PreStartContainer",
    ]
    (pre_start,) = plugin.calls_of("PreStartContainer")
    assert pre_start.request.container_name == "app"  # type: ignore[attr-defined]
    assert has_deadline(pre_start, 30.0)


def test_a_pod_cannot_be_admitted_twice() -> None:
    with registered_kubelet() as (_, kubelet):
        kubelet.admit(shared_pod("u8", "api", 1))
        with pytest.raises(AdmissionError, match="already admitted"):
            kubelet.admit(shared_pod("u8", "api", 1))
