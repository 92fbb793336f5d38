"""Round inputs, records and advices in their plain-dict JSON form: round trips, and bad input
rejected with an error that names the field (spec memory-balancer §4, §5)."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from policy.balance import (
    BalanceError,
    BalanceInfo,
    MemoryAdvice,
    MissingSample,
    NumaMetrics,
    RoundInputs,
    RoundResult,
    distance_lists_from_rows,
    plan_round,
)
from policy.balance.inputs import NumaDistance
from tests.policy.balance.examples import (
    EX2_ADVICE,
    EX2_B,
    EX2_L,
    EX2_PODS,
    last_round,
    make_inputs,
)

Doc = dict[str, Any]


def example_doc() -> Doc:
    doc = make_inputs(EX2_L, EX2_B, EX2_PODS, last=last_round(1, [0], 20)).to_json()
    doc["unresolvedPods"] = [{"uid": "u1", "pool": "batch", "reason": "pod u1 not found"}]
    return doc


def test_inputs_round_trip() -> None:
    doc = example_doc()
    inputs = RoundInputs.from_json(doc)
    assert inputs.to_json() == doc
    assert RoundInputs.from_json(copy.deepcopy(doc)) == inputs


def test_container_ids_round_trip_and_are_absent_without_a_pod_source() -> None:
    doc = example_doc()
    assert all("containerId" not in c for p in doc["pods"] for c in p["containers"])
    doc["pods"][0]["containers"][0]["containerId"] = "cri-o://4f1e"
    inputs = RoundInputs.from_json(doc)
    assert inputs.pods[0].containers[0].container_id == "cri-o://4f1e"
    assert inputs.pods[1].containers[0].container_id == ""
    assert inputs.to_json() == doc


def test_now_may_be_an_rfc3339_timestamp() -> None:
    doc = example_doc()
    doc["now"] = "2026-11-29T23:25:21.5Z"
    assert RoundInputs.from_json(doc).now == 1795994721.5


def test_missing_samples_decode_and_fail_the_round_with_their_reason() -> None:
    doc = example_doc()
    doc["numaMetrics"][2]["readLatency"] = {"error": "metric data expired"}
    doc["numaMetrics"][3]["readWriteBandwidth"] = None
    inputs = RoundInputs.from_json(doc)
    assert inputs.numa_metrics[2].read_latency == MissingSample("metric data expired")
    assert inputs.numa_metrics[3].read_write_bandwidth == MissingSample()
    assert RoundInputs.from_json(inputs.to_json()) == inputs
    outcome = plan_round(inputs)
    assert outcome.result is RoundResult.FAILED
    assert outcome.error == (
        "failed to get numa metric, metric name: mem.latency.read.numa, numa id: 2, "
        "err: metric data expired"
    )
    assert outcome.record is not None
    assert [n.numa_id for n in outcome.record.raw_numa_latency_info] == [0, 1]


def test_amd_reads_its_own_latency_metric() -> None:
    doc = example_doc()
    doc["cpuVendor"] = "AuthenticAMD"
    del doc["numaMetrics"][0]["readLatency"]
    outcome = plan_round(RoundInputs.from_json(doc))
    assert outcome.error.startswith(
        "failed to get numa metric, metric name: mem.latency.amd.l3.miss"
    )


def test_a_numa_node_without_metrics_fails_the_round() -> None:
    doc = example_doc()
    del doc["numaMetrics"][1]
    outcome = plan_round(RoundInputs.from_json(doc))
    assert outcome.error == (
        "failed to get numa metric, metric name: mem.latency.read.numa, numa id: 1, err: no sample"
    )


def test_sysfs_rows_keep_the_self_entry() -> None:
    rows = distance_lists_from_rows({0: [10, 21], 1: [21, 10]})
    assert rows == {
        0: (NumaDistance(0, 10), NumaDistance(1, 21)),
        1: (NumaDistance(0, 21), NumaDistance(1, 10)),
    }


def put(path: str, value: object) -> Callable[[Doc], None]:
    """A damage function: set the field at a dotted path (list indexes as numbers)."""

    def damage(doc: Doc) -> None:
        *parents, leaf = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(leaf)] = value
        else:
            node[leaf] = value

    return damage


def drop(path: str) -> Callable[[Doc], None]:
    def damage(doc: Doc) -> None:
        *parents, leaf = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[leaf]

    return damage


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(drop("now"), "inputs: missing field 'now'", id="missing now"),
        pytest.param(put("now", -1), r"inputs.now: -1 is outside", id="time before 1970"),
        pytest.param(
            put("now", "soon"), "inputs.now: 'soon' is not an RFC 3339", id="time not a time"
        ),
        pytest.param(
            put("extra", 1), "inputs: unknown field 'extra'", id="unknown top-level field"
        ),
        pytest.param(
            put("numaMetrics.0.readLatency", -5),
            r"inputs.numaMetrics\[0\].readLatency: -5 is outside",
            id="negative latency",
        ),
        pytest.param(
            put("numaMetrics.0.readWriteBandwidth", True),
            r"inputs.numaMetrics\[0\].readWriteBandwidth: expected a number, got True",
            id="boolean bandwidth",
        ),
        pytest.param(
            put("numaMetrics.1.numa", 0),
            r"inputs.numaMetrics\[1\].numa: NUMA 0 is listed twice",
            id="a NUMA node's metrics twice",
        ),
        pytest.param(
            put("distances.0", [[1]]),
            r"inputs.distances\['0'\]\[0\]: expected \[numaId, distance\]",
            id="distance pair too short",
        ),
        pytest.param(
            put("distances.0", [[1, 0]]),
            r"inputs.distances\['0'\]\[0\]\[1\]: 0 is outside",
            id="zero distance",
        ),
        pytest.param(
            put("distances.0", [[1, 11], [1, 21]]),
            r"distances\[0\]: a NUMA id appears twice",
            id="a NUMA node twice in one distance list",
        ),
        pytest.param(
            put("distances", {"x": []}),
            "key 'x' is not a NUMA id",
            id="distance key not a number",
        ),
        pytest.param(put("distances", {}), "holds no NUMA node", id="no NUMA node at all"),
        pytest.param(
            put("pools.share", [0, "one"]),
            r"inputs.pools\['share'\]\[1\]: expected an integer",
            id="pool NUMA not a number",
        ),
        pytest.param(
            put("pods.0.containers.0.anon", {"0": -1}),
            r"inputs.pods\[0\].containers\[0\].anon\['0'\]: -1 is outside",
            id="negative anonymous memory",
        ),
        pytest.param(
            put("pods.0.containers.0.anon", {"0": 2.0**64}),
            r"anon\['0'\]: .* is outside",
            id="anonymous memory beyond int64",
        ),
        pytest.param(
            put("pods.0.containers", []),
            r"inputs.pods\[0\]: pod 'r1' has no containers",
            id="pod without containers",
        ),
        pytest.param(
            put("pods.6.containers.1.name", "a"),
            "pod 's4' names a container twice",
            id="container name twice",
        ),
        pytest.param(drop("pods.0.pool"), r"inputs.pods\[0\]: missing field 'pool'", id="no pool"),
        pytest.param(
            put("pods.0.uid", ""), r"inputs.pods\[0\].uid: must not be empty", id="empty uid"
        ),
        pytest.param(put("pods.1.uid", "r1"), "pods: pod 'r1' is listed twice", id="pod UID twice"),
        pytest.param(
            put("unresolvedPods.0.reason", ""),
            r"inputs.unresolvedPods\[0\].reason: must not be empty",
            id="unresolved pod without reason",
        ),
        pytest.param(
            put("config.grace-balance-gap-ratio", -0.1),
            "inputs.config.grace-balance-gap-ratio: -0.1 is outside",
            id="negative gap ratio",
        ),
        pytest.param(
            put("config.force-balance-read-latency-threshold", {"AMD": 600}),
            "inputs.config.force-balance-read-latency-threshold: vendor aware configuration "
            "must have a default value",
            id="vendor-aware option without default",
        ),
        pytest.param(
            put("config.numa-balance-supported-pools", ["reclaim"]),
            "inputs.config: numa-balance-supported-pools: 'reclaim' may not be listed",
            id="reclaim as a supported pool",
        ),
        pytest.param(
            put("config.balanced-pod-source-numa-rss-max", 1.5),
            "inputs.config.balanced-pod-source-numa-rss-max: expected an integer",
            id="byte size not an integer",
        ),
        pytest.param(
            put("config.typo", 1), "inputs.config: unknown field 'typo'", id="unknown config key"
        ),
        pytest.param(
            put("last.detectTime", "noon"),
            "inputs.last.detectTime: 'noon' is not an RFC 3339 timestamp",
            id="last round with a bad time",
        ),
        pytest.param(
            put("last.status", "done"),
            "inputs.last.status: 'done' is not one of",
            id="last round with an unknown status",
        ),
        pytest.param(
            put("pods.0.containers.0.containerId", 7),
            r"inputs.pods\[0\].containers\[0\].containerId: expected a string",
            id="container ID not a string",
        ),
        pytest.param(
            drop("last.totalRSS"),
            "inputs.last: missing field 'totalRSS'",
            id="record field missing",
        ),
    ],
)
def test_bad_inputs_name_the_field(damage: Callable[[Doc], None], message: str) -> None:
    doc = example_doc()
    damage(doc)
    with pytest.raises(BalanceError, match=message):
        RoundInputs.from_json(doc)


def test_record_with_eviction_needs_a_source() -> None:
    doc = plan_round(make_inputs(EX2_L, EX2_B, EX2_PODS)).record
    assert doc is not None
    raw = doc.to_json()
    raw["sourceNuma"] = None
    with pytest.raises(BalanceError, match="evictPods must have a sourceNuma"):
        BalanceInfo.from_json(raw)


def test_advice_text_reads_back() -> None:
    advice = MemoryAdvice.from_json(json.loads(EX2_ADVICE))
    assert advice.to_json_text() == EX2_ADVICE
    assert advice.source_numa == 0 and advice.threshold == 0.7
    assert [c.container_name for c in advice.migrate_containers] == ["r2", "r1", "a", "b", "s1"]
    with pytest.raises(BalanceError, match=r"advice.migrateContainers\[0\].podUID"):
        MemoryAdvice.from_json({**json.loads(EX2_ADVICE), "migrateContainers": [{"podUID": 1}]})


@pytest.mark.parametrize(
    ("sample", "refusal"),
    [
        pytest.param(math.nan, "expected a finite number", id="a NaN float is refused"),
        pytest.param(math.inf, "expected a finite number", id="an infinite float is refused"),
        pytest.param(-0.5, "is outside", id="a negative float is refused"),
        pytest.param(True, "expected a number", id="a boolean is refused"),
    ],
)
def test_a_numa_sample_out_of_bounds_is_refused_whatever_its_type(
    sample: object, refusal: str
) -> None:
    with pytest.raises(BalanceError, match=f"readLatency: .*{refusal}"):
        NumaMetrics(sample, 1.0)  # type: ignore[arg-type]
    with pytest.raises(BalanceError, match=f"readWriteBandwidth: .*{refusal}"):
        NumaMetrics(1.0, sample)  # type: ignore[arg-type]


def test_a_numa_sample_is_kept_as_a_float() -> None:
    metrics = NumaMetrics(0.0, 7)
    assert (metrics.read_latency, metrics.read_write_bandwidth) == (0.0, 7.0)
    assert type(metrics.read_write_bandwidth) is float
