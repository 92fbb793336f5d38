"""§11.6: every rejection with the reference's message, and the CPU state unchanged."""

from __future__ import annotations

import pytest

from policy.cpu.advisor.decision import STAGE_VALIDATE, apply_advice
from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo
from policy.cpu.advisor.validation import aggregate, get_blocks
from policy.state.advisor_section import AdvisorResponseRefused
from policy.state.sections import apply_all
from tests.policy.cpu.advisor.fixtures import SETTINGS, info, pool, response
from tests.policy.pool_fixtures import dedicated, fresh_state, reclaimed, with_events

BASE = fresh_state()
# A node with one dedicated NUMA-binding pod (1,8-9 on NUMA 0) and one non-binding one.
WITH_DEDICATED = with_events(
    BASE,
    dedicated("pod-d", "1,8-9"),
    dedicated("pod-n", "3,10", numa_binding=False),
)
RESERVE = pool("reserve", 2)
DEDICATED_OK = {
    "pod-d": {"c": info("dedicated", {0: [(3, "d1")]})},
    "pod-n": {"c": info("dedicated", {1: [(2, "n1")]})},
}

CASES = [
    pytest.param(
        BASE,
        response(RESERVE, {"pod-x": {"c": info("dedicated", {0: [(1, "x")]})}}),
        "dedicatedAllocationInfos length: 0 and dedicatedCalculationInfos length: 1 mismatch",
        id="more dedicated pods in the response than in the state",
    ),
    pytest.param(
        WITH_DEDICATED,
        response(
            RESERVE,
            {"pod-d": {"c": info("dedicated", {0: [(3, "d1")]})}},
            {"pod-x": {"c": info("dedicated", {0: [(1, "x")]})}},
        ),
        "missing CalculationInfo for pod: pod-n container: c",
        id="a stored dedicated container without a result",
    ),
    pytest.param(
        WITH_DEDICATED,
        response(RESERVE, DEDICATED_OK, {"pod-d": {"c": info("dedicated", {0: [(2, "d1")]})}}),
        "pod: pod-d container: c calculation result: 2 and allocation result: 3 mismatch",
        id="a NUMA-binding container whose total differs",
    ),
    pytest.param(
        WITH_DEDICATED,
        response(RESERVE, DEDICATED_OK, {"pod-n": {"c": info("dedicated", {2: [(2, "n1")]})}}),
        "NUMA: 1 calculation quantity: 0 and allocation quantity: 2 mismatch, pod: pod-n "
        "container: c",
        id="a non-binding container with CPUs on another NUMA node",
    ),
    pytest.param(
        WITH_DEDICATED,
        response(
            RESERVE,
            DEDICATED_OK,
            {"pod-n": {"c": info("dedicated", {1: [(2, "n1")], 2: [(1, "n2")]})}},
        ),
        "NUMA: 2 calculation quantity: 1 and allocation quantity: 0 mismatch, pod: pod-n "
        "container: c",
        id="a non-binding container with an extra NUMA node in the result",
    ),
    pytest.param(
        BASE,
        response(pool("share", 4)),
        "pool: reserve nilStateEntry: false and nilRespEntry: true mismatch",
        id="the reserve pool missing from the response",
    ),
    pytest.param(
        BASE,
        response({"reserve": {"": None}}),
        "pool: reserve nilStateEntry: false and nilRespEntry: true mismatch",
        id="the reserve pool's result is nil",
    ),
    pytest.param(
        BASE,
        response({"reserve": {"": info("share", {-1: [(2, "r")]})}}),
        "pool: reserve has invalid owner pool name: share in cpu advisor resp",
        id="the reserve pool owned by another pool",
    ),
    pytest.param(
        BASE,
        response({"reserve": {"": info("reserve", {-1: [(1, "r1"), (1, "r2")]})}}),
        "static pool: reserve has invalid calculationInfo",
        id="the reserve pool with two blocks",
    ),
    pytest.param(
        BASE,
        response({"reserve": {"": info("reserve", {0: [(2, "r")]})}}),
        "static pool: reserve has invalid calculationInfo",
        id="the reserve pool on a real NUMA node",
    ),
    pytest.param(
        BASE,
        response({"reserve": {"": info("reserve", {-1: None})}}),
        "static pool: reserve has invalid calculationInfo",
        id="the reserve pool with a nil NUMA result",
    ),
    pytest.param(
        BASE,
        response(pool("reserve", 3)),
        "static pool: reserve calculation result: 3 and allocation result: 2 mismatch",
        id="the reserve pool resized",
    ),
    pytest.param(
        BASE,
        response(RESERVE, {"share": {"": info("share", {0: [(2, "s")], 1: [(2, "s")]})}}),
        "GetBlocks failed with error: found block: s both in NUMA: 0 and NUMA: 1, entry: "
        "share, subEntry: ",
        id="one block id on two NUMA nodes",
    ),
    pytest.param(
        BASE,
        response(RESERVE, pool("share", 2, "s"), {"other": {"": info("other", {-1: [(3, "s")]})}}),
        "GetBlocks failed with error: found block: &Block{Result:3,OverlapTargets:"
        "[]*OverlapTarget{},BlockId:s,} result is different with current block: "
        "&Block{Result:2,OverlapTargets:[]*OverlapTarget{},BlockId:s,} result, entry: share, "
        "subEntry: ",
        id="one block id with two sizes",
    ),
    pytest.param(
        BASE,
        response(RESERVE, pool("share", 2, numa=7)),
        "NUMA: 7 referred by blocks isn't in topology",
        id="a NUMA node the machine does not have",
    ),
    pytest.param(
        BASE,
        response(RESERVE, pool("share", 5, numa=0)),
        "numaQuantity: 5 exceeds NUMA capacity: 4 in NUMA: 0",
        id="one NUMA node over capacity",
    ),
    pytest.param(
        BASE,
        response(RESERVE, pool("share", 15)),
        "numaQuantity: 17 exceeds total capacity: 16",
        id="the machine over capacity",
    ),
    pytest.param(
        BASE,
        response(RESERVE, {"pod-ghost": None}),
        "GetBlocks failed with error: entry: pod-ghost has no value (a nil CalculationEntries), "
        "the response is refused",
        id="a top-level entry with no value is refused instead of crashing",
    ),
    pytest.param(
        BASE,
        response(pool("reserve", 3), pool("share", 15)),
        "[static pool: reserve calculation result: 3 and allocation result: 2 mismatch, "
        "numaQuantity: 18 exceeds total capacity: 16]",
        id="errors of several validators are aggregated",
    ),
]


