"""The suppression plugin, ``cpu-pressure-suppression-plugin`` (katalyst-core v0.5.3
``cpueviction/strategy/pressure_suppression.go``, normative for this component; spec
cpu-policy §12.7).

``evict_pods`` (``GetEvictPods``), a decision of ``(history, inputs, settings, now)``:

1. In the reference's order: suppression eviction disabled: no pods. No reclaim pool in the
   state: an error, ``get reclaim pool failed: pool not found`` (the reference wraps
   ``GetCPUSetForPool``'s ``pool not found``; its gRPC server sends that text as the status
   message). A reclaim pool of 0 CPUs: no pods.
2. The candidates are the active pods whose QoS level is reclaimed_cores (a pod whose level
   cannot be resolved is left out); none: no pods. They are ordered by CPU request, larger
   first, then priority, lower first, then ``namespace/name`` in *descending* order
   (``PodUniqKeyCmpFunc`` uses ``CmpString``, which places the greater string first; kept).
3. The total is the candidates' summed CPU requests. For each candidate in order, the pool's
   suppression rate is ``total / |reclaim pool|`` where the total is taken as
   ``Quantity.Value()``, i.e. rounded *up* to whole CPUs (kept: 1.5 + 1.5 CPUs on 10 CPUs is
   0.3, 1.5 alone is 0.2). A pod whose tolerance rate is below the rate has its timer started
   (if not running); once it has run *longer than* the minimum duration the pod is offered
   with the reason ``current pool suppression rate R is over than the pod suppression
   tolerance rate T`` (both ``%.2f``) and its request is taken off the total. A pod at or
   above the rate has its timer stopped.
4. Timers of pods no longer among the candidates are stopped.

Every early answer of step 1 and 2 (disabled, no pool, an empty pool, no candidate) leaves
the timers as they are: only the full pass (steps 3 and 4) stops one. So a pod over its
tolerance while the reclaim pool was briefly missing or empty keeps its start time, and is
offered at the next full pass if it has been over for longer than the minimum.

The timers are the section's ``tolerance_since``; one ``SuppressionTimersSet`` event is
committed when they change or a pod is offered, so the journal shows since when each pod was
over its tolerance and which were offered, with their reasons.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from policy.cpu.pressure.answers import EvictOffer, EvictPodsAnswer
from policy.cpu.pressure.inputs import SuppressionInputs
from policy.cpu.pressure.pods import (
    ActivePod,
    is_reclaimed,
    pod_cpu_request,
    quantity_value,
    suppression_tolerance_rate,
)
from policy.cpu.pressure.settings import PressureSettings
from policy.cpu.qos import QoSConfig, QoSError
from policy.decision import Decision
from policy.errors import PolicyError
from policy.state.pressure import PressureHistory
from policy.state.pressure.events import SuppressionTimersSet

__all__ = [
    "POOL_NOT_FOUND",
    "JudgedPod",
    "SuppressionError",
    "evict_pods",
    "judge_part",
    "suppression_order",
    "suppression_reason",
]

#: ``PodEntries.GetCPUSetForPool``'s error for a name that is no pool entry (state.go).
POOL_NOT_FOUND = "pool not found"


class SuppressionError(PolicyError):
    """``GetEvictPods`` cannot be answered (no reclaim pool in the state)."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    index: int  # position in the request's active pods
    pod: ActivePod
    request: Fraction


class JudgedPod(Protocol):
    """A reclaimed pod as a part's judgement reads it (either level's candidate)."""

    @property
    def index(self) -> int:
        """Its position in the request's active pods."""
        ...

    @property
    def pod(self) -> ActivePod:
        """The pod."""
        ...

    @property
    def request(self) -> Fraction:
        """Its CPU request."""
        ...


def suppression_reason(pool_rate: float, tolerance: float) -> str:
    """The reason text of an offered pod, as the reference formats it (``%.2f``)."""
    return (
        f"current pool suppression rate {_go_2f(pool_rate)} is over than the "
        f"pod suppression tolerance rate {_go_2f(tolerance)}"
    )


