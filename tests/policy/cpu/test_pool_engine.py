"""The pool engine (cpu-policy §6.2, §9.1–§9.3, §9.7–§9.9) on the spec's (16,2,4) node.

Every decision runs through ``decide``, which checks that replaying its events equals its
state. Expected cpusets come from the spec (§6.2, §9.10) or are traced by hand through §2.2.
"""

from __future__ import annotations

import dataclasses

import pytest

from policy.cpu.pool_apply import apply_pools_and_isolated, clean_pools
from policy.cpu.pool_engine import (
    PoolError,
    adjust_allocation_entries,
    put_allocations_and_adjust,
)
from policy.cpu.pool_startup import initialise_pools
from policy.cpu.txn import Txn
from policy.state.entries import RAMPING, InPool, OwnCPUs
from policy.state.events import (
    ContainerAllocated,
    ContainerPlaced,
    PoolRemoved,
    PoolSet,
    RampCPUsSet,
    RampUpFinished,
    RequestQuantitySet,
)
from policy.state.sections import State, empty_state
from tests.policy.pool_fixtures import (
    CTX,
    decide,
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
from tests.topologies import SYNTH_16_2_4, cpus

SPEC_POOLS = {"reclaim": "7-8,10,15", "reserve": "0,2", "share": "1,3-6,9,11-14"}


def after_spec_9_10() -> State:
    """§9.10's end state: one shared container (2 cores) in share, built by the engine."""
    state = fresh_state()
    state = with_events(state, ramping(state, "pod-1"), RampUpFinished("pod-1", "c"))
    txn, _ = decide(state, put_allocations_and_adjust, CTX, [entry_of(state, "pod-1")], True)
    return txn.state


# -- start-up (§6.2) -------------------------------------------------------------------------


def test_startup_on_a_fresh_node_makes_reserve_and_reclaim() -> None:
    txn, _ = decide(empty_state(SYNTH_16_2_4), initialise_pools, CTX)
    assert txn.events == (PoolSet("reserve", cpus("0,2")), PoolSet("reclaim", cpus("1,3,9,11")))


def test_startup_on_a_started_node_commits_nothing() -> None:
    txn, _ = decide(after_spec_9_10(), initialise_pools, CTX)
    assert txn.events == ()


def test_startup_deletes_unowned_pools_and_keeps_an_existing_reclaim() -> None:
    state = with_events(
        empty_state(SYNTH_16_2_4), PoolSet("batch", cpus("4-5")), PoolSet("reclaim", cpus("6"))
    )
    txn, _ = decide(state, initialise_pools, CTX)
    assert txn.events == (PoolRemoved("batch"), PoolSet("reserve", cpus("0,2")))
    assert pools_of(txn.state) == {"reclaim": "6", "reserve": "0,2"}


def test_a_new_reserve_leaves_containers_of_the_old_one_on_their_cpus() -> None:
    state = with_events(
        fresh_state(), shared("pod-r", InPool("reserve"), pool="reserve", quantity=1.0)
    )
    ctx = dataclasses.replace(CTX, reserved=cpus("0,2,4,6"))
    txn, _ = decide(state, initialise_pools, ctx)
    assert pools_of(txn.state)["reserve"] == "0,2,4,6"
    assert entry_of(txn.state, "pod-r").placement == OwnCPUs.of(cpus("0,2"))
    assert entry_of(txn.state, "pod-r").owner_pool_name == "reserve"


def test_reclaim_falls_back_onto_any_four_cpus_when_pools_hold_every_pooled_cpu() -> None:
    state = with_events(
        empty_state(SYNTH_16_2_4),
        PoolSet("share", cpus("1,3-15")),
        shared("pod-1", InPool("share")),
    )
    txn, _ = decide(state, initialise_pools, CTX)
    assert pools_of(txn.state) == {"reclaim": "1,3,9,11", "reserve": "0,2", "share": "1,3-15"}


def test_startup_fails_without_four_cpus_for_reclaim() -> None:
    """Quirk 15.9: nothing free and fewer than four non-reserved CPUs."""
    ctx = dataclasses.replace(CTX, reserved=cpus("0-12"))
    state = with_events(
        empty_state(SYNTH_16_2_4), PoolSet("x", cpus("13-15")), shared("pod-1", InPool("x"))
    )
    with pytest.raises(PoolError, match=r"^fallback takeByNUMABalance faild in initReclaimPool"):
        decide(state, initialise_pools, ctx)


# -- put_allocations_and_adjust (§9.1) -----------------------------------------------------


def test_spec_9_10_worked_example() -> None:
    state = after_spec_9_10()
    assert pools_of(state) == SPEC_POOLS
    info = state.cpu.allocation_info("pod-1", "c")
    assert info is not None and info.owner_pool_name == "share"
    assert {n: c.size() for n, c in (info.topology_aware_assignments or {}).items()} == {
        0: 2, 1: 2, 2: 4, 3: 2,
    }  # fmt: skip
    # the next reclaimed container gets the reclaim pool
    assert result_of(with_events(state, reclaimed("pod-r")), "pod-r") == "7-8,10,15"


def test_spec_9_10_commits_one_event_per_change() -> None:
    state = fresh_state()
    state = with_events(state, ramping(state, "pod-1"), RampUpFinished("pod-1", "c"))
    txn, _ = decide(state, put_allocations_and_adjust, CTX, [entry_of(state, "pod-1")], True)
    assert txn.events == (
        PoolSet("reclaim", cpus("7-8,10,15")),
        PoolSet("share", cpus("1,3-6,9,11-14")),
        RampCPUsSet(cpus("1,3-15")),
        ContainerPlaced("pod-1", "c", InPool("share"), "share"),
    )


def test_first_non_ramping_allocation_sizes_the_pool_without_its_request() -> None:
    """Quirk 15.1: incr_by_req False; the container joins share, which keeps its size."""
    state = after_spec_9_10()
    state = with_events(state, shared("pod-2", OwnCPUs.of(cpus("1,3-15")), quantity=4.0))
    txn, _ = decide(state, put_allocations_and_adjust, CTX, [entry_of(state, "pod-2")], False)
    assert txn.events == (ContainerPlaced("pod-2", "c", InPool("share"), "share"),)
    # the next adjustment counts it: 6 cores, and the apportioned share is 10 CPUs again
    txn, _ = decide(txn.state, adjust_allocation_entries, CTX)
    assert pools_of(txn.state) == SPEC_POOLS and txn.events == ()


def test_updated_annotations_choose_the_pool_of_the_increment() -> None:
    """§7.3 step 2 / quirk 15.2: the in-memory entry names pool batch, the stored one share.

    The increment goes to batch, share is sized without pod-1 and so dropped; the stored
    pod-1 still owns share and keeps its CPUs; batch, owned by nobody, is cleaned away. The
    next adjustment brings share back and puts pod-1 in it.
    """
    state = after_spec_9_10()
    moved = dataclasses.replace(
        entry_of(state, "pod-1"),
        annotations={"katalyst.kubewharf.io/qos_level": "shared_cores", "cpuset_pool": "batch"},
    )
    txn, _ = decide(state, put_allocations_and_adjust, CTX, [moved], True)
    assert pools_of(txn.state) == {"reclaim": "7-8,10,15", "reserve": "0,2"}
    assert entry_of(txn.state, "pod-1").placement == OwnCPUs.of(cpus("1,3-6,9,11-14"))
    assert entry_of(txn.state, "pod-1").owner_pool_name == "share"
    txn, _ = decide(txn.state, adjust_allocation_entries, CTX)
    assert pools_of(txn.state) == SPEC_POOLS
    assert entry_of(txn.state, "pod-1").placement == InPool("share")


@pytest.mark.parametrize(
    ("container", "message"),
    [
        pytest.param(
            reclaimed("pod-r").entry,
            "put container with invalid qos level: reclaimed_cores into pool",
            id="only shared containers go into pools",
        ),
        pytest.param(
            shared("ghost", RAMPING, ramp_up=True).entry,
            "entry default/name-ghost, c isn't found in state",
            id="the container must be stored",
        ),
    ],
)
def test_put_refuses(container: object, message: str) -> None:
    state = after_spec_9_10()
    with pytest.raises(PoolError) as err:
        decide(state, put_allocations_and_adjust, CTX, [container], True)
    assert str(err.value) == message


def test_put_of_nothing_is_a_no_op() -> None:
    txn, _ = decide(after_spec_9_10(), put_allocations_and_adjust, CTX, [], True)
    assert txn.events == ()


def test_fifty_pooled_containers_follow_a_resize_without_events() -> None:
    state = after_spec_9_10()
    state = with_events(
        state, *(shared(f"pod-{i:02}", InPool("share"), quantity=0.1) for i in range(2, 52))
    )
    state = with_events(state, ramping(state, "pod-new"), RampUpFinished("pod-new", "c"))
    txn, _ = decide(state, put_allocations_and_adjust, CTX, [entry_of(state, "pod-new")], True)
    placed = [e for e in txn.events if isinstance(e, ContainerPlaced)]
    assert placed == [ContainerPlaced("pod-new", "c", InPool("share"), "share")]
    assert len(txn.events) <= 4
    # 2 + 50 × 0.1 + 2 = 9 cores: share 9 plus surplus
    assert all(result_of(txn.state, f"pod-{i:02}") == pools_of(txn.state)["share"] for i in (2, 51))


# -- adjust_allocation_entries (§9.2), placement (§9.8) -----------------------------------


def test_a_pool_sized_zero_is_dropped_and_its_container_keeps_its_cpus() -> None:
    state = with_events(
        fresh_state(),
        PoolSet("batch", cpus("4-5")),
        shared("pod-b", InPool("batch"), pool="batch", quantity=0.0),
    )
    txn, _ = decide(state, adjust_allocation_entries, CTX)
    assert "batch" not in pools_of(txn.state)
    assert entry_of(txn.state, "pod-b").placement == OwnCPUs.of(cpus("4-5"))
    assert entry_of(txn.state, "pod-b").owner_pool_name == "batch"
    assert txn.events[-1] == PoolRemoved("batch")


def test_a_container_that_lost_its_pool_joins_it_again_when_it_returns() -> None:
    state = with_events(
        fresh_state(),
        PoolSet("batch", cpus("4-5")),
        shared("pod-b", OwnCPUs.of(cpus("4-5")), quantity=0.0),
        ContainerPlaced("pod-b", "c", OwnCPUs.of(cpus("4-5")), "batch"),
        shared("pod-c", InPool("batch"), pool="batch", quantity=2.0),
    )
    txn, _ = decide(state, adjust_allocation_entries, CTX)
    assert entry_of(txn.state, "pod-b").placement == InPool("batch")


def test_advisor_mode_keeps_the_pool_sizes_it_set() -> None:
    ctx = dataclasses.replace(CTX, advisor_enabled=True)
    state = with_events(
        fresh_state(), PoolSet("share", cpus("1,3-4,9,11-12")), shared("pod-1", InPool("share"))
    )
    txn, _ = decide(state, adjust_allocation_entries, ctx)
    # share keeps 6 CPUs whatever its containers ask (re-taken from scratch), reclaim the rest
    assert pools_of(txn.state) == {
        "reclaim": "7-8,10,15", "reserve": "0,2", "share": "1,3-6,9,11-14"
    }  # fmt: skip


def test_isolated_and_fallback_containers_from_a_checkpoint() -> None:
    """Quirk 15.15: dedicated without NUMA binding is still isolated, or falls back."""
    state = with_events(
        fresh_state(),
        dedicated("pod-d1", "4-5", numa_binding=False, owner="", quantity=2.0),
        dedicated("pod-d2", "6-7", numa_binding=False, owner="", quantity=20.0),
    )
    txn, _ = decide(state, adjust_allocation_entries, CTX)
    # 22 CPUs do not fit in 14: pools (none) fit, isolated containers fall back onto ramp
    for pod in ("pod-d1", "pod-d2"):
        assert entry_of(txn.state, pod).owner_pool_name == "fallback"
        assert result_of(txn.state, pod) == "1,3-15"
    # without the big one, pod-d1 is isolated on its own 2 CPUs
    state = with_events(
        fresh_state(), dedicated("pod-d1", "4-5", numa_binding=False, owner="", quantity=2.0)
    )
    txn, _ = decide(state, adjust_allocation_entries, CTX)
    assert entry_of(txn.state, "pod-d1").owner_pool_name == "dedicated"
    assert result_of(txn.state, "pod-d1") == "1,9"
    assert txn.state.cpu.ramp_cpus == cpus("3-8,10-15")


def test_an_isolated_container_stores_its_looked_up_request() -> None:
    ctx = dataclasses.replace(CTX, requested_millicpu=lambda _pod, _c: 3000.0)
    state = with_events(
        fresh_state(), dedicated("pod-d1", "4-5", numa_binding=False, owner="", quantity=0.0)
    )
    txn, _ = decide(state, adjust_allocation_entries, ctx)
    assert RequestQuantitySet("pod-d1", "c", 3.0) in txn.events
    assert result_of(txn.state, "pod-d1") == "1,3,9"


def test_pools_avoid_a_numa_node_with_a_dedicated_numa_binding_container() -> None:
    """Spec 7.5.1 / checklist 26: after an exclusive allocation on NUMA 0 the pools are
    recomputed on NUMAs 1-3 only; the dedicated sidecar takes ``dedicated`` as owner."""
    state = with_events(
        after_spec_9_10(),
        dedicated("pod-d", "1,8-9", ramp_up=True),
        dedicated("pod-d", "1,8-9", name="side", owner="", container_type="SIDECAR"),
    )
    state = with_events(state, ramping(state, "pod-r"))
    txn, _ = decide(state, adjust_allocation_entries, CTX)
    assert pools_of(txn.state) == {
        "reclaim": "5,7,13,15", "reserve": "0,2", "share": "3-4,6,10-12,14"
    }  # fmt: skip
    assert result_of(txn.state, "pod-r") == "3-7,10-15"
    assert entry_of(txn.state, "pod-d", "side").owner_pool_name == "dedicated"
    assert result_of(txn.state, "pod-d") == "1,8-9"


@pytest.mark.parametrize(
    ("ramp_up", "want_reclaim"),
    [
        pytest.param(False, "1,3-7,9-15", id="reclaim overlaps the settled dedicated CPUs"),
        pytest.param(True, "3-7,10-15", id="not while the dedicated container ramps up"),
    ],
)
def test_reclaim_overlap_with_advisor_and_enable_reclaim(ramp_up: bool, want_reclaim: str) -> None:
    ctx = dataclasses.replace(CTX, advisor_enabled=True, enable_reclaim=True)
    state = with_events(fresh_state(), dedicated("pod-d", "1,8-9", ramp_up=ramp_up))
    txn, _ = decide(state, adjust_allocation_entries, ctx)
    assert pools_of(txn.state)["reclaim"] == want_reclaim


def test_reclaim_overlap_needs_a_reclaim_pool() -> None:
    ctx = dataclasses.replace(CTX, advisor_enabled=True, enable_reclaim=True)
    state = with_events(empty_state(SYNTH_16_2_4), dedicated("pod-d", "1,8-9"))
    with pytest.raises(PoolError) as err:
        decide(state, adjust_allocation_entries, ctx)
    assert str(err.value) == (
        "adjustPoolsAndIsolatedEntries failed with error: reclaimOverlapNUMABinding failed "
        "with error: reclaim pool misses in current entries"
    )


def test_a_container_of_an_unknown_level_is_refused_and_nothing_is_emitted() -> None:
    state = with_events(fresh_state(), shared("pod-x", OwnCPUs.of(cpus("4"))))
    odd = dataclasses.replace(entry_of(state, "pod-x"), qos_level="system_cores")
    state = with_events(state, ContainerAllocated(odd))
    with pytest.raises(PoolError, match="applyPoolsAndIsolatedInfo failed with error: invalid"):
        decide(state, adjust_allocation_entries, CTX)


@pytest.mark.parametrize(
    "pools",
    [
        pytest.param({"reserve": "0,2", "share": "1,3-15"}, id="reclaim missing from the result"),
        pytest.param(
            {"reclaim": "", "reserve": "0,2", "share": "1,3-15"}, id="reclaim empty in the result"
        ),
    ],
)
def test_applying_pools_without_reclaim_is_refused_with_the_references_message(
    pools: dict[str, str],
) -> None:
    # §15.3: the reference names the wrong pool ("share") when reclaim is empty; keep it.
    state = after_spec_9_10()
    pools_cs = {name: cpus(spec) for name, spec in pools.items()}
    with pytest.raises(PoolError, match=r"^entry: share is empty$"):
        decide(state, apply_pools_and_isolated, CTX, pools_cs, {})
    txn = Txn(state)
    with pytest.raises(PoolError):
        apply_pools_and_isolated(txn, CTX, pools_cs, {})
    assert txn.events == ()


# -- clean_pools (§9.9) ----------------------------------------------------------------------


def test_clean_pools_deletes_a_pool_used_only_by_ramping_containers() -> None:
    state = fresh_state()
    state = with_events(state, PoolSet("batch", cpus("4-5")), PoolSet("flink", cpus("6-7")))
    state = with_events(
        state, ramping(state, "pod-1", pool="batch"), shared("pod-2", InPool("flink"), pool="flink")
    )
    txn, _ = decide(state, clean_pools, CTX)
    assert txn.events == (PoolRemoved("batch"),)
