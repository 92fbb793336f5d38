"""Quiet balance rounds coalesced in the journal (memory-balancer §1.1, §6.2; DESIGN.md "Journal").

A round runs every ``qos-aware-sync-period`` (5 s). On an idle node nearly every round says
the same thing: no pressure, stored with ``needBalance=false`` (or, on a broken set-up, the
same failure every time). Journaled one by one, with their inputs, that is ~2 KB every 5 s on
four NUMA nodes and ~21 KB on 64, each fsynced. The rule, given the round's decision and the
stretch of rounds since the last journaled one:

1. A round whose outcome repeats the last journaled round's and that hands nothing out (no
   advice, no eviction offer: ``has_pods_to_move`` is false) is *coalesced*: not journaled,
   counted in the stretch with the range of the metrics it read. The balance section does not
   change, so ``current`` stays the record the journal last stored.
2. A round whose outcome differs, or that hands something out, is journaled as decided, and
   the stretch before it (if any) is summarised in the same record by
   ``BalanceRoundsCoalesced``: one record per outcome change.
3. A round that would be coalesced once ``summary_every_s`` has passed since the last
   journaled round is journaled anyway, with the summary: the journal says at least once per
   period that the balancer ran and what it read, and ``current`` becomes that round's record,
   exactly as the record says (a replay adopts the same event).

The outcome is what the round metric reports (§12: ``need_balance``, ``balance_level``,
``bandwidth_pressure``, ``status``, ``bandwidth_level`` and the full failed reason) and
whether the round was stored or failed (O8). Every journaled round keeps its inputs, so every
round that changed something can be re-run (``policy.balance.rerun``); what is not journaled
are rounds whose re-run could only repeat the outcome already journaled.

The stretch is the balancer's own memory, not durable state: after a restart the first round
is journaled whatever its outcome, and the rounds of a stretch cut short by a stop are lost
(their count and metric range, never a round that changed anything). ``summary_every_s = 0``
journals every round.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import is_
from types import MappingProxyType
from typing import Any

from policy.balance.decide import RoundReply
from policy.balance.events import (
    BalanceEvent,
    BalanceRoundFailed,
    BalanceRoundRecorded,
    BalanceRoundsCoalesced,
)
from policy.balance.inputs import MissingSample, NumaMetrics, PlainInputs
from policy.balance.lifecycle import has_pods_to_move
from policy.decision import Decision, Event

__all__ = [
    "METRIC_NAMES",
    "JournaledRound",
    "OutcomeKey",
    "QuietStretch",
    "coalesce_round",
    "round_outcome",
]

#: The per-NUMA metrics a summary gives the range of, by their ``RoundInputs`` names (§4.1).
METRIC_NAMES = ("readLatency", "readWriteBandwidth")

#: What makes two rounds' outcomes equal (module docstring).
OutcomeKey = tuple[object, ...]

#: Per NUMA node, per metric name, the (min, max) seen.
MetricRanges = Mapping[int, Mapping[str, tuple[float, float]]]


#: Per NUMA node, ``(latency low, latency high, bandwidth low, bandwidth high)``; a metric
#: without a range yet is ``(inf, -inf)``, which no sample lies in.
_Bounds = Mapping[int, tuple[float, float, float, float]]

_NO_RANGE = (math.inf, -math.inf)

#: A live round's samples: its NUMA ids and their ``NumaMetrics``, in the same order.
_Checked = tuple[tuple[int, ...], tuple[NumaMetrics, ...]]


@dataclass(frozen=True, slots=True)
class QuietStretch:
    """The rounds since the last journaled one.

    Attributes:
        outcome: the last journaled round's outcome; None when that round handed something
            out (nothing can repeat it).
        since: the last journaled round's time.
        rounds: how many rounds were coalesced since.
        first_time: the first coalesced round's time (None without one).
        last_time: the last coalesced round's time (None without one).
        metrics: the range of each NUMA node's metrics over the coalesced rounds.
        bounds: ``metrics`` as one flat tuple per NUMA node, for the check every coalesced
            round makes (``_Bounds``); made from ``metrics`` when not given.
        checked: the last live round's samples, ``(NUMA ids, NumaMetrics)`` in its order, all
            of them within ``metrics`` (None when unknown). A ``NumaMetrics`` is immutable and
            ranges only ever widen, so a later round that reads the very same sample objects
            for the same nodes lies within without its values being compared: a source that
            answers each node's sample made once (``qrmd.host.metrics_fixed``) costs one
            identity test per node instead of four comparisons.
    """

    outcome: OutcomeKey | None
    since: float
    rounds: int = 0
    first_time: float | None = None
    last_time: float | None = None
    metrics: MetricRanges = field(default_factory=lambda: MappingProxyType({}))
    bounds: _Bounds | None = field(default=None, compare=False, repr=False)
    checked: _Checked | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.bounds is None:
            object.__setattr__(self, "bounds", _bounds_of(self.metrics))

    def summary(self) -> BalanceRoundsCoalesced | None:
        """The stretch as a journal event; None when no round was coalesced."""
        if self.rounds == 0 or self.first_time is None or self.last_time is None:
            return None
        metrics = {
            str(numa): {name: [low, high] for name, (low, high) in ranges.items()}
            for numa, ranges in sorted(self.metrics.items())
        }
        return BalanceRoundsCoalesced(self.rounds, self.first_time, self.last_time, metrics)

    def with_round(self, now: float, inputs: Mapping[str, Any]) -> QuietStretch:
        """The stretch with one more coalesced round at ``now`` that read ``inputs``."""
        metrics, bounds, checked = self.metrics, self.bounds, None
        if type(inputs) is PlainInputs:
            # A live round's: its samples are read from the inputs the form would be made
            # of, checked against the flat bounds without listing them first.
            sampled = inputs.inputs.numa_metrics
            checked = (tuple(sampled), tuple(sampled.values()))
            if not _same_samples(self.checked, checked) and (
                bounds is None or not _live_within(bounds, sampled)
            ):
                metrics, bounds = _widened(metrics, _samples_of(sampled)), None
        else:
            samples = _samples(inputs)
            if not _within(metrics, samples):
                metrics, bounds = _widened(metrics, samples), None
        return QuietStretch(
            self.outcome,
            self.since,
            self.rounds + 1,
            now if self.first_time is None else self.first_time,
            now,
            metrics,
            bounds,
            checked,
        )


def _same_samples(before: _Checked | None, now: _Checked) -> bool:
    """Whether a round read the very sample objects ``before`` holds, node for node
    (``QuietStretch.checked``): then they lie within the ranges already."""
    return (
        before is not None
        and before[0] == now[0]
        and len(before[1]) == len(now[1])
        and all(map(is_, before[1], now[1]))
    )


def _bounds_of(metrics: MetricRanges) -> _Bounds:
    """``metrics`` as ``_Bounds``."""
    bounds: dict[int, tuple[float, float, float, float]] = {}
    for numa, ranges in metrics.items():
        latency = ranges.get(METRIC_NAMES[0], _NO_RANGE)
        bandwidth = ranges.get(METRIC_NAMES[1], _NO_RANGE)
        bounds[numa] = (latency[0], latency[1], bandwidth[0], bandwidth[1])
    return bounds


def _live_within(bounds: _Bounds, sampled: Mapping[int, NumaMetrics]) -> bool:
    """``_within`` for a live round's metrics: whether every sample lies in its range (a
    ``NumaMetrics`` sample is a float or missing, and a missing one has no range to lie in)."""
    for numa, metrics in sampled.items():
        latency = metrics.read_latency
        bandwidth = metrics.read_write_bandwidth
        node = bounds.get(numa)
        if node is None:
            if type(latency) is float or type(bandwidth) is float:
                return False
            continue
        if type(latency) is float and not node[0] <= latency <= node[1]:
            return False
        if type(bandwidth) is float and not node[2] <= bandwidth <= node[3]:
            return False
    return True


def _within(metrics: MetricRanges, samples: list[tuple[int, str, float]]) -> bool:
    """Whether every sample lies in its metric's range already: the ranges stay as they are
    (on a steady node, once the first rounds of a stretch have set them, nearly every round)."""
    for numa, name, value in samples:
        ranges = metrics.get(numa)
        seen = None if ranges is None else ranges.get(name)
        if seen is None or not seen[0] <= value <= seen[1]:
            return False
    return True


def _widened(metrics: MetricRanges, samples: list[tuple[int, str, float]]) -> MetricRanges:
    """The ranges widened to hold ``samples``, read-only, by NUMA node."""
    # Only the nodes sampled get new ranges; the others keep their read-only ones.
    merged: dict[int, Mapping[str, tuple[float, float]]] = dict(metrics)
    touched: dict[int, dict[str, tuple[float, float]]] = {}
    for numa, name, value in samples:
        ranges = touched.get(numa)
        if ranges is None:
            ranges = touched[numa] = dict(merged.get(numa, {}))
        seen = ranges.get(name)
        ranges[name] = (
            (value, value) if seen is None else (min(seen[0], value), max(seen[1], value))
        )
    for numa, ranges in touched.items():
        merged[numa] = MappingProxyType(ranges)
    return MappingProxyType(dict(sorted(merged.items())))


@dataclass(frozen=True, slots=True)
class JournaledRound:
    """What to journal of one round.

    Attributes:
        events: the events to commit: the round's own, after the summary of the rounds
            coalesced before it; empty when the round is coalesced (or was skipped).
        stretch: the stretch to hold once ``events`` are committed (at once when there is
            nothing to commit). A refused commit keeps the stretch held before, so the next
            round tries again.
    """

    events: tuple[Event, ...]
    stretch: QuietStretch | None

    @property
    def coalesced(self) -> bool:
        """The round was computed but is not journaled (rule 1)."""
        return not self.events and self.stretch is not None and self.stretch.rounds > 0


def round_outcome(event: BalanceEvent) -> OutcomeKey | None:
    """A round event's outcome (module docstring); None for a round that hands something out,
    which never repeats, or for an event that is not a round's."""
    match event:
        case BalanceRoundRecorded(record=record):
            if has_pods_to_move(record):
                return None
            return ("stored", *record.metric_tags().values())
        case BalanceRoundFailed(error=error):
            return ("failed", error)
    return None


