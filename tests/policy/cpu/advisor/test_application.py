"""§11.7 and §11.8 with exact cpusets; §16 items 27–29."""

from __future__ import annotations

import pytest

from policy.cpu.advisor.checkpoint import CheckpointEntry, checkpoint_entries
from policy.cpu.advisor.decision import STAGE_APPLY, STAGE_BLOCKS, apply_advice
from policy.errors import ErrorKind
from policy.state.entries import RAMPING, InPool
from policy.state.events import PoolSet
from policy.state.sections import apply_all
from tests.policy.cpu.advisor.fixtures import SETTINGS, info, pool, response
from tests.policy.pool_fixtures import (
    CTX,
    check_invariants,
    cpus,
    dedicated,
    entry_of,
    fresh_state,
    pools_of,
    ramping,
    reclaimed,
    result_of,
    shared,
    with_events,
)

BASE = fresh_state()
# §11.8 example: two shared containers in share, one reclaimed container.
EXAMPLE = with_events(
    BASE,
    PoolSet("share", cpus("4-7")),
    shared("p1", InPool("share")),
    shared("p2", InPool("share")),
    reclaimed("p3"),
)
RESERVE = pool("reserve", 2)


def applied(state, resp):
    decision = apply_advice(state, resp, SETTINGS, 0.0)
    assert decision.error is None, decision.error
    after = apply_all(state, decision.events)
    check_invariants(after, CTX)
    return decision, after


def test_the_spec_example_resizes_share_and_recreates_reclaim():
    decision, after = applied(EXAMPLE, response(pool("share", 6), RESERVE))
    assert pools_of(after) == {
        "reclaim": "5-8,10,13-15",
        "reserve": "0,2",
        "share": "1,3-4,9,11-12",
    }
    # Containers follow their pools.
    assert result_of(after, "p1") == result_of(after, "p2") == "1,3-4,9,11-12"
    assert result_of(after, "p3") == "5-8,10,13-15"
    assert decision.reply.pool_sizes == {"reclaim": 8, "reserve": 2, "share": 6}


def test_ramping_containers_get_every_cpu_but_reserve_and_dedicated():
    state = with_events(BASE, dedicated("pod-d", "1,8-9"))
    state = with_events(state, ramping(state, "pod-r"))
    resp = response(RESERVE, pool("share", 2), {"pod-d": {"c": info("dedicated", {0: [(3, "d")]})}})
    _, after = applied(state, resp)
    assert result_of(after, "pod-r") == "3-7,10-15"
    assert entry_of(after, "pod-r").placement == RAMPING
    assert result_of(after, "pod-d") == "1,8-9"


def test_a_numa_block_is_taken_by_topology_inside_its_numa_node():
    _, after = applied(EXAMPLE, response(RESERVE, pool("share", 2, numa=1)))
    # NUMA 1 is 2-3,10-11 and 2 is reserved: the free whole core 3/11 is taken.
    assert pools_of(after)["share"] == "3,11"


def test_dedicated_containers_end_their_ramp_up():
    state = with_events(BASE, dedicated("pod-d", "1,8-9", ramp_up=True))
    resp = response(RESERVE, {"pod-d": {"c": info("dedicated", {0: [(3, "d")]})}})
    _, after = applied(state, resp)
    assert not entry_of(after, "pod-d").ramp_up


def test_the_advisor_can_create_a_pool_and_move_a_container_into_it():
    resp = response(
        RESERVE,
        pool("share", 4),
        pool("isolation0", 2),
        {"p1": {"c": info("isolation0", {})}},
    )
    _, after = applied(EXAMPLE, resp)
    assert entry_of(after, "p1").owner_pool_name == "isolation0"
    assert result_of(after, "p1") == pools_of(after)["isolation0"]
    assert entry_of(after, "p2").owner_pool_name == "share"


def test_a_nil_result_for_a_container_counts_as_none():
    resp = response(RESERVE, pool("share", 4), {"p1": {"c": None}})
    _, after = applied(EXAMPLE, resp)
    assert entry_of(after, "p1").placement == InPool("share")


def test_pools_the_response_omits_are_dropped_but_reclaim_stays():
    state = with_events(EXAMPLE, PoolSet("isolation9", cpus("13")))
    _, after = applied(state, response(RESERVE, pool("share", 4)))
    assert set(pools_of(after)) == {"reclaim", "reserve", "share"}


def test_reclaim_falls_back_to_four_cpus_when_pools_take_everything():
    _, after = applied(EXAMPLE, response(RESERVE, pool("share", 14)))
    assert pools_of(after)["reclaim"] == "1,3,9,11"


@pytest.mark.parametrize(
    ("state", "resp", "stage", "message"),
    [
        pytest.param(
            EXAMPLE,
            response(RESERVE, pool("other", 4)),
            STAGE_APPLY,
            "applyBlocks failed with error: cpu advisor doesn't return entry for pool: share "
            "and it's referred by pod: default/name-p1, container: c, qosLevel: shared_cores",
            id="a container's pool missing from the response",
        ),
        pytest.param(
            EXAMPLE,
            response(RESERVE, {"isolation0": {"": info("share", {-1: [(2, "i")]})}}),
            STAGE_APPLY,
            "applyBlocks failed with error: pool entryName: isolation0 and OwnerPoolName: share "
            "mismatch",
            id="a new pool named other than its owner",
        ),
        pytest.param(
            EXAMPLE,
            response(RESERVE, pool("share", 4, numa=0)),
            STAGE_BLOCKS,
            "generateBlockCPUSet failed with error: allocate cpuset for NUMA Aware block: "
            "share-block in NUMA: 0 failed with error: not enough cpus available to satisfy "
            "request: requested=4, available=3, numaAvailableCPUs: 3(1,8-9), blockResult: 4",
            id="a NUMA block larger than what its node has left",
        ),
    ],
)
def test_a_response_refused_after_validation_changes_nothing(state, resp, stage, message):
    decision = apply_advice(state, resp, SETTINGS, 0.0)
    assert decision.reply.stage == stage
    assert str(decision.error) == message
    assert apply_all(state, decision.events).cpu == state.cpu


def test_get_checkpoint_shows_owners_and_numa_assignments_of_pools_and_dedicated_only():
    state = with_events(
        EXAMPLE,
        dedicated("pod-d", "1,8-9"),
        dedicated("pod-d", "1,8-9", name="side", owner="", container_type="SIDECAR"),
    )
    state = with_events(state, ramping(state, "pod-r"))
    entries = checkpoint_entries(state.cpu)
    assert entries["p1"]["c"] == CheckpointEntry(False, "share")
    assert entries["pod-r"]["c"] == CheckpointEntry(True, "")
    assert entries["share"][""].topology_aware_assignments == {
        2: cpus("4-5"),
        3: cpus("6-7"),
    }
    # The sidecar's empty owner shows its main container's.
    assert entries["pod-d"]["side"].owner_pool_name == "dedicated"
    assert entries["pod-d"]["c"].original_topology_aware_assignments == {0: cpus("1,8-9")}


def test_blocks_the_cpus_cannot_hold_are_a_shortage_and_a_mismatch_is_invalid():
    short = apply_advice(EXAMPLE, response(RESERVE, pool("share", 4, numa=0)), SETTINGS, 0.0)
    assert short.error is not None and short.error.kind is ErrorKind.SHORTAGE
    wrong = apply_advice(EXAMPLE, response(pool("reserve", 3)), SETTINGS, 0.0)
    assert wrong.error is not None and wrong.error.kind is ErrorKind.INVALID
