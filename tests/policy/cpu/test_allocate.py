"""Allocate (spec cpu-policy §7; §16 items 6–16, 26) on the spec's (16,2,4) node, reserve 0,2.

Each test drives the façade the way the Allocator does (``decision_fixtures.Node``): decide,
commit the events, adopt the state.
"""

from __future__ import annotations

import math
import re

import pytest

from policy.cpu import facade as cpu_policy
from policy.cpu.allocate import AllocationError
from policy.cpu.commands import GetTopologyHints
from policy.cpu.qos import QOS_LEVEL_KEY, QoSError
from policy.cpu.replies import AllocationReply, CPUAllocation
from policy.cpu.request import ContainerType, RequestError, TopologyHint
from policy.state.events import ContainerAllocated, ContainerRemoved, PoolSet
from policy.state.sections import apply_all, empty_state
from tests.policy.decision_fixtures import (
    CTX,
    DEBUG_KEY,
    FRESH,
    T0,
    Node,
    allocate_inputs,
    cpus,
    dedicated,
    request,
)


def test_start_up_pools_on_the_fresh_node() -> None:
    node = Node()
    assert node.pools() == {"reserve": "0,2", "reclaim": "1,3,9,11"}  # §16 item 5
    assert node.state == FRESH


# -- §16 item 11, 12: the first shared container ramps up on every pooled CPU ------------------


def test_first_shared_container_ramps_up_on_all_pooled_cpus() -> None:
    node = Node()
    reply = node.allocate(request(cpu=2))
    assert reply.allocation == CPUAllocation(
        oci_property_name="CpusetCpus",
        is_node_resource=False,
        is_scalar_resource=True,
        allocated_quantity=14,
        allocation_result="1,3-15",
        resource_hints=(None,),
    )
    info = node.state.cpu.allocation_info("pod-a", "app")
    assert info is not None
    assert info.ramp_up and info.owner_pool_name == ""
    assert str(info.allocation_result) == "1,3-15"
    assert {n: str(c) for n, c in (info.topology_aware_assignments or {}).items()} == {
        0: "1,8-9",
        1: "3,10-11",
        2: "4-5,12-13",
        3: "6-7,14-15",
    }  # per NUMA 3/3/4/4
    assert info.init_timestamp == "2024-05-08 15:04:05 +0000 UTC"
    assert info.request_quantity == 2


def test_reply_echoes_the_request_with_normalised_maps() -> None:
    req = request(cpu=1.2, hint=(1,), pod_role="role", pod_type="type")
    reply = Node().allocate(req)
    assert (reply.identity.pod_uid, reply.identity.pod_namespace, reply.identity.pod_name) == (
        "pod-a",
        "default",
        "name-pod-a",
    )
    assert (
        reply.identity.container_name,
        reply.identity.container_type,
        reply.identity.container_index,
    ) == (
        "app",
        ContainerType.MAIN,
        0,
    )
    assert (reply.pod_role, reply.pod_type, reply.resource_name) == ("role", "type", "cpu")
    assert reply.labels == {QOS_LEVEL_KEY: "shared_cores"}  # §16 item 7
    assert reply.annotations == {QOS_LEVEL_KEY: "shared_cores"}
    assert reply.native_qos_class == "Guaranteed"
    assert reply.allocation is not None
    assert reply.allocation.resource_hints == (TopologyHint((1,), True),)


def test_a_running_pod_with_an_existing_pool_joins_it_and_is_told_all_pooled_cpus() -> None:
    # §7.3 3a / §15.1: after the spec's §9.10 example, share is 1,3-6,9,11-14
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    node.reconcile(T0 + 31)
    assert node.pools()["share"] == "1,3-6,9,11-14" and node.pools()["reclaim"] == "7-8,10,15"
    running = Node.__new__(Node)
    running.__dict__.update(node.__dict__)
    running.phases = {"pod-b": "Running"}
    reply = running.allocate(request("pod-b", cpu=2), T0 + 40)
    assert reply.allocation is not None and reply.allocation.allocation_result == "1,3-15"
    info = running.state.cpu.allocation_info("pod-b", "app")
    assert info is not None and not info.ramp_up and info.owner_pool_name == "share"
    # the pool was resized without pod-b's request (§15.1): still sized for 2 CPUs
    assert running.cpus_of("pod-b") == running.state.cpu.pool_cpus("share")
    assert running.replayed() == running.state


