"""Builders for the balancer's worked examples, in the spec's shorthand (memory-balancer §15).

``N(k, lat, bw)`` is NUMA k's metrics, ``D(k, lat, bw, dist)`` a destination at a distance,
``BP(uid, rss, numas)`` a balance pod, ``EP(uid)`` an evict pod, ``R``/``S`` a reclaimed/shared
pod with its anon per NUMA. Topology T4 and the pools are the spec's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from policy.balance import (
    BalanceInfo,
    BalanceLevel,
    BalancePod,
    BalancerConfig,
    BalanceStatus,
    BandwidthLevel,
    Container,
    EvictPod,
    NumaDistance,
    NumaInfo,
    NumaLatencyInfo,
    NumaMetrics,
    Pod,
    RoundInputs,
)

GiB = 1 << 30
MiB = 1 << 20

#: A fixed "now": 2026-11-29T23:25:21.5Z.
NOW = 1_795_994_721.5

#: The spec's four-NUMA synthetic map without self entries (§15).
T4: dict[int, list[tuple[int, int]]] = {
    0: [(1, 11), (2, 21), (3, 21)],
    1: [(0, 11), (2, 21), (3, 21)],
    2: [(0, 21), (1, 21), (3, 11)],
    3: [(0, 21), (1, 21), (2, 11)],
}
#: share on NUMAs {0,1}, reclaim on {0,1,2,3} (§15).
POOLS: dict[str, tuple[int, ...]] = {"share": (0, 1), "reclaim": (0, 1, 2, 3)}

SUCCESS = BalanceStatus.PREPARE_SUCCESS
FAILED = BalanceStatus.PREPARE_FAILED
PREPARING = BalanceStatus.PREPARING
FORCE = BalanceLevel.FORCE
GRACE = BalanceLevel.GRACE
HIGH, MEDIUM, LOW = BandwidthLevel.HIGH, BandwidthLevel.MEDIUM, BandwidthLevel.LOW
NOTHING_TO_DO = "there is latency pressure but no pod can be balanced or evicted"


def N(numa: int, lat: float, bw: float) -> NumaLatencyInfo:
    return NumaLatencyInfo(numa, float(lat), float(bw))


def D(numa: int, lat: float, bw: float, dist: int) -> NumaInfo:
    return NumaInfo(numa, float(lat), float(bw), dist)


def EP(uid: str) -> EvictPod:
    return EvictPod("default", uid, uid)


def BP(
    uid: str, rss: int, numas: Sequence[int], containers: Sequence[str] | None = None
) -> BalancePod:
    return BalancePod("default", uid, uid, tuple(containers or (uid,)), float(rss), tuple(numas))


def pod(
    uid: str,
    pool: str,
    anon: Mapping[int, int] | None = None,
    containers: Sequence[tuple[str, Mapping[int, int]]] | None = None,
) -> Pod:
    """A pod with one container named like it (anon per NUMA), or the containers given."""
    specs = containers if containers is not None else [(uid, anon or {})]
    return Pod(
        uid,
        "default",
        uid,
        pool,
        tuple(Container(name, {k: float(v) for k, v in a.items()}) for name, a in specs),
    )


def R(uid: str, anon: Mapping[int, int]) -> Pod:
    return pod(uid, "reclaim", anon)


def S(uid: str, anon: Mapping[int, int]) -> Pod:
    return pod(uid, "share", anon)


def distances(
    table: Mapping[int, Sequence[tuple[int, int]]],
) -> dict[int, tuple[NumaDistance, ...]]:
    return {k: tuple(NumaDistance(n, d) for n, d in row) for k, row in table.items()}


def make_inputs(
    lat: Sequence[float],
    bw: Sequence[float],
    pods: Sequence[Pod] = (),
    *,
    table: Mapping[int, Sequence[tuple[int, int]]] = T4,
    pools: Mapping[str, Sequence[int]] = POOLS,
    last: BalanceInfo | None = None,
    now: float = NOW,
    config: BalancerConfig | None = None,
    cpu_vendor: str = "GenuineIntel",
) -> RoundInputs:
    return RoundInputs(
        now=now,
        numa_metrics={
            i: NumaMetrics(float(x), float(y)) for i, (x, y) in enumerate(zip(lat, bw, strict=True))
        },
        distances=distances(table),
        pools={k: tuple(v) for k, v in pools.items()},
        pods=tuple(pods),
        config=config or BalancerConfig(),
        cpu_vendor=cpu_vendor,
        last=last,
    )


def record(lat: Sequence[float], bw: Sequence[float], **fields: object) -> BalanceInfo:
    """The record of a round at NOW over these metrics, other fields at their initial values
    unless given (spec §15: "unlisted fields have their initial values")."""
    raw = tuple(N(i, x, y) for i, (x, y) in enumerate(zip(lat, bw, strict=True)))
    return BalanceInfo(detect_time=NOW, raw_numa_latency_info=raw, **fields)  # type: ignore[arg-type]


def last_round(source: int, dests: Sequence[int], minutes_ago: float) -> BalanceInfo:
    """An emitted round that moved memory from ``source`` to ``dests`` some minutes before NOW."""
    return BalanceInfo(
        detect_time=NOW - minutes_ago * 60,
        need_balance=True,
        balance_level=GRACE,
        max_latency_numa_bandwidth_level=HIGH,
        source_numa=N(source, 90, 900),
        dest_numas=tuple(D(d, 20, 100, 11) for d in dests),
        status=SUCCESS,
        balance_executed=True,
    )


#: Example 2's pods, also used by examples 7 and 9.
EX2_PODS = (
    R("r1", {0: GiB}),
    R("r2", {0: 512 * MiB}),
    R("r3", {0: 100 * MiB}),
    S("s1", {0: 4 * GiB}),
    S("s2", {0: 9 * GiB}),
    S("s3", {0: 64 * MiB}),
    pod("s4", "share", containers=[("a", {0: 2 * GiB}), ("b", {0: GiB})]),
)
EX2_L = (75, 50, 30, 20)
EX2_B = (900, 300, 200, 100)
EX2_ADVICE = (
    '{"destNumaList":[1],"sourceNuma":0,"migrateContainers":['
    '{"podUID":"r2","containerName":"r2","destNumaList":[0,1,2,3]},'
    '{"podUID":"r1","containerName":"r1","destNumaList":[0,1,2,3]},'
    '{"podUID":"s4","containerName":"a","destNumaList":[0,1]},'
    '{"podUID":"s4","containerName":"b","destNumaList":[0,1]},'
    '{"podUID":"s1","containerName":"s1","destNumaList":[0,1]}],'
    '"totalRSS":9126805504,"threshold":0.7}'
)
