"""The simulator's pod model: container types, indexes and admission order (wire.md §4.2, §9.1)."""

from __future__ import annotations

import json

import pytest

from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from qrmd.sim.kubelet import ContainerKind, dedicated_pod, reclaimed_pod, shared_pod
from qrmd.sim.kubelet.pods import (
    CPU,
    MAIN_CONTAINER_ANNOTATION,
    MEMORY_ENHANCEMENT_ANNOTATION,
    POD_ROLE_LABEL,
    POD_TYPE_ANNOTATION,
    QOS_LEVEL_ANNOTATION,
    RECLAIMED_MILLICPU,
    Container,
    ContainerSlot,
    Pod,
    resource_request,
)


def order(pod: Pod) -> list[tuple[str, ContainerKind, int]]:
    return [(s.container.name, s.kind, s.index) for s in pod.admission_order()]


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param(
            {},
            [
                ("init", ContainerKind.INIT, 0),
                ("a", ContainerKind.MAIN, 0),
                ("b", ContainerKind.SIDECAR, 1),
            ],
            id="without the annotation the first app container is MAIN",
        ),
        pytest.param(
            {MAIN_CONTAINER_ANNOTATION: "b"},
            [
                ("init", ContainerKind.INIT, 0),
                ("a", ContainerKind.SIDECAR, 0),
                ("b", ContainerKind.MAIN, 1),
            ],
            id="the main-container-name annotation picks MAIN",
        ),
    ],
)
def test_admission_order_and_container_types(
    annotations: dict[str, str], want: list[tuple[str, ContainerKind, int]]
) -> None:
    pod = Pod(
        uid="u",
        name="p",
        namespace="ns",
        init_containers=(Container("init", ("cpu", 1)),),
        containers=(Container("a", ("cpu", 1)), Container("b", ("cpu", 1))),
        annotations=annotations,
    )
    assert order(pod) == want
    assert [s.container.name for s in pod.app_containers()] == ["a", "b"]


def test_builders_carry_katalyst_annotations() -> None:
    db = dedicated_pod("u1", "db", 4, numa_exclusive=True, sidecars={"exp": 0.5})
    assert db.qos_level == "dedicated_cores"
    assert json.loads(db.annotations[MEMORY_ENHANCEMENT_ANNOTATION]) == {
        "numa_binding": "true",
        "numa_exclusive": "true",
    }
    loose = dedicated_pod("u2", "cache", 4, numa_exclusive=False)
    assert json.loads(loose.annotations[MEMORY_ENHANCEMENT_ANNOTATION]) == {"numa_binding": "true"}
    web = shared_pod("u3", "web", 2, init={"migrate": 1})
    assert web.annotations[QOS_LEVEL_ANNOTATION] == "shared_cores"
    assert [c.name for c in web.init_containers] == ["migrate"]
    batch = reclaimed_pod("u4", "batch", 1500)
    assert batch.containers[0].request == (RECLAIMED_MILLICPU, 1500)


def test_absent_qos_annotation_means_shared_cores() -> None:
    assert Pod("u", "p", "ns", (Container("a"),)).qos_level == "shared_cores"


@pytest.mark.parametrize(
    ("container", "sent"),
    [
        pytest.param(Container("a", ("cpu", 1)), True, id="a cpu request goes to the plugin"),
        pytest.param(Container("a", ("cpu", 0)), False, id="a zero request does not"),
        pytest.param(Container("a"), False, id="no request does not"),
    ],
)
def test_requests_resource(container: Container, sent: bool) -> None:
    assert container.requests_resource is sent


@pytest.mark.parametrize(
    ("init", "containers", "message"),
    [
        pytest.param((), (), "has no app containers", id="a pod needs an app container"),
        pytest.param(
            (Container("x"),),
            (Container("x"),),
            "repeats a container name",
            id="container names are unique across init and app containers",
        ),
    ],
)
def test_invalid_pods_are_refused(
    init: tuple[Container, ...], containers: tuple[Container, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Pod("u", "p", "ns", containers, init)


# -- the request the kubelet sends (wire.md §4.3) --------------------------------------------


def test_request_carries_the_pod_and_the_container_slot() -> None:
    pod = Pod(
        uid="u1",
        name="web",
        namespace="shop",
        init_containers=(Container("setup", (CPU, 1)),),
        containers=(Container("app", (CPU, 1.5)), Container("envoy", (CPU, 0.5))),
        annotations={QOS_LEVEL_ANNOTATION: "shared_cores", POD_TYPE_ANNOTATION: "web-type"},
        labels={POD_ROLE_LABEL: "frontend", "team": "a"},
        native_qos_class="Burstable",
    )
    requests = [resource_request(pod, slot, "cpu", None) for slot in pod.admission_order()]
    assert [(r.container_name, r.container_type, r.container_index) for r in requests] == [
        ("setup", ContainerType.INIT, 0),
        ("app", ContainerType.MAIN, 0),
        ("envoy", ContainerType.SIDECAR, 1),
    ]
    assert requests[1] == ResourceRequest(
        pod_uid="u1",
        pod_namespace="shop",
        pod_name="web",
        container_name="app",
        container_type=ContainerType.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": 1.5},
        pod_role="frontend",
        pod_type="web-type",
        hint=None,
        labels={POD_ROLE_LABEL: "frontend", "team": "a"},
        annotations={QOS_LEVEL_ANNOTATION: "shared_cores", POD_TYPE_ANNOTATION: "web-type"},
        native_qos_class="Burstable",
    )


@pytest.mark.parametrize(
    ("kind", "want"),
    [pytest.param(kind, ContainerType[kind.name], id=kind.name) for kind in ContainerKind],
)
def test_container_kind_is_sent_as_the_same_container_type(
    kind: ContainerKind, want: ContainerType
) -> None:
    pod = shared_pod("u1", "web", 1)
    slot = ContainerSlot(pod.containers[0], kind, 0)
    request = resource_request(pod, slot, "cpu", None)
    assert request.container_type is want and int(want) == kind.value


def test_request_under_the_plugins_name_keeps_the_requested_name_and_the_hint() -> None:
    pod = reclaimed_pod("u3", "batch", 1500)
    (slot,) = pod.admission_order()
    request = resource_request(pod, slot, "cpu", TopologyHint((2, 3), False))
    assert request.resource_name == "cpu"
    assert request.resource_requests == {RECLAIMED_MILLICPU: 1500}
    assert request.hint == TopologyHint((2, 3), False)
    assert (request.pod_role, request.pod_type) == ("", "")


def test_request_of_a_container_that_requests_nothing_is_refused() -> None:
    pod = Pod("u4", "idle", "default", containers=(Container("sleep"),))
    (slot,) = pod.admission_order()
    with pytest.raises(ValueError, match="idle/sleep requests no resource"):
        resource_request(pod, slot, "cpu", None)