def test_a_pending_pod_ramps_up_even_with_an_existing_pool() -> None:
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    node.reconcile(T0 + 31)
    node.phases = {"pod-b": "Pending"}
    node.allocate(request("pod-b", cpu=2), T0 + 40)
    info = node.state.cpu.allocation_info("pod-b", "app")
    assert info is not None and info.ramp_up and str(info.allocation_result) == "1,3-15"


def test_a_larger_request_for_a_pooled_container_is_answered_with_its_old_cpus() -> None:
    # §7.3 3c / §15.2: the pool is re-sized by the *stored* request (2; step 2 updates only the
    # level and annotations), so nothing grows, and the reply is the cpuset from before
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    node.reconcile(T0 + 31)
    before = node.cpus_of("pod-a")
    assert str(before) == "1,3-6,9,11-14"  # 10 CPUs: a request of 12 re-runs the handler
    reply = node.allocate(request("pod-a", cpu=12), T0 + 40)
    assert reply.allocation is not None and reply.allocation.allocation_result == str(before)
    entry = node.state.cpu.entry("pod-a", "app")
    assert entry is not None and entry.request_quantity == 2  # not persisted (§15.2)
    assert node.state.cpu.pool_cpus("share") == before


def test_a_ramping_container_asking_for_more_moves_to_the_current_pooled_cpus() -> None:
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    node.allocate(dedicated("pod-d", cpu=2, hint=(3,)))
    reply = node.allocate(request("pod-a", cpu=15))
    assert reply.allocation is not None and reply.allocation.allocation_result == "1,3-5,8-13"
    info = node.state.cpu.allocation_info("pod-a", "app")
    assert info is not None and info.ramp_up and str(info.allocation_result) == "1,3-5,8-13"


# -- §16 item 13: enough CPUs already ----------------------------------------------------------


def test_second_allocate_with_enough_cpus_returns_the_stored_allocation_and_commits_nothing() -> (
    None
):
    node = Node()
    node.allocate(request(cpu=2, hint=(0,)))
    decision = cpu_policy.allocate(node.state, allocate_inputs(request(cpu=3)), CTX, T0 + 5)
    assert decision.events == ()
    assert decision.reply is not None
    assert decision.reply.allocation == CPUAllocation(
        oci_property_name="CpusetCpus",
        is_node_resource=False,
        is_scalar_resource=True,
        allocated_quantity=14,
        allocation_result="1,3-15",
        resource_hints=None,
    )
    assert decision.reply.native_qos_class == ""


# -- §16 item 14: reclaimed ----------------------------------------------------------------


def test_reclaimed_containers_mirror_the_reclaim_pool() -> None:
    node = Node()
    reply = node.allocate(request("pod-r", qos="reclaimed_cores"))
    assert reply.allocation is not None and reply.allocation.allocation_result == "1,3,9,11"
    info = node.state.cpu.allocation_info("pod-r", "app")
    assert info is not None and info.owner_pool_name == "reclaim" and not info.ramp_up
    # after the §9.10 adjustment the next reclaimed container gets 7-8,10,15, and so does this one
    node.allocate(request("pod-a", cpu=2))
    node.reconcile(T0 + 31)
    reply = node.allocate(request("pod-s", qos="reclaimed_cores"), T0 + 32)
    assert reply.allocation is not None and reply.allocation.allocation_result == "7-8,10,15"
    assert str(node.cpus_of("pod-r")) == "7-8,10,15"


