"""Eviction-plugin messages ↔ the balancer's domain values (wire.md §7; memory-balancer.md §9)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.balance import (
    BalanceInfo,
    EvictOffer,
    EvictPod,
    NumaLatencyInfo,
    ThresholdMetAnswer,
    evict_offers,
)
from tests.policy.balance.examples import NOW
from tests.wire.eviction_agent import go_pod, unknown_fields_of
from wire.eviction_convert import (
    active_pod_uids,
    evict_pods_response,
    threshold_met_response,
    token_response,
    top_eviction_pods_response,
)
from wire.gen import evictionplugin_pb2 as ep
from wire.gen import k8s_core_v1_pb2 as core

REASON = "the memory node 2 is under bandwidth pressure"
# Two pods share a UID (a pod re-created under its old UID would); the offers say which.
PODS = (go_pod("a", "u1"), go_pod("b", "u2"), go_pod("b-again", "u2"), core.Pod())


def offer(uid: str, index: int) -> EvictOffer:
    return EvictOffer(pod_uid=uid, active_index=index, reason=REASON)


def test_active_pods_become_their_uids_in_order() -> None:
    assert active_pod_uids(PODS) == ("u1", "u2", "u2", "")


def test_each_offer_carries_the_very_pod_it_points_at() -> None:
    response = evict_pods_response([offer("u2", 2), offer("u1", 0)], PODS)
    assert [e.pod.metadata.name for e in response.evict_pods] == ["b-again", "a"]
    for evict, sent in zip(response.evict_pods, (PODS[2], PODS[0]), strict=True):
        assert evict.pod.SerializeToString() == sent.SerializeToString()
        assert (evict.reason, evict.force_evict) == (REASON, True)
        assert evict.eviction_plugin_name == "numa_memory_balancer"
        assert not evict.HasField("deletion_options")
    assert all(f in response.SerializeToString() for f in unknown_fields_of("b-again"))
    assert not response.HasField("condition")


def test_no_offers_is_the_empty_response() -> None:
    assert evict_pods_response([], PODS).SerializeToString() == b""


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param(offer("u1", 4), "points at active pod 4, but the request has 4",
                     id="an offer past the last active pod"),
        pytest.param(offer("u1", -1), "points at active pod -1", id="a negative index"),
        pytest.param(offer("u1", 1), "active pod 1, whose UID is 'u2'",
                     id="an offer at a pod with another UID"),
    ],
)  # fmt: skip
def test_an_offer_that_points_wrong_is_refused(bad: EvictOffer, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evict_pods_response([bad], PODS)


def test_the_default_threshold_answer_is_all_zero_on_the_wire() -> None:
    response = threshold_met_response(ThresholdMetAnswer())
    assert response == ep.ThresholdMetResponse()
    assert response.SerializeToString() == b""
    assert (response.met_type, response.threshold_operator) == (ep.NOT_MET, ep.LESS_THAN)


def test_every_threshold_field_is_carried() -> None:
    answer = ThresholdMetAnswer(1.5, 2.5, "GREATER_THAN", "HARD_MET", "memory", 30)
    assert threshold_met_response(answer) == ep.ThresholdMetResponse(
        threshold_value=1.5,
        observed_value=2.5,
        threshold_operator=ep.GREATER_THAN,
        met_type=ep.HARD_MET,
        eviction_scope="memory",
        grace_period_seconds=30,
    )


def test_an_unknown_threshold_operator_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown threshold operator 'AT_MOST' \(known: LESS"):
        threshold_met_response(ThresholdMetAnswer(threshold_operator="AT_MOST"))
    with pytest.raises(ValueError, match="unknown met type 'MET'"):
        threshold_met_response(ThresholdMetAnswer(met_type="MET"))


def test_top_eviction_pods_are_the_received_pods_by_uid() -> None:
    response = top_eviction_pods_response(["u2", "missing", "u1"], PODS)
    assert [p.metadata.name for p in response.target_pods] == ["b", "a"]
    assert response.target_pods[0].SerializeToString() == PODS[1].SerializeToString()
    assert top_eviction_pods_response([], PODS).SerializeToString() == b""


def test_token() -> None:
    assert token_response("") == ep.GetTokenResponse()
    assert token_response("t0k3n").token == "t0k3n"


UIDS = st.sampled_from(["r1", "r2", "s1", "w1", ""])


@settings(max_examples=100, deadline=None)
@given(
    active=st.lists(UIDS, max_size=6),
    evicted=st.lists(UIDS.filter(bool), max_size=3, unique=True),
    source=st.integers(min_value=0, max_value=7),
)
def test_get_evict_pods_echoes_exactly_the_matching_active_pods(
    active: list[str], evicted: list[str], source: int
) -> None:
    pods = [go_pod(f"pod-{i}", uid) for i, uid in enumerate(active)]
    record = BalanceInfo(
        detect_time=NOW,
        evict_pods=tuple(EvictPod("default", uid, uid) for uid in evicted),
        source_numa=NumaLatencyInfo(source, 90.0, 900.0),
    )

    response = evict_pods_response(evict_offers(record, active_pod_uids(pods)), pods)

    want = [pods[i] for uid in evicted for i, a in enumerate(active) if a == uid]
    assert [e.pod.SerializeToString() for e in response.evict_pods] == [
        p.SerializeToString() for p in want
    ]
    assert {e.reason for e in response.evict_pods} <= {
        f"the memory node {source} is under bandwidth pressure"
    }
    assert all(e.force_evict for e in response.evict_pods)
