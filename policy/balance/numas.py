"""Source and destination NUMA selection (spec memory-balancer §7.1, §7.3–§7.7, §7.9).

1. Metrics per NUMA; the max-latency and max-bandwidth nodes, lowest id on ties (§7.1).
2. Candidates from the max-latency node's distance list, by distance then latency (§7.3).
3. Latency pressure: force above the force threshold, grace above the grace threshold, or grace
   when the nearest other node is close enough and much faster (§7.4).
4. The max-latency node's bandwidth level against the busiest node (§7.6), which decides the
   source and the candidate list (§7.7).
5. Destinations: the gap-ratio filter, then the ping-pong filter against the last emitted round
   (§7.9).

Fixes over the reference (§14): the latency-gap trigger looks past the node's own entry in a
real (sysfs) distance list, and a node is never its own destination (O5); a missing distance
list in the ``medium`` branch fails the round (O3); an empty bandwidth-ordered list means no
destination instead of a crash (O4). Sorts are stable, so ties keep distance-list order (O12).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from policy.balance.config import ResolvedConfig
from policy.balance.constants import (
    BANDWIDTH_HIGH_THRESHOLD,
    BANDWIDTH_MEDIUM_THRESHOLD,
    LOW_BANDWIDTH_DESTINATION_DISTANCE,
    PING_PONG_WINDOW_NS,
)
from policy.balance.errors import RoundFailed
from policy.balance.gojson import to_nanos
from policy.balance.inputs import MissingSample, NumaDistance, NumaMetrics
from policy.balance.record import (
    BalanceInfo,
    BalanceLevel,
    BandwidthLevel,
    NumaInfo,
    NumaLatencyInfo,
)

__all__ = [
    "BANDWIDTH_METRIC",
    "bandwidth_level",
    "candidates_by_bandwidth",
    "candidates_by_distance_and_latency",
    "destinations",
    "distance_list",
    "in_ping_pong_window",
    "is_ping_pong",
    "latency_pressure",
    "max_bandwidth_numa",
    "max_latency_numa",
    "nanos",
    "numa_latency_info",
    "regulated_candidates",
]

#: Metric name of the per-NUMA read+write bandwidth (§4.1).
BANDWIDTH_METRIC = "mem.bandwidth.numa"

#: ``to_nanos``, remembered for the last times it converted (exact: the same number of the
#: same type gives the same nanoseconds; a time it refuses is not remembered). A tick on a
#: balancer with a last emitted round converts the round's time and that round's detect time
#: eight times (the cool-down checked by the tick, the planner and the windows machine, the
#: ping-pong window), each through a decimal: 1.5 us a time.
nanos = lru_cache(maxsize=16, typed=True)(to_nanos)


def numa_latency_info(
    numa_id: int, metrics: Mapping[int, NumaMetrics], latency_metric: str
) -> NumaLatencyInfo:
    """One NUMA node's metrics (§7.1).

    Raises:
        RoundFailed: a sample is missing; the message names the metric, the node and the reason.
    """
    sample = metrics.get(numa_id)
    latency = sample.read_latency if sample is not None else MissingSample()
    bandwidth = sample.read_write_bandwidth if sample is not None else MissingSample()
    # Latency is read first, as in the reference, so its failure is the one reported.
    if isinstance(latency, MissingSample):
        raise _missing(latency_metric, numa_id, latency)
    if isinstance(bandwidth, MissingSample):
        raise _missing(BANDWIDTH_METRIC, numa_id, bandwidth)
    return NumaLatencyInfo(numa_id, latency, bandwidth)


def _missing(metric: str, numa_id: int, sample: MissingSample) -> RoundFailed:
    return RoundFailed(
        f"failed to get numa metric, metric name: {metric}, numa id: {numa_id}, "
        f"err: {sample.reason}"
    )


def max_latency_numa(raw: Sequence[NumaLatencyInfo]) -> NumaLatencyInfo:
    """The node with the greatest latency; the first (lowest id) among equal maxima."""
    best = raw[0]
    for info in raw[1:]:
        if info.read_latency > best.read_latency:
            best = info
    return best


def max_bandwidth_numa(raw: Sequence[NumaLatencyInfo]) -> NumaLatencyInfo:
    """The node with the greatest bandwidth; the first (lowest id) among equal maxima."""
    best = raw[0]
    for info in raw[1:]:
        if info.read_write_bandwidth > best.read_write_bandwidth:
            best = info
    return best


def distance_list(
    distances: Mapping[int, tuple[NumaDistance, ...]], numa_id: int
) -> tuple[NumaDistance, ...]:
    """A node's distance list.

    Raises:
        RoundFailed: the node has none; the message dumps the map as Go's ``%+v`` does.
    """
    found = distances.get(numa_id)
    if found is None:
        raise RoundFailed(
            f"failed to find numa id({numa_id})in numa distance array({_go_dump(distances)})"
        )
    return found


def _go_dump(distances: Mapping[int, tuple[NumaDistance, ...]]) -> str:
    rows = (
        f"{numa}:[" + " ".join(f"{{NumaID:{e.numa_id} Distance:{e.distance}}}" for e in row) + "]"
        for numa, row in sorted(distances.items())
    )
    return "map[" + " ".join(rows) + "]"


def _numa_infos(raw: Sequence[NumaLatencyInfo], entries: Sequence[NumaDistance]) -> list[NumaInfo]:
    # Entries naming a node without metrics are left out, as in the reference.
    by_id = {info.numa_id: info for info in raw}
    return [NumaInfo.at(by_id[e.numa_id], e.distance) for e in entries if e.numa_id in by_id]


def candidates_by_distance_and_latency(
    raw: Sequence[NumaLatencyInfo], entries: Sequence[NumaDistance]
) -> list[NumaInfo]:
    """Candidates ascending by distance, then latency; ties keep list order (§7.3, O12)."""
    return sorted(_numa_infos(raw, entries), key=lambda n: (n.distance, n.read_latency))


def candidates_by_bandwidth(
    raw: Sequence[NumaLatencyInfo], entries: Sequence[NumaDistance]
) -> list[NumaInfo]:
    """Candidates ascending by bandwidth; ties keep list order (§7.7, O12)."""
    return sorted(_numa_infos(raw, entries), key=lambda n: n.read_write_bandwidth)


def latency_pressure(
    hottest: NumaLatencyInfo, candidates: Sequence[NumaInfo], cfg: ResolvedConfig
) -> BalanceLevel:
    """Whether and how strongly to balance (§7.4); ``BalanceLevel.NONE`` means no pressure.

    Step 3 compares with the nearest candidate that is not the node itself (fix O5): in a
    sysfs distance list the node's own entry (distance 10) sorts first, and the reference's
    gap of zero against itself can never trigger.
    """
    if hottest.read_latency > cfg.force_balance_read_latency_threshold:
        return BalanceLevel.FORCE
    if hottest.read_latency > cfg.grace_balance_read_latency_threshold:
        return BalanceLevel.GRACE
    nearest = next((c for c in candidates if c.numa_id != hottest.numa_id), None)
    if (
        nearest is not None
        and nearest.distance <= cfg.grace_balance_numa_distance_max
        and hottest.read_latency - nearest.read_latency
        > cfg.grace_balance_read_latency_gap_threshold
    ):
        return BalanceLevel.GRACE
    return BalanceLevel.NONE


def bandwidth_level(hottest: NumaLatencyInfo, busiest: NumaLatencyInfo) -> BandwidthLevel:
    """The max-latency node's bandwidth relative to the max-bandwidth node (§7.6)."""
    if hottest.numa_id == busiest.numa_id:
        return BandwidthLevel.HIGH
    ratio = hottest.read_write_bandwidth / busiest.read_write_bandwidth
    if ratio > BANDWIDTH_HIGH_THRESHOLD:
        return BandwidthLevel.HIGH
    if ratio > BANDWIDTH_MEDIUM_THRESHOLD:
        return BandwidthLevel.MEDIUM
    return BandwidthLevel.LOW


