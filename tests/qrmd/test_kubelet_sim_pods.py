"""The simulator's pod model: container types, indexes and admission order (wire.md §4.2, §9.1)."""

from __future__ import annotations

import json

import pytest

from qrmd.kubelet_sim import ContainerKind, dedicated_pod, reclaimed_pod, shared_pod
from qrmd.kubelet_sim.pods import (
    MAIN_CONTAINER_ANNOTATION,
    MEMORY_ENHANCEMENT_ANNOTATION,
    QOS_LEVEL_ANNOTATION,
    RECLAIMED_MILLICPU,
    Container,
    Pod,
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
