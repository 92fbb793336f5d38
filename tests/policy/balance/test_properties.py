"""Invariants of the round planner over random inputs (spec memory-balancer §7, O12).

* The planner is deterministic: equal inputs give equal outcomes, whatever order the pods,
  metrics, distance lists, pools and per-NUMA samples are given in, and through a JSON round trip.
* It never raises on valid inputs, and the outcome is well-formed: the record encodes as Go
  would, the total is the sum of the balance pods, no node is its own destination.
* Garbage given to the decoders raises ``BalanceError`` and nothing else.

(Container order inside a pod is pod-spec order, part of the output (§5.4), so it is not
permuted.)
"""

from __future__ import annotations

import contextlib
import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.balance import (
    BalanceError,
    BalanceInfo,
    BalancerConfig,
    Container,
    MemoryAdvice,
    MissingSample,
    NumaDistance,
    NumaMetrics,
    Pod,
    RoundInputs,
    RoundResult,
    plan_round,
)
from policy.balance.config import VendorAware
from tests.policy.balance.examples import (
    EX2_B,
    EX2_L,
    EX2_PODS,
    NOW,
    GiB,
    MiB,
    last_round,
    make_inputs,
)

SETTINGS = settings(max_examples=150, deadline=None)

# Values around the thresholds and bounds make ties and boundaries likely.
LATENCIES = st.sampled_from([0.0, 20.0, 40.0, 65.0, 70.0, 75.0, 80.0, 85.0, 100.0]) | st.floats(
    0, 1e4, allow_nan=False
)
BANDWIDTHS = st.sampled_from([0.0, 100.0, 500.0, 800.0, 1000.0]) | st.floats(
    0, 1e4, allow_nan=False
)
ANON = st.one_of(
    st.sampled_from([GiB, 2 * GiB]),
    st.sampled_from([0, 4096, 128 * MiB, 128 * MiB + 1, 3 * GiB, 10 * GiB, 16 * GiB]),
    st.integers(0, 20 * GiB),
)


@st.composite
def round_inputs(draw: st.DrawFn) -> RoundInputs:
    n = draw(st.integers(1, 5))
    ids = list(range(n))
    with_self = draw(st.booleans())
    distances = {}
    for a in ids:
        row = [
            NumaDistance(b, 10 if a == b else draw(st.sampled_from([11, 12, 20, 21, 32])))
            for b in ids
            if with_self or a != b
        ]
        distances[a] = tuple(row)
    metrics = {}
    for i in ids:
        missing = draw(st.integers(0, 30)) == 0
        lat = MissingSample("gone") if missing else draw(LATENCIES)
        metrics[i] = NumaMetrics(lat, draw(BANDWIDTHS))
    pool_names = ["share", "reclaim", "batch"]
    pools = {
        name: tuple(ids if draw(st.booleans()) else draw(st.sets(st.sampled_from(ids))))
        for name in pool_names
        if draw(st.integers(0, 5)) > 0
    }
    uids = draw(st.lists(st.text("abcdef", min_size=1, max_size=3), max_size=12, unique=True))
    pods = []
    for uid in uids:
        containers = [
            # Most containers have a sample on most nodes, so pods qualify often.
            Container(name, {i: draw(ANON) for i in ids if draw(st.integers(0, 9)) > 0})
            for name in draw(st.sampled_from(["x", "x", "xy", "xyz"]))
        ]
        pool = draw(st.sampled_from(pool_names))
        pods.append(Pod(uid, "ns", f"pod-{uid}", pool, tuple(containers)))
    config = BalancerConfig(
        grace_balance_gap_ratio=draw(st.sampled_from([0.0, 0.15, 0.5])),
        force_balance_read_latency_threshold=VendorAware.of(
            {"default": draw(st.sampled_from([80, 90]))}
        ),
        supported_pools=tuple(
            draw(st.sampled_from([("share",), ("share", "batch"), ("batch",), ()]))
        ),
    )
    last = None
    if draw(st.booleans()):
        source = draw(st.sampled_from(ids))
        dests = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))
        last = last_round(source, dests, draw(st.sampled_from([0.1, 0.5, 5.0, 15.0, 20.0])))
    return RoundInputs(
        now=NOW,
        numa_metrics=metrics,
        distances=distances,
        pools=pools,
        pods=tuple(pods),
        config=config,
        cpu_vendor=draw(st.sampled_from(["GenuineIntel", "AuthenticAMD", ""])),
        last=last,
    )


