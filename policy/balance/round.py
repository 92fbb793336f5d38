"""One balance round as a pure function of its inputs (spec memory-balancer §6.2, §7).

``plan_round`` reads ``RoundInputs`` and returns a ``RoundOutcome``:

* **skipped** while the last emitted round is younger than 30 s (cool-down, §6.2 step 2);
* **failed** when a step errs (§7.12): the record, with status ``prepareFailed`` and the error
  as its reason, is for the log and the metric only and must not be stored (O8);
* **stored** otherwise: the record to store as ``current`` and the advice it yields (§8).

The steps, each in ``numas`` or ``pods``:

1. Metrics of every NUMA node; max latency and max bandwidth (§7.1).
2. Zero guard: no measurement, no round (§7.2).
3. Candidates by distance and latency from the max-latency node (§7.3).
4. Latency pressure (§7.4); none ends the round as ``preparing``.
5. An empty candidate list is an error (§7.5).
6. Bandwidth level (§7.6) and regulation (§7.7): a cancelled grace round ends as ``preparing``.
7. The pod to evict (§7.8).
8. Destinations (§7.9), then the pods to migrate (§7.10).
9. Final status (§7.11): pressure with nothing to balance or evict is ``prepareFailed`` with its
   reason, and is stored (fix O1; the reference reports ``prepareSuccess``).

``run_round`` runs a round against the balancer's state: a stored outcome replaces
``current``, a skipped or failed one leaves the state as it was (O8). It lives here, not with
the state's other transitions in ``section``, so that the state section (what the journal codec
and replay need) loads without the planner.

No clock, no I/O: the time is ``inputs.now``. Given equal inputs the outcome is equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from policy.balance.advice import MemoryAdvice, advice_for
from policy.balance.config import ResolvedConfig
from policy.balance.constants import BALANCE_INTERVAL_NS, NO_DEST_NUMA, NOTHING_TO_DO
from policy.balance.errors import BalanceError, RoundFailed
from policy.balance.inputs import RoundInputs
from policy.balance.numas import (
    bandwidth_level,
    candidates_by_distance_and_latency,
    destinations,
    distance_list,
    latency_pressure,
    max_bandwidth_numa,
    max_latency_numa,
    nanos,
    numa_latency_info,
    regulated_candidates,
)
from policy.balance.pods import PoolListing, balance_pods, pod_to_evict
from policy.balance.record import (
    BalanceInfo,
    BalanceLevel,
    BalancePod,
    BalanceStatus,
    BandwidthLevel,
    EvictPod,
    NumaInfo,
    NumaLatencyInfo,
)
from policy.balance.section import BalancerState

__all__ = [
    "NOTHING_TO_DO",
    "RoundOutcome",
    "RoundResult",
    "in_cool_down",
    "plan_round",
    "run_round",
]

#: Failed reason of a round with pressure but nothing to balance or evict (§7.11).


class RoundResult(StrEnum):
    """What the balancer does with a round's outcome."""

    SKIPPED = "skipped"
    FAILED = "failed"
    STORED = "stored"


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """A round's result, its record (None when skipped) and the advice the record yields."""

    result: RoundResult
    record: BalanceInfo | None = None
    advice: MemoryAdvice | None = None

    @property
    def error(self) -> str:
        """The error of a failed round; empty otherwise."""
        if self.result is RoundResult.FAILED and self.record is not None:
            return self.record.failed_reason
        return ""

    def to_json(self) -> dict[str, object]:
        """``{"result", "record", "advice"}``, the advice as its exact text."""
        return {
            "result": str(self.result),
            "record": None if self.record is None else self.record.to_json(),
            "advice": None if self.advice is None else self.advice.to_json_text(),
        }


def in_cool_down(last: BalanceInfo | None, now: float) -> bool:
    """Whether rounds are skipped: the last emitted round started less than 30 s ago (§6.2).

    A clock that stepped back (``now`` before the last round) also skips, as in the reference.
    """
    return last is not None and nanos(now) - nanos(last.detect_time) < BALANCE_INTERVAL_NS


def plan_round(inputs: RoundInputs) -> RoundOutcome:
    """Run one balance round.

    Args:
        inputs: everything the round reads, ``inputs.last`` being the last emitted round.

    Returns:
        The outcome (module docstring). Never raises: inputs were validated on construction,
        and a failing step yields a ``failed`` outcome.
    """
    if in_cool_down(inputs.last, inputs.now):
        return RoundOutcome(RoundResult.SKIPPED)
    draft = _Draft(inputs.now)
    try:
        _run_steps(inputs, inputs.config.resolve(inputs.cpu_vendor), draft)
    except RoundFailed as exc:
        draft.status = BalanceStatus.PREPARE_FAILED
        draft.failed_reason = str(exc)
        return RoundOutcome(RoundResult.FAILED, draft.freeze())
    record = draft.freeze()
    return RoundOutcome(RoundResult.STORED, record, advice_for(record))


