"""RemovePod, remove_container and residual pods (cpu-policy §7.2, §10.6, §12.4; checklist 24,
25, 30) on (16,2,4) with reserve 0,2."""

from __future__ import annotations

import pytest

from policy.cpu.pool_engine import put_allocations_and_adjust
from policy.cpu.remove import remove_container, remove_pod, remove_residual_pods, residual_round
from policy.state.cpu_state import CPUState
from policy.state.entries import ContainerEntry, InPool, OwnCPUs
from policy.state.events import (
    ContainerPlaced,
    ContainerRemoved,
    PodRemoved,
    PoolRemoved,
    PoolSet,
    RampUpFinished,
)
from policy.state.sections import State
from tests.policy.pool_fixtures import (
    CTX,
    decide,
    dedicated,
    entry_of,
    fresh_state,
    pools_of,
    ramping,
    reclaimed,
    shared,
    with_events,
)
from tests.topologies import cpus

SPEC_POOLS = {"reclaim": "7-8,10,15", "reserve": "0,2", "share": "1,3-6,9,11-14"}


def two_in_share() -> State:
    """pod-1 (2 cores) and pod-2 (4 cores) in share, pools sized for both."""
    state = fresh_state()
    state = with_events(state, ramping(state, "pod-1"), RampUpFinished("pod-1", "c"))
    state = with_events(state, ramping(state, "pod-2", quantity=4.0), RampUpFinished("pod-2", "c"))
    entries = [entry_of(state, "pod-1"), entry_of(state, "pod-2")]
    txn, _ = decide(state, put_allocations_and_adjust, CTX, entries, True)
    return txn.state


def test_removing_the_last_shared_pod_gives_everything_back_to_reclaim() -> None:
    """Checklist 24/25: the pod goes, pools are re-sized, the unowned share is deleted."""
    state = fresh_state()
    state = with_events(state, ramping(state, "pod-1"), RampUpFinished("pod-1", "c"))
    txn, _ = decide(state, put_allocations_and_adjust, CTX, [entry_of(state, "pod-1")], True)
    assert pools_of(txn.state) == SPEC_POOLS
    txn, warnings = decide(txn.state, remove_pod, CTX, "pod-1")
    assert warnings == ()
    assert txn.events == (
        PodRemoved("pod-1"),
        PoolSet("reclaim", cpus("1,3-15")),
        PoolRemoved("share"),
    )
    assert "pod-1" not in txn.state.cpu.pods


def test_removing_one_of_two_pods_shrinks_their_pool() -> None:
    state = two_in_share()
    assert pools_of(state)["share"] == "1,3-6,9,11-14"  # 6 cores + the surplus above 4
    txn, _ = decide(state, remove_pod, CTX, "pod-2")
    assert pools_of(txn.state) == SPEC_POOLS
    assert entry_of(txn.state, "pod-1").placement == InPool("share")


def test_removing_an_unknown_pod_commits_nothing_when_pools_are_settled() -> None:
    txn, warnings = decide(two_in_share(), remove_pod, CTX, "nobody")
    assert (txn.events, warnings) == ((), ())


def test_removing_an_unknown_pod_still_re_sizes_pools() -> None:
    """§10.6 step 3 runs whatever the pod: a sidecar stored since the last adjustment gets
    ``dedicated`` as owner (§9.8 note)."""
    state = with_events(
        two_in_share(),
        dedicated("pod-d", "1,8-9"),
        dedicated("pod-d", "1,8-9", name="side", owner="", container_type="SIDECAR"),
    )
    txn, _ = decide(state, remove_pod, CTX, "nobody")
    assert ContainerPlaced("pod-d", "side", OwnCPUs.of(cpus("1,8-9")), "dedicated") in txn.events


def test_a_failed_adjustment_after_removal_is_only_reported() -> None:
    state = with_events(
        two_in_share(), shared("pod-x", InPool("reserve"), pool="reserve", quantity=1.0)
    )
    txn, warnings = decide(state, remove_pod, CTX, "pod-2")
    assert txn.events == (PodRemoved("pod-2"),)
    assert warnings == (
        "adjustPoolsAndIsolatedEntries failed with error: generatePoolsAndIsolation failed "
        "with error: static pool reserve result: 1 is generated dynamically",
    )


def test_remove_container_deletes_one_entry_and_nothing_else() -> None:
    state = with_events(two_in_share(), reclaimed("pod-2", name="helper"))
    txn, _ = decide(state, remove_container, CTX, "pod-2", "helper")
    assert txn.events == (ContainerRemoved("pod-2", "helper"),)
    txn, _ = decide(txn.state, remove_container, CTX, "pod-2", "helper")
    assert txn.events == ()