def test_reclaimed_millicpu_quantity() -> None:
    node = Node()
    req = request(
        "pod-r",
        qos="reclaimed_cores",
        resource_requests={"resource.katalyst.kubewharf.io/reclaimed_millicpu": 1500},
    )
    node.allocate(req)
    entry = node.state.cpu.entry("pod-r", "app")
    assert entry is not None and entry.request_quantity == 1.5  # §16 item 8: 2 / 1.5


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        pytest.param({"reserve": "0,2"}, "pool: reclaim is not ready", id="no reclaim pool"),
        pytest.param(
            {"reserve": "0,2", "reclaim": ""},
            "pool: reclaim is not empty",
            id="empty reclaim (sic)",
        ),
    ],
)
def test_reclaimed_needs_a_reclaim_pool(pools: dict[str, str], message: str) -> None:
    state = apply_all(empty_state(CTX.topology), [PoolSet(n, cpus(c)) for n, c in pools.items()])
    with pytest.raises(AllocationError, match=f"container app: {message}"):
        cpu_policy.allocate(state, allocate_inputs(request(qos="reclaimed_cores")), CTX, T0)


# -- §16 item 15: dedicated with NUMA binding ----------------------------------------------


@pytest.mark.parametrize(
    ("exclusive", "want", "reclaim"),
    [
        pytest.param(
            True, "1,8-9", "3-7,10-15", id="exclusive takes the whole NUMA node minus reserve"
        ),
        pytest.param(False, "1,9", "3-7,10-15", id="non-exclusive takes by topology"),
    ],
)
def test_dedicated_numa_binding_on_hint_0(exclusive: bool, want: str, reclaim: str) -> None:
    node = Node()
    reply = node.allocate(dedicated(cpu=2, exclusive=exclusive, hint=(0,)))
    assert reply.allocation is not None and reply.allocation.allocation_result == want
    assert reply.allocation.resource_hints == (TopologyHint((0,), True),)
    info = node.state.cpu.allocation_info("pod-d", "app")
    assert info is not None and info.ramp_up and info.owner_pool_name == "dedicated"
    # the pools are recomputed on NUMA nodes 1-3 only
    assert node.pools() == {"reserve": "0,2", "reclaim": reclaim}
    assert node.replayed() == node.state


def test_a_shared_container_after_a_dedicated_one_avoids_its_numa_node() -> None:
    node = Node()
    node.allocate(dedicated(cpu=2, exclusive=False, hint=(0,)))
    reply = node.allocate(request("pod-a", cpu=2))
    # §16 item 26: nothing of NUMA 0 (it hosts a NUMA-binding container), nor the reserve
    assert reply.allocation is not None and reply.allocation.allocation_result == "3-7,10-15"


@pytest.mark.parametrize(
    ("req", "message"),
    [
        pytest.param(dedicated(hint=None), "hint is nil", id="no hint"),
        pytest.param(dedicated(hint=()), "hint is empty", id="empty hint"),
        pytest.param(
            dedicated(exclusive=False, hint=(0, 1)),
            "NUMA not exclusive binding container has request larger than 1 NUMA",
            id="multi-NUMA hint for non-exclusive (16.15)",
        ),
        pytest.param(
            dedicated(cpu=4, exclusive=False, hint=(0,)),
            "take cpu for NUMA not exclusive binding container failed with err: "
            "not enough cpus available to satisfy request",
            id="non-exclusive larger than the NUMA node",
        ),
        pytest.param(
            dedicated(cpu=4, hint=(0,)), "results can't meet cpus request", id="exclusive too small"
        ),
        pytest.param(
            request(qos="dedicated_cores", hint=(0,)),
            "not support dedicated_cores without NUMA binding",
            id="dedicated without NUMA binding (16.16)",
        ),
    ],
)
def test_dedicated_refusals_commit_nothing(req: object, message: str) -> None:
    with pytest.raises(AllocationError) as caught:
        cpu_policy.allocate(FRESH, allocate_inputs(req), CTX, T0)  # type: ignore[arg-type]
    assert str(caught.value).startswith("pod default/name-pod-")
    assert message in str(caught.value)


def test_a_larger_dedicated_request_re_allocates_from_the_state_without_the_old_entry() -> None:
    node = Node()
    node.allocate(dedicated(cpu=2, exclusive=False, hint=(0,)))  # 1,9
    reply = node.allocate(dedicated(cpu=3, exclusive=False, hint=(0,)), T0 + 5)
    assert reply.allocation is not None and reply.allocation.allocation_result == "1,8-9"
    assert node.state.cpu.entry("pod-d", "app").init_timestamp.startswith("2024-05-08 15:04:10")  # type: ignore[union-attr]


