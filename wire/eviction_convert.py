"""Eviction-plugin messages ↔ the balancer's domain values (wire.md §7, memory-balancer.md §9).

Requests carry whole Kubernetes ``Pod`` objects; the balancer needs only their UIDs, so the
requests become the UIDs of ``active_pods`` in request order. Answers name pods by their
position in (or UID of) that list, and the pod put in the answer is **the very object received**
(wire.md §7.4): the ``Pod`` subset keeps the fields it does not declare, so the agent gets back
the full object it sent and evicts by its namespace, name and UID.

``ThresholdMet``'s answer names its enums in the spec's words (``LESS_THAN``, ``NOT_MET``);
they become the enum numbers of ``evictionplugin.v1alpha1`` here.
"""

from __future__ import annotations

from collections.abc import Sequence

from policy.balance.eviction import EvictOffer, ThresholdMetAnswer
from wire.gen import evictionplugin_pb2 as ep
from wire.gen import k8s_core_v1_pb2 as core

__all__ = [
    "active_pod_uids",
    "evict_pods_response",
    "threshold_met_response",
    "token_response",
    "top_eviction_pods_response",
]


def active_pod_uids(active_pods: Sequence[core.Pod]) -> tuple[str, ...]:
    """The UIDs of a request's active pods, in request order (``metadata.uid``).

    A pod without a UID keeps its place as ``""``; it matches no balancer pod.
    """
    return tuple(pod.metadata.uid for pod in active_pods)


def evict_pods_response(
    offers: Sequence[EvictOffer], active_pods: Sequence[core.Pod]
) -> ep.GetEvictPodsResponse:
    """``GetEvictPodsResponse`` for the balancer's offers (§9.1), condition unset.

    Args:
        offers: the balancer's answer to the request's active pod UIDs.
        active_pods: the request's pods; each offer's ``active_index`` points into it.

    Returns:
        One ``EvictPod`` per offer, in offer order, each carrying the received pod object,
        the reason, ``force_evict`` and the plugin name, without deletion options.

    Raises:
        ValueError: an offer points outside ``active_pods`` or at a pod with another UID.
    """
    response = ep.GetEvictPodsResponse()
    for offer in offers:
        pod = _offered_pod(offer, active_pods)
        evict = response.evict_pods.add(
            reason=offer.reason,
            force_evict=offer.force_evict,
            eviction_plugin_name=offer.eviction_plugin_name,
        )
        # CopyFrom keeps the pod's unknown fields: the agent gets its whole object back.
        evict.pod.CopyFrom(pod)
    return response


def _offered_pod(offer: EvictOffer, active_pods: Sequence[core.Pod]) -> core.Pod:
    if not 0 <= offer.active_index < len(active_pods):
        raise ValueError(
            f"eviction offer for pod {offer.pod_uid!r} points at active pod "
            f"{offer.active_index}, but the request has {len(active_pods)}"
        )
    pod = active_pods[offer.active_index]
    if pod.metadata.uid != offer.pod_uid:
        raise ValueError(
            f"eviction offer for pod {offer.pod_uid!r} points at active pod "
            f"{offer.active_index}, whose UID is {pod.metadata.uid!r}"
        )
    return pod


def threshold_met_response(answer: ThresholdMetAnswer) -> ep.ThresholdMetResponse:
    """``ThresholdMetResponse`` for the balancer's answer (§9.2), without a condition.

    Raises:
        ValueError: the answer names an operator or met type the protocol does not have.
    """
    for field, name, known in (
        ("threshold operator", answer.threshold_operator, ep.ThresholdOperator.keys()),
        ("met type", answer.met_type, ep.ThresholdMetType.keys()),
    ):
        if name not in known:
            raise ValueError(
                f"ThresholdMet answer has an unknown {field} {name!r} (known: {', '.join(known)})"
            )
    return ep.ThresholdMetResponse(
        threshold_value=answer.threshold_value,
        observed_value=answer.observed_value,
        threshold_operator=answer.threshold_operator,
        met_type=answer.met_type,
        eviction_scope=answer.eviction_scope,
        grace_period_seconds=answer.grace_period_seconds,
    )


def top_eviction_pods_response(
    target_pod_uids: Sequence[str], active_pods: Sequence[core.Pod]
) -> ep.GetTopEvictionPodsResponse:
    """``GetTopEvictionPodsResponse`` naming the received pods with the given UIDs (§9.2).

    The balancer names none; a target not among the active pods is left out, as the agent
    could not evict it by a pod object it never sent.

    Args:
        target_pod_uids: the chosen pods, in order.
        active_pods: the request's pods.

    Returns:
        The received pod objects of the targets, without deletion options.
    """
    by_uid: dict[str, core.Pod] = {}
    for pod in active_pods:
        by_uid.setdefault(pod.metadata.uid, pod)
    response = ep.GetTopEvictionPodsResponse()
    for uid in target_pod_uids:
        target = by_uid.get(uid)
        if target is not None:
            response.target_pods.add().CopyFrom(target)
    return response


def token_response(token: str) -> ep.GetTokenResponse:
    """``GetTokenResponse`` carrying the token (the balancer's is ``""``, §9.2)."""
    return ep.GetTokenResponse(token=token)