def test_removing_the_last_container_forgets_the_pod() -> None:
    txn, _ = decide(two_in_share(), remove_container, CTX, "pod-2", "c")
    assert "pod-2" not in txn.state.cpu.pods


# -- residual pods (§12.4) ------------------------------------------------------------------


def test_residual_pods_become_candidates_after_ten_rounds_in_uid_order() -> None:
    state = with_events(two_in_share(), reclaimed("pod-0"))
    hits: dict[str, int] = {}
    for round_no in range(1, 11):
        hits, candidates = residual_round(hits, {"pod-1"}, state.cpu)
        assert hits == {"pod-0": round_no, "pod-2": round_no}
        assert candidates == ([] if round_no < 10 else ["pod-0", "pod-2"])


@pytest.mark.parametrize(
    ("hit_map", "listed", "want_hits", "want_candidates"),
    [
        pytest.param({"pod-2": 9}, {"pod-1", "pod-2"}, {}, [], id="a listed pod is forgotten"),
        pytest.param(
            {"gone": 4, "pod-2": 3}, {"pod-1"}, {"pod-2": 4}, [],
            id="a pod no longer in the state is forgotten",
        ),
        pytest.param({"pod-2": 12}, ["pod-1"], {"pod-2": 13}, ["pod-2"], id="still a candidate"),
    ],
)  # fmt: skip
def test_residual_round(
    hit_map: dict[str, int], listed: object, want_hits: dict[str, int], want_candidates: list[str]
) -> None:
    hits, candidates = residual_round(hit_map, listed, two_in_share().cpu)  # type: ignore[arg-type]
    assert (hits, candidates) == (want_hits, want_candidates)
    assert hit_map == dict(hit_map)  # not modified


def test_residual_pods_are_removed_in_uid_order_then_pools_re_sized() -> None:
    """Checklist 30."""
    state = with_events(two_in_share(), reclaimed("pod-0"))
    txn, errors = decide(state, remove_residual_pods, CTX, ["pod-2", "unknown", "pod-0"])
    assert errors == ()
    assert txn.events[:2] == (PodRemoved("pod-0"), PodRemoved("pod-2"))
    assert pools_of(txn.state) == SPEC_POOLS


def test_residual_clean_up_re_sizes_pools_even_with_nothing_left_to_remove() -> None:
    state = with_events(two_in_share(), shared("pod-3", InPool("share"), quantity=6.0))
    txn, _ = decide(state, remove_residual_pods, CTX, [])
    # 2 + 4 + 6 = 12 cores: share grows to 12, reclaim keeps the 2 left
    assert pools_of(txn.state) == {
        "reclaim": "8,10", "reserve": "0,2", "share": "1,3-7,9,11-15"
    }  # fmt: skip
    assert len(txn.events) == 2  # two PoolSets: pod-3 and the others follow share


def test_removing_a_dedicated_container_frees_its_numa_node_at_once() -> None:
    """Quirk 15.7, fixed by construction: machine state is derived from the entries, so a
    removed dedicated container's CPUs are free again without any regeneration step."""
    state = with_events(fresh_state(), dedicated("pod-d", "1,8-9"))
    assert str(state.cpu.allocated_cpuset(0)) == "1,8-9"
    txn, _ = decide(state, remove_container, CTX, "pod-d", "c")
    assert str(txn.state.cpu.allocated_cpuset(0)) == ""
    assert str(txn.state.cpu.pooled_cpus(CTX.reserved)) == "1,3-15"


def _entries_read_by_remove_pod(ramping_pods: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many entries RemovePod of one pod looks up with ``ramping_pods`` others ramping."""
    state = fresh_state()
    for i in range(ramping_pods):
        state = with_events(state, ramping(state, f"pod-{i:03d}", quantity=0.1))
    state = with_events(state, ramping(state, "leaving", quantity=0.1))
    settled, _ = decide(state, remove_pod, CTX, "unknown")  # every one now on the ramp-up set
    state = settled.state
    reads = 0
    lookup = CPUState.entry

    def counted(self: CPUState, pod_uid: str, container_name: str) -> ContainerEntry | None:
        nonlocal reads
        reads += 1
        return lookup(self, pod_uid, container_name)

    monkeypatch.setattr(CPUState, "entry", counted)
    decide(state, remove_pod, CTX, "leaving")
    return reads


def test_remove_pod_reads_no_entry_of_the_pods_still_ramping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The state model's promise (policy.cpu.pool_apply): a removal costs what changes, so
    ramping pods that stay where they are are not visited, however many there are."""
    few = _entries_read_by_remove_pod(2, monkeypatch)
    many = _entries_read_by_remove_pod(60, monkeypatch)
    assert many == few
