"""The eviction plugin's answers as domain values (spec memory-balancer §9).

``GetEvictPods`` offers the current record's eviction pod, once per record, if the eviction
manager lists it among its active pods; the offer is force-evict and names the source NUMA in
its reason (always "bandwidth pressure", O18). The other RPCs answer constants. The wire layer
turns these values into protobuf; the "taken once" bookkeeping lives in ``state``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policy.balance.constants import EVICT_REASON, EVICTION_PLUGIN_NAME
from policy.balance.record import BalanceInfo

__all__ = [
    "EvictOffer",
    "ThresholdMetAnswer",
    "evict_offers",
    "threshold_met",
    "token",
    "top_eviction_pods",
]


@dataclass(frozen=True, slots=True)
class EvictOffer:
    """One ``EvictPod`` of a ``GetEvictPods`` answer.

    ``active_index`` is the position of the matching pod in the request's active pods, so the
    wire layer can return that very pod object.
    """

    pod_uid: str
    active_index: int
    reason: str
    force_evict: bool = True
    eviction_plugin_name: str = EVICTION_PLUGIN_NAME


def evict_offers(
    record: BalanceInfo | None, active_pod_uids: Sequence[str]
) -> tuple[EvictOffer, ...]:
    """What ``GetEvictPods`` returns for a record (§9.1 steps 1–2); it sets no flag.

    Args:
        record: the current record; None before the first stored round.
        active_pod_uids: UIDs of the request's active pods, in request order.

    Returns:
        One offer per (eviction pod, active pod with its UID) pair, eviction pods first; empty
        without a record or once the record's eviction was taken.
    """
    if record is None or record.evict_executed or record.source_numa is None:
        return ()
    reason = EVICT_REASON.format(record.source_numa.numa_id)
    return tuple(
        EvictOffer(pod_uid=uid, active_index=i, reason=reason)
        for evict in record.evict_pods
        for i, uid in enumerate(active_pod_uids)
        if uid == evict.uid
    )


@dataclass(frozen=True, slots=True)
class ThresholdMetAnswer:
    """``ThresholdMet``'s all-default answer (§9.2): never met, no condition."""

    threshold_value: float = 0.0
    observed_value: float = 0.0
    threshold_operator: str = "LESS_THAN"
    met_type: str = "NOT_MET"
    eviction_scope: str = ""
    grace_period_seconds: int = 0


def threshold_met() -> ThresholdMetAnswer:
    """``ThresholdMet``: the balancer never reports a threshold (§9.2)."""
    return ThresholdMetAnswer()


def top_eviction_pods() -> tuple[str, ...]:
    """``GetTopEvictionPods``: no target pods (§9.2); the balancer evicts via ``GetEvictPods``."""
    return ()


def token() -> str:
    """``GetToken``: the empty token (§9.2)."""
    return ""
