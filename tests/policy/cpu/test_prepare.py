"""The request intake every Allocate and GetTopologyHints starts with (spec cpu-policy §7.1 steps
2–4, §8.1 step 2; §16 items 6, 7, 8, 10)."""

import dataclasses

import pytest

from policy.cpu.prepare import prepare_request
from policy.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_LEVEL_KEY, QoSConfig, QoSError
from policy.cpu.request import ContainerType, Quantity, RequestError, ResourceRequest, TopologyHint

DEBUG_KEY = "debug.example.com/attach"
CONFIG = QoSConfig.build(debug_annotation_keys=[DEBUG_KEY])
WHO = "pod default/web (uid 1234), container app"


def web_app(**changes: object) -> ResourceRequest:
    request = ResourceRequest(
        pod_uid="1234",
        pod_namespace="default",
        pod_name="web",
        container_name="app",
        container_type=ContainerType.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": 1.2},
        labels={"app": "web"},
        annotations={"kubernetes.io/config.source": "api"},
        native_qos_class="Burstable",
    )
    return dataclasses.replace(request, **changes)  # type: ignore[arg-type]


def test_a_plain_pod_is_shared_with_its_quantity() -> None:
    prepared = prepare_request(CONFIG, web_app())
    assert prepared.qos_level == "shared_cores"
    assert prepared.quantity == Quantity(2, 1.2)
    assert (prepared.req_int, prepared.req_float) == (2, 1.2)
    assert prepared.labels == {QOS_LEVEL_KEY: "shared_cores"}
    assert prepared.annotations == {QOS_LEVEL_KEY: "shared_cores"}
    assert not prepared.is_debug and not prepared.is_init and not prepared.numa_binding
    assert prepared.request == web_app()


def test_a_dedicated_numa_binding_pod_reads_its_enhancements() -> None:
    annotations = {
        QOS_LEVEL_KEY: "dedicated_cores",
        MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true","numa_exclusive":"true"}',
    }
    prepared = prepare_request(
        CONFIG, web_app(annotations=annotations, hint=TopologyHint((0,), True))
    )
    assert prepared.qos_level == "dedicated_cores"
    assert prepared.numa_binding and prepared.numa_exclusive and prepared.cpuset_pool == ""
    assert prepared.annotations == {
        QOS_LEVEL_KEY: "dedicated_cores",
        "numa_binding": "true",
        "numa_exclusive": "true",
    }


def test_reclaimed_millicpu_is_counted_in_cpus() -> None:
    prepared = prepare_request(
        CONFIG,
        web_app(
            annotations={QOS_LEVEL_KEY: "reclaimed_cores"},
            resource_requests={"resource.katalyst.kubewharf.io/reclaimed_millicpu": 1500},
        ),
    )
    assert (prepared.qos_level, prepared.quantity) == ("reclaimed_cores", Quantity(2, 1.5))


def test_debug_is_read_from_the_original_annotations() -> None:
    prepared = prepare_request(CONFIG, web_app(annotations={DEBUG_KEY: ""}))
    assert prepared.is_debug
    assert DEBUG_KEY not in prepared.annotations  # normalisation drops it afterwards


def test_init_containers_are_prepared_and_flagged() -> None:
    prepared = prepare_request(CONFIG, web_app(container_type=ContainerType.INIT))
    assert prepared.is_init and prepared.qos_level == "shared_cores"


def test_system_cores_resolves_here_and_is_refused_by_the_handlers() -> None:
    prepared = prepare_request(CONFIG, web_app(annotations={QOS_LEVEL_KEY: "system_cores"}))
    assert prepared.qos_level == "system_cores"


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        pytest.param(
            {"annotations": {QOS_LEVEL_KEY: "foo"}},
            QoSError,
            "GetKatalystQoSLevelFromResourceReq for pod: default/web, container: app failed "
            "with error: resource type mismatches: can't get valid qos level",
            id="unknown QoS value gets the reference's wrapped error",
        ),
        pytest.param(
            {"resource_requests": {}},
            RequestError,
            f"{WHO}: getReqQuantityFromResourceReq failed with error: "
            "invalid req.ResourceRequests length: 0",
            id="no resource request is refused",
        ),
        pytest.param(
            {"resource_requests": {"cpu": 1, "memory": 1}},
            RequestError,
            f"{WHO}: getReqQuantityFromResourceReq failed with error: "
            "invalid req.ResourceRequests length: 2",
            id="two resource requests are refused",
        ),
        pytest.param(
            {"resource_requests": {"cpu": -1}},
            RequestError,
            f"{WHO}: getReqQuantityFromResourceReq failed with error: cpu request -1 is negative",
            id="a negative request names pod, container and value",
        ),
        pytest.param(
            {"resource_requests": {"cpu": float("nan")}},
            RequestError,
            f"{WHO}: getReqQuantityFromResourceReq failed with error: cpu request nan is not a "
            "number",
            id="a NaN request is refused",
        ),
        pytest.param(
            {"annotations": {MEMORY_ENHANCEMENT_KEY: '{"numa_binding": true}'}},
            RequestError,
            f"{WHO}: annotation {MEMORY_ENHANCEMENT_KEY}: value of 'numa_binding' is a JSON "
            "boolean, not a string",
            id="malformed enhancement JSON names the annotation",
        ),
        pytest.param(
            {"pod_uid": ""},
            RequestError,
            "pod default/web (uid ), container app: pod uid is empty",
            id="an empty pod uid is refused before anything else",
        ),
    ],
)
def test_bad_requests_are_refused(
    changes: dict[str, object], error: type[Exception], message: str
) -> None:
    request = web_app(**changes)
    with pytest.raises(error) as caught:
        prepare_request(CONFIG, request)
    assert str(caught.value) == message
    assert request == web_app(**changes)  # the request is untouched


def test_qos_errors_are_checked_before_quantities() -> None:
    # The reference resolves the level first (§7.1 steps 3 and 4).
    with pytest.raises(QoSError):
        prepare_request(CONFIG, web_app(annotations={QOS_LEVEL_KEY: "foo"}, resource_requests={}))


def test_lenient_config_passes_warnings_on() -> None:
    lenient = QoSConfig(strict_enhancements=False)
    prepared = prepare_request(lenient, web_app(annotations={MEMORY_ENHANCEMENT_KEY: "{"}))
    assert prepared.annotations == {QOS_LEVEL_KEY: "shared_cores"}
    assert len(prepared.warnings) == 1 and "is not valid JSON" in prepared.warnings[0]