def test_a_failed_re_allocation_removes_the_container_as_the_reference_finaliser_does() -> None:
    # §7.2 with the §15.7 fix: the decision carries the error and the removal, nothing else
    node = Node()
    node.allocate(dedicated(cpu=2, exclusive=False, hint=(0,)))
    decision = cpu_policy.allocate(
        node.state, allocate_inputs(dedicated(cpu=3, exclusive=False, hint=(0, 1))), CTX, T0
    )
    assert decision.reply is None
    assert isinstance(decision.error, AllocationError)
    assert "larger than 1 NUMA" in str(decision.error)
    assert decision.events == (ContainerRemoved("pod-d", "app"),)
    node.commit(decision)
    assert node.state.cpu.entry("pod-d", "app") is None
    # machine state is derived: NUMA 0 is free again at once
    assert node.hints(dedicated("pod-e", cpu=2))[0] == TopologyHint((0,), True)  # type: ignore[index]


# -- sidecars (§7.5.2) ---------------------------------------------------------------------


def test_a_sidecar_copies_its_main_container() -> None:
    node = Node()
    node.allocate(dedicated(cpu=2, hint=(0,)))
    reply = node.allocate(
        dedicated(cpu=1, container="side", container_type=ContainerType.SIDECAR, hint=(0,))
    )
    assert reply.allocation is not None and reply.allocation.allocation_result == "1,8-9"
    info = node.state.cpu.allocation_info("pod-d", "side")
    assert info is not None and not info.ramp_up and info.owner_pool_name == ""
    assert node.hints(dedicated(container="side", container_type=ContainerType.SIDECAR)) is None


def test_a_sidecar_before_its_main_container_gets_an_empty_reply() -> None:
    decision = cpu_policy.allocate(
        FRESH,
        allocate_inputs(
            dedicated(container="side", container_type=ContainerType.SIDECAR, hint=(0,))
        ),
        CTX,
        T0,
    )
    assert decision.events == () and decision.reply == AllocationReply()


# -- §16 items 6, 9, 10: levels, INIT, debug ------------------------------------------------


def test_init_containers_are_echoed_without_an_allocation() -> None:
    decision = cpu_policy.allocate(
        FRESH, allocate_inputs(request(container_type=ContainerType.INIT)), CTX, T0
    )
    assert decision.events == ()
    assert decision.reply is not None and decision.reply.allocation is None
    assert (
        decision.reply.identity.container_type is ContainerType.INIT
        and decision.reply.resource_name == "cpu"
    )


def test_debug_pods_get_an_allocation_that_leaves_the_cpuset_alone() -> None:
    req = request(annotations={DEBUG_KEY: "yes"})
    decision = cpu_policy.allocate(FRESH, allocate_inputs(req), CTX, T0)
    assert decision.events == ()
    assert decision.reply is not None
    assert decision.reply.allocation == CPUAllocation(
        oci_property_name="", is_node_resource=False, is_scalar_resource=True, allocated_quantity=0
    )
    assert cpu_policy.get_topology_hints(FRESH, GetTopologyHints(req), CTX, T0).reply.hints is None


def test_system_cores_is_not_supported() -> None:
    with pytest.raises(QoSError, match="katalyst QoS level: system_cores is not supported yet"):
        cpu_policy.allocate(FRESH, allocate_inputs(request(qos="system_cores")), CTX, T0)


# -- bad requests: a clear error naming pod and container, nothing committed ----------------