def coalesce_round(
    stretch: QuietStretch | None,
    decision: Decision[RoundReply],
    now: float,
    summary_every_s: float,
) -> JournaledRound:
    """Whether a round is journaled, and with which summary (module docstring, rules 1-3).

    Args:
        stretch: the rounds since the last journaled one; None before the first since start.
        decision: the round's decision (``policy.balance.decide.balance_round``,
            ``unreadable_round`` or ``skip_round``).
        now: the round's time.
        summary_every_s: the summary period; 0 journals every round.

    Returns:
        What to commit and the stretch to hold after it.

    Raises:
        ValueError: ``summary_every_s`` is negative or not a number.
    """
    if not (math.isfinite(summary_every_s) and summary_every_s >= 0):
        raise ValueError(f"the round summary period must be 0 s or more, got {summary_every_s}")
    rounds = [e for e in decision.events if isinstance(e, _ROUND_EVENTS)]
    if not rounds:
        # Skipped in the cool-down: nothing computed, nothing to count (§6.2 step 2).
        return JournaledRound(decision.events, stretch)
    (event,) = rounds
    outcome = round_outcome(event)
    repeats = stretch is not None and outcome is not None and outcome == stretch.outcome
    if stretch is not None and repeats and 0 <= now - stretch.since < summary_every_s:
        return JournaledRound((), stretch.with_round(now, event.inputs))
    summary = None if stretch is None else stretch.summary()
    events = decision.events if summary is None else (summary, *decision.events)
    return JournaledRound(events, QuietStretch(outcome, since=now))