class _Draft:
    """The record under construction; a failed step leaves what was computed so far."""

    def __init__(self, detect_time: float) -> None:
        self.detect_time = detect_time
        self.raw: list[NumaLatencyInfo] = []
        self.max_latency_numa: NumaLatencyInfo | None = None
        self.max_bandwidth_numa: NumaLatencyInfo | None = None
        self.need_balance = False
        self.balance_level = BalanceLevel.NONE
        self.bandwidth_level = BandwidthLevel.NONE
        self.bandwidth_pressure = False
        self.source_numa: NumaLatencyInfo | None = None
        self.evict_pods: tuple[EvictPod, ...] = ()
        self.dest_numas: tuple[NumaInfo, ...] | None = None
        self.balance_pods: tuple[BalancePod, ...] = ()
        self.total_rss = 0.0
        self.status = BalanceStatus.PREPARING
        self.failed_reason = ""

    def freeze(self) -> BalanceInfo:
        return BalanceInfo(
            detect_time=self.detect_time,
            evict_pods=self.evict_pods,
            balance_pods=self.balance_pods,
            dest_numas=self.dest_numas,
            need_balance=self.need_balance,
            bandwidth_pressure=self.bandwidth_pressure,
            balance_level=self.balance_level,
            total_rss=self.total_rss,
            max_latency_numa=self.max_latency_numa,
            max_bandwidth_numa=self.max_bandwidth_numa,
            raw_numa_latency_info=tuple(self.raw),
            max_latency_numa_bandwidth_level=self.bandwidth_level,
            source_numa=self.source_numa,
            status=self.status,
            failed_reason=self.failed_reason,
        )


def _run_steps(inputs: RoundInputs, cfg: ResolvedConfig, d: _Draft) -> None:
    # 1. Metrics of every NUMA node; a failure keeps the nodes read so far, like the reference.
    try:
        for numa in inputs.numa_ids():
            d.raw.append(numa_latency_info(numa, inputs.numa_metrics, cfg.read_latency_metric))
    finally:
        if d.raw:
            d.max_latency_numa = max_latency_numa(d.raw)
            d.max_bandwidth_numa = max_bandwidth_numa(d.raw)
    hottest, busiest = max_latency_numa(d.raw), max_bandwidth_numa(d.raw)

    # 2. Zero guard: the agent could not measure (typical of VMs); not an error.
    if hottest.read_latency == 0 or busiest.read_write_bandwidth == 0:
        return

    # 3. Candidates from the hottest node's distance list.
    candidates = candidates_by_distance_and_latency(
        d.raw, distance_list(inputs.distances, hottest.numa_id)
    )

    # 4. Latency pressure.
    d.balance_level = latency_pressure(hottest, candidates, cfg)
    d.need_balance = d.balance_level is not BalanceLevel.NONE
    if not d.need_balance:
        return

    # 5. Nowhere to go at all.
    if not candidates:
        raise RoundFailed(NO_DEST_NUMA)

    # 6. Bandwidth level and regulation.
    d.bandwidth_level = bandwidth_level(hottest, busiest)
    if d.bandwidth_level is BandwidthLevel.HIGH:
        source = hottest
    elif d.balance_level is BalanceLevel.GRACE:
        # Grace balance only when the hottest node itself carries high bandwidth.
        d.need_balance = False
        return
    else:
        source = busiest
        d.bandwidth_pressure = True
        d.source_numa = source
        candidates = regulated_candidates(
            d.bandwidth_level, hottest, source, d.raw, inputs.distances
        )
    d.source_numa = source

    # 7. The pod to evict, for force and grace rounds alike.
    listing = PoolListing(inputs.pods, inputs.unresolved_pods)
    evict = pod_to_evict(listing, source.numa_id)
    d.evict_pods = () if evict is None else (evict,)

    # 8. Destinations, then the pods to migrate.
    d.dest_numas = destinations(
        candidates,
        source,
        level=d.balance_level,
        bandwidth_pressure=d.bandwidth_pressure,
        cfg=cfg,
        last=inputs.last,
        now_ns=nanos(inputs.now),
    )
    if d.dest_numas:
        dest_ids = frozenset(n.numa_id for n in d.dest_numas)
        d.balance_pods, d.total_rss = balance_pods(
            listing, inputs.pools, cfg, source.numa_id, dest_ids
        )

    # 9. Final status.
    if (not d.dest_numas or not d.balance_pods) and not d.evict_pods:
        d.status = BalanceStatus.PREPARE_FAILED
        d.failed_reason = NOTHING_TO_DO
    else:
        d.status = BalanceStatus.PREPARE_SUCCESS


def run_round(state: BalancerState, inputs: RoundInputs) -> tuple[BalancerState, RoundOutcome]:
    """Run one round against the state (§6.2).

    Args:
        state: the balancer's state.
        inputs: the round's inputs; ``inputs.last`` must be ``state.last``, so that the round a
            journal records is the round that ran.

    Returns:
        The new state (``current`` replaced only by a stored outcome) and the outcome.

    Raises:
        BalanceError: ``inputs.last`` is not the state's last emitted round.
    """
    if inputs.last != state.last:
        raise BalanceError(
            "round inputs carry a last emitted round that differs from the balancer state's"
        )
    outcome = plan_round(inputs)
    if outcome.result is RoundResult.STORED:
        # The state's two fields, made directly: every computed quiet round comes here.
        return BalancerState(current=outcome.record, last=state.last), outcome
    return state, outcome