WHO = "pod default/name-pod-a (uid pod-a), container app"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        pytest.param(
            {"resource_requests": {}},
            "invalid req.ResourceRequests length: 0",
            id="no resource_requests",
        ),
        pytest.param(
            {"resource_requests": {"cpu": 1, "memory": 2}},
            "invalid req.ResourceRequests length: 2",
            id="two keys",
        ),
        pytest.param(
            {"resource_requests": {"cpu": -1}}, "cpu request -1 is negative", id="negative"
        ),
        pytest.param(
            {"resource_requests": {"cpu": math.nan}}, "cpu request nan is not a number", id="NaN"
        ),
        pytest.param({"resource_requests": {"cpu": 1e12}}, "is absurd", id="absurd"),
        pytest.param(
            {"resource_requests": {"gpu": 1}},
            "invalid request resource name: gpu",
            id="unknown resource",
        ),
        pytest.param(
            {"annotations": {QOS_LEVEL_KEY: "foo"}},
            "can't get valid qos level",
            id="unknown QoS value",
        ),
        pytest.param(
            {"annotations": {"katalyst.kubewharf.io/cpu_enhancement": "{not json"}},
            "cpu_enhancement",
            id="malformed enhancement JSON",
        ),
        pytest.param({"pod_uid": ""}, "pod uid is empty", id="empty pod uid"),
    ],
)
@pytest.mark.parametrize(
    "rpc",
    [
        lambda state, ctx, req, now: cpu_policy.allocate(state, allocate_inputs(req), ctx, now),
        lambda state, ctx, req, now: cpu_policy.get_topology_hints(
            state, GetTopologyHints(req), ctx, now
        ),
    ],
    ids=["allocate", "hints"],
)
def test_bad_requests_name_pod_container_and_reason(
    changes: dict[str, object], reason: str, rpc: object
) -> None:
    with pytest.raises((RequestError, QoSError)) as caught:
        rpc(FRESH, CTX, request(**changes), T0)  # type: ignore[operator]
    message = str(caught.value)
    assert reason in message
    assert "name-pod-a" in message and "app" in message


def test_cpu_1_2_counts_as_2_and_is_stored_as_1_2() -> None:
    node = Node()
    reply = node.allocate(dedicated(cpu=1.2, exclusive=False, hint=(2,)))
    assert reply.allocation is not None and reply.allocation.allocated_quantity == 2  # §16 item 8
    assert node.state.cpu.entry("pod-d", "app").request_quantity == 1.2  # type: ignore[union-attr]


def test_every_allocate_event_is_a_container_allocation_or_a_pool_change() -> None:
    node = Node()
    node.allocate(request("pod-a"))
    node.allocate(dedicated(hint=(1,)))
    node.allocate(request("pod-r", qos="reclaimed_cores"))
    assert any(isinstance(e, ContainerAllocated) for e in node.events)
    assert node.replayed() == node.state


def test_a_level_change_the_lifecycle_has_no_transition_for_is_refused_and_removed() -> None:
    # qrmd refuses what the ramp-up machine has no transition for (the reference would rewrite
    # the level); the handler failed for an existing container, so the finaliser removes it.
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    decision = cpu_policy.allocate(
        node.state, allocate_inputs(request("pod-a", cpu=16, qos="reclaimed_cores")), CTX, T0
    )
    assert decision.error is not None
    assert "cannot 'allocate_reclaimed' in state 'ramping'" in str(decision.error)
    assert str(decision.error).startswith(WHO)
    assert decision.events == (ContainerRemoved("pod-a", "app"),)


def test_no_pooled_cpus_left_for_a_shared_container() -> None:
    node = Node()
    for numa in range(4):
        node.allocate(dedicated(f"pod-{numa}", cpu=1, hint=(numa,)))
    with pytest.raises(AllocationError, match=re.escape(f"{WHO}: get empty pooledCPUs")):
        cpu_policy.allocate(node.state, allocate_inputs(request("pod-a")), CTX, T0)


def test_a_reclaimed_container_asking_for_more_than_the_pool_is_stored_again() -> None:
    node = Node()
    node.allocate(request("pod-r", qos="reclaimed_cores", cpu=1))
    decision = node.commit(
        cpu_policy.allocate(
            node.state, allocate_inputs(request("pod-r", qos="reclaimed_cores", cpu=8)), CTX, T0 + 9
        )
    )
    assert decision.reply is not None and decision.reply.allocation is not None
    assert decision.reply.allocation.allocation_result == "1,3,9,11"
    assert [type(e).__name__ for e in decision.events] == ["ContainerAllocated"]
    entry = node.state.cpu.entry("pod-r", "app")
    assert entry is not None and entry.init_timestamp == "2024-05-08 15:04:05 +0000 UTC"
    assert entry.request_quantity == 1  # §7.4 step 1 updates only the level and annotations