def shuffled(inputs: RoundInputs, rng: random.Random) -> RoundInputs:
    """The same inputs with every unordered collection given in another order."""

    def shuffle_dict(d: Any) -> dict[Any, Any]:
        items = list(d.items())
        rng.shuffle(items)
        return dict(items)

    pods = [
        Pod(
            p.uid,
            p.namespace,
            p.name,
            p.pool,
            tuple(Container(c.name, shuffle_dict(c.anon)) for c in p.containers),
        )
        for p in inputs.pods
    ]
    rng.shuffle(pods)
    return RoundInputs(
        now=inputs.now,
        numa_metrics=shuffle_dict(inputs.numa_metrics),
        distances=shuffle_dict(inputs.distances),
        pools={k: tuple(rng.sample(v, len(v))) for k, v in shuffle_dict(inputs.pools).items()},
        pods=tuple(pods),
        config=inputs.config,
        cpu_vendor=inputs.cpu_vendor,
        last=inputs.last,
    )


@SETTINGS
@given(round_inputs(), st.randoms(use_true_random=False))
def test_planner_is_deterministic_under_reordering(inputs: RoundInputs, rng: random.Random) -> None:
    outcome = plan_round(inputs)
    assert plan_round(inputs) == outcome
    assert plan_round(shuffled(inputs, rng)) == outcome
    assert plan_round(RoundInputs.from_json(inputs.to_json())) == outcome


@SETTINGS
@given(round_inputs())
def test_outcome_is_well_formed(inputs: RoundInputs) -> None:
    outcome = plan_round(inputs)
    if outcome.result is RoundResult.SKIPPED:
        assert outcome.record is None and outcome.advice is None
        return
    record = outcome.record
    assert record is not None
    assert BalanceInfo.from_json(record.to_json()) == record
    record.to_json_text()
    assert record.total_rss == sum(p.rss_on_source_numa for p in record.balance_pods)
    assert len({p.uid for p in record.balance_pods}) == len(record.balance_pods)
    if record.dest_numas:
        assert record.source_numa is not None
        assert all(n.numa_id != record.source_numa.numa_id for n in record.dest_numas)
    reclaimed = {p.uid for p in inputs.pods if p.pool == "reclaim"}
    assert {p.uid for p in record.evict_pods} <= reclaimed
    if outcome.result is RoundResult.FAILED:
        assert outcome.advice is None and record.failed_reason
    if outcome.advice is not None:
        assert MemoryAdvice.from_json(outcome.advice.to_json()) == outcome.advice
        assert outcome.advice.total_rss <= max(
            inputs.config.balanced_pods_source_numa_total_rss_max,
            inputs.config.balanced_reclaimed_pods_source_numa_total_rss_max,
        )


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.just(10**400)
    | st.floats()
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            found += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += paths(v, (*prefix, i))
    return found


def damaged(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    node = doc
    for part in path[:-1]:
        node = node[part]
    if delete and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


BASE_DOC = make_inputs(EX2_L, EX2_B, EX2_PODS, last=last_round(1, [0], 20)).to_json()
BASE_PATHS = paths(BASE_DOC)


@SETTINGS
@given(st.sampled_from(BASE_PATHS), JSON, st.booleans())
def test_damaged_inputs_raise_only_balance_error(
    path: tuple[Any, ...], value: Any, delete: bool
) -> None:
    doc = damaged(BASE_DOC, path, value, delete)
    try:
        inputs = RoundInputs.from_json(doc)
    except BalanceError:
        return
    plan_round(inputs)  # what decodes must plan without raising


@SETTINGS
@given(JSON)
def test_garbage_raises_only_balance_error(value: Any) -> None:
    for decode in (
        RoundInputs.from_json,
        BalanceInfo.from_json,
        MemoryAdvice.from_json,
        BalancerConfig.from_json,
    ):
        with contextlib.suppress(BalanceError):
            decode(value)
