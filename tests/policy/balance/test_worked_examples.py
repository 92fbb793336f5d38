"""Every worked example of spec memory-balancer §15, with its variants: the exact record, the
exact advice text and the eviction answer. Example 9 (the life cycle) is in test_timeline.

Where the reference and qrmd differ (O1 in example 3, O5 in example 10a), the table holds qrmd's
fixed outcome; test_oddities shows each fix against the reference's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from policy.balance import (
    BalanceInfo,
    RoundInputs,
    RoundResult,
    evict_offers,
    plan_round,
)
from tests.policy.balance.examples import (
    BP,
    EP,
    EX2_ADVICE,
    EX2_B,
    EX2_L,
    EX2_PODS,
    FAILED,
    FORCE,
    GRACE,
    HIGH,
    LOW,
    MEDIUM,
    NOTHING_TO_DO,
    SUCCESS,
    D,
    GiB,
    N,
    R,
    S,
    last_round,
    make_inputs,
    record,
)


@dataclass(frozen=True)
class Example:
    inputs: RoundInputs
    result: RoundResult
    record: BalanceInfo
    advice: str | None = None
    evictions: tuple[tuple[str, str], ...] = ()


def evicts(uid: str, numa: int) -> tuple[tuple[str, str], ...]:
    return ((uid, f"the memory node {numa} is under bandwidth pressure"),)


STORED = RoundResult.STORED

# --- example 1: no pressure ----------------------------------------------------------------
EX1 = Example(
    make_inputs([60, 50, 45, 40], [100, 90, 80, 70]),
    STORED,
    record(
        [60, 50, 45, 40],
        [100, 90, 80, 70],
        max_latency_numa=N(0, 60, 100),
        max_bandwidth_numa=N(0, 60, 100),
    ),
)

# --- example 2: grace by threshold, reclaimed + shared pods, caps ---------------------------
EX2 = Example(
    make_inputs(EX2_L, EX2_B, EX2_PODS),
    STORED,
    record(
        EX2_L,
        EX2_B,
        need_balance=True,
        balance_level=GRACE,
        max_latency_numa=N(0, 75, 900),
        max_bandwidth_numa=N(0, 75, 900),
        max_latency_numa_bandwidth_level=HIGH,
        source_numa=N(0, 75, 900),
        dest_numas=(D(1, 50, 300, 11),),
        evict_pods=(EP("r1"),),
        balance_pods=(
            BP("r2", 536870912, [0, 1, 2, 3]),
            BP("r1", 1073741824, [0, 1, 2, 3]),
            BP("s4", 3221225472, [0, 1], ["a", "b"]),
            BP("s1", 4294967296, [0, 1]),
        ),
        total_rss=9126805504.0,
        status=SUCCESS,
    ),
    EX2_ADVICE,
    evicts("r1", 0),
)

# --- example 3: latency-gap trigger, ping-pong, nothing to do --------------------------------
EX3_L, EX3_B = (65, 20, 30, 25), (500, 400, 300, 200)
EX3_PODS = (S("s1", {0: 2 * GiB}),)
EX3_COMMON = {
    "need_balance": True,
    "balance_level": GRACE,
    "max_latency_numa": N(0, 65, 500),
    "max_bandwidth_numa": N(0, 65, 500),
    "max_latency_numa_bandwidth_level": HIGH,
    "source_numa": N(0, 65, 500),
}
EX3_PING_PONG = record(
    EX3_L,
    EX3_B,
    **EX3_COMMON,
    dest_numas=(),
    status=FAILED,  # the reference says prepareSuccess (O1)
    failed_reason=NOTHING_TO_DO,
)
EX3_5MIN = Example(
    make_inputs(EX3_L, EX3_B, EX3_PODS, last=last_round(1, [0], 5)), STORED, EX3_PING_PONG
)
EX3_15MIN = Example(
    make_inputs(EX3_L, EX3_B, EX3_PODS, last=last_round(1, [0], 15)), STORED, EX3_PING_PONG
)
EX3_16MIN = Example(
    make_inputs(EX3_L, EX3_B, EX3_PODS, last=last_round(1, [0], 16)),
    STORED,
    record(
        EX3_L,
        EX3_B,
        **EX3_COMMON,
        dest_numas=(D(1, 20, 400, 11),),
        balance_pods=(BP("s1", 2147483648, [0, 1]),),
        total_rss=2147483648.0,
        status=SUCCESS,
    ),
    '{"destNumaList":[1],"sourceNuma":0,"migrateContainers":[{"podUID":"s1","containerName":"s1",'
    '"destNumaList":[0,1]}],"totalRSS":2147483648,"threshold":0.7}',
)

# --- example 4: force, per-distance gap ratios, pool without overlap -------------------------
EX4_L, EX4_B = (100, 88, 80, 70), (500, 450, 100, 90)
EX4 = Example(
    make_inputs(EX4_L, EX4_B, [R("rb", {0: 20 * GiB}), R("rs", {0: 2 * GiB}), S("s1", {0: GiB})]),
    STORED,
    record(
        EX4_L,
        EX4_B,
        need_balance=True,
        balance_level=FORCE,
        max_latency_numa=N(0, 100, 500),
        max_bandwidth_numa=N(0, 100, 500),
        max_latency_numa_bandwidth_level=HIGH,
        source_numa=N(0, 100, 500),
        dest_numas=(D(3, 70, 90, 21), D(2, 80, 100, 21)),
        evict_pods=(EP("rb"),),
        balance_pods=(BP("rs", 2147483648, [0, 1, 2, 3]),),
        total_rss=2147483648.0,
        status=SUCCESS,
    ),
    '{"destNumaList":[3,2],"sourceNuma":0,"migrateContainers":[{"podUID":"rs","containerName":"rs",'
    '"destNumaList":[0,1,2,3]}],"totalRSS":2147483648,"threshold":0.7}',
    evicts("rb", 0),
)

# --- example 5: force, medium bandwidth: source is the busiest NUMA --------------------------
EX5_L, EX5_B = (90, 40, 30, 20), (600, 150, 1000, 300)
EX5 = Example(
    make_inputs(
        EX5_L,
        EX5_B,
        [R("r1", {2: 2 * GiB}), S("s1", {2: GiB}), S("s2", {0: GiB})],
    ),
    STORED,
    record(
        EX5_L,
        EX5_B,
        need_balance=True,
        balance_level=FORCE,
        max_latency_numa=N(0, 90, 600),
        max_bandwidth_numa=N(2, 30, 1000),
        max_latency_numa_bandwidth_level=MEDIUM,
        bandwidth_pressure=True,
        source_numa=N(2, 30, 1000),
        dest_numas=(D(1, 40, 150, 21),),
        evict_pods=(EP("r1"),),
        balance_pods=(BP("r1", 2147483648, [0, 1, 2, 3]), BP("s1", 1073741824, [0, 1])),
        total_rss=3221225472.0,
        status=SUCCESS,
    ),
    '{"destNumaList":[1],"sourceNuma":2,"migrateContainers":[{"podUID":"r1","containerName":"r1",'
    '"destNumaList":[0,1,2,3]},{"podUID":"s1","containerName":"s1","destNumaList":[0,1]}],'
    '"totalRSS":3221225472,"threshold":0.7}',
    evicts("r1", 2),
)

# --- example 6: force, low bandwidth: destination is the hottest NUMA ------------------------
EX6_L, EX6_B = (95, 40, 30, 20), (200, 300, 1000, 100)
EX6 = Example(
    make_inputs(EX6_L, EX6_B, [S("s1", {2: 5 * GiB}), S("s2", {2: 8 * GiB})]),
    STORED,
    record(
        EX6_L,
        EX6_B,
        need_balance=True,
        balance_level=FORCE,
        max_latency_numa=N(0, 95, 200),
        max_bandwidth_numa=N(2, 30, 1000),
        max_latency_numa_bandwidth_level=LOW,
        bandwidth_pressure=True,
        source_numa=N(2, 30, 1000),
        dest_numas=(D(0, 95, 200, 10),),
        balance_pods=(BP("s1", 5368709120, [0, 1]),),
        total_rss=5368709120.0,
        status=SUCCESS,
    ),
    '{"destNumaList":[0],"sourceNuma":2,"migrateContainers":[{"podUID":"s1","containerName":"s1",'
    '"destNumaList":[0,1]}],"totalRSS":5368709120,"threshold":0.7}',
)

# --- example 7: grace cancelled at a bandwidth ratio of exactly 0.5 --------------------------
EX7_L, EX7_B = (75, 50, 40, 30), (500, 1000, 300, 200)
EX7 = Example(
    make_inputs(EX7_L, EX7_B, EX2_PODS),
    STORED,
    record(
        EX7_L,
        EX7_B,
        need_balance=False,
        balance_level=GRACE,
        max_latency_numa=N(0, 75, 500),
        max_bandwidth_numa=N(1, 50, 1000),
        max_latency_numa_bandwidth_level=LOW,
    ),
)
# With B[0] = 810 the ratio 0.81 is high and the round proceeds with source N0 (as example 2).
EX7_810_B = (810, 1000, 300, 200)
EX7_810 = Example(
    make_inputs(EX7_L, EX7_810_B, EX2_PODS),
    STORED,
    record(
        EX7_L,
        EX7_810_B,
        need_balance=True,
        balance_level=GRACE,
        max_latency_numa=N(0, 75, 810),
        max_bandwidth_numa=N(1, 50, 1000),
        max_latency_numa_bandwidth_level=HIGH,
        source_numa=N(0, 75, 810),
        dest_numas=(D(1, 50, 1000, 11),),
        evict_pods=(EP("r1"),),
        balance_pods=EX2.record.balance_pods,
        total_rss=9126805504.0,
        status=SUCCESS,
    ),
    EX2_ADVICE,
    evicts("r1", 0),
)

# --- example 8: reclaimed total cap and single-round threshold -------------------------------
EX8_L, EX8_B = (85, 50, 40, 30), (800, 700, 300, 200)
EX8 = Example(
    make_inputs(
        EX8_L,
        EX8_B,
        [
            R("ra", {0: 4 * GiB}),
            R("rb", {0: 5 * GiB}),
            R("rc", {0: 7 * GiB}),
            R("rd", {0: 14 * GiB}),
            R("re", {0: 16 * GiB}),
            S("s1", {0: GiB}),
        ],
    ),
    STORED,
    record(
        EX8_L,
        EX8_B,
        need_balance=True,
        balance_level=FORCE,
        max_latency_numa=N(0, 85, 800),
        max_bandwidth_numa=N(0, 85, 800),
        max_latency_numa_bandwidth_level=HIGH,
        source_numa=N(0, 85, 800),
        dest_numas=(D(1, 50, 700, 11), D(3, 30, 200, 21), D(2, 40, 300, 21)),
        evict_pods=(EP("re"),),
        balance_pods=(BP("ra", 4294967296, [0, 1, 2, 3]), BP("rb", 5368709120, [0, 1, 2, 3])),
        total_rss=9663676416.0,
        status=SUCCESS,
    ),
    '{"destNumaList":[1,3,2],"sourceNuma":0,"migrateContainers":[{"podUID":"ra",'
    '"containerName":"ra","destNumaList":[0,1,2,3]},{"podUID":"rb","containerName":"rb",'
    '"destNumaList":[0,1,2,3]}],"totalRSS":9663676416,"threshold":0.7}',
    evicts("re", 0),
)

# --- example 10: topology edge cases --------------------------------------------------------
REAL2 = {0: [(0, 10), (1, 11)], 1: [(0, 11), (1, 10)]}
POOLS2 = {"share": (0, 1), "reclaim": (0, 1)}
EX10A_ADVICE = (
    '{"destNumaList":[1],"sourceNuma":0,"migrateContainers":[{"podUID":"s1","containerName":"s1",'
    '"destNumaList":[0,1]}],"totalRSS":2147483648,"threshold":0.7}'
)


def ex10a(latency: int, level: object) -> Example:
    return Example(
        make_inputs([latency, 20], [500, 400], [S("s1", {0: 2 * GiB})], table=REAL2, pools=POOLS2),
        STORED,
        record(
            [latency, 20],
            [500, 400],
            need_balance=True,
            balance_level=level,
            max_latency_numa=N(0, latency, 500),
            max_bandwidth_numa=N(0, latency, 500),
            max_latency_numa_bandwidth_level=HIGH,
            source_numa=N(0, latency, 500),
            dest_numas=(D(1, 20, 400, 11),),
            balance_pods=(BP("s1", 2147483648, [0, 1]),),
            total_rss=2147483648.0,
            status=SUCCESS,
        ),
        EX10A_ADVICE,
    )


EX10B = Example(
    make_inputs([90, 40, 30, 20], [0, 0, 0, 0]),
    STORED,
    record(
        [90, 40, 30, 20],
        [0, 0, 0, 0],
        max_latency_numa=N(0, 90, 0),
        max_bandwidth_numa=N(0, 90, 0),
    ),
)
EX10C = Example(
    make_inputs([90], [50], table={0: []}, pools={"reclaim": (0,)}),
    RoundResult.FAILED,
    record(
        [90],
        [50],
        need_balance=True,
        balance_level=FORCE,
        max_latency_numa=N(0, 90, 50),
        max_bandwidth_numa=N(0, 90, 50),
        status=FAILED,
        failed_reason="failed to find any dest numa",
    ),
)
EX10D = Example(
    make_inputs([90], [50], [R("r1", {0: GiB})], table={0: [(0, 10)]}, pools={"reclaim": (0,)}),
    STORED,
    record(
        [90],
        [50],
        need_balance=True,
        balance_level=FORCE,
        max_latency_numa=N(0, 90, 50),
        max_bandwidth_numa=N(0, 90, 50),
        max_latency_numa_bandwidth_level=HIGH,
        source_numa=N(0, 90, 50),
        evict_pods=(EP("r1"),),
        dest_numas=(),
        status=SUCCESS,
    ),
    None,
    evicts("r1", 0),
)


EXAMPLES = [
    pytest.param(EX1, id="1 no pressure"),
    pytest.param(EX2, id="2 grace by threshold with reclaimed and shared pods under caps"),
    pytest.param(EX3_5MIN, id="3 latency gap with a ping-pong 5 minutes ago has nothing to do"),
    pytest.param(EX3_15MIN, id="3 ping-pong window includes exactly 15 minutes"),
    pytest.param(EX3_16MIN, id="3 after 16 minutes the reverse migration is allowed"),
    pytest.param(EX4, id="4 force with per-distance gap ratios and a pool without overlap"),
    pytest.param(EX5, id="5 force with medium bandwidth moves from the busiest NUMA"),
    pytest.param(EX6, id="6 force with low bandwidth moves to the hottest NUMA"),
    pytest.param(EX7, id="7 grace is cancelled at a bandwidth ratio of exactly 0.5"),
    pytest.param(EX7_810, id="7 with B0=810 the ratio 0.81 is high and the round proceeds"),
    pytest.param(EX8, id="8 reclaimed total cap and single-round threshold"),
    pytest.param(ex10a(65, GRACE), id="10a self entries no longer hide the latency gap"),
    pytest.param(ex10a(85, FORCE), id="10a force balance drops the self entry"),
    pytest.param(EX10B, id="10b zero bandwidth ends the round without error"),
    pytest.param(EX10C, id="10c single NUMA without self entry fails the round"),
    pytest.param(EX10D, id="10d single NUMA with self entry only evicts"),
]


@pytest.mark.parametrize("example", EXAMPLES)
def test_record(example: Example) -> None:
    outcome = plan_round(example.inputs)
    assert outcome.result is example.result
    assert outcome.record == example.record


@pytest.mark.parametrize("example", EXAMPLES)
def test_advice_text(example: Example) -> None:
    outcome = plan_round(example.inputs)
    got = None if outcome.advice is None else outcome.advice.to_json_text()
    assert got == example.advice


@pytest.mark.parametrize("example", EXAMPLES)
def test_eviction_answer(example: Example) -> None:
    outcome = plan_round(example.inputs)
    active = [p.uid for p in example.inputs.pods]
    stored = outcome.record if outcome.result is RoundResult.STORED else None
    offers = evict_offers(stored, active)
    assert [(o.pod_uid, o.reason) for o in offers] == list(example.evictions)
    assert all(o.force_evict and o.eviction_plugin_name == "numa_memory_balancer" for o in offers)
    assert all(active[o.active_index] == o.pod_uid for o in offers)


def test_example_2_full_record_as_logged() -> None:
    """The spec prints example 2's whole record; ours is byte-identical (detectTime aside)."""
    want = (
        '{"evictPods":[{"namespace":"default","name":"r1","UID":"r1"}],'
        '"balancePods":[{"namespace":"default","name":"r2","UID":"r2","containers":["r2"],'
        '"RSSOnSourceNuma":536870912,"destNumas":[0,1,2,3]},'
        '{"namespace":"default","name":"r1","UID":"r1","containers":["r1"],'
        '"RSSOnSourceNuma":1073741824,"destNumas":[0,1,2,3]},'
        '{"namespace":"default","name":"s4","UID":"s4","containers":["a","b"],'
        '"RSSOnSourceNuma":3221225472,"destNumas":[0,1]},'
        '{"namespace":"default","name":"s1","UID":"s1","containers":["s1"],'
        '"RSSOnSourceNuma":4294967296,"destNumas":[0,1]}],'
        '"destNumas":[{"NumaID":1,"ReadLatency":50,"ReadWriteBandwidth":300,"Distance":11}],'
        '"needBalance":true,"bandwidthPressure":false,"balanceLevel":"graceBalance",'
        '"totalRSS":9126805504,'
        '"maxLatencyNuma":{"NumaID":0,"ReadLatency":75,"ReadWriteBandwidth":900},'
        '"maxBandwidthNuma":{"NumaID":0,"ReadLatency":75,"ReadWriteBandwidth":900},'
        '"rawNumaLatencyInfo":[{"NumaID":0,"ReadLatency":75,"ReadWriteBandwidth":900},'
        '{"NumaID":1,"ReadLatency":50,"ReadWriteBandwidth":300},'
        '{"NumaID":2,"ReadLatency":30,"ReadWriteBandwidth":200},'
        '{"NumaID":3,"ReadLatency":20,"ReadWriteBandwidth":100}],'
        '"maxLatencyNumaBandwidthLevel":"high",'
        '"sourceNuma":{"NumaID":0,"ReadLatency":75,"ReadWriteBandwidth":900},'
        '"status":"prepareSuccess","failedReason":"",'
        '"detectTime":"2026-11-29T23:25:21.5Z","balanceExecuted":false,"evictExecuted":false}'
    )
    outcome = plan_round(EX2.inputs)
    assert outcome.record is not None
    assert outcome.record.to_json_text() == want


def test_example_1_record_keeps_null_destinations() -> None:
    outcome = plan_round(EX1.inputs)
    assert outcome.record is not None
    text = outcome.record.to_json_text()
    assert '"destNumas":null' in text and '"sourceNuma":null' in text
    assert '"balanceLevel":""' in text and '"maxLatencyNumaBandwidthLevel":""' in text
    assert '"status":"preparing"' in text


@pytest.mark.parametrize("example", EXAMPLES)
def test_record_json_round_trips(example: Example) -> None:
    outcome = plan_round(example.inputs)
    assert outcome.record is not None
    assert BalanceInfo.from_json(outcome.record.to_json()) == outcome.record


@pytest.mark.parametrize("example", EXAMPLES)
def test_inputs_json_round_trip_gives_the_same_round(example: Example) -> None:
    again = RoundInputs.from_json(example.inputs.to_json())
    assert again == example.inputs
    assert plan_round(again) == plan_round(example.inputs)
