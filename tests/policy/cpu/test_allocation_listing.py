"""GetResourcesAllocation (cpu-policy §10.1, §15.6; checklist 18, 20) on (16,2,4), reserve 0,2."""

from __future__ import annotations

import dataclasses

from policy.cpu.allocation_listing import (
    ContainerCPUAllocation,
    ResourcesAllocation,
    resources_allocation,
)
from policy.cpu.timestamps import format_qrm_time
from policy.state.entries import RAMPING, InPool, OwnCPUs
from policy.state.events import (
    ContainerAllocated,
    ContainerReRamped,
    RampUpFinished,
    TimestampReset,
)
from policy.state.sections import State
from tests.policy.pool_fixtures import (
    CTX,
    T0,
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


def reported(allocation: object, pod: str, name: str = "c") -> tuple[int, str]:
    cpu = allocation.pod_resources[pod][name]  # type: ignore[attr-defined]
    assert cpu.oci_property_name == "CpusetCpus"
    assert (cpu.is_node_resource, cpu.is_scalar_resource) == (False, True)
    return cpu.allocated_quantity, cpu.allocation_result


def after_allocate() -> State:
    """§7.3's example: the first shared container (2 cores) ramps on 1,3-15 since T0."""
    state = fresh_state()
    return with_events(state, ramping(state, "pod-1"))


def test_ramp_up_ends_after_the_period_and_reports_the_old_cpuset_once() -> None:
    """Checklist 18 and quirk 15.6: the reply still shows 1,3-15, the state has moved."""
    txn, reply = decide(after_allocate(), resources_allocation, CTX, T0 + 31)
    assert reported(reply, "pod-1") == (14, "1,3-15")
    assert reply.warnings == ()
    assert isinstance(txn.events[0], RampUpFinished)
    assert pools_of(txn.state) == {
        "reclaim": "7-8,10,15", "reserve": "0,2", "share": "1,3-6,9,11-14"
    }  # fmt: skip
    txn, reply = decide(txn.state, resources_allocation, CTX, T0 + 62)
    assert reported(reply, "pod-1") == (10, "1,3-6,9,11-14")
    assert txn.events == ()


def test_ramp_up_lasts_the_whole_period() -> None:
    txn, reply = decide(after_allocate(), resources_allocation, CTX, T0 + 30)
    assert txn.events == ()
    assert entry_of(txn.state, "pod-1").ramp_up
    assert reported(reply, "pod-1") == (14, "1,3-15")


def test_a_custom_transition_period_is_honoured() -> None:
    ctx = dataclasses.replace(CTX, transition_period_s=5.0)
    txn, _ = decide(after_allocate(), resources_allocation, ctx, T0 + 5.5)
    assert not entry_of(txn.state, "pod-1").ramp_up


def test_a_bad_timestamp_re_ramps_a_shared_container() -> None:
    """Checklist 20: back on the pooled CPUs, owner "", ramp_up, timestamp now."""
    state = with_events(fresh_state(), shared("pod-1", OwnCPUs.of(cpus("4-5"))))
    broken = dataclasses.replace(entry_of(state, "pod-1"), init_timestamp="yesterday")
    state = with_events(state, ContainerAllocated(broken))
    now = T0 + 100
    txn, reply = decide(state, resources_allocation, CTX, now)
    assert txn.events == (ContainerReRamped("pod-1", "c", format_qrm_time(now), cpus("1,3-15")),)
    entry = entry_of(txn.state, "pod-1")
    assert (entry.ramp_up, entry.owner_pool_name, entry.init_timestamp) == (
        True, "", format_qrm_time(now),
    )  # fmt: skip
    assert reported(reply, "pod-1") == (14, "1,3-15")
    # ... and it finishes ramping a period later like any other
    txn, _ = decide(txn.state, resources_allocation, CTX, now + 31)
    assert entry_of(txn.state, "pod-1").placement == InPool("share")


def test_a_bad_timestamp_is_only_reset_for_other_levels() -> None:
    state = with_events(fresh_state(), dedicated("pod-d", "1,8-9"), reclaimed("pod-r"))
    for pod in ("pod-d", "pod-r"):
        state = with_events(
            state, ContainerAllocated(dataclasses.replace(entry_of(state, pod), init_timestamp=""))
        )
    txn, reply = decide(state, resources_allocation, CTX, T0)
    stamp = format_qrm_time(T0)
    assert txn.events == (TimestampReset("pod-d", "c", stamp), TimestampReset("pod-r", "c", stamp))
    assert reported(reply, "pod-d") == (3, "1,8-9")
    assert reported(reply, "pod-r") == (4, "1,3,9,11")


def test_a_dedicated_container_ends_ramp_up_without_touching_pools() -> None:
    state = with_events(fresh_state(), dedicated("pod-d", "1,8-9", ramp_up=True))
    txn, _ = decide(state, resources_allocation, CTX, T0 + 31)
    assert txn.events == (RampUpFinished("pod-d", "c"),)


def test_a_failed_adjustment_is_a_warning_and_the_flag_stays_cleared() -> None:
    state = fresh_state()
    state = with_events(state, ramping(state, "pod-1", pool="reserve"))
    txn, reply = decide(state, resources_allocation, CTX, T0 + 31)
    assert reply.warnings == (
        "putAllocationsAndAdjustAllocationEntries failed with error: "
        "adjustPoolsAndIsolatedEntries failed with error: generatePoolsAndIsolation failed "
        "with error: static pool reserve result: 1,9 is generated dynamically",
    )
    assert txn.events == (RampUpFinished("pod-1", "c"),)
    assert reported(reply, "pod-1") == (14, "1,3-15")


def test_every_container_is_reported() -> None:
    state = after_allocate()
    state = with_events(
        state,
        reclaimed("pod-r"),
        dedicated("pod-d", "4-5,12-13"),
        dedicated("pod-d", "4-5,12-13", name="side", owner="", container_type="SIDECAR"),
    )
    _, reply = decide(state, resources_allocation, CTX, T0 + 1)
    assert reply.pod_resources == {
        "pod-1": {"c": ContainerCPUAllocation(14, "1,3-15")},
        "pod-d": {
            "c": ContainerCPUAllocation(4, "4-5,12-13"),
            "side": ContainerCPUAllocation(4, "4-5,12-13"),
        },
        "pod-r": {"c": ContainerCPUAllocation(4, "1,3,9,11")},
    }


def test_a_container_of_a_level_without_lifecycle_is_reported_with_a_warning() -> None:
    state = with_events(fresh_state(), shared("pod-x", OwnCPUs.of(cpus("4")), started=T0))
    odd = dataclasses.replace(entry_of(state, "pod-x"), qos_level="system_cores", init_timestamp="")
    state = with_events(state, ContainerAllocated(odd))
    txn, reply = decide(state, resources_allocation, CTX, T0)
    assert txn.events == ()
    assert "'system_cores' has no ramp-up lifecycle" in reply.warnings[0]
    assert reported(reply, "pod-x") == (1, "4")


def test_ramping_containers_on_the_ramp_set_are_reported_with_it() -> None:
    state = after_allocate()
    txn, _ = decide(state, resources_allocation, CTX, T0 + 31)
    # the ramp set now exists: a new ramping container follows it
    state = with_events(txn.state, ramping(txn.state, "pod-2"))
    assert entry_of(state, "pod-2").placement == RAMPING
    _, reply = decide(state, resources_allocation, CTX, T0 + 32)
    assert reported(reply, "pod-2") == (14, "1,3-15")


def test_with_enable_reclaim_the_surplus_stays_in_reclaim() -> None:
    """Checklist 19, through the whole ramp-up end."""
    ctx = dataclasses.replace(CTX, enable_reclaim=True)
    txn, _ = decide(after_allocate(), resources_allocation, ctx, T0 + 31)
    assert pools_of(txn.state) == {"reclaim": "3-8,10-15", "reserve": "0,2", "share": "1,9"}


def _listed(state: State, now: float, previous: ResourcesAllocation | None = None) -> object:
    """The listing of ``state``, built from nothing unless ``previous`` is given."""
    _, reply = decide(state, resources_allocation, CTX, now, previous)
    return reply


def test_a_settled_state_gets_its_reply_again_equal_to_a_freshly_built_one() -> None:
    txn, _ = decide(after_allocate(), resources_allocation, CTX, T0 + 31)  # ramp-up ends
    settled = txn.state
    first = _listed(settled, T0 + 62)
    txn, again = decide(settled, resources_allocation, CTX, T0 + 93, first)
    assert again is first and txn.events == ()
    assert again == _listed(settled, T0 + 93)


def test_a_changed_state_gets_a_new_reply() -> None:
    txn, _ = decide(after_allocate(), resources_allocation, CTX, T0 + 31)
    before = _listed(txn.state, T0 + 62)
    changed = with_events(txn.state, reclaimed("pod-2"))
    _, reply = decide(changed, resources_allocation, CTX, T0 + 62, before)
    assert reply is not before and "pod-2" in reply.pod_resources
    assert reply == _listed(changed, T0 + 62)


def test_a_state_with_a_ramping_container_is_listed_anew_each_time() -> None:
    """Its reply depends on the time: ramp-up ends when the period has passed (§10.1)."""
    state = after_allocate()
    first = _listed(state, T0 + 1)
    txn, again = decide(state, resources_allocation, CTX, T0 + 31, first)
    assert again is not first and isinstance(txn.events[0], RampUpFinished)
