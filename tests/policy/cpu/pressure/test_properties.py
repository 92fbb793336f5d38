"""Invariants of the CPU pressure decisions, for any inputs (hypothesis).

* A ring never holds more than its size; a pool is HARD_MET only when at least
  ``percentage × size`` of its samples are over the hard bound.
* The journal's form of every event decodes to the same event, and replaying the decoded
  events gives the history the decisions saw (replay equals live).
* Offered suppression pods are in eviction order, each over its tolerance at its turn.
* A plan that is not well formed raises a ``PolicyError`` and nothing else.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.pressure import (
    ActivePod,
    ContainerPool,
    LoadInputs,
    PoolMap,
    PressureSettings,
    SuppressionInputs,
    collect_load,
    evict_pods,
    threshold_met,
)
from policy.cpu.pressure.plan import parse_plan, run_plan
from policy.errors import PolicyError
from policy.state.codec import decode_event, encode_event
from policy.state.pressure import PressureHistory, apply_pressure_event

POOLS = ("share", "isolation-a", "batch")
loads = st.floats(0, 100, allow_nan=False)
ticks = st.lists(
    st.dictionaries(st.sampled_from([f"p{i}" for i in range(4)]), st.one_of(st.none(), loads)),
    min_size=1,
    max_size=12,
)


def owner(pod: str) -> str:
    return POOLS[int(pod[1:]) % len(POOLS)]


@settings(max_examples=150, deadline=None)
@given(ticks, st.integers(1, 5), st.floats(0.1, 1.0), st.sampled_from([1.0, 1.8, 3.0]))
def test_rings_stay_bounded_and_hard_needs_enough_samples(
    steps: list[dict[str, float | None]], size: int, pct: float, ratio: float
) -> None:
    s = PressureSettings(
        enable_load_eviction=True,
        load_metric_ring_size=size,
        load_threshold_met_percentage=pct,
        load_upper_bound_ratio=ratio,
    )
    live = PressureHistory()
    replayed = PressureHistory()
    for t, step in enumerate(steps):
        containers = tuple(ContainerPool(pod, "c", owner(pod)) for pod in sorted(step))
        inputs = LoadInputs(
            PoolMap({"share": 4, "isolation-a": 2, "batch": 8}, containers),
            {(pod, "c"): v for pod, v in step.items() if v is not None},
        )
        for decide in (
            lambda h: collect_load(h, inputs, s, float(t)),  # noqa: B023 (called at once)
            lambda h: threshold_met(h, s, float(t)),  # noqa: B023
        ):
            decision = decide(live)
            for event in decision.events:
                live = apply_pressure_event(live, event)
                replayed = apply_pressure_event(replayed, decode_event(encode_event(event)))
            if (
                decision.reply.__class__.__name__ == "ThresholdMetAnswer"
                and decision.reply.met_type == "HARD_MET"
            ):
                ring = live.pool_rings[decision.reply.pool]
                hard = sum(1 for x in ring.samples if x.is_hard_over)
                assert hard >= math.ceil(pct * ring.max_len - 1e-9)
                assert not decision.reply.pool.startswith("isolation")
        assert all(len(r.samples) <= r.max_len for r in live.pool_rings.values())
        assert all(len(r.samples) <= r.max_len for r in live.container_rings.values())
    assert replayed == live


reclaimed = st.builds(
    lambda i, cpus, rate, prio: ActivePod(
        f"u{i}",
        "ns",
        f"pod-{i}",
        {
            "katalyst.kubewharf.io/qos_level": "reclaimed_cores",
            "katalyst.kubewharf.io/cpu_enhancement": f'{{"suppression_tolerance_rate": "{rate}"}}',
        },
        prio,
        (("c", {"cpu": f"{cpus}m"}),),
    ),
    st.integers(0, 50),
    st.integers(0, 16000),
    st.sampled_from(["0.1", "0.5", "1", "2", "9"]),
    st.one_of(st.none(), st.integers(-5, 5)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(reclaimed, max_size=6, unique_by=lambda p: p.uid), st.integers(1, 16))
def test_offers_come_in_eviction_order_each_over_its_tolerance(
    pods: list[ActivePod], pool: int
) -> None:
    s = PressureSettings(enable_suppression_eviction=True, min_suppression_tolerance_duration_s=0)
    history = PressureHistory()
    first = evict_pods(history, SuppressionInputs(pool, tuple(pods)), s, 0.0)
    for event in first.events:
        history = apply_pressure_event(history, event)
    second = evict_pods(history, SuppressionInputs(pool, tuple(pods)), s, 1.0)
    assert first.reply.offers == ()  # a timer must run longer than the minimum first
    by_uid = {p.uid: p for p in pods}
    offered = [by_uid[o.pod_uid] for o in second.reply.offers]
    requests = [int(p.containers[0][1]["cpu"][:-1]) for p in offered]
    assert requests == sorted(requests, reverse=True)
    for offer in second.reply.offers:
        rate, tolerance = (float(x) for x in offer.reason.split()[4::9][:2])
        assert tolerance < rate + 0.005  # both printed with %.2f


PRIMITIVES: Any = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        PRIMITIVES,
        st.fixed_dictionaries(
            {
                "ticks": st.lists(
                    st.dictionaries(
                        st.sampled_from(
                            ["time", "pools", "pods", "calls", "top_n", "active_pods", "settings"]
                        ),
                        PRIMITIVES,
                    ),
                    min_size=1,
                    max_size=2,
                )
            }
        ),
    )
)
def test_a_malformed_plan_raises_a_policy_error_and_nothing_else(document: object) -> None:
    try:
        ticks_ = parse_plan(document)
    except PolicyError:
        return
    with contextlib.suppress(PolicyError):
        run_plan(ticks_)
