"""The façade (policy.cpu.facade): start-up, read-only RPCs, removal, reconcile, residual pods
(spec cpu-policy §6.2, §10, §12.4; §16 items 18, 21–23, 26, 30), and scenarios on a 96-CPU
two-socket HT machine and an 8-NUMA 256-CPU one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from policy.cpu import facade as cpu_policy
from policy.cpu.commands import (
    GetResourcePluginOptions,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PreStartContainer,
    RemovePod,
)
from policy.cpu.context import PolicyContext
from policy.cpu.errors import UnknownContainerError
from policy.cpu.replies import PluginOptions, TopologyAwareQuantity
from policy.cpu.request import TopologyHint
from policy.cpu.reserve import reserved_cpus
from policy.cpu.residual_check import Listing, ResidualEvidence, observe_listing
from policy.cpu.residual_removal import ResidualOutcome, ResidualPods
from policy.topology.cpuset import CPUSet
from policy.topology.machine_file import topology_from_machine
from policy.topology.model import CPUTopology
from tests.policy.decision_fixtures import CTX, FRESH, T0, Node, cpus, dedicated, request

ROOT = Path(__file__).resolve().parents[3]


def test_start_is_idempotent() -> None:
    node = Node()
    again = cpu_policy.start(node.state, CTX)
    assert again.events == () and again.reply is None


def test_read_only_rpcs_commit_nothing() -> None:
    node = Node()
    node.allocate(request("pod-a"))
    state = node.state
    for decision in (
        cpu_policy.get_topology_hints(state, GetTopologyHints(dedicated()), CTX, T0),
        cpu_policy.get_topology_aware_resources(
            state, GetTopologyAwareResources("pod-a", "app"), CTX, T0
        ),
        cpu_policy.get_topology_aware_allocatable_resources(
            state, GetTopologyAwareAllocatableResources(), CTX, T0
        ),
        cpu_policy.get_resource_plugin_options(state, GetResourcePluginOptions(), CTX, T0),
        cpu_policy.pre_start_container(
            state, PreStartContainer("pod-a", "default", "name-pod-a", "app"), CTX, T0
        ),
    ):
        assert decision.events == ()
    assert node.state is state


def test_topology_aware_rpcs_through_the_facade() -> None:
    node = Node()
    node.allocate(request("pod-a"))
    reply = cpu_policy.get_topology_aware_resources(
        node.state, GetTopologyAwareResources("pod-a", "app"), CTX, T0
    ).reply
    assert reply.resource.aggregated_quantity == 14  # §16 item 21
    assert reply.resource.topology_aware_quantity_list == tuple(
        TopologyAwareQuantity(v, n) for n, v in enumerate([3.0, 3.0, 4.0, 4.0])
    )
    with pytest.raises(UnknownContainerError, match="pod: pod-a, container: nope is not show up"):
        cpu_policy.get_topology_aware_resources(
            node.state, GetTopologyAwareResources("pod-a", "nope"), CTX, T0
        )
    with pytest.raises(UnknownContainerError, match="pod: , container: app"):
        cpu_policy.get_topology_aware_resources(
            node.state, GetTopologyAwareResources("", "app"), CTX, T0
        )
    allocatable = cpu_policy.get_topology_aware_allocatable_resources(
        FRESH, GetTopologyAwareAllocatableResources(), CTX, T0
    ).reply
    assert allocatable.resource.aggregated_allocatable_quantity == 14  # §16 item 22
    options = cpu_policy.get_resource_plugin_options(
        FRESH, GetResourcePluginOptions(), CTX, T0
    ).reply
    assert options == PluginOptions(False, True, True)  # §16 item 23


def test_ramp_up_ends_after_the_transition_period_spec_9_10() -> None:
    # §16 item 18 through the façade: the reply is the pre-adjustment cpuset (§15.6)
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    early = node.reconcile(T0 + 30)
    assert early.pod_resources["pod-a"]["app"].allocation_result == "1,3-15"
    assert node.pools() == {"reserve": "0,2", "reclaim": "1,3,9,11"}
    late = node.reconcile(T0 + 31)
    assert late.pod_resources["pod-a"]["app"].allocation_result == "1,3-15"
    assert node.pools() == {"reserve": "0,2", "reclaim": "7-8,10,15", "share": "1,3-6,9,11-14"}
    assert str(node.cpus_of("pod-a")) == "1,3-6,9,11-14"
    assert node.replayed() == node.state


def test_remove_pod() -> None:
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    node.reconcile(T0 + 31)
    node.allocate(dedicated("pod-d", hint=(3,)), T0 + 32)
    unknown = cpu_policy.remove_pod(node.state, RemovePod("ghost"), CTX, T0)
    assert unknown.events == () and unknown.warnings == ()
    node.remove("pod-d")
    assert node.state.cpu.entry("pod-d", "app") is None
    assert node.pools() == {"reserve": "0,2", "reclaim": "7-8,10,15", "share": "1,3-6,9,11-14"}
    node.remove("pod-a")
    assert node.pools() == {"reserve": "0,2", "reclaim": "1,3-15"}
    assert node.replayed() == node.state


def test_residual_pods_are_removed_after_ten_rounds() -> None:
    # §16 item 30: ten consecutive 30-s sightings of absence, then removal and re-adjustment
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    node.allocate(request("pod-b", cpu=2))
    node.reconcile(T0 + 31)
    proof = ResidualEvidence()
    for round_ in range(1, 11):
        # The checker's count (the only one), on listings that hold pod-a alone.
        listing = Listing(frozenset({"pod-a"}), T0 + 30 * round_)
        proof = observe_listing(proof, node.state.cpu, listing, CTX.residual_sightings)
        hits = {uid: s.count for uid, s in proof.sightings.items()}
        assert hits == {"pod-b": round_}
        assert proof.due == (("pod-b",) if round_ == 10 else ())
    decision = cpu_policy.remove_residual_pods(node.state, ResidualPods(proof), CTX, T0 + 300)
    assert decision.reply == ResidualOutcome(removed=("pod-b",))
    node.commit(decision)
    assert node.state.cpu.entry("pod-b", "app") is None
    assert node.pools()["share"] == "1,3-6,9,11-14"  # re-sized for pod-a's 2 CPUs alone
    assert node.replayed() == node.state


def test_shared_pods_never_get_dedicated_numa_or_reserved_cpus() -> None:
    # §16 item 26
    node = Node()
    node.allocate(request("pod-a", cpu=2))
    node.allocate(dedicated("pod-d", cpu=2, exclusive=False, hint=(2,)))
    node.reconcile(T0 + 31)
    numa2 = CTX.topology.cpus_in_numa(2)
    for pod in ("pod-a",):
        assert not node.cpus_of(pod) & (numa2 | CTX.reserved)
    for name, cpuset in node.state.cpu.pools.items():
        if name != "reserve":
            assert not cpuset & (numa2 | CTX.reserved), name


# -- scenarios --------------------------------------------------------------------------------


def _machine(doc: object) -> CPUTopology:
    return topology_from_machine(doc)


#: A two-socket host, 24 cores × 2 threads per socket, one NUMA node each; Linux numbering
#: puts every core's second thread 48 above its first.
TWO_SOCKET_96_HT = _machine(
    {
        "threads_per_core": 2,
        "sibling_layout": "split",
        "sockets": [
            {"id": 0, "numa_nodes": [{"id": 0, "cpus": "0-23,48-71"}]},
            {"id": 1, "numa_nodes": [{"id": 1, "cpus": "24-47,72-95"}]},
        ],
    }
)
#: The project's example machine file: 2 sockets × 4 NUMA nodes (SNC4), 256 CPUs.
EIGHT_NUMA_256 = _machine(
    yaml.safe_load((ROOT / "docs/examples/machine-8numa-256cpu.yaml").read_text())
)


def _context(topology: CPUTopology, reserve: int) -> PolicyContext:
    reserved = reserved_cpus(
        topology, use_kubelet_reserved_config=False, reserved_cpu_cores=reserve
    )
    return dataclasses.replace(CTX, topology=topology, reserved=reserved)


def test_scenario_two_socket_96_cpu_ht() -> None:
    ctx = _context(TWO_SOCKET_96_HT, 2)
    assert str(ctx.reserved) == "0,24"
    node = Node(ctx)
    assert node.pools() == {"reserve": "0,24", "reclaim": "1,25,49,73"}
    hints = node.hints(dedicated("db", cpu=20))
    assert hints == (
        TopologyHint((0,), True),
        TopologyHint((1,), True),
        TopologyHint((0, 1), False),
    )
    reply = node.allocate(dedicated("db", cpu=20, hint=(0,)))
    assert reply.allocation is not None and reply.allocation.allocation_result == "1-23,48-71"
    web = node.allocate(request("web", cpu=4))
    assert web.allocation is not None and web.allocation.allocation_result == "25-47,72-95"
    assert node.hints(dedicated("cache", cpu=30)) == (TopologyHint((1,), True),)
    assert node.hints(dedicated("big", cpu=60)) == ()
    node.reconcile(T0 + 31)
    assert not node.cpus_of("web") & cpus("0-23,48-71")
    node.remove("db")
    assert node.hints(dedicated("cache", cpu=30)) == (
        TopologyHint((0,), True),
        TopologyHint((1,), True),
        TopologyHint((0, 1), False),
    )
    assert node.replayed() == node.state


def test_scenario_eight_numa_256_cpu() -> None:
    ctx = _context(EIGHT_NUMA_256, 4)
    assert str(ctx.reserved) == "0,16,32,48"
    node = Node(ctx)
    hints = node.hints(dedicated("db", cpu=40))
    assert hints is not None and len(hints) == 12 + 8 + 2 + 93
    same_socket_pairs = [h.nodes for h in hints if h.preferred]
    assert same_socket_pairs == [
        (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3),
        (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7),
    ]  # fmt: skip
    reduced = dataclasses.replace(ctx, max_full_hint_numa_nodes=4)
    assert cpu_policy.get_topology_hints(
        node.state, GetTopologyHints(dedicated("db", cpu=40)), reduced, T0
    ).reply.hints == tuple(h for h in hints if h.preferred)
    reply = node.allocate(dedicated("db", cpu=40, hint=(0, 1)))
    assert reply.allocation is not None
    assert reply.allocation.allocation_result == "1-15,17-31,128-159"
    for i in range(50):
        node.allocate(request(f"web-{i:02}", cpu=1 + i % 3), T0 + i)
    node.reconcile(T0 + 100)
    numa01 = EIGHT_NUMA_256.cpus_in_numa(0) | EIGHT_NUMA_256.cpus_in_numa(1)
    share = node.state.cpu.pool_cpus("share")
    # share is sized for the 99 CPUs requested, then takes the reclaim surplus above 4 (§9.5):
    # 190 adjustable CPUs (NUMA 2-7 minus reserve) = 186 + 4
    assert share is not None and share.size() == 186
    assert node.state.cpu.pool_cpus("reclaim").size() == 4  # type: ignore[union-attr]
    for i in range(50):
        got = node.cpus_of(f"web-{i:02}")
        assert got == share and not got & (numa01 | ctx.reserved)
    assert node.replayed() == node.state


def test_the_reserve_is_never_handed_out() -> None:
    node = Node()
    node.allocate(request("pod-a"))
    node.allocate(request("pod-r", qos="reclaimed_cores"))
    node.allocate(dedicated("pod-d", hint=(0,)))
    for entry in node.state.cpu.allocation_infos():
        assert not entry.allocation_result & CPUSet.parse("0,2"), entry.pod_uid