@pytest.mark.parametrize(("state", "resp", "message"), CASES)
def test_a_rejected_response_changes_no_cpu_state(state, resp, message):
    decision = apply_advice(state, resp, SETTINGS, 0.0)
    assert decision.error is not None
    assert str(decision.error) == f"ValidateCPUAdvisorResp failed with error: {message}"
    assert decision.reply.stage == STAGE_VALIDATE and not decision.reply.applied
    # Only the refusal's own record: the CPU section is untouched.
    assert decision.events == (
        AdvisorResponseRefused(resp.fingerprint(), STAGE_VALIDATE, str(decision.error)),
    )
    after = apply_all(state, decision.events)
    assert after.cpu == state.cpu
    assert after.advisor.last_reason == str(decision.error)


@pytest.mark.parametrize(
    ("errors", "text"),
    [
        pytest.param(["a"], "a", id="one error is its own text"),
        pytest.param(["a", "b"], "[a, b]", id="several are bracketed"),
        pytest.param(["a", "a"], "a", id="duplicates are printed once"),
        pytest.param(["a", "b", "a"], "[a, b]", id="duplicates among others are dropped"),
    ],
)
def test_errors_aggregate_as_the_reference_prints_them(errors, text):
    assert aggregate(errors) == text


def test_blocks_sort_by_pods_then_pools_then_id():
    resp = AdvisorResponse(
        {
            "share": {"": CalculationInfo("share", {-1: (Block(2, "z"),)})},
            "reclaim": {"": CalculationInfo("reclaim", {-1: (Block(2, "y"), Block(1, "x"))})},
            "isolation0": {"": CalculationInfo("isolation0", {-1: (Block(1, "x"),)})},
            "pod-b": {"c": CalculationInfo("reclaim", {-1: (Block(2, "y"),)})},
            "pod-a": {"c": CalculationInfo("reclaim", {-1: (Block(1, "w"),)})},
        }
    )
    index = get_blocks(resp)
    # w and y have one pod each (pod-a < pod-b); x has two pools, z one.
    assert [b.block_id for b in index.by_numa[-1]] == ["w", "y", "x", "z"]


def test_a_valid_response_passes():
    decision = apply_advice(
        WITH_DEDICATED, response(RESERVE, DEDICATED_OK, pool("share", 4)), SETTINGS, 0.0
    )
    assert decision.error is None, decision.error


def test_shared_and_reclaimed_state_is_valid_with_pools_only():
    state = with_events(BASE, reclaimed("pod-r"))
    decision = apply_advice(state, response(RESERVE, pool("share", 4)), SETTINGS, 0.0)
    assert decision.error is None