def judge_part(
    members: Sequence[JudgedPod],
    supply: float,
    *,
    settings: PressureSettings,
    qos: QoSConfig,
    now: float,
    since: dict[str, float],
    offers: list[tuple[str, EvictOffer]],
    warnings: list[str],
) -> None:
    """Each pod of a part of the reclaim pool, in eviction order, against the part's rate: the
    pods' requests over what the part supplies, the total shrinking as pods are offered
    (``evictPodsByReclaimMetrics``). v0.5.3 judges the whole pool against its size; v0.5.47
    each part against a measured supply, which may be 0 (every pod then over any tolerance).
    Updates ``since`` (tolerance timers), ``offers`` and ``warnings`` in place."""
    total = sum((c.request for c in members), Fraction(0))
    for c in members:
        key = c.pod.uniq_key
        rate = sys.float_info.max if supply == 0 else quantity_value(total) / supply
        tolerance, problem = suppression_tolerance_rate(
            qos, c.pod, settings.max_suppression_tolerance_rate
        )
        if problem:
            maximum = settings.max_suppression_tolerance_rate
            warnings.append(f"{problem}; using the maximum {maximum}")
        if tolerance < rate:
            started = since.setdefault(key, now)
            if now - started > settings.min_suppression_tolerance_duration_s:
                reason = suppression_reason(rate, tolerance)
                offers.append((key, EvictOffer(c.pod.uid, c.index, reason, False, "")))
                total -= c.request
        else:
            since.pop(key, None)


def _go_2f(value: float) -> str:
    # Go's %.2f writes +Inf and NaN; Python writes inf and nan.
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.2f}"


def suppression_order(candidates: list[_Candidate]) -> list[_Candidate]:
    """Larger request first, then lower priority, then ``namespace/name`` descending."""
    by_key = sorted(candidates, key=lambda c: c.pod.uniq_key, reverse=True)
    by_priority = sorted(by_key, key=lambda c: c.pod.effective_priority)
    return sorted(by_priority, key=lambda c: c.request, reverse=True)


def evict_pods(
    history: PressureHistory,
    inputs: SuppressionInputs,
    settings: PressureSettings,
    now: float,
    qos: QoSConfig | None = None,
) -> Decision[EvictPodsAnswer]:
    """``GetEvictPods`` of the suppression plugin at ``now`` (the module docstring's steps).

    Args:
        history: the section; its ``tolerance_since`` are the timers.
        inputs: the reclaim pool's size and the request's pods.
        settings: the plugin's settings.
        now: the time of the call, seconds.
        qos: how QoS levels are resolved; the default selectors when None.

    Returns:
        The offers and, when the timers change or a pod is offered, one
        ``SuppressionTimersSet``; warnings for pods left out or given the maximum rate.

    Raises:
        SuppressionError: the state has no reclaim pool (``get reclaim pool failed: pool not
            found``).
        PodError: a pod's request is not a Kubernetes quantity.
    """
    qos = qos or QoSConfig()
    # 1. Disabled, no pool, an empty pool: early answers that keep the timers.
    if not settings.enable_suppression_eviction:
        return Decision(events=(), reply=EvictPodsAnswer())
    if inputs.reclaim_pool_size is None:
        raise SuppressionError(f"get reclaim pool failed: {POOL_NOT_FOUND}")
    pool_size = inputs.reclaim_pool_size
    if pool_size == 0:
        return Decision(
            events=(), reply=EvictPodsAnswer(), warnings=("reclaim pool set size is empty",)
        )
    # 2. Reclaimed pods, in eviction order.
    warnings: list[str] = []
    candidates = []
    for index, pod in enumerate(inputs.active_pods):
        try:
            if not is_reclaimed(qos, pod):
                continue
        except QoSError as err:
            warnings.append(f"filter pod {pod.name} err: {err}")
            continue
        candidates.append(_Candidate(index, pod, pod_cpu_request(pod)))
    if not candidates:
        # An early return, as the reference's: the timers are kept (module docstring).
        return Decision(events=(), reply=EvictPodsAnswer(), warnings=tuple(warnings))
    ordered = suppression_order(candidates)
    # 3. Each pod against the pool's rate, the total shrinking as pods are offered.
    since = dict(history.tolerance_since)
    offers: list[tuple[str, EvictOffer]] = []
    judge_part(
        ordered,
        pool_size,
        settings=settings,
        qos=qos,
        now=now,
        since=since,
        offers=offers,
        warnings=warnings,
    )
    # 4. Timers of pods that are no longer candidates.
    keys = {c.pod.uniq_key for c in ordered}
    since = {key: t for key, t in since.items() if key in keys}
    return _decide(history, since, offers, warnings)


def _decide(
    history: PressureHistory,
    since: dict[str, float],
    offers: list[tuple[str, EvictOffer]],
    warnings: list[str],
) -> Decision[EvictPodsAnswer]:
    """The answer, and one event when the timers changed or a pod was offered."""
    events: tuple[SuppressionTimersSet, ...] = ()
    if offers or since != dict(history.tolerance_since):
        evicted = tuple((key, offer.reason) for key, offer in offers)
        events = (SuppressionTimersSet(since=tuple(sorted(since.items())), evicted=evicted),)
    answer = EvictPodsAnswer(tuple(offer for _, offer in offers))
    return Decision(events=events, reply=answer, warnings=tuple(warnings))
