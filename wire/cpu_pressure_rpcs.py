"""The CPU pressure eviction plugins' RPC tables and their conversions (wire.md §7, §8.3, §11;
katalyst-core v0.5.3 ``cpueviction``; spec cpu-policy §12.7).

Two plugins, each on its own socket in the plugin-registration directory and registered with
katalyst-agent's eviction manager under the reference's names, served by
``wire.eviction_server.EvictionPluginServer`` with these tables:

==========================  ================================  ================================
RPC                         ``cpu-pressure-load-plugin``      ``cpu-pressure-suppression-plugin``
==========================  ================================  ================================
``GetToken``                ``""``                            ``""``
``ThresholdMet``            the actor's ``LoadThresholdMet``  NOT_MET, all defaults
``GetTopEvictionPods``      ``LoadTopEvictionPods``           no pods
``GetEvictPods``            no pods                           ``SuppressionEvictPods``
==========================  ================================  ================================

Requests become ``ActivePod`` values (name, namespace, UID, annotations, priority, each
container's requests); answers name pods by UID or by their position in ``active_pods``, and
the pod put in an answer is the very object received (wire.md §7.4), as the balancer's are.
A met threshold carries its ``CPUPressure`` node condition; candidates carry their deletion
grace period when one is set (``--eviction-cpu-grace-period >= 0``).
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.cpu_pressure_messages import LoadThresholdMet, LoadTopEvictionPods, SuppressionEvictPods
from policy.cpu.pressure import ActivePod, EvictPodsAnswer, ThresholdMetAnswer, TopEvictionAnswer
from wire.eviction_convert import evict_pods_response, token_response, top_eviction_pods_response
from wire.eviction_server import EvictionPluginRpc
from wire.gen import evictionplugin_pb2 as ep
from wire.gen import k8s_core_v1_pb2 as core

__all__ = [
    "LOAD_PLUGIN_RPCS",
    "SUPPRESSION_PLUGIN_RPCS",
    "active_pods",
    "cpu_threshold_met_response",
    "cpu_top_eviction_pods_response",
]


def _requests(container: core.Container) -> dict[str, str]:
    return {name: q.string for name, q in container.resources.requests.items()}


def active_pods(pods: Sequence[core.Pod]) -> tuple[ActivePod, ...]:
    """The request's pods as the plugins read them, in request order."""
    return tuple(
        ActivePod(
            uid=pod.metadata.uid,
            namespace=pod.metadata.namespace,
            name=pod.metadata.name,
            annotations=dict(pod.metadata.annotations),
            priority=pod.spec.priority if pod.spec.HasField("priority") else None,
            containers=tuple((c.name, _requests(c)) for c in pod.spec.containers),
            init_containers=tuple((c.name, _requests(c)) for c in pod.spec.initContainers),
        )
        for pod in pods
    )


def cpu_threshold_met_response(answer: ThresholdMetAnswer) -> ep.ThresholdMetResponse:
    """``ThresholdMetResponse`` with the ``CPUPressure`` condition when met.

    Raises:
        ValueError: an operator, met type or condition type the protocol does not have.
    """
    for what, name, known in (
        ("threshold operator", answer.threshold_operator, ep.ThresholdOperator.keys()),
        ("met type", answer.met_type, ep.ThresholdMetType.keys()),
    ):
        if name not in known:
            raise ValueError(f"ThresholdMet answer has an unknown {what} {name!r}")
    response = ep.ThresholdMetResponse(
        threshold_value=answer.threshold_value,
        observed_value=answer.observed_value,
        threshold_operator=answer.threshold_operator,
        met_type=answer.met_type,
        eviction_scope=answer.eviction_scope,
        grace_period_seconds=answer.grace_period_seconds,
    )
    if answer.condition is not None:
        c = answer.condition
        if c.condition_type not in set(ep.ConditionType.keys()):
            raise ValueError(
                f"ThresholdMet answer has an unknown condition type {c.condition_type!r}"
            )
        response.condition.CopyFrom(
            ep.Condition(
                condition_type=c.condition_type,
                effects=list(c.effects),
                condition_name=c.condition_name,
                met_condition=c.met_condition,
            )
        )
    return response


def cpu_top_eviction_pods_response(
    answer: TopEvictionAnswer, pods: Sequence[core.Pod]
) -> ep.GetTopEvictionPodsResponse:
    """The received pods of the targets, in order, with the grace period when set."""
    response = top_eviction_pods_response(answer.pod_uids, pods)
    if answer.grace_period_seconds is not None:
        response.deletion_options.grace_period_seconds = answer.grace_period_seconds
    return response


def _evict(request: ep.GetEvictPodsRequest, answer: EvictPodsAnswer) -> ep.GetEvictPodsResponse:
    response = evict_pods_response(answer.offers, request.active_pods)
    if answer.grace_period_seconds is not None:
        # v0.5.47: each offer carries the deletion grace period (``evictPodsByReclaimMetrics``).
        for evict_pod in response.evict_pods:
            evict_pod.deletion_options.grace_period_seconds = answer.grace_period_seconds
    return response


_TOKEN = EvictionPluginRpc("GetToken", ep.Empty, None, lambda request, _: token_response(""))

#: ``cpu-pressure-load-plugin``, in the proto file's order (wire.md §7.1).
LOAD_PLUGIN_RPCS = (
    _TOKEN,
    EvictionPluginRpc(
        "ThresholdMet",
        ep.Empty,
        lambda request: LoadThresholdMet(),
        lambda request, answer: cpu_threshold_met_response(answer),
    ),
    EvictionPluginRpc(
        "GetTopEvictionPods",
        ep.GetTopEvictionPodsRequest,
        lambda request: LoadTopEvictionPods(active_pods(request.active_pods), request.topN),
        lambda request, answer: cpu_top_eviction_pods_response(answer, request.active_pods),
    ),
    EvictionPluginRpc(
        "GetEvictPods", ep.GetEvictPodsRequest, None, lambda request, _: ep.GetEvictPodsResponse()
    ),
)

#: ``cpu-pressure-suppression-plugin``.
SUPPRESSION_PLUGIN_RPCS = (
    _TOKEN,
    EvictionPluginRpc("ThresholdMet", ep.Empty, None, lambda request, _: ep.ThresholdMetResponse()),
    EvictionPluginRpc(
        "GetTopEvictionPods",
        ep.GetTopEvictionPodsRequest,
        None,
        lambda request, _: ep.GetTopEvictionPodsResponse(),
    ),
    EvictionPluginRpc(
        "GetEvictPods",
        ep.GetEvictPodsRequest,
        lambda request: SuppressionEvictPods(active_pods(request.active_pods)),
        _evict,
    ),
)
