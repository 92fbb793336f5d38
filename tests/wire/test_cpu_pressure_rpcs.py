"""The CPU pressure plugins on the wire: a pod as the agent sends it becomes an ``ActivePod``
with its requests and priority, answers become the protocol's messages (condition, deletion
options, the received pod objects), and each plugin's constant answers need no actor."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from actors.cpu_pressure_messages import (
    LoadThresholdMet,
    LoadTopEvictionPods,
    PressureUnavailable,
    SuppressionEvictPods,
)
from policy.cpu.pressure import (
    Condition,
    EvictPodsAnswer,
    PodError,
    SuppressionError,
    ThresholdMetAnswer,
    TopEvictionAnswer,
)
from policy.cpu.pressure.answers import EvictOffer
from tests.wire.eviction_agent import go_pod, unknown_fields_of
from wire.cpu_pressure_rpcs import (
    LOAD_PLUGIN_RPCS,
    SUPPRESSION_PLUGIN_RPCS,
    active_pods,
    cpu_threshold_met_response,
    cpu_top_eviction_pods_response,
)
from wire.errors import code_for
from wire.gen import evictionplugin_pb2 as ep
from wire.gen import k8s_core_v1_pb2 as core
from wire.gen import k8s_meta_v1_pb2 as meta
from wire.gen import k8s_resource_pb2 as resource


def container(name: str, **requests: str) -> core.Container:
    quantities = {k.replace("_", "."): resource.Quantity(string=v) for k, v in requests.items()}
    return core.Container(name=name, resources=core.ResourceRequirements(requests=quantities))


def test_a_pod_becomes_an_active_pod_with_requests_and_priority() -> None:
    pod = core.Pod(
        metadata=meta.ObjectMeta(name="etl", namespace="batch", uid="u1", annotations={"a": "b"}),
        spec=core.PodSpec(
            containers=[container("main", cpu="1500m"), container("side", cpu="500m")],
            initContainers=[container("init", cpu="4")],
            priority=-10,
        ),
    )
    (got,) = active_pods([pod])
    assert (got.uid, got.namespace, got.name, dict(got.annotations)) == (
        "u1",
        "batch",
        "etl",
        {"a": "b"},
    )
    assert got.priority == -10
    assert got.containers == (("main", {"cpu": "1500m"}), ("side", {"cpu": "500m"}))
    assert got.init_containers == (("init", {"cpu": "4"}),)


def test_a_pod_without_a_priority_has_none() -> None:
    (got,) = active_pods([go_pod("a", "uid-a")])
    assert got.priority is None and got.effective_priority == 0
    assert got.container_names == ("a",)


def test_a_met_threshold_carries_the_cpu_pressure_condition() -> None:
    answer = ThresholdMetAnswer(
        1.0, 0.8, "GREATER_THAN", "HARD_MET", "cpu.load.1min.container", condition=Condition()
    )
    response = cpu_threshold_met_response(answer)
    assert response == ep.ThresholdMetResponse(
        threshold_value=1.0,
        observed_value=0.8,
        threshold_operator=ep.GREATER_THAN,
        met_type=ep.HARD_MET,
        eviction_scope="cpu.load.1min.container",
        condition=ep.Condition(
            condition_type=ep.NODE_CONDITION,
            effects=["NoSchedule"],
            condition_name="CPUPressure",
            met_condition=True,
        ),
    )
    assert not cpu_threshold_met_response(ThresholdMetAnswer()).HasField("condition")
    with pytest.raises(ValueError, match="unknown met type"):
        cpu_threshold_met_response(ThresholdMetAnswer(met_type="VERY_MET"))


def test_top_pods_are_the_received_objects_with_the_grace_period() -> None:
    pods = [go_pod("a", "uid-a"), go_pod("b", "uid-b")]
    response = cpu_top_eviction_pods_response(TopEvictionAnswer(("uid-b",), 15), pods)
    (target,) = response.target_pods
    assert target.metadata.uid == "uid-b"
    assert all(field in target.SerializeToString() for field in unknown_fields_of("b"))
    assert response.deletion_options.grace_period_seconds == 15
    assert not cpu_top_eviction_pods_response(TopEvictionAnswer(("uid-a",)), pods).HasField(
        "deletion_options"
    )


def by_name(rpcs: tuple[Any, ...]) -> dict[str, Any]:
    return {rpc.name: rpc for rpc in rpcs}


def test_the_load_plugin_asks_for_threshold_and_top_pods_only() -> None:
    rpcs = by_name(LOAD_PLUGIN_RPCS)
    assert list(rpcs) == ["GetToken", "ThresholdMet", "GetTopEvictionPods", "GetEvictPods"]
    assert rpcs["ThresholdMet"].command(ep.Empty()) == LoadThresholdMet()
    request = ep.GetTopEvictionPodsRequest(active_pods=[go_pod("a", "uid-a")], topN=1)
    command = rpcs["GetTopEvictionPods"].command(request)
    assert isinstance(command, LoadTopEvictionPods) and command.top_n == 1
    assert [p.uid for p in command.active_pods] == ["uid-a"]
    for constant in ("GetToken", "GetEvictPods"):
        assert rpcs[constant].command is None
    assert rpcs["GetToken"].response(ep.Empty(), None) == ep.GetTokenResponse(token="")
    assert (
        rpcs["GetEvictPods"].response(ep.GetEvictPodsRequest(), None) == ep.GetEvictPodsResponse()
    )


def test_the_suppression_plugin_asks_for_evict_pods_only() -> None:
    rpcs = by_name(SUPPRESSION_PLUGIN_RPCS)
    for constant in ("GetToken", "ThresholdMet", "GetTopEvictionPods"):
        assert rpcs[constant].command is None
    assert rpcs["ThresholdMet"].response(ep.Empty(), None) == ep.ThresholdMetResponse()
    request = ep.GetEvictPodsRequest(active_pods=[go_pod("a", "uid-a"), go_pod("r", "uid-r")])
    command = rpcs["GetEvictPods"].command(request)
    assert isinstance(command, SuppressionEvictPods)
    offer = EvictOffer("uid-r", 1, "current pool suppression rate 2.00 is over", False, "")
    response = rpcs["GetEvictPods"].response(request, EvictPodsAnswer((offer,)))
    (evict,) = response.evict_pods
    assert evict.pod.metadata.uid == "uid-r" and evict.reason.startswith("current pool")
    assert (evict.force_evict, evict.eviction_plugin_name) == (False, "")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        pytest.param(
            PressureUnavailable("GetEvictPods: the decision was not made durable: disk full"),
            grpc.StatusCode.UNAVAILABLE,
            id="a decision not made durable is retried at the next poll",
        ),
        pytest.param(
            SuppressionError("get reclaim pool failed: pool not found"),
            grpc.StatusCode.FAILED_PRECONDITION,
            id="no reclaim pool is this node's state, not the request's fault",
        ),
        pytest.param(
            PodError("pod batch/etl container main cpu: 'lots' is not a Kubernetes quantity"),
            grpc.StatusCode.INVALID_ARGUMENT,
            id="a pod whose request is not a quantity is a bad request",
        ),
    ],
)
def test_each_error_answers_its_status(error: Exception, status: grpc.StatusCode) -> None:
    assert code_for(error) is status