def regulated_candidates(
    level: BandwidthLevel,
    hottest: NumaLatencyInfo,
    source: NumaLatencyInfo,
    raw: Sequence[NumaLatencyInfo],
    distances: Mapping[int, tuple[NumaDistance, ...]],
) -> list[NumaInfo]:
    """Candidates of a force round whose hottest node is not ``high`` (§7.7).

    The source is then the busiest node. ``medium``: its least busy neighbour, distances from
    the source; an empty list means no destination (fix O4). ``low``: the hottest node itself,
    at the hard-coded distance 10 (O6, kept).

    Raises:
        RoundFailed: ``medium`` and the source has no distance list (fix O3: the reference
            swallows this error and continues with the unregulated list).
    """
    if level is BandwidthLevel.MEDIUM:
        return candidates_by_bandwidth(raw, distance_list(distances, source.numa_id))[:1]
    return [NumaInfo.at(hottest, LOW_BANDWIDTH_DESTINATION_DISTANCE)]


def in_ping_pong_window(last: BalanceInfo | None, now_ns: int) -> bool:
    """Whether ``now_ns`` is within 15 minutes of the last emitted round, 15 minutes included
    (§7.9.2, O19); without a last round there is no window."""
    return last is not None and now_ns - nanos(last.detect_time) <= PING_PONG_WINDOW_NS


def is_ping_pong(last: BalanceInfo | None, now_ns: int, source_id: int, dest_id: int) -> bool:
    """Whether moving memory from ``source_id`` to ``dest_id`` reverses the last emitted round
    within the 15-minute window, 15 minutes included (§7.9.2, O19)."""
    if last is None or last.source_numa is None or last.dest_numas is None:
        return False
    if not in_ping_pong_window(last, now_ns):
        return False
    if dest_id != last.source_numa.numa_id:
        return False
    return any(source_id == n.numa_id for n in last.dest_numas)


def destinations(
    candidates: Sequence[NumaInfo],
    source: NumaLatencyInfo,
    *,
    level: BalanceLevel,
    bandwidth_pressure: bool,
    cfg: ResolvedConfig,
    last: BalanceInfo | None,
    now_ns: int,
) -> tuple[NumaInfo, ...]:
    """The destination NUMA nodes, in candidate order (§7.9).

    1. Gap ratio: a grace round stops at the first node beyond the grace distance; a node is
       kept if its latency (bandwidth under bandwidth pressure) times ``1 + ratio`` is at most
       the source's, the ratio being the grace one within the grace distance, else the force
       one. The source itself is never kept (fix O5, for a gap ratio of 0).
    2. Ping-pong: drop a node that would reverse the last emitted round.
    """
    kept: list[NumaInfo] = []
    for n in candidates:
        within_grace = n.distance <= cfg.grace_balance_numa_distance_max
        if level is BalanceLevel.GRACE and not within_grace:
            break
        ratio = cfg.grace_balance_gap_ratio if within_grace else cfg.force_balance_gap_ratio
        if bandwidth_pressure:
            fits = n.read_write_bandwidth * (1 + ratio) <= source.read_write_bandwidth
        else:
            fits = n.read_latency * (1 + ratio) <= source.read_latency
        if fits and n.numa_id != source.numa_id:
            kept.append(n)
    return tuple(n for n in kept if not is_ping_pong(last, now_ns, source.numa_id, n.numa_id))