_ROUND_EVENTS = (BalanceRoundRecorded, BalanceRoundFailed)


def _samples(inputs: Mapping[str, Any]) -> list[tuple[int, str, float]]:
    """The numeric samples of a round's ``RoundInputs.to_json()`` form: (NUMA, metric, value).
    A missing sample (null or ``{"error"}``) has no value, and is left out."""
    if type(inputs) is PlainInputs:
        return _samples_of(inputs.inputs.numa_metrics)
    found: list[tuple[int, str, float]] = []
    listed = inputs.get("numaMetrics")
    if not isinstance(listed, list):
        return found
    for entry in listed:
        # The exact-type tests first: a live round's form holds dicts and floats only.
        if not (type(entry) is dict or isinstance(entry, Mapping)):
            continue
        numa = entry.get("numa")
        if not isinstance(numa, int):
            continue
        for name in METRIC_NAMES:
            value = entry.get(name)
            if type(value) is float:
                found.append((numa, name, value))
            elif isinstance(value, int | float) and not isinstance(value, bool):
                found.append((numa, name, float(value)))
    return found


def _samples_of(metrics: Mapping[int, NumaMetrics]) -> list[tuple[int, str, float]]:
    """``_samples`` of the form of ``metrics``: the same samples in the same order, without
    making the form. A checked sample is a float (``NumaMetrics``), a missing one has none."""
    found: list[tuple[int, str, float]] = []
    for numa, sampled in metrics.items():
        for name, value in (
            (METRIC_NAMES[0], sampled.read_latency),
            (METRIC_NAMES[1], sampled.read_write_bandwidth),
        ):
            if not isinstance(value, MissingSample):
                found.append((numa, name, value))
    return found
